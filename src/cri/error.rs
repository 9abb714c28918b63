//! Errors of the CRI clients: every gRPC failure keeps the endpoint and RPC it
//! came from, and its status code decides the variant, so callers test
//! `is_not_found()` as the Go kubelet tests `IsNotFound(err)`.

use std::time::Duration;

use tonic::Code;

/// The kubelet's reason string for a failed image pull.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";

/// A failure talking to the container runtime or image service.
#[derive(Debug, thiserror::Error)]
pub enum CriError {
    /// The endpoint flag value cannot be used.
    #[error("invalid container runtime endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The value as given.
        endpoint: String,
        /// Why it was refused.
        reason: String,
    },

    /// The client could not be set up (before any call was made).
    #[error("cannot set up the CRI client for {endpoint}: {reason}")]
    ClientSetup {
        /// The endpoint.
        endpoint: String,
        /// Why.
        reason: String,
    },

    /// The runtime answered the start-up probe but does not serve CRI v1.
    #[error(
        "container runtime at {endpoint} does not serve the CRI v1 {service} API ({message}); \
         a runtime speaking runtime.v1 is required"
    )]
    UnsupportedApi {
        /// Endpoint probed.
        endpoint: String,
        /// "runtime" or "image".
        service: &'static str,
        /// What the runtime said.
        message: String,
    },

    /// gRPC NotFound: the sandbox, container or image does not exist.
    #[error("{rpc} on {endpoint}: rpc error: code = NotFound desc = {message}")]
    NotFound {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// Status message.
        message: String,
    },

    /// gRPC DeadlineExceeded, or the client's own bound ran out.
    #[error("{rpc} on {endpoint}: rpc error: code = DeadlineExceeded desc = {message}")]
    DeadlineExceeded {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// Status message.
        message: String,
    },

    /// gRPC Unavailable: the runtime is down or restarting.
    #[error("{rpc} on {endpoint}: rpc error: code = Unavailable desc = {message}")]
    Unavailable {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// Status message.
        message: String,
    },

    /// gRPC Unimplemented: the runtime does not know this RPC.
    #[error("{rpc} on {endpoint}: rpc error: code = Unimplemented desc = {message}")]
    Unimplemented {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// Status message.
        message: String,
    },

    /// Any other gRPC status.
    #[error("{rpc} on {endpoint}: rpc error: code = {} desc = {message}", go_code_name(*.code))]
    Rpc {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// Status code.
        code: Code,
        /// Status message.
        message: String,
    },

    /// The runtime answered, but the answer lacks a field the kubelet needs.
    #[error("{rpc} on {endpoint}: invalid response: {reason}")]
    InvalidResponse {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// What is missing.
        reason: String,
    },

    /// The runtime answered with a status that lacks a key field.
    #[error("{rpc} on {endpoint}: invalid response: {field}")]
    IncompleteStatus {
        /// Endpoint called.
        endpoint: String,
        /// RPC name.
        rpc: &'static str,
        /// What is missing.
        #[source]
        field: super::verify::MissingField,
    },

    /// ExecSync ran past its timeout.
    #[error("command {cmd:?} timed out")]
    ExecTimeout {
        /// Container the command ran in.
        container: String,
        /// The command, words joined by spaces.
        cmd: String,
        /// The timeout that was asked for.
        timeout: Duration,
    },

    /// ExecSync ran, and the command exited non-zero.
    #[error("command '{cmd}' exited with {code}: {}", String::from_utf8_lossy(.stderr))]
    ExitCode {
        /// Container the command ran in.
        container: String,
        /// The command, words joined by spaces.
        cmd: String,
        /// Exit code.
        code: i32,
        /// Captured standard output.
        stdout: Vec<u8>,
        /// Captured standard error.
        stderr: Vec<u8>,
    },

    /// PullImage failed (reason `ErrImagePull` in pod status).
    #[error("failed to pull image {image:?}: {source}")]
    ImagePull {
        /// The image as asked for.
        image: String,
        /// The underlying failure.
        #[source]
        source: Box<CriError>,
    },
}

impl CriError {
    /// Maps a gRPC status of `rpc` on `endpoint` to its variant.
    pub fn from_status(endpoint: &str, rpc: &'static str, status: &tonic::Status) -> Self {
        let endpoint = endpoint.to_string();
        let message = status.message().to_string();
        let code = effective_code(status);
        match code {
            Code::NotFound => CriError::NotFound {
                endpoint,
                rpc,
                message,
            },
            Code::DeadlineExceeded => CriError::DeadlineExceeded {
                endpoint,
                rpc,
                message,
            },
            Code::Unavailable => CriError::Unavailable {
                endpoint,
                rpc,
                message: describe_transport(status),
            },
            Code::Unimplemented => CriError::Unimplemented {
                endpoint,
                rpc,
                message,
            },
            code => CriError::Rpc {
                endpoint,
                rpc,
                code,
                message,
            },
        }
    }

    /// ImageStatus answered with an image that has no id or no size.
    pub fn incomplete_image(endpoint: &str, image: &str) -> Self {
        CriError::InvalidResponse {
            endpoint: endpoint.to_string(),
            rpc: "ImageStatus",
            reason: format!("Id or size of image {image:?} is not set"),
        }
    }

    /// The client-side bound of `rpc` ran out.
    pub fn deadline(endpoint: &str, rpc: &'static str, after: Duration) -> Self {
        CriError::DeadlineExceeded {
            endpoint: endpoint.to_string(),
            rpc,
            message: format!("context deadline exceeded after {after:?}"),
        }
    }

    /// The gRPC status code behind this error, if it came from one.
    pub fn code(&self) -> Option<Code> {
        match self {
            CriError::NotFound { .. } => Some(Code::NotFound),
            CriError::DeadlineExceeded { .. } | CriError::ExecTimeout { .. } => {
                Some(Code::DeadlineExceeded)
            }
            CriError::Unavailable { .. } => Some(Code::Unavailable),
            CriError::Unimplemented { .. } => Some(Code::Unimplemented),
            CriError::Rpc { code, .. } => Some(*code),
            CriError::ImagePull { source, .. } => source.code(),
            CriError::InvalidEndpoint { .. }
            | CriError::ClientSetup { .. }
            | CriError::UnsupportedApi { .. }
            | CriError::InvalidResponse { .. }
            | CriError::IncompleteStatus { .. }
            | CriError::ExitCode { .. } => None,
        }
    }

    /// The runtime reported that the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(Code::NotFound)
    }

    /// The call ran out of time (runtime-side or client-side).
    pub fn is_deadline_exceeded(&self) -> bool {
        self.code() == Some(Code::DeadlineExceeded)
    }

    /// The runtime could not be reached.
    pub fn is_unavailable(&self) -> bool {
        self.code() == Some(Code::Unavailable)
    }

    /// The runtime does not implement the RPC.
    pub fn is_unimplemented(&self) -> bool {
        self.code() == Some(Code::Unimplemented)
    }

    /// The kubelet reason this error surfaces as in pod status, where it has
    /// one (`ErrImagePull` for pulls).
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            CriError::ImagePull { .. } => Some(ERR_IMAGE_PULL),
            _ => None,
        }
    }

    /// The message without the endpoint/RPC context, in the form the Go
    /// kubelet puts into events and pod status
    /// (`rpc error: code = NotFound desc = ...`).
    pub fn status_message(&self) -> String {
        match self {
            CriError::NotFound { message, .. }
            | CriError::DeadlineExceeded { message, .. }
            | CriError::Unavailable { message, .. }
            | CriError::Unimplemented { message, .. } => {
                let code = self.code().unwrap_or(Code::Unknown);
                format!("rpc error: code = {} desc = {message}", go_code_name(code))
            }
            CriError::Rpc { code, message, .. } => {
                format!("rpc error: code = {} desc = {message}", go_code_name(*code))
            }
            CriError::ImagePull { source, .. } => source.status_message(),
            other => other.to_string(),
        }
    }
}

/// A client-side timeout shows up from tonic as Cancelled with a
/// `TimeoutExpired` source: that is a deadline, as it is for grpc-go.
fn effective_code(status: &tonic::Status) -> Code {
    if status.code() == Code::Cancelled {
        let mut source = std::error::Error::source(status);
        while let Some(err) = source {
            if err.is::<tonic::TimeoutExpired>() {
                return Code::DeadlineExceeded;
            }
            source = err.source();
        }
        if status.message().contains("Timeout expired") {
            return Code::DeadlineExceeded;
        }
    }
    status.code()
}

/// Transport failures carry their cause in the source chain, not the message.
fn describe_transport(status: &tonic::Status) -> String {
    let mut text = status.message().to_string();
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        let s = err.to_string();
        if !s.is_empty() && !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        source = err.source();
    }
    text
}

/// The status code spelled as grpc-go spells it.
pub fn go_code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_variants() {
        let ep = "unix:///run/containerd/containerd.sock";
        type IsVariant = fn(&CriError) -> bool;
        let table: &[(Code, IsVariant, &str)] = &[
            (
                Code::NotFound,
                |e| matches!(e, CriError::NotFound { .. }),
                "NotFound",
            ),
            (
                Code::DeadlineExceeded,
                |e| matches!(e, CriError::DeadlineExceeded { .. }),
                "DeadlineExceeded",
            ),
            (
                Code::Unavailable,
                |e| matches!(e, CriError::Unavailable { .. }),
                "Unavailable",
            ),
            (
                Code::Unimplemented,
                |e| matches!(e, CriError::Unimplemented { .. }),
                "Unimplemented",
            ),
            (
                Code::Unknown,
                |e| {
                    matches!(
                        e,
                        CriError::Rpc {
                            code: Code::Unknown,
                            ..
                        }
                    )
                },
                "Unknown",
            ),
            (
                Code::Cancelled,
                |e| {
                    matches!(
                        e,
                        CriError::Rpc {
                            code: Code::Cancelled,
                            ..
                        }
                    )
                },
                "Canceled",
            ),
        ];
        for (code, is_variant, go_name) in table {
            let err =
                CriError::from_status(ep, "ContainerStatus", &tonic::Status::new(*code, "boom"));
            assert!(is_variant(&err), "{code:?} → {err:?}");
            assert_eq!(err.code(), Some(*code));
            let shown = err.to_string();
            assert!(shown.contains(ep), "{shown}");
            assert!(shown.contains("ContainerStatus"), "{shown}");
            assert_eq!(
                err.status_message(),
                format!("rpc error: code = {go_name} desc = boom")
            );
        }
    }

    #[test]
    fn predicates_and_pull_reason() {
        let nf =
            CriError::from_status("e", "PullImage", &tonic::Status::not_found("no such image"));
        assert!(nf.is_not_found());
        assert!(!nf.is_unavailable());
        let pull = CriError::ImagePull {
            image: "kubelet-rs.local/absent:1".into(),
            source: Box::new(nf),
        };
        assert!(pull.is_not_found());
        assert_eq!(pull.reason(), Some(ERR_IMAGE_PULL));
        assert_eq!(
            pull.status_message(),
            "rpc error: code = NotFound desc = no such image"
        );
        assert!(pull.to_string().contains("kubelet-rs.local/absent:1"));

        let exit = CriError::ExitCode {
            container: "c".into(),
            cmd: "sh -c exit 3".into(),
            code: 3,
            stdout: vec![],
            stderr: b"bad".to_vec(),
        };
        assert_eq!(
            exit.to_string(),
            "command 'sh -c exit 3' exited with 3: bad"
        );
        assert_eq!(exit.code(), None);
        let timeout = CriError::ExecTimeout {
            container: "c".into(),
            cmd: "sleep 9".into(),
            timeout: Duration::from_secs(1),
        };
        assert!(timeout.is_deadline_exceeded());
        assert_eq!(timeout.to_string(), "command \"sleep 9\" timed out");
    }
}
