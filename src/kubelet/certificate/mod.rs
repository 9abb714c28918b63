//! pkg/kubelet/certificate and client-go's certificate utilities: the TLS
//! bootstrap of the kubelet's client identity (`--bootstrap-kubeconfig`),
//! the certificate store in `--cert-dir` (`kubelet-client-<timestamp>.pem`
//! and the `kubelet-client-current.pem` symlink), certificate signing
//! requests, and the manager that renews the client certificate before it
//! expires (`rotateCertificates`), swapping the identity the API clients
//! present without a restart.

pub mod bootstrap;
pub mod csr;
pub mod manager;
pub mod pem;
pub mod serving;
pub mod store;

pub use bootstrap::{BootstrapParams, load_client_cert, load_client_config};
pub use csr::{CsrRequest, KUBELET_CLIENT_SIGNER, kubelet_client_usages};
pub use manager::{CertificateManager, CsrClients, Exported, ManagerConfig, Template};
pub use pem::KeyPair;
pub use store::FileStore;

use std::path::PathBuf;

/// Errors of the certificate subsystem.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("{0}")]
    Parse(String),
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
    #[error("no cert/key files read at {0}")]
    NoCertKey(String),
    #[error("unable to generate a certificate signing request: {0}")]
    Generate(String),
    #[error("cannot create certificate signing request: {0}")]
    Create(String),
    /// The API server answered the create with an error status.
    #[error("cannot create certificate signing request: {message}")]
    CreateStatus { code: u16, message: String },
    #[error("retrieved csr is not compatible: {0}")]
    Incompatible(String),
    #[error("certificate signing request {name} was deleted")]
    Deleted { name: String },
    #[error("csr {name:?} changed UIDs")]
    UidChanged { name: String },
    #[error("certificate signing request is denied, reason: {reason}, message: {message}")]
    Denied { reason: String, message: String },
    #[error("certificate signing request failed, reason: {reason}, message: {message}")]
    Failed { reason: String, message: String },
    #[error("timed out waiting for the condition")]
    Timeout,
    #[error("cannot watch on the certificate signing request: {0}")]
    Watch(String),
    #[error("unable to load bootstrap kubeconfig: {0}")]
    BootstrapKubeconfig(String),
    #[error("unable to load kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("{0}")]
    Client(String),
}

impl CertificateError {
    pub(crate) fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        CertificateError::Io {
            path: path.into(),
            reason: e.to_string(),
        }
    }
}

/// Runs blocking certificate file work off the runtime threads.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, CertificateError>
where
    F: FnOnce() -> Result<T, CertificateError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CertificateError::Client(format!("blocking task failed: {e}")))?
}
