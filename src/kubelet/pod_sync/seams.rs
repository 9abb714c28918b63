//! What pod sync asks of subsystems built elsewhere (the volume manager, the
//! prober manager, the secret manager), as traits: the kubelet wires the
//! real ones in `kubelet::build`, unit tests use fakes.

use std::collections::HashSet;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::kubelet::kuberuntime::VolumeMap;
use crate::kubelet::status::ContainerProbeStatus;

/// The volume manager as pod sync and housekeeping use it.
#[async_trait]
pub trait PodVolumes: Send + Sync + 'static {
    /// Waits until every volume of the pod is mounted (or fails with the
    /// volume manager's message, e.g. its timeout).
    async fn wait_for_attach_and_mount(&self, pod: &Pod) -> Result<(), String>;
    /// Waits until every volume of the terminated pod is unmounted.
    async fn wait_for_unmount(&self, pod: &Pod) -> Result<(), String>;
    /// Whether the pod still has volume directories (or mounts) on disk.
    async fn pod_volumes_exist(&self, uid: &str) -> bool;
    /// The pod's mounted volumes, for its containers' mounts.
    fn get_mounted_volumes_for_pod(&self, uid: &str) -> VolumeMap;
    /// Supplemental groups the pod's volumes ask for (GID annotations).
    fn get_extra_supplemental_groups_for_pod(&self, pod: &Pod) -> Vec<i64>;
    /// Removes the directories of pods that are neither desired nor
    /// running, never one that still has a mount.
    async fn cleanup_orphaned_pod_dirs(
        &self,
        desired: &HashSet<String>,
        running: &HashSet<String>,
    ) -> Result<(), String>;
}

/// The prober manager as the lifecycle uses it.
pub trait ProbeManager: ContainerProbeStatus {
    /// Starts probing the pod's containers (idempotent).
    fn add_pod(&self, pod: &Pod);
    /// Stops every probe of the pod.
    fn remove_pod(&self, pod: &Pod);
    /// Stops liveness and startup probes while the pod terminates.
    fn stop_liveness_and_startup(&self, pod: &Pod);
    /// Stops probing pods not in `desired` (UIDs).
    fn cleanup_pods(&self, desired: &HashSet<String>);
}

/// Image pull secrets of a pod (the secret manager; none in standalone).
pub trait PullSecrets: Send + Sync + 'static {
    fn pull_secrets_for_pod(&self, pod: &Pod) -> Vec<Secret>;
}

/// Standalone: no API server, so named pull secrets cannot be fetched; each
/// is reported as Go does and the pull goes on without it.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSecretManager;

impl PullSecrets for NoSecretManager {
    fn pull_secrets_for_pod(&self, pod: &Pod) -> Vec<Secret> {
        for s in pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.as_ref())
            .into_iter()
            .flatten()
        {
            tracing::warn!(
                pod = %crate::kubelet::container::format_pod(pod),
                secret = %s.name,
                err = "no API server to read secrets from",
                "Unable to retrieve pull secret, the image pull may not succeed."
            );
        }
        Vec::new()
    }
}
