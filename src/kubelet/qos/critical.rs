//! Pod predicates the OOM policy needs: static, mirror and critical pods
//! (pkg/kubelet/types).

use k8s_openapi::api::core::v1::Pod;

/// Annotation naming the source a pod came from (`api`, `file`, `http`).
pub const CONFIG_SOURCE_ANNOTATION_KEY: &str = "kubernetes.io/config.source";
/// Annotation marking a mirror pod.
pub const CONFIG_MIRROR_ANNOTATION_KEY: &str = "kubernetes.io/config.mirror";
/// The source name of pods from the API server.
pub const API_SERVER_SOURCE: &str = "api";
/// Priority at and above which a pod is system-critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// The priority class of node-critical pods.
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// A pod from a file or URL source (any source but the API server).
pub fn is_static_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_SOURCE_ANNOTATION_KEY).is_some_and(|s| s != API_SERVER_SOURCE)
}

/// The API server's copy of a static pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION_KEY).is_some()
}

/// Static, mirror, or of system-critical priority.
pub fn is_critical_pod(pod: &Pod) -> bool {
    is_static_pod(pod)
        || is_mirror_pod(pod)
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.priority)
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// Critical and in the `system-node-critical` priority class.
pub fn is_node_critical_pod(pod: &Pod) -> bool {
    is_critical_pod(pod)
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref())
            == Some(SYSTEM_NODE_CRITICAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: serde_json::Value, spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"annotations": annotations}, "spec": spec
        }))
        .expect("pod")
    }

    #[test]
    fn critical_table() {
        use serde_json::json;
        let base = json!({"containers": []});
        let cases: Vec<(&str, Pod, bool, bool, bool, bool)> = vec![
            (
                "api pod",
                pod(json!({"kubernetes.io/config.source": "api"}), base.clone()),
                false,
                false,
                false,
                false,
            ),
            (
                "no source",
                pod(json!({}), base.clone()),
                false,
                false,
                false,
                false,
            ),
            (
                "file pod",
                pod(json!({"kubernetes.io/config.source": "file"}), base.clone()),
                true,
                false,
                true,
                false,
            ),
            (
                "mirror pod",
                pod(
                    json!({"kubernetes.io/config.mirror": "x", "kubernetes.io/config.source": "api"}),
                    base.clone(),
                ),
                false,
                true,
                true,
                false,
            ),
            (
                "high priority",
                pod(json!({}), json!({"containers": [], "priority": 2000000000})),
                false,
                false,
                true,
                false,
            ),
            (
                "just below",
                pod(json!({}), json!({"containers": [], "priority": 1999999999})),
                false,
                false,
                false,
                false,
            ),
            (
                "node critical static",
                pod(
                    json!({"kubernetes.io/config.source": "file"}),
                    json!({"containers": [], "priorityClassName": "system-node-critical"}),
                ),
                true,
                false,
                true,
                true,
            ),
            (
                "node critical class, not critical",
                pod(
                    json!({}),
                    json!({"containers": [], "priorityClassName": "system-node-critical"}),
                ),
                false,
                false,
                false,
                false,
            ),
        ];
        for (name, p, st, mi, cr, nc) in cases {
            assert_eq!(is_static_pod(&p), st, "{name} static");
            assert_eq!(is_mirror_pod(&p), mi, "{name} mirror");
            assert_eq!(is_critical_pod(&p), cr, "{name} critical");
            assert_eq!(is_node_critical_pod(&p), nc, "{name} node critical");
        }
    }
}
