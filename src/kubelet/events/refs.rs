//! The object references events point at: a pod, one of its containers
//! (the pod with the container's field path), or the node.

use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};

fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|v| !v.is_empty()).cloned()
}

/// A reference to `pod` (kind Pod, v1, name, namespace, uid, resourceVersion).
pub fn pod_ref(pod: &Pod) -> ObjectReference {
    let m = &pod.metadata;
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: non_empty(m.name.as_ref()),
        namespace: non_empty(m.namespace.as_ref()),
        uid: non_empty(m.uid.as_ref()),
        resource_version: non_empty(m.resource_version.as_ref()),
        field_path: None,
    }
}

/// The field path of a container of `pod`: `spec.containers{name}`,
/// `spec.initContainers{name}` or `spec.ephemeralContainers{name}`, or
/// `implicitly required container <name>` for one not in the spec (the
/// sandbox).
pub fn container_field_path(pod: &Pod, container_name: &str) -> String {
    let spec = pod.spec.as_ref();
    let has =
        |l: Option<&Vec<Container>>| l.is_some_and(|l| l.iter().any(|c| c.name == container_name));
    if has(spec.map(|s| &s.containers)) {
        format!("spec.containers{{{container_name}}}")
    } else if has(spec.and_then(|s| s.init_containers.as_ref())) {
        format!("spec.initContainers{{{container_name}}}")
    } else if spec
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|l| l.iter().any(|c| c.name == container_name))
    {
        format!("spec.ephemeralContainers{{{container_name}}}")
    } else {
        format!("implicitly required container {container_name}")
    }
}

/// A reference to a container of `pod` (Go's GenerateContainerRef).
pub fn container_ref(pod: &Pod, container_name: &str) -> ObjectReference {
    ObjectReference {
        field_path: Some(container_field_path(pod, container_name)),
        ..pod_ref(pod)
    }
}

/// The kubelet's reference to its node: kind Node, the node name as name
/// and UID, no namespace (events land in `default`).
pub fn node_ref(node_name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".into()),
        name: Some(node_name.to_string()),
        uid: Some(node_name.to_string()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
            "spec": {
                "containers": [{"name": "app"}],
                "initContainers": [{"name": "init"}],
                "ephemeralContainers": [{"name": "debug"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn field_paths() {
        let cases = [
            ("app", "spec.containers{app}"),
            ("init", "spec.initContainers{init}"),
            ("debug", "spec.ephemeralContainers{debug}"),
            ("POD", "implicitly required container POD"),
        ];
        for (name, want) in cases {
            let r = container_ref(&pod(), name);
            assert_eq!(r.field_path.as_deref(), Some(want));
            assert_eq!(r.kind.as_deref(), Some("Pod"));
            assert_eq!(r.api_version.as_deref(), Some("v1"));
            assert_eq!(r.uid.as_deref(), Some("u1"));
            assert_eq!(r.resource_version.as_deref(), Some("7"));
        }
        let n = node_ref("n1");
        assert_eq!(
            (n.name.as_deref(), n.uid.as_deref(), n.namespace),
            (Some("n1"), Some("n1"), None)
        );
    }
}
