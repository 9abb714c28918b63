//! The main port's serving certificate under `serverTLSBootstrap`: the
//! certificate manager of [`crate::kubelet::certificate::serving`] over the
//! Node's addresses from the Node channel, requesting through the main API
//! client. Standalone there is no client: a stored pair (or tlsCertFile)
//! is served, and nothing is requested.

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeAddress;

use super::api::ApiObjects;
use crate::apis::config::server::KubeletServer;
use crate::kubelet::certificate::serving::{ServingParams, serving_manager};
use crate::kubelet::certificate::{CertificateError, CertificateManager, CsrClients};
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

/// The serving certificate manager and the client it requests with.
pub struct ServingCertificate {
    manager: Arc<CertificateManager>,
    client: Option<kube::Client>,
}

impl ServingCertificate {
    /// Built when serverTLSBootstrap is on; `None` otherwise.
    pub async fn build(
        server: &KubeletServer,
        node_name: &str,
        api: Option<&ApiObjects>,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Self>, CertificateError> {
        let c = &server.config;
        if !c.server_tls_bootstrap {
            return Ok(None);
        }
        let addresses: Arc<dyn Fn() -> Vec<NodeAddress> + Send + Sync> = match api {
            Some(a) => {
                let node = a.node.clone();
                Arc::new(move || {
                    node.get()
                        .ok()
                        .and_then(|n| n.status.as_ref()?.addresses.clone())
                        .unwrap_or_default()
                })
            }
            None => Arc::new(Vec::new),
        };
        let file = |p: &str| (!p.is_empty()).then(|| PathBuf::from(p));
        let manager = serving_manager(
            ServingParams {
                node_name: node_name.to_string(),
                cert_dir: PathBuf::from(&server.flags.cert_directory),
                cert_file: file(&c.tls_cert_file),
                key_file: file(&c.tls_private_key_file),
            },
            addresses,
            clock,
        )
        .await?;
        Ok(Some(ServingCertificate {
            manager,
            client: api.map(|a| a.clients.main.clone()),
        }))
    }

    /// What the main server's TLS serves.
    pub fn resolver(&self) -> Arc<dyn rustls::server::ResolvesServerCert> {
        self.manager.server_resolver()
    }

    /// Start phase: rotation over the main client (none standalone).
    pub fn start(self, tasks: &TaskSet) {
        match self.client {
            Some(client) => self.manager.start(
                tasks,
                CsrClients {
                    with_current: client,
                    bootstrap: None,
                },
            ),
            None => tracing::warn!(
                "serverTLSBootstrap without an API server: the serving certificate is not requested"
            ),
        }
    }
}
