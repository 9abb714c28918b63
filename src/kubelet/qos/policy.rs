//! The oom_score_adj the kubelet gives a container: -997 for Guaranteed and
//! node-critical pods, 1000 for BestEffort, and for Burstable a value that
//! falls with the share of the node's memory the container requests, kept
//! within 3..=999.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{QosClass, get_pod_qos};
use crate::kubelet::types::is_node_critical_pod;
use crate::util::quantity;

/// The kubelet's own oom_score_adj.
pub const KUBELET_OOM_SCORE_ADJ: i64 = -999;
/// kube-proxy's oom_score_adj.
pub const KUBE_PROXY_OOM_SCORE_ADJ: i64 = -999;
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BESTEFFORT_OOM_SCORE_ADJ: i64 = 1000;

fn memory_request(container: &Container) -> i64 {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| quantity::parse(q.0.trim()).ok())
        .map(|q| q.value())
        .unwrap_or(0)
}

/// oom_score_adj for `container` of `pod` on a node with `memory_capacity`
/// bytes of memory.
pub fn get_container_oom_score_adjust(
    pod: &Pod,
    container: &Container,
    memory_capacity: i64,
) -> i64 {
    if is_node_critical_pod(pod) {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match get_pod_qos(pod) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BESTEFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    if memory_capacity <= 0 {
        // Go would divide by zero; no machine reports zero memory.
        return BESTEFFORT_OOM_SCORE_ADJ - 1;
    }
    let request = i128::from(memory_request(container));
    let adjust = 1000 - (1000 * request) / i128::from(memory_capacity);
    let adjust = adjust.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    if adjust < 1000 + GUARANTEED_OOM_SCORE_ADJ {
        return 1000 + GUARANTEED_OOM_SCORE_ADJ;
    }
    if adjust == BESTEFFORT_OOM_SCORE_ADJ {
        return adjust - 1;
    }
    adjust
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i64 = 1 << 30;

    fn burstable(mem_request: Option<&str>) -> (Pod, Container) {
        let mut c = serde_json::json!({"name": "c", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}});
        if let Some(m) = mem_request {
            c["resources"]["requests"]["memory"] = serde_json::json!(m);
        }
        let pod: Pod =
            serde_json::from_value(serde_json::json!({"spec": {"containers": [c]}})).expect("pod");
        let container = pod.spec.as_ref().expect("spec").containers[0].clone();
        (pod, container)
    }

    #[test]
    fn burstable_table() {
        let cases: &[(&str, Option<&str>, i64, i64)] = &[
            ("no memory request", None, 4 * GI, 999),
            (
                "tiny request rounds to 1000, bumped down",
                Some("1Ki"),
                4 * GI,
                999,
            ),
            ("10% of memory", Some("400Mi"), 4000 * (1 << 20), 900),
            ("half", Some("2Gi"), 4 * GI, 500),
            ("all memory", Some("4Gi"), 4 * GI, 3),
            ("more than the node", Some("8Gi"), 4 * GI, 3),
            ("large node", Some("64Mi"), 40 * GI, 999),
            // The reference node: 24684092Ki of memory gave web 998.
            (
                "reference burstable pod",
                Some("64Mi"),
                24_684_092 * 1024,
                998,
            ),
        ];
        for (name, req, cap, want) in cases {
            let (pod, c) = burstable(*req);
            assert_eq!(
                get_container_oom_score_adjust(&pod, &c, *cap),
                *want,
                "case {name}"
            );
        }
    }

    #[test]
    fn class_and_criticality() {
        let be: Pod =
            serde_json::from_value(serde_json::json!({"spec": {"containers": [{"name": "c"}]}}))
                .expect("pod");
        let c = be.spec.as_ref().expect("spec").containers[0].clone();
        assert_eq!(get_container_oom_score_adjust(&be, &c, 4 * GI), 1000);

        let mut critical = be.clone();
        critical.metadata.annotations = Some(
            [(
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            )]
            .into(),
        );
        if let Some(spec) = critical.spec.as_mut() {
            spec.priority_class_name = Some("system-node-critical".into());
        }
        assert_eq!(get_container_oom_score_adjust(&critical, &c, 4 * GI), -997);

        let g: Pod = serde_json::from_value(serde_json::json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}))
            .expect("pod");
        let gc = g.spec.as_ref().expect("spec").containers[0].clone();
        assert_eq!(get_container_oom_score_adjust(&g, &gc, 4 * GI), -997);
    }
}
