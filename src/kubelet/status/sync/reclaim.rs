//! Whether a deleted pod may go from the API server (Go's
//! PodResourcesAreReclaimed / PodCouldHaveRunningContainers): only once the
//! pod workers say no container can run, the reported status shows none
//! running, its volumes are gone (unless the kubelet keeps terminated pods'
//! volumes) and, with cgroupsPerQOS, its pod cgroup is gone.

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};

use crate::cm::PodContainerManager;
use crate::kubelet::container::format_pod;

/// What the status sync asks before deleting a pod for good.
#[async_trait]
pub trait PodDeletionSafetyProvider: Send + Sync {
    /// Every node resource of the pod has been released.
    async fn pod_resources_are_reclaimed(&self, pod: &Pod, status: &PodStatus) -> bool;
    /// A container of the pod may still be running.
    fn pod_could_have_running_containers(&self, pod: &Pod) -> bool;
}

/// A per-pod question answered by another subsystem, by pod UID.
pub type PodUidCheck = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A per-pod question that needs I/O to answer (the volume directories).
pub type AsyncPodUidCheck = Arc<dyn Fn(String) -> BoxFuture<'static, bool> + Send + Sync>;

/// The kubelet's answers, from the pod workers, the volume manager and the
/// pod cgroups.
pub struct ReclaimChecks {
    /// Pod workers: the pod may have running containers.
    pub could_have_running_containers: PodUidCheck,
    /// Volume manager: the pod still has volumes on the node.
    pub pod_volumes_exist: AsyncPodUidCheck,
    /// The pod cgroups, when cgroupsPerQOS is on.
    pub pod_cgroups: Option<Arc<dyn PodContainerManager>>,
    /// keepTerminatedPodVolumes: volumes do not hold a deletion back.
    pub keep_terminated_pod_volumes: bool,
}

fn running(list: Option<&Vec<ContainerStatus>>) -> usize {
    list.into_iter()
        .flatten()
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .count()
}

/// Containers the status reports as running.
pub fn count_running_container_status(status: &PodStatus) -> usize {
    running(status.init_container_statuses.as_ref())
        + running(status.container_statuses.as_ref())
        + running(status.ephemeral_container_statuses.as_ref())
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

#[async_trait]
impl PodDeletionSafetyProvider for ReclaimChecks {
    async fn pod_resources_are_reclaimed(&self, pod: &Pod, status: &PodStatus) -> bool {
        let pod_ref = format_pod(pod);
        if (self.could_have_running_containers)(uid(pod)) {
            crate::vlog!(3, pod = %pod_ref, "Pod is terminated, but some containers are still running");
            return false;
        }
        let count = count_running_container_status(status);
        if count > 0 {
            crate::vlog!(3, pod = %pod_ref, running = count, "Pod is terminated, but some container status has not yet been reported");
            return false;
        }
        if !self.keep_terminated_pod_volumes && (self.pod_volumes_exist)(uid(pod).to_string()).await
        {
            crate::vlog!(3, pod = %pod_ref, "Pod is terminated, but some volumes have not been cleaned up");
            return false;
        }
        if let Some(pcm) = &self.pod_cgroups
            && pcm.exists(pod).await
        {
            crate::vlog!(3, pod = %pod_ref, "Pod is terminated, but pod cgroup sandbox has not been cleaned up");
            return false;
        }
        crate::vlog!(3, pod = %pod_ref, "Pod is terminated and all resources are reclaimed");
        true
    }

    fn pod_could_have_running_containers(&self, pod: &Pod) -> bool {
        (self.could_have_running_containers)(uid(pod))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checks(running: bool, volumes: bool, keep: bool) -> ReclaimChecks {
        ReclaimChecks {
            could_have_running_containers: Arc::new(move |_| running),
            pod_volumes_exist: Arc::new(move |_| Box::pin(async move { volumes })),
            pod_cgroups: None,
            keep_terminated_pod_volumes: keep,
        }
    }

    #[tokio::test]
    async fn reclaim_table() {
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u"}})).unwrap();
        let stopped: PodStatus = serde_json::from_value(json!({"containerStatuses": [
            {"name": "c", "ready": false, "restartCount": 0, "image": "", "imageID": "",
             "state": {"terminated": {"exitCode": 0}}}]}))
        .unwrap();
        let still_running: PodStatus = serde_json::from_value(json!({"initContainerStatuses": [
            {"name": "i", "ready": false, "restartCount": 0, "image": "", "imageID": "",
             "state": {"running": {}}}]}))
        .unwrap();
        // (workers say running, volumes exist, keep volumes, status, reclaimed)
        let cases = [
            (false, false, false, &stopped, true),
            (true, false, false, &stopped, false),
            (false, false, false, &still_running, false),
            (false, true, false, &stopped, false),
            (false, true, true, &stopped, true),
        ];
        for (i, (run, vol, keep, status, want)) in cases.into_iter().enumerate() {
            let c = checks(run, vol, keep);
            assert_eq!(
                c.pod_resources_are_reclaimed(&pod, status).await,
                want,
                "case {i}"
            );
            assert_eq!(c.pod_could_have_running_containers(&pod), run);
        }
    }
}
