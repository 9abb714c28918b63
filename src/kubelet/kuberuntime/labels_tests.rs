//! Round-trip tests for labels and annotations.

use super::*;
use crate::kubelet::container::{Annotation, hash_container};
use serde_json::json;

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "uid-1",
            "labels": {"app": "a", "io.kubernetes.pod.name": "spoofed"},
            "annotations": {"note": "x"}, "deletionGracePeriodSeconds": 7},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [{
            "name": "c", "image": "busybox",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"},
                {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "127.0.0.1"}],
            "lifecycle": {"preStop": {"httpGet": {"path": "/stop", "port": "http", "scheme": "HTTP",
                "httpHeaders": [{"name": "X-Reason", "value": "<stop>"}]}}}}]}
    }))
    .expect("pod")
}

#[test]
fn sandbox_labels_and_annotations() {
    let p = pod();
    let labels = new_pod_labels(&p);
    assert_eq!(labels.get("app").map(String::as_str), Some("a"));
    // The kubelet's own keys override the pod's.
    assert_eq!(
        labels.get(KUBERNETES_POD_NAME_LABEL).map(String::as_str),
        Some("web")
    );
    assert_eq!(
        labels
            .get(KUBERNETES_POD_NAMESPACE_LABEL)
            .map(String::as_str),
        Some("ns")
    );
    assert_eq!(
        labels.get(KUBERNETES_POD_UID_LABEL).map(String::as_str),
        Some("uid-1")
    );
    let info = get_pod_sandbox_info_from_labels(&labels);
    assert_eq!(info.pod_name, "web");
    assert_eq!(info.pod_uid, "uid-1");
    assert_eq!(
        info.labels,
        BTreeMap::from([("app".to_string(), "a".to_string())])
    );
    assert_eq!(
        new_pod_annotations(&p),
        HashMap::from([("note".to_string(), "x".to_string())])
    );
}

#[test]
fn container_labels_round_trip() {
    let p = pod();
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let labels = new_container_labels(c, &p);
    assert_eq!(labels.len(), 4);
    assert_eq!(
        get_container_info_from_labels(&labels),
        LabeledContainerInfo {
            container_name: "c".into(),
            pod_name: "web".into(),
            pod_namespace: "ns".into(),
            pod_uid: "uid-1".into(),
        }
    );
}

#[test]
fn container_annotations_round_trip() {
    let p = pod();
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let opts = RunContainerOptions {
        annotations: vec![
            Annotation {
                name: "device.example/x".into(),
                value: "1".into(),
            },
            Annotation {
                name: CONTAINER_RESTART_COUNT_LABEL.into(),
                value: "99".into(),
            },
        ],
        ..Default::default()
    };
    let a = new_container_annotations(c, &p, 3, &opts);
    assert_eq!(a.get("device.example/x").map(String::as_str), Some("1"));
    assert_eq!(
        a.get(CONTAINER_RESTART_COUNT_LABEL).map(String::as_str),
        Some("3")
    );
    assert_eq!(
        a.get(CONTAINER_PRE_STOP_HANDLER_LABEL).map(String::as_str),
        Some(
            r#"{"httpGet":{"path":"/stop","port":"http","scheme":"HTTP","httpHeaders":[{"name":"X-Reason","value":"\u003cstop\u003e"}]}}"#
        )
    );
    assert_eq!(
        a.get(CONTAINER_PORTS_LABEL).map(String::as_str),
        Some(
            r#"[{"name":"http","containerPort":80,"protocol":"TCP"},{"hostPort":5353,"containerPort":53,"protocol":"UDP","hostIP":"127.0.0.1"}]"#
        )
    );
    let info = get_container_info_from_annotations(&a);
    assert_eq!(info.hash, hash_container(c));
    assert_eq!(info.restart_count, 3);
    assert_eq!(info.pod_deletion_grace_period, Some(7));
    assert_eq!(info.pod_termination_grace_period, Some(30));
    assert_eq!(info.termination_message_path, "/dev/termination-log");
    assert_eq!(info.termination_message_policy, "File");
    assert_eq!(
        info.pre_stop_handler.as_ref(),
        c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref())
    );
    assert_eq!(Some(&info.container_ports), c.ports.as_ref());
}

#[test]
fn optional_annotations_absent_and_bad_values_default() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "spec": {"containers": [{"name": "c"}]}
    }))
    .expect("pod");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let a = new_container_annotations(c, &p, 0, &RunContainerOptions::default());
    for key in [
        POD_DELETION_GRACE_PERIOD_LABEL,
        POD_TERMINATION_GRACE_PERIOD_LABEL,
        CONTAINER_PRE_STOP_HANDLER_LABEL,
        CONTAINER_PORTS_LABEL,
    ] {
        assert!(!a.contains_key(key), "{key}");
    }
    let bad: HashMap<String, String> = [
        (CONTAINER_HASH_LABEL, "zz"),
        (CONTAINER_RESTART_COUNT_LABEL, "x"),
        (POD_TERMINATION_GRACE_PERIOD_LABEL, "y"),
        (CONTAINER_PRE_STOP_HANDLER_LABEL, "{not json"),
        (CONTAINER_PORTS_LABEL, "[1]"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let info = get_container_info_from_annotations(&bad);
    assert_eq!(info, AnnotatedContainerInfo::default());
}

#[test]
fn reference_annotations_parse() {
    // Annotations as the Go kubelet wrote them for the guaranteed pod.
    let a: HashMap<String, String> = [
        ("io.kubernetes.container.hash", "3d78d44b"),
        (
            "io.kubernetes.container.preStopHandler",
            r#"{"exec":{"command":["/bin/sh","-c","sleep 1"]}}"#,
        ),
        ("io.kubernetes.container.restartCount", "0"),
        (
            "io.kubernetes.container.terminationMessagePath",
            "/dev/termination-log",
        ),
        ("io.kubernetes.container.terminationMessagePolicy", "File"),
        ("io.kubernetes.pod.terminationGracePeriod", "5"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let info = get_container_info_from_annotations(&a);
    assert_eq!(info.hash, 0x3d78d44b);
    assert_eq!(info.pod_termination_grace_period, Some(5));
    let cmd = info
        .pre_stop_handler
        .and_then(|h| h.exec)
        .and_then(|e| e.command)
        .unwrap_or_default();
    assert_eq!(cmd, vec!["/bin/sh", "-c", "sleep 1"]);
}
