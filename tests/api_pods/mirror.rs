//! Mirror pods in the API server for static pods.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kubelet::kubelet::pod::{
    BasicMirrorClient, MirrorClient, PodManager, delete_orphaned_mirror_pods, sync_mirror_pod,
};
use kubelet::kubelet::types::{CONFIG_MIRROR_ANNOTATION_KEY, get_pod_full_name};
use serde_json::json;

use crate::common::{WAIT, bound_pod};
use crate::support::apiserver::testkit::obj;
use crate::support::apiserver::{KubeUser, TestApi};

fn static_pod(ns: &str, node: &str, hash: &str) -> Pod {
    let mut p = bound_pod(ns, &format!("etcd-{node}"), node, json!({}));
    p.metadata.uid = Some(hash.to_string());
    p.metadata.annotations = Some(
        [
            (
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            ),
            ("kubernetes.io/config.hash".to_string(), hash.to_string()),
            (
                "kubernetes.io/config.seen".to_string(),
                "2024-01-01T00:00:00.000000000Z".to_string(),
            ),
        ]
        .into(),
    );
    p
}

fn mirror_hash(p: &Pod) -> Option<String> {
    p.metadata
        .annotations
        .as_ref()?
        .get(CONFIG_MIRROR_ANNOTATION_KEY)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_pods_get_mirror_pods_replaced_on_change_and_removed_when_orphaned() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("mirror").await;
    let node_name = api.unique_name("mnode");
    let node = api
        .put(&obj::<Node>(json!({"metadata": {"name": node_name}})))
        .await;
    let node_uid = node.metadata.uid.clone().unwrap();
    let client = BasicMirrorClient::new(
        api.client(&KubeUser::Node(node_name.clone())).await,
        &node_name,
        None,
    );
    let name = format!("etcd-{node_name}");

    // A static pod without a mirror gets one.
    let v1 = static_pod(&ns, &node_name, "hash-1");
    sync_mirror_pod(&client, &v1, None, Some(&node)).await;
    let m1: Pod = api
        .wait_for(Some(&ns), &name, WAIT, |p: &Pod| mirror_hash(p).is_some())
        .await;
    assert_eq!(mirror_hash(&m1).as_deref(), Some("hash-1"));
    let annotations = m1.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["kubernetes.io/config.source"], "file");
    assert_eq!(annotations["kubernetes.io/config.hash"], "hash-1");
    let owner = &m1.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("Node", node_name.as_str(), node_uid.as_str(), Some(true))
    );
    assert_ne!(
        m1.metadata.uid.as_deref(),
        Some("hash-1"),
        "the API server gives the mirror its own UID"
    );

    // Up to date: nothing happens.
    sync_mirror_pod(&client, &v1, Some(&m1), Some(&node)).await;
    let same: Pod = api.get(Some(&ns), &name).await.unwrap();
    assert_eq!(same.metadata.uid, m1.metadata.uid);

    // A changed manifest (new hash): the mirror is deleted and recreated.
    let v2 = static_pod(&ns, &node_name, "hash-2");
    sync_mirror_pod(&client, &v2, Some(&m1), Some(&node)).await;
    let m2: Pod = api
        .wait_for(Some(&ns), &name, WAIT, |p: &Pod| {
            mirror_hash(p).as_deref() == Some("hash-2")
        })
        .await;
    assert_ne!(m2.metadata.uid, m1.metadata.uid);

    // Deleting with a stale UID precondition does nothing.
    let stale = client
        .delete_mirror_pod(&get_pod_full_name(&v2), m1.metadata.uid.as_deref())
        .await
        .unwrap();
    assert!(!stale);
    assert!(api.get::<Pod>(Some(&ns), &name).await.is_some());

    // The static pod goes: housekeeping deletes the orphaned mirror, at once.
    let pods = PodManager::new();
    pods.add_pod(Arc::new(m2.clone()));
    delete_orphaned_mirror_pods(&client, &pods, |_| false).await;
    let gone = crate::support::eventually(Duration::from_secs(10), || async {
        api.get::<Pod>(Some(&ns), &name)
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "orphaned mirror pod deleted");
    api.cleanup().await;
}
