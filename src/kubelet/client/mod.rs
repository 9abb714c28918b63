//! The kubelet's API server clients (Go's buildKubeletClientConfig and the
//! clients run() makes from it): from `--kubeconfig` (after a TLS bootstrap
//! from `--bootstrap-kubeconfig` when needed), three kube clients over one
//! connection-tracked transport:
//!
//! - `main`: throttled by kubeAPIQPS / kubeAPIBurst;
//! - `events`: throttled by eventRecordQPS / eventBurst;
//! - `heartbeat`: unthrottled, each request bounded by
//!   min(nodeLeaseDurationSeconds, nodeStatusUpdateFrequency).
//!
//! Repeated heartbeat failures that got no answer from the server (a
//! timeout, a broken connection) drop every connection
//! ([`KubeClients::close_all_connections`]) so a dead endpoint is abandoned;
//! a failure the server answered (a refused patch, a 5xx) proves the
//! connections alive and leaves them, and the watches on them, alone.
//! With `rotateCertificates` the clients present the certificate manager's
//! current pair, and a rotation drops the connections so new handshakes use
//! it. Bodies are JSON: kube speaks no protobuf.

pub mod clients;
pub mod connector;
pub mod kubeconfig;
pub mod ratelimit;
#[cfg(test)]
pub(crate) mod testing;
pub mod timeout;

pub use clients::{
    ClientParams, HeartbeatFailureFn, KubeClients, SharedTransport, build_clients,
    build_clients_with_clock,
};
pub use connector::ConnTracker;

use std::path::PathBuf;

/// Whether the API server answered the failed request (a Status, or a body
/// the client could not decode): the transport works, so a heartbeat that
/// failed this way is no reason to drop the connections other requests and
/// watches are using.
pub fn server_answered(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(_) | kube::Error::SerdeError(_))
}

/// Errors building the API clients.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid kubeconfig {path:?}: {reason}")]
    Kubeconfig { path: PathBuf, reason: String },
    /// The kubeconfig's client certificate is one the TLS stack refuses.
    #[error("invalid kubeconfig {path:?}: {source}")]
    ClientCertVersion {
        path: PathBuf,
        #[source]
        source: kubeconfig::ClientCertVersionError,
    },
    #[error("{path:?}: {reason}")]
    Io { path: PathBuf, reason: String },
    #[error("failed to initialize kubelet client: {0}")]
    Build(String),
    #[error(transparent)]
    Certificate(#[from] crate::kubelet::certificate::CertificateError),
}
