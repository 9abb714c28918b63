//! Events the runtime manager and the image manager report about pods and
//! their containers (Go's pkg/kubelet/events reasons), through a small
//! recorder seam the API event recorder implements; until it is wired in, a
//! recorder that logs.

use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};

pub use crate::cm::EventType;

/// Event reasons (pkg/kubelet/events).
pub mod reasons {
    pub const CREATED_CONTAINER: &str = "Created";
    pub const STARTED_CONTAINER: &str = "Started";
    pub const FAILED_TO_CREATE_CONTAINER: &str = "Failed";
    pub const FAILED_TO_START_CONTAINER: &str = "Failed";
    pub const KILLING_CONTAINER: &str = "Killing";
    pub const BACK_OFF_START_CONTAINER: &str = "BackOff";
    pub const PULLING_IMAGE: &str = "Pulling";
    pub const PULLED_IMAGE: &str = "Pulled";
    pub const FAILED_TO_PULL_IMAGE: &str = "Failed";
    pub const FAILED_TO_INSPECT_IMAGE: &str = "InspectFailed";
    pub const ERR_IMAGE_NEVER_PULL_POLICY: &str = "ErrImageNeverPull";
    pub const BACK_OFF_PULL_IMAGE: &str = "BackOff";
    pub const SANDBOX_CHANGED: &str = "SandboxChanged";
    pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
    pub const FAILED_STATUS_POD_SANDBOX: &str = "FailedPodSandBoxStatus";
    pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
    pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
    pub const INVALID_DISK_CAPACITY: &str = "InvalidDiskCapacity";
    pub const FREE_DISK_SPACE_FAILED: &str = "FreeDiskSpaceFailed";
}

/// Where pod and container events go.
pub trait EventRecorder: Send + Sync + 'static {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str);
}

/// A recorder that writes events to the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoggingEventRecorder;

impl EventRecorder for LoggingEventRecorder {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        let ns = object.namespace.as_deref().unwrap_or("");
        let name = object.name.as_deref().unwrap_or("");
        let field = object.field_path.as_deref().unwrap_or("");
        match event_type {
            EventType::Normal => {
                tracing::info!(object = %format!("{ns}/{name}"), field, reason, message, "event")
            }
            EventType::Warning => {
                tracing::warn!(object = %format!("{ns}/{name}"), field, reason, message, "event")
            }
        }
    }
}

/// A reference to the pod itself.
pub fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The field path of a container within its pod:
/// `spec.containers{name}`, `spec.initContainers{name}` or
/// `spec.ephemeralContainers{name}`; containers the pod does not declare
/// are named as implicitly required.
pub fn container_field_path(pod: &Pod, name: &str) -> String {
    let spec = pod.spec.as_ref();
    let has =
        |list: Option<&Vec<Container>>| list.is_some_and(|l| l.iter().any(|c| c.name == name));
    if has(spec.map(|s| &s.containers)) {
        format!("spec.containers{{{name}}}")
    } else if has(spec.and_then(|s| s.init_containers.as_ref())) {
        format!("spec.initContainers{{{name}}}")
    } else if spec
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|l| l.iter().any(|c| c.name == name))
    {
        format!("spec.ephemeralContainers{{{name}}}")
    } else {
        format!("implicitly required container {name}")
    }
}

/// A reference to one container of the pod (GenerateContainerRef).
pub fn container_ref(pod: &Pod, container_name: &str) -> ObjectReference {
    ObjectReference {
        field_path: Some(container_field_path(pod, container_name)),
        ..pod_ref(pod)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A recorder that keeps what it was given, for unit tests.
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, Clone, PartialEq)]
    pub struct Recorded {
        pub field_path: String,
        pub event_type: EventType,
        pub reason: String,
        pub message: String,
    }

    #[derive(Debug, Default)]
    pub struct CapturingRecorder(pub Mutex<Vec<Recorded>>);

    impl CapturingRecorder {
        pub fn reasons(&self) -> Vec<String> {
            self.0
                .lock()
                .map(|v| v.iter().map(|r| r.reason.clone()).collect())
                .unwrap_or_default()
        }
        pub fn messages(&self) -> Vec<String> {
            self.0
                .lock()
                .map(|v| v.iter().map(|r| r.message.clone()).collect())
                .unwrap_or_default()
        }
    }

    impl EventRecorder for CapturingRecorder {
        fn event(
            &self,
            object: &ObjectReference,
            event_type: EventType,
            reason: &str,
            message: &str,
        ) {
            if let Ok(mut v) = self.0.lock() {
                v.push(Recorded {
                    field_path: object.field_path.clone().unwrap_or_default(),
                    event_type,
                    reason: reason.into(),
                    message: message.into(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_by_container_kind() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "initContainers": [{"name": "init"}],
                "containers": [{"name": "app"}],
                "ephemeralContainers": [{"name": "debug"}]
            }
        }))
        .expect("pod");
        let cases = [
            ("app", "spec.containers{app}"),
            ("init", "spec.initContainers{init}"),
            ("debug", "spec.ephemeralContainers{debug}"),
            ("POD", "implicitly required container POD"),
        ];
        for (name, want) in cases {
            let r = container_ref(&pod, name);
            assert_eq!(r.field_path.as_deref(), Some(want), "{name}");
            assert_eq!(r.kind.as_deref(), Some("Pod"));
            assert_eq!(r.uid.as_deref(), Some("u"));
        }
    }
}
