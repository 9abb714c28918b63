//! Keys the kubelet uses for pods and containers: the pod full name
//! (`<name>_<namespace>`) and the `name_namespace(uid)` form its messages use.
//! The typed container ID lives in `super::runtime`.

use k8s_openapi::api::core::v1::Pod;

/// Errors from parsing keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("failed to parse the pod full name {0:?}: expected <name>_<namespace>")]
    PodFullName(String),
}

/// `<name>_<namespace>`, the key the kubelet uses for a pod across sources.
pub fn build_pod_full_name(name: &str, namespace: &str) -> String {
    format!("{name}_{namespace}")
}

/// The pod full name of a pod object.
pub fn pod_full_name(pod: &Pod) -> String {
    build_pod_full_name(pod_name(pod), pod_namespace(pod))
}

/// Splits a pod full name back into (name, namespace).
pub fn parse_pod_full_name(full: &str) -> Result<(String, String), RefError> {
    let parts: Vec<&str> = full.split('_').collect();
    match parts.as_slice() {
        [name, ns] if !name.is_empty() && !ns.is_empty() => Ok((name.to_string(), ns.to_string())),
        _ => Err(RefError::PodFullName(full.to_string())),
    }
}

/// `name_namespace(uid)`, how the kubelet names a pod in messages.
pub fn format_pod(pod: &Pod) -> String {
    format!("{}_{}({})", pod_name(pod), pod_namespace(pod), pod_uid(pod))
}

/// The pod's name ("" when unset).
pub fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// The pod's namespace ("" when unset).
pub fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("")
}

/// The pod's UID ("" when unset).
pub fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_full_name_round_trip() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("web_default", Some(("web", "default"))),
            (
                "web-gonode_kube-system",
                Some(("web-gonode", "kube-system")),
            ),
            ("nounderscore", None),
            ("a_b_c", None),
            ("_ns", None),
            ("name_", None),
        ];
        for (input, want) in cases {
            let got = parse_pod_full_name(input).ok();
            let want = want.map(|(a, b)| (a.to_string(), b.to_string()));
            assert_eq!(got, want, "{input}");
            if let Some((n, ns)) = &want {
                assert_eq!(&build_pod_full_name(n, ns), input);
            }
        }
    }

    #[test]
    fn format_pod_shape() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}
        }))
        .expect("pod");
        assert_eq!(format_pod(&pod), "p_ns(u-1)");
        assert_eq!(pod_full_name(&pod), "p_ns");
    }
}
