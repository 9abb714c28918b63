//! What pod sync asks of subsystems built elsewhere (the volume manager, the
//! prober manager, the secret manager), as traits: the kubelet wires the
//! real ones through `kubelet::build::lifecycle::compose`, unit tests fakes
//! through the same composition.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::kubelet::kuberuntime::VolumeMap;
use crate::kubelet::status::ContainerProbeStatus;
use crate::kubelet::volumemanager::{OrphanCleanupError, WaitError};
use crate::util::object_getters::SecretGetter;

/// The volume manager as pod sync and housekeeping use it.
#[async_trait]
pub trait PodVolumes: Send + Sync + 'static {
    /// Waits until every volume of the pod is mounted (or fails, e.g. at
    /// the volume manager's timeout, naming the volumes left).
    async fn wait_for_attach_and_mount(&self, pod: &Pod) -> Result<(), WaitError>;
    /// Waits until every volume of the terminated pod is unmounted.
    async fn wait_for_unmount(&self, pod: &Pod) -> Result<(), WaitError>;
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
    ) -> Result<(), OrphanCleanupError>;
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
#[async_trait]
pub trait PullSecrets: Send + Sync + 'static {
    async fn pull_secrets_for_pod(&self, pod: &Pod) -> Vec<Secret>;
}

/// The pod's named pull secrets read through the secret manager (Go's
/// getPullSecretsForPod): entries without a name are skipped, one that
/// cannot be read is logged and the pull goes on without it.
pub struct SecretManagerPullSecrets(pub Arc<dyn SecretGetter>);

#[async_trait]
impl PullSecrets for SecretManagerPullSecrets {
    async fn pull_secrets_for_pod(&self, pod: &Pod) -> Vec<Secret> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut out = Vec::new();
        for name in pull_secret_names(pod) {
            match self.0.get_secret(namespace, name).await {
                Ok(secret) => out.push(secret),
                Err(e) => tracing::info!(
                    pod = %crate::kubelet::container::format_pod(pod),
                    secret = %format!("{namespace}/{name}"),
                    err = %e,
                    "Unable to retrieve pull secret, the image pull may not succeed."
                ),
            }
        }
        out
    }
}

fn pull_secret_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.name.as_str())
        .filter(|n| !n.is_empty())
}

/// Standalone: no API server, so named pull secrets cannot be fetched; each
/// is reported as Go does and the pull goes on without it.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSecretManager;

#[async_trait]
impl PullSecrets for NoSecretManager {
    async fn pull_secrets_for_pod(&self, pod: &Pod) -> Vec<Secret> {
        for name in pull_secret_names(pod) {
            tracing::warn!(
                pod = %crate::kubelet::container::format_pod(pod),
                secret = %name,
                err = "no API server to read secrets from",
                "Unable to retrieve pull secret, the image pull may not succeed."
            );
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::object_getters::{GetError, ObjectKind};

    struct Store;

    #[async_trait]
    impl SecretGetter for Store {
        async fn get_secret(&self, namespace: &str, name: &str) -> Result<Secret, GetError> {
            if name == "missing" {
                return Err(GetError::NotFound {
                    kind: ObjectKind::Secret,
                    name: name.into(),
                });
            }
            let mut s = Secret::default();
            s.metadata.namespace = Some(namespace.into());
            s.metadata.name = Some(name.into());
            Ok(s)
        }
    }

    #[tokio::test]
    async fn named_pull_secrets_are_read_in_order_skipping_empty_and_unreadable_ones() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "imagePullSecrets": [
                {"name": "b"}, {"name": ""}, {"name": "missing"}, {"name": "a"}]}
        }))
        .unwrap();
        let got = SecretManagerPullSecrets(Arc::new(Store))
            .pull_secrets_for_pod(&pod)
            .await;
        let names: Vec<_> = got
            .iter()
            .map(|s| {
                format!(
                    "{}/{}",
                    s.metadata.namespace.as_deref().unwrap_or_default(),
                    s.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        assert_eq!(names, ["ns/b", "ns/a"]);
        assert!(NoSecretManager.pull_secrets_for_pod(&pod).await.is_empty());
    }
}
