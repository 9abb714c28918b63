//! Test doubles for the prober's unit tests: a scripted command runner, an
//! event recorder that keeps what it gets, a status table, a wall clock that
//! follows tokio's (paused) time, and pod builders.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodStatus};

use super::events::{EventRecorder, EventType};
use super::exec::{CommandRunner, RunError};
use super::status::PodStatusProvider;
use crate::kubelet::container::ContainerId;
use crate::util::clock::Clock;

/// One recorded exec call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub(crate) id: ContainerId,
    pub(crate) cmd: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) at: tokio::time::Instant,
}

/// Answers exec calls from a script (then repeats `fallback`).
pub(crate) struct ScriptedRunner {
    script: Mutex<VecDeque<Result<Vec<u8>, RunError>>>,
    fallback: Mutex<Result<Vec<u8>, RunError>>,
    pub(crate) calls: Mutex<Vec<Call>>,
}

impl ScriptedRunner {
    pub(crate) fn new(fallback: Result<Vec<u8>, RunError>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(fallback),
            calls: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn push(&self, r: Result<Vec<u8>, RunError>) {
        self.script.lock().expect("lock").push_back(r);
    }

    pub(crate) fn set_fallback(&self, r: Result<Vec<u8>, RunError>) {
        *self.fallback.lock().expect("lock") = r;
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("lock").clone()
    }
}

/// Exit with `code` and `output`.
pub(crate) fn exit(code: i32, output: &str) -> Result<Vec<u8>, RunError> {
    Err(RunError::Exit {
        code,
        output: output.as_bytes().to_vec(),
    })
}

#[async_trait]
impl CommandRunner for ScriptedRunner {
    async fn run_in_container(
        &self,
        id: &ContainerId,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<Vec<u8>, RunError> {
        self.calls.lock().expect("lock").push(Call {
            id: id.clone(),
            cmd: cmd.to_vec(),
            timeout,
            at: tokio::time::Instant::now(),
        });
        let next = self.script.lock().expect("lock").pop_front();
        next.unwrap_or_else(|| self.fallback.lock().expect("lock").clone())
    }
}

/// An event as recorded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recorded {
    pub(crate) object: ObjectReference,
    pub(crate) event_type: EventType,
    pub(crate) reason: String,
    pub(crate) message: String,
}

#[derive(Default)]
pub(crate) struct CapturingRecorder {
    pub(crate) events: Mutex<Vec<Recorded>>,
}

impl CapturingRecorder {
    pub(crate) fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.events.lock().expect("lock"))
    }
}

impl EventRecorder for CapturingRecorder {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        self.events.lock().expect("lock").push(Recorded {
            object: object.clone(),
            event_type,
            reason: reason.to_string(),
            message: message.to_string(),
        });
    }
}

/// Pod statuses by UID, set by the test.
#[derive(Default)]
pub(crate) struct StatusTable {
    pub(crate) statuses: Mutex<HashMap<String, PodStatus>>,
}

impl StatusTable {
    pub(crate) fn set(&self, uid: &str, status: PodStatus) {
        self.statuses
            .lock()
            .expect("lock")
            .insert(uid.to_string(), status);
    }
}

impl PodStatusProvider for StatusTable {
    fn get_pod_status(&self, pod_uid: &str) -> Option<PodStatus> {
        self.statuses.lock().expect("lock").get(pod_uid).cloned()
    }
}

/// Wall time that advances with tokio's clock (so paused tests drive both).
pub(crate) struct TokioWallClock {
    wall: SystemTime,
    mono: tokio::time::Instant,
}

impl TokioWallClock {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            wall: SystemTime::now(),
            mono: tokio::time::Instant::now(),
        })
    }
}

impl Clock for TokioWallClock {
    fn now(&self) -> SystemTime {
        self.wall + (tokio::time::Instant::now() - self.mono)
    }

    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

/// A pod `ns/p` (uid `uid-1`) with the given container specs (JSON).
pub(crate) fn pod_with(containers: serde_json::Value, extra_spec: serde_json::Value) -> Pod {
    let mut spec = serde_json::json!({ "containers": containers });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
        "spec": spec,
    }))
    .expect("pod")
}

/// An exec probe running `cmd`, with extra fields.
pub(crate) fn exec_probe(cmd: &[&str], extra: serde_json::Value) -> serde_json::Value {
    let mut p = serde_json::json!({"exec": {"command": cmd}});
    if let (Some(o), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    p
}

/// Status of a pod whose container `name` runs as `id`, started at
/// `started_at`, with `started` as given.
pub(crate) fn running_status(
    name: &str,
    id: &str,
    started_at: SystemTime,
    started: Option<bool>,
) -> PodStatus {
    let ts = jiff::Timestamp::try_from(started_at).expect("timestamp");
    serde_json::from_value(serde_json::json!({
        "phase": "Running",
        "podIP": "10.0.0.5",
        "containerStatuses": [{
            "name": name,
            "containerID": id,
            "image": "busybox",
            "imageID": "",
            "ready": false,
            "restartCount": 0,
            "started": started,
            "state": {"running": {"startedAt": ts.to_string()}},
        }],
    }))
    .expect("status")
}

/// Status of a pod whose container `name` (as `id`) is waiting or exited.
pub(crate) fn stopped_status(name: &str, id: &str, terminated: bool, phase: &str) -> PodStatus {
    let state = if terminated {
        serde_json::json!({"terminated": {"exitCode": 1}})
    } else {
        serde_json::json!({"waiting": {"reason": "ContainerCreating"}})
    };
    serde_json::from_value(serde_json::json!({
        "phase": phase,
        "containerStatuses": [{
            "name": name,
            "containerID": id,
            "image": "busybox",
            "imageID": "",
            "ready": false,
            "restartCount": 0,
            "state": state,
        }],
    }))
    .expect("status")
}
