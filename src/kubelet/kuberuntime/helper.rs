//! What the runtime manager asks of the rest of the kubelet (Go's
//! kubecontainer.RuntimeHelper and the kuberuntime podStateProvider). The
//! kubelet implements these over its DNS configurer, environment, volume
//! manager, container manager and pod workers; the runtime manager never
//! holds the kubelet itself.

use std::path::PathBuf;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod};

use crate::cri::api::DnsConfig;
use crate::kubelet::container::RunContainerOptions;

/// A helper could not produce what a container or sandbox needs. Surfaces
/// as `CreateContainerConfigError` (containers) or `CreatePodSandboxError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HelperError(pub String);

impl HelperError {
    pub fn new(message: impl Into<String>) -> Self {
        HelperError(message.into())
    }
}

/// The kubelet side of container and sandbox creation.
#[async_trait]
pub trait RuntimeHelper: Send + Sync + 'static {
    /// Environment, mounts (volumes, then the managed /etc/hosts), devices,
    /// hostname and the pod container directory for `container`, given the
    /// pod's IPs as the runtime manager knows them now (the primary first).
    /// Blocking work (hosts file, subPath preparation) happens here or is
    /// left described in the options; the runtime manager writes a hosts file
    /// that does not exist yet and creates the pod container directory.
    async fn generate_run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        pod_ip: &str,
        pod_ips: &[String],
    ) -> Result<RunContainerOptions, HelperError>;

    /// The pod's DNS settings for its sandbox.
    async fn get_pod_dns(&self, pod: &Pod) -> Result<DnsConfig, HelperError>;

    /// The pod cgroup in the driver's literal form (the sandbox's cgroup
    /// parent), e.g. `/kubepods/burstable/pod<uid>`.
    fn get_pod_cgroup_parent(&self, pod: &Pod) -> String;

    /// `<root-dir>/pods/<uid>`.
    fn get_pod_dir(&self, pod_uid: &str) -> PathBuf;

    /// Supplemental groups from the GID annotations of the pod's volumes.
    fn get_extra_supplemental_groups_for_pod(&self, pod: &Pod) -> Vec<i64>;
}

/// What the pod workers know about a pod's lifecycle, for sandbox creation
/// and garbage collection.
pub trait PodStateProvider: Send + Sync + 'static {
    /// The pod is being terminated (deleted or asked to stop).
    fn is_pod_termination_requested(&self, uid: &str) -> bool;
    /// Nothing of the pod is needed any more: containers, sandboxes and logs
    /// may all go.
    fn should_pod_content_be_removed(&self, uid: &str) -> bool;
    /// The pod's runtime objects (containers, sandboxes) may go.
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool;
}
