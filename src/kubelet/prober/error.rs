//! Errors of a probe run. A probe that *ran* and found the container unhealthy
//! is not an error (that is a `Failure` outcome); these are the cases where
//! the kubelet could not tell, which Go's prober reports as an `Unhealthy`
//! event ("... probe errored: ...") and then discards, keeping the previous
//! result. The messages are what the event shows.

/// A probe could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProberError {
    /// The probe's port is neither a container port name nor a number in
    /// 1..=65535.
    #[error("{message}")]
    Port {
        /// Container whose port was looked up.
        container: String,
        /// What was wrong, in the kubelet's words.
        message: String,
    },

    /// The probe names no handler this kubelet can run.
    #[error("missing probe handler for {pod}:{container}")]
    MissingHandler {
        /// `name_namespace(uid)`.
        pod: String,
        /// Container name.
        container: String,
    },

    /// The command could not be run in the container (not a non-zero exit,
    /// which is a failure, and not a timeout when timeouts count).
    #[error("{message}")]
    Exec {
        /// Container ID.
        container_id: String,
        /// The runtime's error.
        message: String,
    },

    /// The response body of an HTTP probe could not be read.
    #[error("{message}")]
    HttpBody {
        /// The probed URL.
        url: String,
        /// Why reading stopped.
        message: String,
    },
}
