//! The `Runtime` seam (Go's kubecontainer.Runtime) and the types it speaks:
//! running pods, pod statuses and container statuses as the runtime reports
//! them, before they are turned into API pod status.

use std::fmt;
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::cri::api::PodSandboxStatus;

/// A pod UID as the API or the static pod source gave it.
pub type PodUid = String;

/// `<type>://<id>`, e.g. `containerd://6ae6…`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId {
    pub runtime_type: String,
    pub id: String,
}

impl ContainerId {
    pub fn new(runtime_type: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            runtime_type: runtime_type.into(),
            id: id.into(),
        }
    }

    /// Parses `<type>://<id>`; `None` when the separator is missing.
    pub fn parse(s: &str) -> Option<Self> {
        let (t, id) = s.trim_matches('"').split_once("://")?;
        Some(Self::new(t, id))
    }

    pub fn is_empty(&self) -> bool {
        self.runtime_type.is_empty() && self.id.is_empty()
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.runtime_type, self.id)
    }
}

/// A container's (or sandbox's) state as the runtime sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

/// A container or sandbox of a running pod (kubecontainer.Container).
#[derive(Debug, Clone, PartialEq)]
pub struct RunningContainer {
    pub id: ContainerId,
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub hash: u64,
    pub state: ContainerState,
}

/// The containers and sandboxes the runtime has for one pod (kubecontainer.Pod).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunningPod {
    pub id: PodUid,
    pub name: String,
    pub namespace: String,
    pub containers: Vec<RunningContainer>,
    pub sandboxes: Vec<RunningContainer>,
}

impl RunningPod {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.sandboxes.is_empty()
    }

    pub fn find_container_by_name(&self, name: &str) -> Option<&RunningContainer> {
        self.containers.iter().find(|c| c.name == name)
    }
}

/// One container's status as the runtime reports it (kubecontainer.Status).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerStatus {
    pub id: ContainerId,
    pub name: String,
    pub state: ContainerState,
    pub created_at: Option<SystemTime>,
    pub started_at: Option<SystemTime>,
    pub finished_at: Option<SystemTime>,
    pub exit_code: i32,
    pub image: String,
    pub image_id: String,
    pub hash: u64,
    pub restart_count: i32,
    pub reason: String,
    pub message: String,
}

/// Everything the runtime knows about one pod (kubecontainer.PodStatus).
/// Container statuses are newest first per container name, as the runtime
/// manager sorts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodStatus {
    pub id: PodUid,
    pub name: String,
    pub namespace: String,
    pub ips: Vec<String>,
    pub container_statuses: Vec<ContainerStatus>,
    pub sandbox_statuses: Vec<PodSandboxStatus>,
}

impl PodStatus {
    /// An empty status for a pod the runtime does not know.
    pub fn empty(id: impl Into<PodUid>) -> Self {
        Self {
            id: id.into(),
            ..Default::default()
        }
    }

    /// The newest status of the named container, if any.
    pub fn find_container_status_by_name(&self, name: &str) -> Option<&ContainerStatus> {
        self.container_statuses.iter().find(|c| c.name == name)
    }

    pub fn running_container_statuses(&self) -> impl Iterator<Item = &ContainerStatus> {
        self.container_statuses
            .iter()
            .filter(|c| c.state == ContainerState::Running)
    }
}

/// Runtime and network readiness (kubecontainer.RuntimeStatus).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeStatus {
    pub conditions: Vec<RuntimeCondition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeCondition {
    /// `RuntimeReady` or `NetworkReady`.
    pub condition_type: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl RuntimeStatus {
    pub fn condition(&self, t: &str) -> Option<&RuntimeCondition> {
        self.conditions.iter().find(|c| c.condition_type == t)
    }
}

/// An image as the runtime lists it (kubecontainer.Image).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Image {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
    pub pinned: bool,
}

/// Dead-container garbage collection policy (kubecontainer.GCPolicy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcPolicy {
    /// Minimum age of a dead container before it may be removed.
    pub min_age: std::time::Duration,
    /// Dead instances kept per (pod, container name); negative means no limit.
    pub max_per_pod_container: i32,
    /// Dead containers kept on the node; negative means no limit.
    pub max_containers: i32,
}

/// A runtime-level failure the syncLoop and node status care about.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    #[error("runtime call {op} failed: {message}")]
    Call { op: &'static str, message: String },
    #[error("pod {pod}: {message}")]
    Pod { pod: String, message: String },
}

/// The container runtime as the kubelet drives it (Go's kubecontainer.Runtime),
/// implemented over CRI by `kuberuntime`. Object-safe: held as `Arc<dyn Runtime>`.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// The runtime's name as used in container IDs (`containerd`).
    fn runtime_type(&self) -> &str;
    /// `<name>://<version>` as node status reports it (`containerd://1.6.20`).
    async fn version(&self) -> Result<String, RuntimeError>;
    async fn status(&self) -> Result<RuntimeStatus, RuntimeError>;
    /// Pods with their containers and sandboxes; `all` includes exited ones.
    async fn get_pods(&self, all: bool) -> Result<Vec<RunningPod>, RuntimeError>;
    async fn get_pod_status(
        &self,
        uid: &str,
        name: &str,
        namespace: &str,
    ) -> Result<PodStatus, RuntimeError>;
    /// Drives the pod towards its spec: kill what must go, create the sandbox,
    /// run init containers in order, start app containers, with back-off.
    async fn sync_pod(
        &self,
        pod: &Pod,
        status: &PodStatus,
        pull_secrets: &[Secret],
    ) -> super::PodSyncResult;
    /// Kills every container and sandbox of the pod. `pod` may be unknown
    /// (orphans); the grace override is for hard kills only.
    async fn kill_pod(
        &self,
        pod: Option<&Pod>,
        running: &RunningPod,
        grace_period_override: Option<i64>,
    ) -> Result<(), RuntimeError>;
    async fn garbage_collect(
        &self,
        policy: GcPolicy,
        all_sources_ready: bool,
        evict_non_deleted_pods: bool,
    ) -> Result<(), RuntimeError>;
    async fn delete_container(&self, id: &ContainerId) -> Result<(), RuntimeError>;
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeError>;
    async fn remove_image(&self, image_id: &str) -> Result<(), RuntimeError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_id_round_trips() {
        let cases = [
            ("containerd://abc", Some(("containerd", "abc"))),
            ("\"docker://x\"", Some(("docker", "x"))),
            ("no-separator", None),
        ];
        for (input, want) in cases {
            let got = ContainerId::parse(input);
            assert_eq!(
                got.as_ref()
                    .map(|c| (c.runtime_type.as_str(), c.id.as_str())),
                want,
                "{input}"
            );
            if let Some(id) = got {
                assert_eq!(ContainerId::parse(&id.to_string()), Some(id));
            }
        }
    }
}
