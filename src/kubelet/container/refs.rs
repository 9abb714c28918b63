//! Keys the kubelet uses for pods and containers: the pod full name
//! (`<name>_<namespace>`, from `kubelet::types`) and the
//! `name_namespace(uid)` form its messages use.
//! The typed container ID lives in `super::runtime`.

use k8s_openapi::api::core::v1::Pod;

pub use crate::kubelet::types::{
    build_pod_full_name, get_pod_full_name as pod_full_name, parse_pod_full_name,
};

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
    fn format_pod_shape() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}
        }))
        .expect("pod");
        assert_eq!(format_pod(&pod), "p_ns(u-1)");
        assert_eq!(pod_full_name(&pod), "p_ns");
    }
}
