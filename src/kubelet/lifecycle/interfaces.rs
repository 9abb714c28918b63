//! The admission vocabulary: what a handler is asked, what it answers, and
//! the ordered list of handlers the kubelet consults.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

/// What an admission decision looks at.
#[derive(Debug, Clone, Copy)]
pub struct PodAdmitAttributes<'a> {
    /// The pod asking to be admitted.
    pub pod: &'a Pod,
    /// Every other admitted, still active pod bound to this kubelet.
    pub other_pods: &'a [Arc<Pod>],
}

/// The answer of one handler.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodAdmitResult {
    /// Whether the pod may run.
    pub admit: bool,
    /// One CamelCase word naming why not (empty when admitted).
    pub reason: String,
    /// A sentence explaining why not (empty when admitted).
    pub message: String,
}

impl PodAdmitResult {
    /// The pod may run.
    pub fn admitted() -> Self {
        PodAdmitResult {
            admit: true,
            ..Default::default()
        }
    }

    /// The pod may not run, for `reason`, explained by `message`.
    pub fn rejected(reason: impl Into<String>, message: impl Into<String>) -> Self {
        PodAdmitResult {
            admit: false,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Decides whether a pod may run on this node. Must not block: it is called
/// from the sync loop for every new pod.
pub trait PodAdmitHandler: Send + Sync {
    fn admit(&self, attrs: &PodAdmitAttributes<'_>) -> PodAdmitResult;
}

/// The handlers in the order they were added; the first refusal wins.
#[derive(Clone, Default)]
pub struct PodAdmitHandlers {
    handlers: Vec<Arc<dyn PodAdmitHandler>>,
}

impl PodAdmitHandlers {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a handler.
    pub fn add(&mut self, handler: Arc<dyn PodAdmitHandler>) {
        self.handlers.push(handler);
    }

    pub fn len(&self) -> usize {
        self.handlers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    /// Asks every handler in turn (Go's `canAdmitPod`); `other_pods` are the
    /// admitted pods that are still active. Returns the first refusal, or an
    /// admitting result.
    pub fn can_admit_pod(&self, other_pods: &[Arc<Pod>], pod: &Pod) -> PodAdmitResult {
        let attrs = PodAdmitAttributes { pod, other_pods };
        for handler in &self.handlers {
            let result = handler.admit(&attrs);
            if !result.admit {
                return result;
            }
        }
        PodAdmitResult::admitted()
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

    struct Fixed(PodAdmitResult);

    impl PodAdmitHandler for Fixed {
        fn admit(&self, _: &PodAdmitAttributes<'_>) -> PodAdmitResult {
            self.0.clone()
        }
    }

    #[test]
    fn first_refusal_wins_and_empty_list_admits() {
        let pod = Pod::default();
        let mut handlers = PodAdmitHandlers::new();
        assert!(handlers.can_admit_pod(&[], &pod).admit);
        handlers.add(Arc::new(Fixed(PodAdmitResult::admitted())));
        handlers.add(Arc::new(Fixed(PodAdmitResult::rejected("First", "one"))));
        handlers.add(Arc::new(Fixed(PodAdmitResult::rejected("Second", "two"))));
        let got = handlers.can_admit_pod(&[], &pod);
        assert_eq!(got, PodAdmitResult::rejected("First", "one"));
        assert_eq!(handlers.len(), 3);
    }

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
