//! Events the runtime manager and the image manager report about pods and
//! their containers (Go's pkg/kubelet/events reasons), through the same
//! recorder seam the prober uses.

/// The kubelet's one recorder seam and references (kubelet::events).
pub use crate::kubelet::events::{
    EventRecorder, EventType, LoggingRecorder as LoggingEventRecorder, container_ref, pod_ref,
};

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

#[cfg(test)]
pub(crate) mod testing {
    //! A recorder that keeps what it was given, for unit tests.
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
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
