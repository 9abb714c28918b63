use super::*;
use serde_json::json;

fn status(v: Value) -> PodStatus {
    serde_json::from_value(v).unwrap()
}

fn cond(t: &str, s: &str, at: &str) -> Value {
    json!({"type": t, "status": s, "lastTransitionTime": at})
}

#[test]
fn unchanged_status_is_only_the_precondition() {
    let s = status(
        json!({"phase": "Running", "conditions": [cond("Ready", "True", "2024-01-01T00:00:00Z")]}),
    );
    let p = prepare_pod_status_patch("u1", &s, &s).unwrap();
    assert!(p.unchanged);
    assert_eq!(p.to_json(), r#"{"metadata":{"uid":"u1"}}"#);
}

#[test]
fn patch_table() {
    let t0 = "2024-01-01T00:00:00Z";
    let t1 = "2024-01-01T00:00:09Z";
    let cases = [
        (
            "phase and reason set, scalar fields only",
            json!({"phase": "Pending", "qosClass": "BestEffort"}),
            json!({"phase": "Failed", "reason": "OutOfcpu", "message": "Pod x", "qosClass": "BestEffort"}),
            json!({"metadata": {"uid": "u"}, "status": {"message": "Pod x", "phase": "Failed", "reason": "OutOfcpu"}}),
        ),
        (
            "a changed condition: its changed fields with its key, and the order",
            json!({"conditions": [cond("Initialized", "True", t0), cond("Ready", "False", t0), cond("PodScheduled", "True", t0)]}),
            json!({"conditions": [cond("Initialized", "True", t0), cond("Ready", "True", t1), cond("PodScheduled", "True", t0)]}),
            json!({"metadata": {"uid": "u"}, "status": {
                "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}, {"type": "PodScheduled"}],
                "conditions": [{"lastTransitionTime": t1, "status": "True", "type": "Ready"}]}}),
        ),
        (
            "added and removed conditions",
            json!({"conditions": [cond("PodScheduled", "True", t0), cond("Custom", "True", t0)]}),
            json!({"conditions": [cond("Initialized", "True", t1), cond("PodScheduled", "True", t0)]}),
            json!({"metadata": {"uid": "u"}, "status": {
                "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "PodScheduled"}],
                "conditions": [
                    {"lastProbeTime": null, "lastTransitionTime": t1, "status": "True", "type": "Initialized"},
                    {"$patch": "delete", "type": "Custom"}]}}),
        ),
        (
            "reordered conditions: only the order",
            json!({"conditions": [cond("A", "True", t0), cond("B", "True", t0)]}),
            json!({"conditions": [cond("B", "True", t0), cond("A", "True", t0)]}),
            json!({"metadata": {"uid": "u"}, "status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}]}}),
        ),
        (
            "container statuses are replaced whole; new lists are sent whole",
            json!({"containerStatuses": [{"name": "a", "ready": false, "restartCount": 0, "image": "i", "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
            json!({"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
                "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0, "image": "i", "imageID": "sha256:1",
                    "containerID": "containerd://c1", "started": true, "state": {"running": {"startedAt": t1}}}]}),
            json!({"metadata": {"uid": "u"}, "status": {
                "containerStatuses": [{"containerID": "containerd://c1", "image": "i", "imageID": "sha256:1",
                    "lastState": {}, "name": "a", "ready": true, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": t1}}}],
                "podIP": "10.0.0.5",
                "podIPs": [{"ip": "10.0.0.5"}]}}),
        ),
        (
            "pod IPs merged by ip",
            json!({"podIPs": [{"ip": "10.0.0.1"}]}),
            json!({"podIPs": [{"ip": "10.0.0.2"}]}),
            json!({"metadata": {"uid": "u"}, "status": {
                "$setElementOrder/podIPs": [{"ip": "10.0.0.2"}],
                "podIPs": [{"ip": "10.0.0.2"}, {"$patch": "delete", "ip": "10.0.0.1"}]}}),
        ),
        (
            "removed fields become null",
            json!({"phase": "Failed", "reason": "Evicted", "message": "gone", "nominatedNodeName": "n"}),
            json!({"phase": "Failed"}),
            json!({"metadata": {"uid": "u"}, "status": {"message": null, "nominatedNodeName": null, "reason": null}}),
        ),
    ];
    for (name, old, new, want) in cases {
        let p = prepare_pod_status_patch("u", &status(old), &status(new)).unwrap();
        assert!(!p.unchanged, "{name}");
        assert_eq!(p.patch, want, "{name}");
        // Keys come out sorted, as Go writes maps.
        assert_eq!(
            p.to_json(),
            serde_json::to_string(&crate::util::strategicpatch::sort_keys(want)).unwrap(),
            "{name}"
        );
    }
}
