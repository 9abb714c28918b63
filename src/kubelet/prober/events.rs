//! Events the prober records, through a small recorder seam: issue 6 brings
//! the recorder that writes Event objects to the API server; until then
//! [`LoggingRecorder`] logs them.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};

use crate::kubelet::container::refs::{pod_name, pod_namespace, pod_uid};

/// Reason of a probe failure event.
pub const CONTAINER_UNHEALTHY: &str = "Unhealthy";
/// Reason of a probe that passed with a warning (a redirect it did not follow).
pub const CONTAINER_PROBE_WARNING: &str = "ProbeWarning";

/// The `type` of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records an event about an object.
pub trait EventRecorder: Send + Sync + 'static {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str);
}

/// A recorder that only writes the event to the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoggingRecorder;

impl EventRecorder for LoggingRecorder {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        let ns = object.namespace.as_deref().unwrap_or("");
        let name = object.name.as_deref().unwrap_or("");
        let field = object.field_path.as_deref().unwrap_or("");
        match event_type {
            EventType::Normal => {
                tracing::info!(object = %format!("{ns}/{name}"), field_path = field, reason, message, "Event")
            }
            EventType::Warning => {
                tracing::warn!(object = %format!("{ns}/{name}"), field_path = field, reason, message, "Event")
            }
        }
    }
}

/// The reference events about one of a pod's containers point at: the pod,
/// with the container's field path (`spec.containers{name}`, or the init /
/// ephemeral list it is in).
pub fn container_ref(pod: &Pod, container_name: &str) -> ObjectReference {
    let spec = pod.spec.as_ref();
    let in_list = |list: Option<&Vec<k8s_openapi::api::core::v1::Container>>| {
        list.is_some_and(|l| l.iter().any(|c| c.name == container_name))
    };
    let field_path = if in_list(spec.map(|s| &s.containers)) {
        format!("spec.containers{{{container_name}}}")
    } else if in_list(spec.and_then(|s| s.init_containers.as_ref())) {
        format!("spec.initContainers{{{container_name}}}")
    } else if spec
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|l| l.iter().any(|c| c.name == container_name))
    {
        format!("spec.ephemeralContainers{{{container_name}}}")
    } else {
        format!("implicitly required container {container_name}")
    };
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("Pod".to_string()),
        name: non_empty(pod_name(pod)),
        namespace: non_empty(pod_namespace(pod)),
        uid: non_empty(pod_uid(pod)),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: Some(field_path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ref_field_paths() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "42"},
            "spec": {
                "containers": [{"name": "app"}],
                "initContainers": [{"name": "init"}],
                "ephemeralContainers": [{"name": "debug"}]
            }
        }))
        .expect("pod");
        let cases = [
            ("app", "spec.containers{app}"),
            ("init", "spec.initContainers{init}"),
            ("debug", "spec.ephemeralContainers{debug}"),
            ("ghost", "implicitly required container ghost"),
        ];
        for (name, want) in cases {
            let r = container_ref(&pod, name);
            assert_eq!(r.field_path.as_deref(), Some(want), "{name}");
            assert_eq!(r.kind.as_deref(), Some("Pod"));
            assert_eq!(r.api_version.as_deref(), Some("v1"));
            assert_eq!(r.name.as_deref(), Some("p"));
            assert_eq!(r.namespace.as_deref(), Some("ns"));
            assert_eq!(r.uid.as_deref(), Some("u1"));
            assert_eq!(r.resource_version.as_deref(), Some("42"));
        }
    }
}
