use super::*;
use serde_json::{Value, json};

fn node() -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "zone": "a"}},
        "spec": {"taints": [
            {"key": "dedicated", "value": "infra", "effect": "NoExecute"},
            {"key": "soft", "effect": "NoSchedule"},
        ]},
        "status": {"allocatable": {
            "cpu": "2", "memory": "4Gi", "pods": "3", "ephemeral-storage": "10Gi",
            "example.com/gpu": "1",
        }},
    }))
    .unwrap()
}

/// A pod from `spec` (merged over a base that tolerates the node's taint
/// unless `tolerations` is given).
fn pod(name: &str, spec: Value) -> Pod {
    let mut base = json!({
        "containers": [{"name": "c", "image": "i"}],
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    });
    if let (Some(b), Some(s)) = (base.as_object_mut(), spec.as_object()) {
        for (k, v) in s {
            b.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": base,
    }))
    .unwrap()
}

fn requests(r: Value) -> Value {
    json!([{"name": "c", "image": "i", "resources": {"requests": r}}])
}

fn running() -> Vec<Arc<Pod>> {
    vec![Arc::new(pod(
        "busy",
        json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "1500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}},
            "ports": [{"containerPort": 80, "hostPort": 8080}]}]}),
    ))]
}

fn handler() -> PredicateAdmitHandler {
    let node_getter: Arc<dyn NodeGetter> = Arc::new(|| Ok::<_, String>(node()));
    PredicateAdmitHandler::new(node_getter, Arc::new(AdmissionFailureHandlerStub), None)
}

type Case = (&'static str, Pod, Vec<Arc<Pod>>, Option<(String, String)>);

#[test]
fn admission_reasons_table() {
    let gi: i64 = 1 << 30;
    // (case, pod, other pods, Some((reason, message)) when rejected)
    let cases: Vec<Case> = vec![
        ("fits", pod("p", json!({"containers": requests(json!({"cpu": "500m", "memory": "1Gi"}))})), running(), None),
        ("no requests", pod("p", json!({})), running(), None),
        ("cpu", pod("p", json!({"containers": requests(json!({"cpu": "1"}))})), running(),
            Some(("OutOfcpu".into(), "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000".into()))),
        ("memory", pod("p", json!({"containers": requests(json!({"memory": "4Gi"}))})), running(),
            Some(("OutOfmemory".into(), format!("Node didn't have enough resource: memory, requested: {}, used: {}, capacity: {}", 4 * gi, gi, 4 * gi)))),
        ("ephemeral storage", pod("p", json!({"containers": requests(json!({"ephemeral-storage": "10Gi"}))})), running(),
            Some(("OutOfephemeral-storage".into(), format!("Node didn't have enough resource: ephemeral-storage, requested: {}, used: {}, capacity: {}", 10 * gi, gi, 10 * gi)))),
        ("extended", pod("p", json!({"containers": requests(json!({"example.com/gpu": "2"}))})), running(),
            Some(("OutOfexample.com/gpu".into(), "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1".into()))),
        ("extended the node does not know is ignored", pod("p", json!({"containers": requests(json!({"other.io/fpga": "5"}))})), running(), None),
        ("init container max counts", pod("p", json!({"initContainers": requests(json!({"cpu": "600m"}))})), running(),
            Some(("OutOfcpu".into(), "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000".into()))),
        ("pods", pod("p", json!({})), vec![running()[0].clone(), Arc::new(pod("b", json!({}))), Arc::new(pod("c", json!({})))],
            Some(("OutOfpods".into(), "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3".into()))),
        ("node selector", pod("p", json!({"nodeSelector": {"zone": "b"}})), running(),
            Some(("NodeAffinity".into(), "Predicate NodeAffinity failed".into()))),
        ("node name", pod("p", json!({"nodeName": "n2"})), running(),
            Some(("NodeName".into(), "Predicate NodeName failed".into()))),
        ("own node name", pod("p", json!({"nodeName": "n1"})), running(), None),
        ("host port", pod("p", json!({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]}]})), running(),
            Some(("NodePorts".into(), "Predicate NodePorts failed".into()))),
        ("other host port", pod("p", json!({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8081}]}]})), running(), None),
        ("untolerated NoExecute taint", pod("p", json!({"tolerations": []})), running(),
            Some(("TaintToleration".into(), "Predicate TaintToleration failed".into()))),
        ("NoSchedule taints are the scheduler's", pod("p", json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoExecute"}]})), running(), None),
        ("first failure wins", pod("p", json!({"nodeSelector": {"zone": "b"}, "containers": requests(json!({"cpu": "1"}))})), running(),
            Some(("OutOfcpu".into(), "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000".into()))),
        ("os label", {
            let mut p = pod("p", json!({}));
            p.metadata.labels = Some([("kubernetes.io/os".to_string(), "windows".to_string())].into());
            p
        }, running(), Some(("PodOSSelectorNodeLabelDoesNotMatch".into(), "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label".into()))),
        ("os field", pod("p", json!({"os": {"name": "windows"}})), running(),
            Some(("PodOSNotSupported".into(), "Failed to admit pod as the OS field doesn't match node OS".into()))),
        ("os field linux", pod("p", json!({"os": {"name": "linux"}})), running(), None),
    ];
    let h = handler();
    for (name, p, others, want) in cases {
        let got = h.admit(&PodAdmitAttributes {
            pod: &p,
            other_pods: &others,
        });
        match want {
            None => assert!(got.admit, "{name}: {got:?}"),
            Some((reason, message)) => {
                assert_eq!(got, PodAdmitResult::rejected(reason, message), "{name}")
            }
        }
    }
}

#[test]
fn static_pods_skip_the_taint_check() {
    let mut p = pod("p", json!({"tolerations": []}));
    p.metadata.annotations = Some(
        [(
            "kubernetes.io/config.source".to_string(),
            "file".to_string(),
        )]
        .into(),
    );
    let got = handler().admit(&PodAdmitAttributes {
        pod: &p,
        other_pods: &[],
    });
    assert!(got.admit, "{got:?}");
}

#[test]
fn node_errors_and_failure_handlers() {
    let failing: Arc<dyn NodeGetter> = Arc::new(|| Err::<Node, _>("no node".to_string()));
    let h = PredicateAdmitHandler::new(failing, Arc::new(AdmissionFailureHandlerStub), None);
    let p = pod("p", json!({}));
    let attrs = PodAdmitAttributes {
        pod: &p,
        other_pods: &[],
    };
    assert_eq!(
        h.admit(&attrs),
        PodAdmitResult::rejected("InvalidNodeInfo", "Kubelet cannot get node info.")
    );

    struct Clear;
    impl AdmissionFailureHandler for Clear {
        fn handle_admission_failure(
            &self,
            _: &Pod,
            f: Vec<PredicateFailureReason>,
        ) -> Result<Vec<PredicateFailureReason>, String> {
            assert!(
                f.iter()
                    .all(PredicateFailureReason::is_insufficient_resource)
            );
            Ok(Vec::new())
        }
    }
    struct Fail;
    impl AdmissionFailureHandler for Fail {
        fn handle_admission_failure(
            &self,
            _: &Pod,
            _: Vec<PredicateFailureReason>,
        ) -> Result<Vec<PredicateFailureReason>, String> {
            Err("cannot evict".into())
        }
    }
    let big = pod("big", json!({"containers": requests(json!({"cpu": "3"}))}));
    let attrs = PodAdmitAttributes {
        pod: &big,
        other_pods: &[],
    };
    let node_getter: Arc<dyn NodeGetter> = Arc::new(|| Ok::<_, String>(node()));
    let preempting = PredicateAdmitHandler::new(node_getter.clone(), Arc::new(Clear), None);
    assert!(preempting.admit(&attrs).admit);
    let broken = PredicateAdmitHandler::new(node_getter.clone(), Arc::new(Fail), None);
    assert_eq!(
        broken.admit(&attrs),
        PodAdmitResult::rejected(
            "UnexpectedAdmissionError",
            "Unexpected error while attempting to recover from admission failure: cannot evict"
        )
    );
    let plugin: PluginResourceUpdateFn = Arc::new(|_, _| Err("device plugin gone".into()));
    let with_plugin = PredicateAdmitHandler::new(
        node_getter,
        Arc::new(AdmissionFailureHandlerStub),
        Some(plugin),
    );
    assert_eq!(
        with_plugin.admit(&attrs),
        PodAdmitResult::rejected(
            "UnexpectedAdmissionError",
            "Update plugin resources failed due to device plugin gone, which is unexpected."
        )
    );
}
