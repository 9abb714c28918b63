//! Where workers read the pod's latest API status (Go's status manager
//! `GetPodStatus`): container IDs, states, `started`, and the pod IP that
//! network probes target.

use k8s_openapi::api::core::v1::PodStatus;

/// The latest API status the kubelet computed for a pod. The status manager
/// implements it; `None` when the pod has no status yet (or any more).
pub trait PodStatusProvider: Send + Sync + 'static {
    fn get_pod_status(&self, pod_uid: &str) -> Option<PodStatus>;
}
