//! pkg/kubelet/lifecycle, the parts other subsystems share: the Node the
//! kubelet believes it runs on, and the status of a pod it refuses to run.
//! The admit handlers themselves run in the sync loop
//! (`kubelet::sync_loop::admission`: eviction, sysctls, the scheduler
//! predicates with critical pod preemption, the OS checks).

use k8s_openapi::api::core::v1::{Node, PodStatus};

/// Why the Node the kubelet runs on could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NodeGetError {
    /// No copy of the node is known (yet).
    #[error("node {0:?} not found")]
    NotFound(String),
    /// The getter failed otherwise.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// Reads the Node the kubelet believes it runs on: the API's copy when there
/// is one, else the kubelet's locally built initial Node.
pub trait NodeGetter: Send + Sync {
    fn get_node_any_way(&self) -> Result<Node, NodeGetError>;
}

/// Any closure whose error converts into [`NodeGetError`] is a getter.
impl<F, E> NodeGetter for F
where
    F: Fn() -> Result<Node, E> + Send + Sync,
    E: Into<NodeGetError>,
{
    fn get_node_any_way(&self) -> Result<Node, NodeGetError> {
        self().map_err(Into::into)
    }
}

/// The status the kubelet gives a pod it refuses to run (Go's `rejectPod`,
/// v1.25 wording): phase Failed, the handler's reason, "Pod " + its message.
pub fn rejected_pod_status(reason: &str, message: &str) -> PodStatus {
    PodStatus {
        phase: Some("Failed".to_string()),
        reason: Some(reason.to_string()),
        message: Some(format!("Pod {message}")),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_status_shape() {
        let s = rejected_pod_status("OutOfcpu", "Node didn't have enough resource: cpu");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(s.reason.as_deref(), Some("OutOfcpu"));
        assert_eq!(
            s.message.as_deref(),
            Some("Pod Node didn't have enough resource: cpu")
        );
        assert!(s.conditions.is_none() && s.container_statuses.is_none());
    }
}
