//! Endpoints and channels: parses `--container-runtime-endpoint` values and
//! opens a lazily connecting gRPC channel over a unix socket. The channel
//! re-dials on its own after the runtime restarts.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use super::error::CriError;

/// Largest message the kubelet accepts from the runtime (16 MiB; gRPC's
/// default of 4 MiB is too small for large ListContainers answers).
pub const MAX_MSG_SIZE: usize = 16 * 1024 * 1024;

/// The default runtime endpoint on Linux.
pub const DEFAULT_RUNTIME_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// A parsed unix-socket endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixEndpoint {
    /// The value as given on the command line.
    pub original: String,
    /// Path of the socket.
    pub path: PathBuf,
    /// The value was a bare path, accepted for compatibility.
    pub deprecated_form: bool,
}

/// Parses an endpoint: `unix:///abs/path.sock`, or a bare path (taken as a
/// unix socket, as the Go kubelet does with a deprecation notice). Only unix
/// sockets are supported on Linux.
pub fn parse_endpoint(endpoint: &str) -> Result<UnixEndpoint, CriError> {
    let invalid = |reason: String| CriError::InvalidEndpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    let trimmed = endpoint.trim();
    if trimmed.is_empty() {
        return Err(invalid("no endpoint given".into()));
    }
    match trimmed.split_once("://") {
        None => {
            if trimmed.contains(':') && !trimmed.starts_with('/') {
                let scheme = trimmed.split(':').next().unwrap_or_default();
                return Err(invalid(format!(
                    "protocol {scheme:?} not supported; only unix socket endpoints are"
                )));
            }
            Ok(UnixEndpoint {
                original: endpoint.to_string(),
                path: PathBuf::from(trimmed),
                deprecated_form: true,
            })
        }
        Some((scheme, rest)) => {
            let scheme = scheme.to_ascii_lowercase();
            if scheme != "unix" {
                return Err(invalid(format!(
                    "protocol {scheme:?} not supported; only unix socket endpoints are"
                )));
            }
            if !rest.starts_with('/') {
                return Err(invalid(
                    "a unix endpoint needs an absolute path (unix:///path/to.sock)".into(),
                ));
            }
            Ok(UnixEndpoint {
                original: endpoint.to_string(),
                path: PathBuf::from(rest),
                deprecated_form: false,
            })
        }
    }
}

/// The image endpoint to use: the runtime's when none is given.
pub fn image_endpoint_or_runtime<'a>(
    image_endpoint: &'a str,
    runtime_endpoint: &'a str,
) -> &'a str {
    if image_endpoint.trim().is_empty() {
        runtime_endpoint
    } else {
        image_endpoint
    }
}

/// A channel to the socket. Nothing is dialled until the first call; after a
/// broken connection the next call dials again. Must be called within a
/// tokio runtime (the channel runs a small background task).
pub fn unix_channel(
    endpoint: &UnixEndpoint,
    connect_timeout: Duration,
) -> Result<Channel, CriError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(CriError::ClientSetup {
            endpoint: endpoint.original.clone(),
            reason: "the CRI client must be created inside the tokio runtime".into(),
        });
    }
    if endpoint.deprecated_form {
        tracing::warn!(
            endpoint = %endpoint.original,
            url = %format!("unix://{}", endpoint.path.display()),
            "Using a bare path as endpoint is deprecated, please use the full URL form"
        );
    }
    let path = endpoint.path.clone();
    // The URI is only a placeholder for the HTTP/2 authority; the connector
    // below ignores it and dials the socket.
    Ok(Endpoint::from_static("http://localhost")
        .connect_timeout(connect_timeout)
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { dial(&path).await.map(TokioIo::new) }
        })))
}

async fn dial(path: &Path) -> std::io::Result<UnixStream> {
    UnixStream::connect(path).await
}

/// Wraps a message in a request carrying the deadline (sent to the runtime
/// as `grpc-timeout`, and enforced by the channel).
pub(crate) fn request<T>(message: T, timeout: Option<Duration>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Some(t) = timeout {
        req.set_timeout(t);
    }
    req
}

/// Runs one unary call under `timeout` (none: unbounded) and maps failures.
pub(crate) async fn unary<T, F>(
    endpoint: &str,
    rpc: &'static str,
    timeout: Option<Duration>,
    call: F,
) -> Result<T, CriError>
where
    F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let outcome = match timeout {
        Some(t) => match tokio::time::timeout(t, call).await {
            Ok(outcome) => outcome,
            Err(_) => return Err(CriError::deadline(endpoint, rpc, t)),
        },
        None => call.await,
    };
    outcome
        .map(tonic::Response::into_inner)
        .map_err(|status| CriError::from_status(endpoint, rpc, &status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_as_the_kubelet_accepts_them() {
        let ok: &[(&str, &str, bool)] = &[
            (
                "unix:///run/containerd/containerd.sock",
                "/run/containerd/containerd.sock",
                false,
            ),
            (
                "UNIX:///var/run/crio/crio.sock",
                "/var/run/crio/crio.sock",
                false,
            ),
            (
                "/run/containerd/containerd.sock",
                "/run/containerd/containerd.sock",
                true,
            ),
            ("relative/dir/x.sock", "relative/dir/x.sock", true),
        ];
        for (input, path, deprecated) in ok {
            let ep = parse_endpoint(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(ep.path, PathBuf::from(path), "{input}");
            assert_eq!(ep.deprecated_form, *deprecated, "{input}");
        }
        let bad: &[(&str, &str)] = &[
            ("", "no endpoint"),
            ("   ", "no endpoint"),
            ("tcp://127.0.0.1:3735", "\"tcp\" not supported"),
            ("npipe:////./pipe/containerd", "\"npipe\" not supported"),
            ("unix://run/containerd.sock", "absolute path"),
            ("localhost:3735", "\"localhost\" not supported"),
        ];
        for (input, want) in bad {
            let err = parse_endpoint(input).expect_err(input).to_string();
            assert!(err.contains(want), "{input}: {err}");
            assert!(
                err.contains(&format!("{input:?}")),
                "names the value: {err}"
            );
        }
    }

    #[test]
    fn image_endpoint_defaults_to_runtime_endpoint() {
        let rt = "unix:///run/containerd/containerd.sock";
        assert_eq!(image_endpoint_or_runtime("", rt), rt);
        assert_eq!(
            image_endpoint_or_runtime("unix:///x.sock", rt),
            "unix:///x.sock"
        );
    }

    #[tokio::test]
    async fn client_side_deadline_maps_to_deadline_exceeded() {
        let never = std::future::pending::<Result<tonic::Response<()>, tonic::Status>>();
        let err = unary(
            "unix:///x",
            "Version",
            Some(Duration::from_millis(20)),
            never,
        )
        .await
        .expect_err("must time out");
        assert!(err.is_deadline_exceeded(), "{err}");
        assert!(err.to_string().contains("Version on unix:///x"), "{err}");
    }

    #[test]
    fn channel_outside_a_runtime_is_an_error_not_a_panic() {
        let ep = parse_endpoint("unix:///run/containerd/containerd.sock").expect("parse");
        let err = unix_channel(&ep, Duration::from_secs(1)).expect_err("no runtime");
        assert!(matches!(err, CriError::ClientSetup { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn absent_socket_is_unavailable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("absent.sock");
        let ep = parse_endpoint(&format!("unix://{}", sock.display())).expect("parse");
        let channel = unix_channel(&ep, Duration::from_secs(1)).expect("inside a runtime");
        let mut client =
            super::super::api::runtime_service_client::RuntimeServiceClient::new(channel);
        let err = unary(
            &ep.original,
            "Version",
            Some(Duration::from_secs(5)),
            client.version(request(super::super::api::VersionRequest::default(), None)),
        )
        .await
        .expect_err("nothing listens");
        assert!(err.is_unavailable(), "{err:?}");
    }
}
