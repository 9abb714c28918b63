//! Pod full names (`<name>_<namespace>`) and the two kinds of pod UID the pod
//! manager translates between.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

/// The UID of a pod as the kubelet runs it: a static pod's own UID, never its
/// mirror pod's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ResolvedPodUid(pub String);

/// The UID of a mirror pod in the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MirrorPodUid(pub String);

impl fmt::Display for ResolvedPodUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for MirrorPodUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `<name>_<namespace>`, the key the kubelet uses for a pod across UIDs
/// (a static pod and its mirror pod share it).
pub fn build_pod_full_name(name: &str, namespace: &str) -> String {
    format!("{name}_{namespace}")
}

/// The full name of a pod.
pub fn get_pod_full_name(pod: &Pod) -> String {
    build_pod_full_name(
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
    )
}

/// A string that is not `<name>_<namespace>` with both parts non-empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse the pod full name {0:?}")]
pub struct PodFullNameError(pub String);

/// Splits a full name back into `(name, namespace)`.
pub fn parse_pod_full_name(full_name: &str) -> Result<(String, String), PodFullNameError> {
    let parts: Vec<&str> = full_name.split('_').collect();
    match parts.as_slice() {
        [name, namespace] if !name.is_empty() && !namespace.is_empty() => {
            Ok((name.to_string(), namespace.to_string()))
        }
        _ => Err(PodFullNameError(full_name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_names_round_trip() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("etcd-node1".into());
        pod.metadata.namespace = Some("kube-system".into());
        let full = get_pod_full_name(&pod);
        assert_eq!(full, "etcd-node1_kube-system");
        assert_eq!(
            parse_pod_full_name(&full),
            Ok(("etcd-node1".to_string(), "kube-system".to_string()))
        );
    }

    #[test]
    fn malformed_full_names_are_rejected() {
        for bad in ["", "name", "_ns", "name_", "a_b_c"] {
            assert_eq!(
                parse_pod_full_name(bad),
                Err(PodFullNameError(bad.to_string())),
                "{bad:?}"
            );
        }
    }
}
