//! Pod events the lifecycle code reports (pkg/kubelet/events reasons), and
//! where they go: a recorder seam the API event recorder implements; until
//! then (and in standalone mode) events are logged.

use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::container::format_pod;
pub use crate::kubelet::events::EventType;

/// Event reasons used by the pod lifecycle.
pub mod reasons {
    pub const FAILED_SYNC: &str = "FailedSync";
    pub const FAILED_TO_KILL_POD: &str = "FailedKillPod";
    pub const FAILED_TO_CREATE_POD_CONTAINER: &str = "FailedCreatePodContainer";
    pub const FAILED_TO_MAKE_POD_DATA_DIRECTORIES: &str = "Failed";
    pub const FAILED_MOUNT_VOLUME: &str = "FailedMount";
    pub const NETWORK_NOT_READY: &str = "NetworkNotReady";
    pub const EXCEEDED_GRACE_PERIOD: &str = "ExceededGracePeriod";
}

/// Where pod events go.
pub trait PodEventRecorder: Send + Sync + 'static {
    fn pod_event(&self, pod: &Pod, event_type: EventType, reason: &str, message: &str);
}

/// Writes pod events to the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoggingPodEvents;

impl PodEventRecorder for LoggingPodEvents {
    fn pod_event(&self, pod: &Pod, event_type: EventType, reason: &str, message: &str) {
        let pod = format_pod(pod);
        match event_type {
            EventType::Normal => tracing::info!(pod = %pod, reason, message, "Event"),
            EventType::Warning => tracing::warn!(pod = %pod, reason, message, "Event"),
        }
    }
}
