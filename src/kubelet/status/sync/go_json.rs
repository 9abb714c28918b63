//! A pod status as Go's `encoding/json` writes a v1.25 `v1.PodStatus`: the
//! fields that API version has, `omitempty` as Go applies it (nested structs
//! such as a container's `state` and `lastState` always written, zero times
//! as `null`, `ready`/`restartCount`/`image`/`imageID` always), times in
//! whole seconds. Both sides of a status patch go through this, so the patch
//! is the one the Go kubelet computes and nothing the v1.25 API does not
//! know is sent.

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, PodCondition, PodIP, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value};

/// Go's `metav1.Time` marshaling: RFC 3339 in UTC, whole seconds; zero is null.
pub fn go_time(t: Option<&Time>) -> Value {
    match t {
        None => Value::Null,
        Some(t) => match jiff::Timestamp::from_second(t.0.as_second()) {
            Ok(ts) => Value::String(ts.to_string()),
            Err(_) => Value::Null,
        },
    }
}

struct Obj(Map<String, Value>);

impl Obj {
    fn new() -> Self {
        Obj(Map::new())
    }

    fn always(&mut self, key: &str, v: Value) {
        self.0.insert(key.to_string(), v);
    }

    fn str_omitempty(&mut self, key: &str, v: Option<&str>) {
        if let Some(s) = v.filter(|s| !s.is_empty()) {
            self.0.insert(key.to_string(), Value::String(s.to_string()));
        }
    }

    fn int_omitempty(&mut self, key: &str, v: Option<i32>) {
        if let Some(n) = v.filter(|n| *n != 0) {
            self.0.insert(key.to_string(), Value::from(n));
        }
    }

    fn list_omitempty<T>(&mut self, key: &str, v: Option<&[T]>, f: impl Fn(&T) -> Value) {
        if let Some(items) = v.filter(|l| !l.is_empty()) {
            self.0
                .insert(key.to_string(), Value::Array(items.iter().map(f).collect()));
        }
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

fn condition(c: &PodCondition) -> Value {
    let mut o = Obj::new();
    o.always("type", Value::String(c.type_.clone()));
    o.always("status", Value::String(c.status.clone()));
    o.always("lastProbeTime", go_time(c.last_probe_time.as_ref()));
    o.always(
        "lastTransitionTime",
        go_time(c.last_transition_time.as_ref()),
    );
    o.str_omitempty("reason", c.reason.as_deref());
    o.str_omitempty("message", c.message.as_deref());
    o.done()
}

fn pod_ip(ip: &PodIP) -> Value {
    let mut o = Obj::new();
    o.str_omitempty("ip", Some(ip.ip.as_str()));
    o.done()
}

fn state(s: Option<&ContainerState>) -> Value {
    let mut o = Obj::new();
    let Some(s) = s else { return o.done() };
    if let Some(w) = &s.waiting {
        let mut w_obj = Obj::new();
        w_obj.str_omitempty("reason", w.reason.as_deref());
        w_obj.str_omitempty("message", w.message.as_deref());
        o.always("waiting", w_obj.done());
    }
    if let Some(r) = &s.running {
        let mut r_obj = Obj::new();
        r_obj.always("startedAt", go_time(r.started_at.as_ref()));
        o.always("running", r_obj.done());
    }
    if let Some(t) = &s.terminated {
        let mut t_obj = Obj::new();
        t_obj.always("exitCode", Value::from(t.exit_code));
        t_obj.int_omitempty("signal", t.signal);
        t_obj.str_omitempty("reason", t.reason.as_deref());
        t_obj.str_omitempty("message", t.message.as_deref());
        t_obj.always("startedAt", go_time(t.started_at.as_ref()));
        t_obj.always("finishedAt", go_time(t.finished_at.as_ref()));
        t_obj.str_omitempty("containerID", t.container_id.as_deref());
        o.always("terminated", t_obj.done());
    }
    o.done()
}

fn container_status(c: &ContainerStatus) -> Value {
    let mut o = Obj::new();
    o.always("name", Value::String(c.name.clone()));
    o.always("state", state(c.state.as_ref()));
    o.always("lastState", state(c.last_state.as_ref()));
    o.always("ready", Value::Bool(c.ready));
    o.always("restartCount", Value::from(c.restart_count));
    o.always("image", Value::String(c.image.clone()));
    o.always("imageID", Value::String(c.image_id.clone()));
    o.str_omitempty("containerID", c.container_id.as_deref());
    if let Some(started) = c.started {
        o.always("started", Value::Bool(started));
    }
    o.done()
}

/// The status as Go marshals a v1.25 `v1.PodStatus`.
pub fn pod_status_to_go_value(s: &PodStatus) -> Value {
    let mut o = Obj::new();
    o.str_omitempty("phase", s.phase.as_deref());
    o.list_omitempty("conditions", s.conditions.as_deref(), condition);
    o.str_omitempty("message", s.message.as_deref());
    o.str_omitempty("reason", s.reason.as_deref());
    o.str_omitempty("nominatedNodeName", s.nominated_node_name.as_deref());
    o.str_omitempty("hostIP", s.host_ip.as_deref());
    o.str_omitempty("podIP", s.pod_ip.as_deref());
    o.list_omitempty("podIPs", s.pod_ips.as_deref(), pod_ip);
    if let Some(t) = &s.start_time {
        o.always("startTime", go_time(Some(t)));
    }
    o.list_omitempty(
        "initContainerStatuses",
        s.init_container_statuses.as_deref(),
        container_status,
    );
    o.list_omitempty(
        "containerStatuses",
        s.container_statuses.as_deref(),
        container_status,
    );
    o.str_omitempty("qosClass", s.qos_class.as_deref());
    o.list_omitempty(
        "ephemeralContainerStatuses",
        s.ephemeral_container_statuses.as_deref(),
        container_status,
    );
    o.done()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_statuses_round_trip_as_go_writes_them() {
        // The statuses the Go kubelet wrote for the reference pods.
        let files = [
            include_str!("../../../../tests/fixtures/go-kubelet-examples/pod-burstable.json"),
            include_str!("../../../../tests/fixtures/go-kubelet-examples/pod-guaranteed.json"),
            include_str!("../../../../tests/fixtures/go-kubelet-examples/pod-besteffort.json"),
        ];
        for text in files {
            let pod: serde_json::Value = serde_json::from_str(text).unwrap();
            let go_status = pod["status"].clone();
            let decoded: PodStatus = serde_json::from_value(go_status.clone()).unwrap();
            assert_eq!(
                pod_status_to_go_value(&decoded),
                go_status,
                "{}",
                pod["metadata"]["name"]
            );
        }
    }

    #[test]
    fn go_shapes() {
        let s: PodStatus = serde_json::from_value(json!({
            "phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2024-01-02T03:04:05.678Z"}],
            "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "ContainerCreating"}},
                "started": false}],
            "hostIPs": [{"ip": "10.0.0.1"}],
            "observedGeneration": 3,
        }))
        .unwrap();
        assert_eq!(
            pod_status_to_go_value(&s),
            json!({
                "phase": "Pending",
                "conditions": [{"type": "Ready", "status": "False", "lastProbeTime": null,
                    "lastTransitionTime": "2024-01-02T03:04:05Z"}],
                "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}},
                    "lastState": {}, "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                    "started": false}],
            })
        );
    }
}
