//! Static pod identity, as the Go kubelet gives it to pods from files and
//! URLs: the UID is a content hash, the name gets the node name appended, the
//! namespace defaults to "default", the pod is bound to this node, the hash is
//! kept in the `config.hash` annotation, file pods tolerate every NoExecute
//! taint, and the phase starts at Pending.
//!
//! ## The UID hash
//! Go hashes a go-spew dump of its in-memory struct, which cannot be
//! reproduced outside Go. kubelet-rs hashes, with MD5, the compact JSON of the
//! decoded and defaulted pod (k8s-openapi's serialization: fields in a fixed
//! order, maps sorted, unset fields omitted), followed by `host:<node>` and
//! `file:<path>` for file pods or by `url:<url>` for URL pods — the same
//! trailer Go appends. The same manifest at the same place on the same node
//! therefore always gets the same UID, across restarts and kubelet-rs
//! versions, and any change to its content gives a new one. A UID written in
//! the manifest is kept as is.

use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, PodStatus, Toleration};
use md5::{Digest, Md5};

use crate::kubelet::types::{CONFIG_HASH_ANNOTATION_KEY, NAMESPACE_DEFAULT};

/// Where a static pod was read from; part of its identity.
#[derive(Debug, Clone, Copy)]
pub enum StaticPodOrigin<'a> {
    /// A manifest file (the path as listed, e.g. `<staticPodPath>/<name>`).
    File(&'a Path),
    /// The staticPodURL.
    Url(&'a str),
}

impl StaticPodOrigin<'_> {
    /// The path or URL, as logs and errors name it.
    pub fn describe(&self) -> String {
        match self {
            StaticPodOrigin::File(p) => p.display().to_string(),
            StaticPodOrigin::Url(u) => u.to_string(),
        }
    }
}

/// `<name>-<lower-cased node name>`, unique among nodes.
pub fn generate_pod_name(name: &str, node_name: &str) -> String {
    format!("{name}-{}", node_name.to_lowercase())
}

/// The UID a static pod gets when its manifest names none.
pub fn static_pod_uid(pod: &Pod, origin: StaticPodOrigin<'_>, node_name: &str) -> String {
    let mut hasher = Md5::new();
    // Serializing plain data to JSON cannot fail; an empty body would only
    // weaken the hash, never break identity across restarts.
    hasher.update(serde_json::to_vec(pod).unwrap_or_default());
    match origin {
        StaticPodOrigin::File(path) => {
            hasher.update(format!("host:{node_name}"));
            hasher.update(format!("file:{}", path.display()));
        }
        StaticPodOrigin::Url(url) => hasher.update(format!("url:{url}")),
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Gives a decoded, defaulted pod its static identity (Go's applyDefaults).
pub fn apply_static_pod_identity(pod: &mut Pod, origin: StaticPodOrigin<'_>, node_name: &str) {
    if pod.metadata.uid.as_deref().is_none_or(str::is_empty) {
        let uid = static_pod_uid(pod, origin, node_name);
        crate::vlog!(5, pod = ?pod.metadata.name, pod_uid = %uid, source = %origin.describe(), "Generated UID");
        pod.metadata.uid = Some(uid);
    }
    let name = pod.metadata.name.as_deref().unwrap_or("");
    pod.metadata.name = Some(generate_pod_name(name, node_name));
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = Some(NAMESPACE_DEFAULT.to_string());
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_HASH_ANNOTATION_KEY.to_string(), uid);
    if let StaticPodOrigin::File(_) = origin {
        add_or_update_toleration(
            spec.tolerations.get_or_insert_with(Vec::new),
            Toleration {
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                ..Default::default()
            },
        );
    }
    pod.status.get_or_insert_with(PodStatus::default).phase = Some("Pending".into());
}

fn same(a: &Option<String>, b: &Option<String>) -> bool {
    a.as_deref().unwrap_or("") == b.as_deref().unwrap_or("")
}

/// Adds a toleration, replacing one with the same key, effect, operator and
/// value unless it is already identical. Returns whether anything changed.
pub fn add_or_update_toleration(tolerations: &mut Vec<Toleration>, toleration: Toleration) -> bool {
    let matches = |t: &Toleration| {
        same(&t.key, &toleration.key)
            && same(&t.effect, &toleration.effect)
            && same(&t.operator, &toleration.operator)
            && same(&t.value, &toleration.value)
    };
    let mut updated = false;
    for existing in tolerations.iter_mut() {
        if matches(existing) {
            if existing.toleration_seconds == toleration.toleration_seconds {
                return false;
            }
            *existing = toleration.clone();
            updated = true;
        }
    }
    if !updated {
        tolerations.push(toleration);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn identity_of_a_file_pod() {
        let mut p = pod(json!({"metadata": {"name": "web"}, "spec": {"containers": []}}));
        let path = Path::new("/etc/kubernetes/manifests/web.yaml");
        apply_static_pod_identity(&mut p, StaticPodOrigin::File(path), "Node-A");
        let uid = p.metadata.uid.clone().unwrap();
        assert_eq!(uid.len(), 32);
        assert!(uid.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(p.metadata.name.as_deref(), Some("web-node-a"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("Node-A"));
        assert_eq!(
            p.metadata.annotations.as_ref().unwrap()[CONFIG_HASH_ANNOTATION_KEY],
            uid
        );
        assert_eq!(
            serde_json::to_value(&spec.tolerations).unwrap(),
            json!([{"operator": "Exists", "effect": "NoExecute"}])
        );
        assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn url_pods_keep_their_namespace_and_get_no_toleration() {
        let mut p = pod(json!({"metadata": {"name": "web", "namespace": "infra"}}));
        apply_static_pod_identity(&mut p, StaticPodOrigin::Url("http://h/p"), "n");
        assert_eq!(p.metadata.namespace.as_deref(), Some("infra"));
        assert!(p.spec.unwrap().tolerations.is_none());
    }

    #[test]
    fn uid_depends_on_content_host_and_place_and_a_given_uid_is_kept() {
        let a = pod(json!({"metadata": {"name": "web"}, "spec": {"hostname": "a"}}));
        let b = pod(json!({"metadata": {"name": "web"}, "spec": {"hostname": "b"}}));
        let f1 = StaticPodOrigin::File(Path::new("/m/web.yaml"));
        let f2 = StaticPodOrigin::File(Path::new("/m/web2.yaml"));
        let uid = static_pod_uid(&a, f1, "n");
        assert_eq!(uid, static_pod_uid(&a.clone(), f1, "n"));
        assert_ne!(uid, static_pod_uid(&b, f1, "n"));
        assert_ne!(uid, static_pod_uid(&a, f2, "n"));
        assert_ne!(uid, static_pod_uid(&a, f1, "m"));
        assert_ne!(
            uid,
            static_pod_uid(&a, StaticPodOrigin::Url("/m/web.yaml"), "n")
        );

        let mut given = pod(json!({"metadata": {"name": "web", "uid": "fixed"}}));
        apply_static_pod_identity(&mut given, f1, "n");
        assert_eq!(given.metadata.uid.as_deref(), Some("fixed"));
    }

    #[test]
    fn toleration_add_or_update() {
        let ours = Toleration {
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        };
        let with_seconds = Toleration {
            toleration_seconds: Some(30),
            ..ours.clone()
        };
        let other = Toleration {
            key: Some("k".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        let cases = [
            (vec![], true, vec![ours.clone()]),
            (vec![ours.clone()], false, vec![ours.clone()]),
            (vec![with_seconds.clone()], true, vec![ours.clone()]),
            (vec![other.clone()], true, vec![other.clone(), ours.clone()]),
        ];
        for (mut start, changed, want) in cases {
            assert_eq!(add_or_update_toleration(&mut start, ours.clone()), changed);
            assert_eq!(start, want);
        }
    }
}
