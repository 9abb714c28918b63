//! Events (client-go's record package as the kubelet sets it up, and
//! pkg/kubelet/events' reasons): a recorder other modules call with an
//! object reference, type, reason and message; events are logged (klog
//! V(3)) and, with an API server, correlated (aggregation, dedupe, spam
//! filter) and written as core/v1 Events through the event client, source
//! component `kubelet`, host the node name. Without an API server
//! ([`LoggingRecorder`]) they are only logged.

mod correlator;
mod lru;
pub mod reasons;
mod recorder;
pub mod refs;

pub use correlator::{COMBINED_PREFIX, Correlated, EventCorrelator, event_key, event_name};
pub use recorder::{ApiEventRecorder, EventSink, KubeEventSink, SINK_RETRY_SLEEP};
pub use refs::{container_field_path, container_ref, node_ref, pod_ref};

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;

/// The component events are recorded as.
pub const COMPONENT_KUBELET: &str = "kubelet";

pub use crate::util::event_type::EventType;

/// Records an event about an object: the one recorder seam every module
/// (prober, runtime and image managers, pod workers, container manager,
/// eviction) records through.
pub trait EventRecorder: Send + Sync + 'static {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str);
}

/// Logs an event as the kubelet's structured event logging does (V(3)).
pub(crate) fn log_event(
    object: &ObjectReference,
    event_type: EventType,
    reason: &str,
    message: &str,
) {
    let ns = object.namespace.as_deref().unwrap_or("");
    let name = object.name.as_deref().unwrap_or("");
    let obj = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    };
    crate::vlog!(
        3,
        object = %obj,
        field_path = object.field_path.as_deref().unwrap_or(""),
        kind = object.kind.as_deref().unwrap_or(""),
        api_version = object.api_version.as_deref().unwrap_or(""),
        r#type = event_type.as_str(),
        reason,
        message,
        "Event occurred"
    );
}

/// The recorder of a kubelet without an API server: events are logged only.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoggingRecorder;

impl EventRecorder for LoggingRecorder {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        log_event(object, event_type, reason, message);
    }
}

/// Events about this node, for subsystems that only talk about the node
/// (the container manager's [`crate::cm::NodeEventRecorder`], node status).
#[derive(Clone)]
pub struct NodeEvents {
    recorder: Arc<dyn EventRecorder>,
    node: ObjectReference,
}

impl NodeEvents {
    pub fn new(recorder: Arc<dyn EventRecorder>, node_name: &str) -> Self {
        NodeEvents {
            recorder,
            node: node_ref(node_name),
        }
    }

    pub fn event(&self, event_type: EventType, reason: &str, message: &str) {
        self.recorder.event(&self.node, event_type, reason, message);
    }

    /// BirthCry: "Starting kubelet." on the node.
    pub fn birth_cry(&self) {
        self.event(
            EventType::Normal,
            reasons::STARTING_KUBELET,
            "Starting kubelet.",
        );
    }
}

impl crate::cm::NodeEventRecorder for NodeEvents {
    fn node_event(&self, event_type: EventType, reason: &str, message: &str) {
        self.event(event_type, reason, message);
    }
}
