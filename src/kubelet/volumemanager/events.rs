//! Outcomes of volume operations as data for the caller's event recorder,
//! and the message wording of Go's operation executor
//! (`MountVolume.SetUp failed for volume "cfg" : <error>`).

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

/// `FailedMount`: a mount failed, or waiting for mounts timed out.
pub const FAILED_MOUNT: &str = "FailedMount";
/// Mount success reason; the Go kubelet records it only for block
/// volumes, so filesystem mounts report it with `record == false`.
pub const SUCCESSFUL_MOUNT_VOLUME: &str = "SuccessfulMountVolume";
/// Unmount failures (logged by Go, never recorded).
pub const FAILED_UNMOUNT: &str = "FailedUnMount";

/// `Normal` or `Warning` (the one event type of every layer).
pub use crate::util::event_type::EventType;

/// The pod an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn from_pod(pod: &Pod) -> Self {
        PodRef {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One outcome of a volume operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeEvent {
    pub pod: PodRef,
    /// The volume's name in the pod spec.
    pub volume: String,
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
    /// Whether the Go kubelet records this as an API event (otherwise it
    /// only logs it).
    pub record: bool,
}

/// `<prefix> for volume "<name>" <suffix>` (the simple message).
pub fn volume_msg(prefix: &str, volume: &str, suffix: &str) -> String {
    format!("{prefix} for volume {volume:?} {suffix}")
}

/// `: <err>` or nothing.
pub fn err_suffix(err: &dyn std::fmt::Display) -> String {
    let s = err.to_string();
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

/// The detailed form for logs: `... for volume "<name>" (UniqueName: "<u>") pod "<p>" (UID: "<uid>") <suffix>`.
pub fn volume_msg_detailed(
    prefix: &str,
    volume: &str,
    unique: &str,
    pod: &str,
    uid: &str,
    suffix: &str,
) -> String {
    format!(
        "{prefix} for volume {volume:?} (UniqueName: {unique:?}) pod {pod:?} (UID: {uid:?}) {suffix}"
    )
}

/// Where operations publish their outcomes. Full or closed channels drop
/// events (as a full event broadcaster does), with a log line.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<VolumeEvent>,
}

/// The capacity of the outcome channel.
pub const EVENT_QUEUE: usize = 1000;

impl EventSink {
    pub fn new() -> (Self, mpsc::Receiver<VolumeEvent>) {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        (EventSink { tx }, rx)
    }

    pub fn publish(&self, event: VolumeEvent) {
        if let Err(e) = self.tx.try_send(event) {
            crate::vlog!(4, error = %e, "Dropping volume event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_like_go() {
        assert_eq!(
            volume_msg(
                "MountVolume.SetUp failed",
                "cfg",
                &err_suffix(&"configmap \"cfg\" not found")
            ),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"cfg\" not found"
        );
        assert_eq!(
            volume_msg("MountVolume.SetUp succeeded", "cfg", ""),
            "MountVolume.SetUp succeeded for volume \"cfg\" "
        );
        assert_eq!(
            volume_msg_detailed(
                "UnmountVolume.TearDown succeeded",
                "cfg",
                "kubernetes.io/configmap/u-cfg",
                "ns/p",
                "u",
                ""
            ),
            "UnmountVolume.TearDown succeeded for volume \"cfg\" (UniqueName: \"kubernetes.io/configmap/u-cfg\") pod \"ns/p\" (UID: \"u\") "
        );
    }
}
