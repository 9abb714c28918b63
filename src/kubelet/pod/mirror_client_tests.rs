use super::*;
use crate::kubelet::types::{CONFIG_HASH_ANNOTATION_KEY, CONFIG_SOURCE_ANNOTATION_KEY};
use std::sync::Mutex;

/// Records what the kubelet asked of the API server.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    delete_result: Mutex<bool>,
}

#[async_trait]
impl MirrorClient for Recorder {
    async fn create_mirror_pod(&self, pod: &Pod) -> Result<(), MirrorError> {
        self.calls.lock().unwrap().push(format!(
            "create {} {}",
            get_pod_full_name(pod),
            get_pod_hash(pod)
        ));
        Ok(())
    }
    async fn delete_mirror_pod(&self, full: &str, uid: Option<&str>) -> Result<bool, MirrorError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("delete {full} {}", uid.unwrap_or("-")));
        Ok(*self.delete_result.lock().unwrap())
    }
}

fn static_pod(hash: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some("etcd-n1".into());
    p.metadata.namespace = Some("kube-system".into());
    p.metadata.uid = Some(hash.into());
    p.metadata.annotations = Some(
        [
            (CONFIG_SOURCE_ANNOTATION_KEY.to_string(), "file".to_string()),
            (CONFIG_HASH_ANNOTATION_KEY.to_string(), hash.to_string()),
        ]
        .into(),
    );
    p
}

fn mirror(hash: &str, deleting: bool) -> Pod {
    let mut p = mirror_pod_for(&static_pod(hash), "n1", "node-uid");
    p.metadata.uid = Some(format!("mirror-{hash}"));
    if deleting {
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
    }
    p
}

fn node(deleting: bool) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some("n1".into());
    if deleting {
        n.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
    }
    n
}

#[test]
fn mirror_object_shape() {
    let m = mirror_pod_for(&static_pod("abc"), "n1", "node-uid");
    let a = m.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[CONFIG_MIRROR_ANNOTATION_KEY], "abc");
    assert_eq!(a[CONFIG_HASH_ANNOTATION_KEY], "abc");
    assert_eq!(a[CONFIG_SOURCE_ANNOTATION_KEY], "file");
    let owners = m.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        serde_json::to_value(&owners[0]).unwrap(),
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid", "controller": true})
    );
}

type Case = (
    &'static str,
    Pod,
    Option<Pod>,
    Option<Node>,
    bool,
    Vec<&'static str>,
);

#[tokio::test]
async fn sync_table() {
    // (case, pod, mirror, node, delete succeeds, calls)
    let api_pod = {
        let mut p = static_pod("x");
        p.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(CONFIG_SOURCE_ANNOTATION_KEY.into(), "api".into());
        p
    };
    let cases: Vec<Case> = vec![
        (
            "missing mirror is created",
            static_pod("h1"),
            None,
            Some(node(false)),
            true,
            vec!["create etcd-n1_kube-system h1"],
        ),
        (
            "current mirror is kept",
            static_pod("h1"),
            Some(mirror("h1", false)),
            Some(node(false)),
            true,
            vec![],
        ),
        (
            "outdated mirror is replaced",
            static_pod("h2"),
            Some(mirror("h1", false)),
            Some(node(false)),
            true,
            vec![
                "delete etcd-n1_kube-system mirror-h1",
                "create etcd-n1_kube-system h2",
            ],
        ),
        (
            "terminating mirror is replaced",
            static_pod("h1"),
            Some(mirror("h1", true)),
            Some(node(false)),
            true,
            vec![
                "delete etcd-n1_kube-system mirror-h1",
                "create etcd-n1_kube-system h1",
            ],
        ),
        (
            "failed delete: no create",
            static_pod("h2"),
            Some(mirror("h1", false)),
            Some(node(false)),
            false,
            vec!["delete etcd-n1_kube-system mirror-h1"],
        ),
        (
            "no node: no create",
            static_pod("h1"),
            None,
            None,
            true,
            vec![],
        ),
        (
            "node being deleted: no create",
            static_pod("h1"),
            None,
            Some(node(true)),
            true,
            vec![],
        ),
        (
            "api pods never get one",
            api_pod,
            None,
            Some(node(false)),
            true,
            vec![],
        ),
    ];
    for (name, pod, m, n, delete_ok, want) in cases {
        let rec = Recorder::default();
        *rec.delete_result.lock().unwrap() = delete_ok;
        sync_mirror_pod(&rec, &pod, m.as_ref(), n.as_ref()).await;
        assert_eq!(*rec.calls.lock().unwrap(), want, "{name}");
    }
}

#[tokio::test]
async fn orphans_are_deleted_unless_terminating() {
    let pods = PodManager::new();
    let mut other = mirror("h9", false);
    other.metadata.name = Some("old-n1".into());
    pods.add_pod(Arc::new(mirror("h1", false)));
    pods.add_pod(Arc::new(other));
    pods.add_pod(Arc::new(static_pod("h1")));
    let rec = Recorder::default();
    delete_orphaned_mirror_pods(&rec, &pods, |_| false).await;
    assert_eq!(*rec.calls.lock().unwrap(), ["delete old-n1_kube-system -"]);
    let rec = Recorder::default();
    delete_orphaned_mirror_pods(&rec, &pods, |full| full == "old-n1_kube-system").await;
    assert!(rec.calls.lock().unwrap().is_empty());
}
