//! KubeGenericRuntimeManager: the container runtime as the kubelet drives
//! it, over CRI. Construction checks the runtime's API version and learns
//! its name; the work lives in the sibling modules (sync, start, kill,
//! status, pod_sandbox, gc, hooks).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};

use super::events::EventRecorder;
use super::helper::{PodStateProvider, RuntimeHelper};
use super::hooks::HookHttpClient;
use super::log_paths::{LEGACY_CONTAINER_LOGS_DIR, POD_LOGS_ROOT_DIRECTORY};
use super::settings::RuntimeSettings;
use crate::cri::{CriError, KUBE_RUNTIME_API_VERSION, RuntimeService};
use crate::kubelet::container::{
    ContainerId, GcPolicy, Image, PodStatus, PodSyncResult, RunningPod, Runtime, RuntimeCondition,
    RuntimeError, RuntimeStatus,
};
use crate::kubelet::images::{ImageManager, RuntimeImageService};
use crate::kubelet::prober::results::ResultsManager;
use crate::util::backoff::Backoff;
use crate::util::clock::Clock;

/// The CRI API version the runtime must answer with (Go's
/// kubeRuntimeAPIVersion).
pub const RUNTIME_API_VERSION: &str = "0.1.0";
/// Containers always get at least this long to stop (seconds).
pub const MINIMUM_GRACE_PERIOD_SECONDS: i64 = 2;
/// The container restart back-off: 10 s doubling to 5 min.
pub const CRASH_BACKOFF_INITIAL: Duration = Duration::from_secs(10);
/// The cap of the container restart back-off.
pub const CRASH_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Errors building the manager.
#[derive(Debug, thiserror::Error)]
pub enum KubeRuntimeError {
    #[error("get remote runtime typed version failed: {0}")]
    Version(#[source] CriError),
    #[error("runtime api version {got:?} is not supported (supported: {RUNTIME_API_VERSION})")]
    UnsupportedVersion { got: String },
}

/// Node-wide settings of the runtime manager.
#[derive(Debug, Clone)]
pub struct RuntimeManagerConfig {
    /// Settings the CRI configs depend on (CFS quota, seccomp, memory, huge pages).
    pub settings: RuntimeSettings,
    /// `clusterDomain`, for pod hostnames and subdomains.
    pub cluster_domain: String,
    /// RuntimeClass name → CRI handler. `None` when there is no RuntimeClass
    /// manager (standalone): every pod runs with the default handler.
    pub runtime_class_handlers: Option<HashMap<String, String>>,
    /// Where pod log directories live (`/var/log/pods`).
    pub pod_logs_root: PathBuf,
    /// Where the legacy per-container log symlinks go
    /// (`/var/log/containers`); `None` to make none.
    pub legacy_log_symlinks_dir: Option<PathBuf>,
}

impl Default for RuntimeManagerConfig {
    fn default() -> Self {
        RuntimeManagerConfig {
            settings: RuntimeSettings::default(),
            cluster_domain: String::new(),
            runtime_class_handlers: None,
            pod_logs_root: PathBuf::from(POD_LOGS_ROOT_DIRECTORY),
            legacy_log_symlinks_dir: Some(PathBuf::from(LEGACY_CONTAINER_LOGS_DIR)),
        }
    }
}

/// What the manager works through.
#[derive(Clone)]
pub struct RuntimeManagerDeps {
    pub runtime_service: Arc<dyn RuntimeService>,
    pub image_service: Arc<RuntimeImageService>,
    pub image_manager: Arc<ImageManager>,
    pub helper: Arc<dyn RuntimeHelper>,
    pub pod_state: Arc<dyn PodStateProvider>,
    pub liveness: Arc<ResultsManager>,
    pub startup: Arc<ResultsManager>,
    pub recorder: Arc<dyn EventRecorder>,
    /// The container restart back-off (shared with the kubelet, which
    /// garbage-collects it during housekeeping).
    pub crash_backoff: Arc<Backoff>,
    pub clock: Arc<dyn Clock>,
    /// The container manager's hooks around creation (the CPU manager's cpuset).
    pub lifecycle: Arc<dyn crate::cm::InternalContainerLifecycle>,
}

/// The CRI-backed runtime manager.
pub struct KubeGenericRuntimeManager {
    pub(super) runtime_name: String,
    pub(super) runtime: Arc<dyn RuntimeService>,
    pub(super) images: Arc<RuntimeImageService>,
    pub(super) image_manager: Arc<ImageManager>,
    pub(super) helper: Arc<dyn RuntimeHelper>,
    pub(super) pod_state: Arc<dyn PodStateProvider>,
    pub(super) liveness: Arc<ResultsManager>,
    pub(super) startup: Arc<ResultsManager>,
    pub(super) recorder: Arc<dyn EventRecorder>,
    pub(super) crash_backoff: Arc<Backoff>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) lifecycle: Arc<dyn crate::cm::InternalContainerLifecycle>,
    pub(super) config: RuntimeManagerConfig,
    pub(super) http: HookHttpClient,
}

impl std::fmt::Debug for KubeGenericRuntimeManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeGenericRuntimeManager")
            .field("runtime_name", &self.runtime_name)
            .finish_non_exhaustive()
    }
}

impl KubeGenericRuntimeManager {
    /// Asks the runtime for its version (it must speak the kubelet's
    /// runtime API version) and builds the manager. Spawns nothing.
    pub async fn new(
        config: RuntimeManagerConfig,
        deps: RuntimeManagerDeps,
    ) -> Result<Self, KubeRuntimeError> {
        let version = deps
            .runtime_service
            .version(KUBE_RUNTIME_API_VERSION)
            .await
            .map_err(KubeRuntimeError::Version)?;
        if version.version != RUNTIME_API_VERSION {
            return Err(KubeRuntimeError::UnsupportedVersion {
                got: version.version,
            });
        }
        tracing::info!(
            container_runtime = %version.runtime_name,
            version = %version.runtime_version,
            api_version = %version.runtime_api_version,
            "container runtime initialized"
        );
        Ok(KubeGenericRuntimeManager {
            runtime_name: version.runtime_name,
            runtime: deps.runtime_service,
            images: deps.image_service,
            image_manager: deps.image_manager,
            helper: deps.helper,
            pod_state: deps.pod_state,
            liveness: deps.liveness,
            startup: deps.startup,
            recorder: deps.recorder,
            crash_backoff: deps.crash_backoff,
            clock: deps.clock,
            lifecycle: deps.lifecycle,
            config,
            http: HookHttpClient::new(),
        })
    }

    /// The container restart back-off.
    pub fn crash_backoff(&self) -> &Arc<Backoff> {
        &self.crash_backoff
    }

    /// The image manager pulls go through.
    pub fn image_manager(&self) -> &Arc<ImageManager> {
        &self.image_manager
    }

    /// The CRI runtime service.
    pub fn runtime_service(&self) -> &Arc<dyn RuntimeService> {
        &self.runtime
    }

    pub(super) fn container_id(&self, id: &str) -> ContainerId {
        ContainerId::new(self.runtime_name.clone(), id)
    }

    /// Pushes the node's pod CIDR to the runtime.
    pub async fn update_pod_cidr(&self, pod_cidr: &str) -> Result<(), CriError> {
        tracing::info!(
            cidr = pod_cidr,
            "updating runtime config through cri with podcidr"
        );
        self.runtime
            .update_runtime_config(&crate::cri::api::RuntimeConfig {
                network_config: Some(crate::cri::api::NetworkConfig {
                    pod_cidr: pod_cidr.to_string(),
                }),
            })
            .await
    }
}

pub(super) fn call_error(op: &'static str, e: CriError) -> RuntimeError {
    RuntimeError::Call {
        op,
        message: e.status_message(),
    }
}

#[async_trait]
impl Runtime for KubeGenericRuntimeManager {
    fn runtime_type(&self) -> &str {
        &self.runtime_name
    }

    async fn version(&self) -> Result<String, RuntimeError> {
        let v = self
            .runtime
            .version(KUBE_RUNTIME_API_VERSION)
            .await
            .map_err(|e| call_error("Version", e))?;
        Ok(format!("{}://{}", v.runtime_name, v.runtime_version))
    }

    async fn status(&self) -> Result<RuntimeStatus, RuntimeError> {
        let resp = self
            .runtime
            .status(false)
            .await
            .map_err(|e| call_error("Status", e))?;
        let status = resp.status.ok_or_else(|| RuntimeError::Call {
            op: "Status",
            message: "runtime status is nil".into(),
        })?;
        Ok(RuntimeStatus {
            conditions: status
                .conditions
                .into_iter()
                .map(|c| RuntimeCondition {
                    condition_type: c.r#type,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                })
                .collect(),
        })
    }

    async fn get_pods(&self, all: bool) -> Result<Vec<RunningPod>, RuntimeError> {
        self.get_pods_impl(all).await
    }

    async fn get_pod_status(
        &self,
        uid: &str,
        name: &str,
        namespace: &str,
    ) -> Result<PodStatus, RuntimeError> {
        self.get_pod_status_impl(uid, name, namespace).await
    }

    async fn sync_pod(
        &self,
        pod: &Pod,
        status: &PodStatus,
        pull_secrets: &[Secret],
    ) -> PodSyncResult {
        self.sync_pod_impl(pod, status, pull_secrets).await
    }

    async fn kill_pod(
        &self,
        pod: Option<&Pod>,
        running: &RunningPod,
        grace_period_override: Option<i64>,
    ) -> Result<(), RuntimeError> {
        let result = self
            .kill_pod_with_sync_result(pod, running, grace_period_override)
            .await;
        match result.error() {
            Some(e) => Err(RuntimeError::Pod {
                pod: format!("{}_{}({})", running.name, running.namespace, running.id),
                message: e.to_string(),
            }),
            None => Ok(()),
        }
    }

    async fn garbage_collect(
        &self,
        policy: GcPolicy,
        all_sources_ready: bool,
        evict_non_deleted_pods: bool,
    ) -> Result<(), RuntimeError> {
        self.garbage_collect_impl(policy, all_sources_ready, evict_non_deleted_pods)
            .await
    }

    async fn delete_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.remove_container(&id.id)
            .await
            .map_err(|e| call_error("RemoveContainer", e))
    }

    async fn list_images(&self) -> Result<Vec<Image>, RuntimeError> {
        self.images
            .list_images()
            .await
            .map_err(|e| call_error("ListImages", e))
    }

    async fn remove_image(&self, image_id: &str) -> Result<(), RuntimeError> {
        self.images
            .remove_image(image_id)
            .await
            .map_err(|e| call_error("RemoveImage", e))
    }
}
