use super::*;
use serde_json::json;

fn status(v: serde_json::Value) -> PodStatus {
    serde_json::from_value(v).unwrap()
}

#[test]
fn kubelet_equality_ignores_foreign_conditions_and_order() {
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}))
            .unwrap();
    let cs = |name: &str| json!({"name": name, "ready": true, "restartCount": 0, "image": "i", "imageID": "x"});
    let api = status(json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {"type": "example.com/gate", "status": "True"}],
        "containerStatuses": [cs("b"), cs("a")]}));
    let ours = status(json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00.5Z"}],
        "containerStatuses": [cs("a"), cs("b")]}));
    assert!(is_pod_status_by_kubelet_equal(&pod, &api, &ours));
    let not_ready = status(json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False"}], "containerStatuses": [cs("a"), cs("b")]}));
    assert!(!is_pod_status_by_kubelet_equal(&pod, &api, &not_ready));
    let other_phase = status(json!({"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "True"}], "containerStatuses": [cs("a"), cs("b")]}));
    assert!(!is_pod_status_by_kubelet_equal(&pod, &api, &other_phase));
}
