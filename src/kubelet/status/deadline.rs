//! activeDeadlineSeconds (Go's activeDeadlineHandler): a pod active on the
//! node longer than its deadline is failed with reason DeadlineExceeded, and
//! is synced on the next sync tick so that happens promptly.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use super::manager::StatusManager;
use crate::kubelet::container::format_pod;
use crate::util::clock::Clock;

pub const DEADLINE_EXCEEDED_REASON: &str = "DeadlineExceeded";
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

/// Where a pod event goes (reason and message of a Normal event).
pub type PodEventFn = Arc<dyn Fn(&Pod, &str, &str) + Send + Sync>;

/// Decides whether pods are past their active deadline.
pub struct ActiveDeadline {
    status: Arc<StatusManager>,
    clock: Arc<dyn Clock>,
    event: Option<PodEventFn>,
}

impl ActiveDeadline {
    pub fn new(
        status: Arc<StatusManager>,
        clock: Arc<dyn Clock>,
        event: Option<PodEventFn>,
    ) -> Self {
        ActiveDeadline {
            status,
            clock,
            event,
        }
    }

    fn past_deadline(&self, pod: &Pod) -> bool {
        let Some(seconds) = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds) else {
            return false;
        };
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let status = self
            .status
            .get_pod_status(uid)
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        let Some(start) = status.start_time else {
            return false;
        };
        let start = SystemTime::from(start.0);
        let elapsed = self
            .clock
            .now()
            .duration_since(start)
            .unwrap_or(Duration::ZERO);
        elapsed >= Duration::from_secs(seconds.max(0) as u64)
    }

    /// Whether the sync tick should sync the pod (ShouldSync).
    pub fn should_sync(&self, pod: &Pod) -> bool {
        self.past_deadline(pod)
    }

    /// The eviction reason and message once the deadline passed (ShouldEvict).
    pub fn should_evict(&self, pod: &Pod) -> Option<(&'static str, &'static str)> {
        if !self.past_deadline(pod) {
            return None;
        }
        crate::vlog!(2, pod = %format_pod(pod), "Pod is past its active deadline");
        if let Some(event) = &self.event {
            event(pod, DEADLINE_EXCEEDED_REASON, DEADLINE_EXCEEDED_MESSAGE);
        }
        Some((DEADLINE_EXCEEDED_REASON, DEADLINE_EXCEEDED_MESSAGE))
    }
}
