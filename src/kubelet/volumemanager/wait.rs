//! Waiting for a pod's volumes (WaitForAttachAndMount, WaitForUnmount):
//! poll every 300 ms for up to 2 min 3 s; errors the populator met for
//! the pod end the wait at once.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::events::FAILED_MOUNT;
use super::populator::pod_volume_names;

/// How often the wait checks.
pub const POD_ATTACH_AND_MOUNT_RETRY_INTERVAL: Duration = Duration::from_millis(300);
/// How long the wait lasts.
pub const POD_ATTACH_AND_MOUNT_TIMEOUT: Duration = Duration::from_secs(2 * 60 + 3);

/// Why a wait ended before its volumes were ready.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitCause {
    /// Errors the populator met for the pod.
    #[error("{}", .0.join("; "))]
    PodErrors(Vec<String>),
    /// wait.ErrWaitTimeout.
    #[error("timed out waiting for the condition")]
    TimedOut,
}

/// A wait that did not end with every volume mounted (or unmounted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// `unmounted volumes=[a b], unattached volumes=[a b c]: <cause>`.
    #[error("unmounted volumes=[{}], unattached volumes=[{}]: {cause}", .unmounted.join(" "), .unattached.join(" "))]
    Mount {
        unmounted: Vec<String>,
        unattached: Vec<String>,
        cause: WaitCause,
    },
    /// `mounted volumes=[a]: <cause>`.
    #[error("mounted volumes=[{}]: {cause}", .mounted.join(" "))]
    Unmount {
        mounted: Vec<String>,
        cause: WaitCause,
    },
}

impl WaitError {
    /// The event reason for the pod (`FailedMount`).
    pub fn reason(&self) -> &'static str {
        FAILED_MOUNT
    }

    /// The event message the kubelet records on the pod.
    pub fn event_message(&self) -> String {
        match self {
            WaitError::Mount { .. } => format!("Unable to attach or mount volumes: {self}"),
            WaitError::Unmount { .. } => format!("Unable to unmount volumes: {self}"),
        }
    }
}

/// The volumes a pod's containers mount or use as devices, sorted.
pub fn expected_volumes(pod: &Pod) -> Vec<String> {
    let (mounts, devices) = pod_volume_names(pod);
    let all: BTreeSet<String> = mounts.union(&devices).cloned().collect();
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_like_go() {
        let e = WaitError::Mount {
            unmounted: vec!["cfg".into()],
            unattached: vec!["cfg".into(), "kube-api-access-x".into()],
            cause: WaitCause::TimedOut,
        };
        assert_eq!(
            e.to_string(),
            "unmounted volumes=[cfg], unattached volumes=[cfg kube-api-access-x]: timed out waiting for the condition"
        );
        assert_eq!(
            e.event_message(),
            "Unable to attach or mount volumes: unmounted volumes=[cfg], unattached volumes=[cfg kube-api-access-x]: timed out waiting for the condition"
        );
        assert_eq!(e.reason(), "FailedMount");
        let e = WaitError::Unmount {
            mounted: vec![],
            cause: WaitCause::TimedOut,
        };
        assert_eq!(
            e.to_string(),
            "mounted volumes=[]: timed out waiting for the condition"
        );
    }

    #[test]
    fn expected_volumes_cover_every_container_kind() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {
            "initContainers": [{"name": "i", "volumeMounts": [{"name": "b", "mountPath": "/b"}]}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/b2"}],
                "volumeDevices": [{"name": "dev", "devicePath": "/dev/x"}]}],
            "ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "z", "mountPath": "/z"}]}],
            "volumes": [{"name": "unused", "emptyDir": {}}]
        }}))
        .expect("pod");
        assert_eq!(expected_volumes(&pod), vec!["a", "b", "dev", "z"]);
    }
}
