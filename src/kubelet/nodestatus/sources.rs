//! The seams node status reads from: the container runtime (version,
//! readiness, images), eviction pressure and the volumes in use, each with
//! a real implementation.

use std::sync::Arc;

use async_trait::async_trait;

use crate::cri::{CriError, ImageService, RuntimeService};
use crate::kubelet::container::{Image, Runtime, RuntimeCondition, RuntimeError, RuntimeStatus};

/// A runtime call node status made failed; reads as the runtime's error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeInfoError {
    /// Through the kubelet's runtime manager.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Straight over the CRI.
    #[error(transparent)]
    Cri(#[from] CriError),
}

/// What node status asks of the container runtime.
#[async_trait]
pub trait RuntimeInfo: Send + Sync + 'static {
    /// The runtime's name (`containerd`).
    fn runtime_type(&self) -> String;
    /// `<name>://<version>`.
    async fn version(&self) -> Result<String, RuntimeInfoError>;
    async fn status(&self) -> Result<RuntimeStatus, RuntimeInfoError>;
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeInfoError>;
    /// Hands the node's pod CIDR to the runtime (its network config).
    async fn update_pod_cidr(&self, cidr: &str) -> Result<(), RuntimeInfoError>;
}

/// Node status over the kubelet's runtime manager (which has no pod CIDR
/// call: use [`CriRuntimeInfo`] where the runtime must learn the CIDR).
pub struct RuntimeAdapter(pub Arc<dyn Runtime>);

#[async_trait]
impl RuntimeInfo for RuntimeAdapter {
    fn runtime_type(&self) -> String {
        self.0.runtime_type().to_string()
    }
    async fn version(&self) -> Result<String, RuntimeInfoError> {
        self.0.version().await.map_err(RuntimeInfoError::from)
    }
    async fn status(&self) -> Result<RuntimeStatus, RuntimeInfoError> {
        self.0.status().await.map_err(RuntimeInfoError::from)
    }
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeInfoError> {
        self.0.list_images().await.map_err(RuntimeInfoError::from)
    }
    async fn update_pod_cidr(&self, cidr: &str) -> Result<(), RuntimeInfoError> {
        crate::vlog!(
            4,
            cidr,
            "The runtime manager takes no pod CIDR; not passed on"
        );
        Ok(())
    }
}

/// Node status straight over the CRI services.
pub struct CriRuntimeInfo {
    runtime: Arc<dyn RuntimeService>,
    images: Arc<dyn ImageService>,
    name: std::sync::Mutex<String>,
}

impl CriRuntimeInfo {
    pub fn new(runtime: Arc<dyn RuntimeService>, images: Arc<dyn ImageService>) -> Self {
        CriRuntimeInfo {
            runtime,
            images,
            name: std::sync::Mutex::new(String::new()),
        }
    }
}

#[async_trait]
impl RuntimeInfo for CriRuntimeInfo {
    fn runtime_type(&self) -> String {
        self.name.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn version(&self) -> Result<String, RuntimeInfoError> {
        let v = self
            .runtime
            .version(crate::cri::KUBE_RUNTIME_API_VERSION)
            .await?;
        *self.name.lock().unwrap_or_else(|p| p.into_inner()) = v.runtime_name.clone();
        Ok(format!("{}://{}", v.runtime_name, v.runtime_version))
    }

    async fn status(&self) -> Result<RuntimeStatus, RuntimeInfoError> {
        let s = self.runtime.status(false).await?;
        let conditions = s
            .status
            .map(|st| st.conditions)
            .unwrap_or_default()
            .into_iter()
            .map(|c| RuntimeCondition {
                condition_type: c.r#type,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect();
        Ok(RuntimeStatus { conditions })
    }

    async fn list_images(&self) -> Result<Vec<Image>, RuntimeInfoError> {
        let list = self.images.list_images(None).await?;
        Ok(list
            .into_iter()
            .map(|i| Image {
                id: i.id,
                repo_tags: i.repo_tags,
                repo_digests: i.repo_digests,
                size: i.size,
                pinned: i.pinned,
            })
            .collect())
    }

    async fn update_pod_cidr(&self, cidr: &str) -> Result<(), RuntimeInfoError> {
        let cfg = crate::cri::api::RuntimeConfig {
            network_config: Some(crate::cri::api::NetworkConfig {
                pod_cidr: cidr.to_string(),
            }),
        };
        Ok(self.runtime.update_runtime_config(&cfg).await?)
    }
}

/// Whether the node is under resource pressure (the eviction manager).
pub trait PressureSource: Send + Sync + 'static {
    fn memory_pressure(&self) -> bool;
    fn disk_pressure(&self) -> bool;
    fn pid_pressure(&self) -> bool;
}

/// No eviction manager: never under pressure.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPressure;

impl PressureSource for NoPressure {
    fn memory_pressure(&self) -> bool {
        false
    }
    fn disk_pressure(&self) -> bool {
        false
    }
    fn pid_pressure(&self) -> bool {
        false
    }
}

/// The volume manager's view node status reports (volumesInUse).
pub trait VolumesInUse: Send + Sync + 'static {
    /// Whether the reconciler has synced its states (only then are volumes
    /// in use reported).
    fn reconciler_synced(&self) -> bool;
    /// Unique names of the volumes attached and in use by pods.
    fn volumes_in_use(&self) -> Vec<String>;
    /// The API server now lists these volumes as in use.
    fn mark_reported_in_use(&self, volumes: &[String]);
}

/// No attachable volumes.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoVolumes;

impl VolumesInUse for NoVolumes {
    fn reconciler_synced(&self) -> bool {
        true
    }
    fn volumes_in_use(&self) -> Vec<String> {
        Vec::new()
    }
    fn mark_reported_in_use(&self, _volumes: &[String]) {}
}
