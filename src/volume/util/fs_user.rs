//! The user a pod's volumes may be owned by (FsUserFrom): the effective
//! runAsUser, when every init and regular container has one and they agree.

use k8s_openapi::api::core::v1::{Container, Pod};

/// The container's effective runAsUser: its own, else the pod's.
pub fn effective_run_as_user(pod: &Pod, container: &Container) -> Option<i64> {
    container
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_user)
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.security_context.as_ref())
                .and_then(|s| s.run_as_user)
        })
}

/// The single runAsUser of all init and regular containers, if any.
pub fn fs_user_from(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let mut fs_user: Option<i64> = None;
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for c in containers {
        let user = effective_run_as_user(pod, c)?;
        match fs_user {
            Some(u) if u != user => return None,
            _ => fs_user = Some(user),
        }
    }
    fs_user
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fs_user_table() {
        let cases = [
            (json!({"containers": [{"name": "a"}]}), None),
            (
                json!({"securityContext": {"runAsUser": 1000}, "containers": [{"name": "a"}, {"name": "b"}]}),
                Some(1000),
            ),
            (
                json!({"securityContext": {"runAsUser": 1000}, "containers": [{"name": "a"},
                    {"name": "b", "securityContext": {"runAsUser": 2000}}]}),
                None,
            ),
            (
                json!({"containers": [{"name": "a", "securityContext": {"runAsUser": 5}}],
                    "initContainers": [{"name": "i", "securityContext": {"runAsUser": 5}}]}),
                Some(5),
            ),
            (
                json!({"containers": [{"name": "a", "securityContext": {"runAsUser": 5}}],
                    "initContainers": [{"name": "i"}]}),
                None,
            ),
            (json!({"containers": []}), None),
        ];
        for (spec, want) in cases {
            let pod: Pod = serde_json::from_value(json!({"spec": spec})).expect("pod");
            assert_eq!(fs_user_from(&pod), want, "{spec}");
        }
    }
}
