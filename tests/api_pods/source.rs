//! The "api" pod source against the API server.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kubelet::kubelet::types::{API_SOURCE, PodOperation, get_pod_source};
use serde_json::json;

use crate::common::{bound_pod, next_update, start_api_source, summary, wait_op};
use crate::support::apiserver::testkit::skip;
use crate::support::apiserver::{KubeUser, TestApi};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_source_delivers_add_update_delete_and_survives_compaction() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("src").await;
    let node = api.unique_name("srcnode");
    api.put(&bound_pod(&ns, "first", &node, json!({}))).await;
    api.put(&bound_pod(&ns, "elsewhere", "some-other-node", json!({})))
        .await;

    let client = api.client(&KubeUser::Node(node.clone())).await;
    let (_config, mut updates, tasks) = start_api_source(client, &node);

    // The first list arrives as an ADD of this node's pods only.
    let u = next_update(&mut updates).await;
    assert_eq!(u.source, API_SOURCE);
    assert_eq!(summary(&u), (PodOperation::Add, vec!["first".to_string()]));
    assert_eq!(get_pod_source(&u.pods[0]), Some(API_SOURCE));

    // A label change is an UPDATE.
    let mut first: Pod = api.get(Some(&ns), "first").await.unwrap();
    first.metadata.labels = Some([("tier".to_string(), "web".to_string())].into());
    api.put(&first).await;
    let (u, _) = wait_op(&mut updates, PodOperation::Update, "first").await;
    assert_eq!(u.pods[0].metadata.labels.as_ref().unwrap()["tier"], "web");

    // A new pod is an ADD.
    api.put(&bound_pod(&ns, "second", &node, json!({}))).await;
    wait_op(&mut updates, PodOperation::Add, "second").await;

    // Compaction forces a relist; a pod created meanwhile arrives and
    // nothing that still exists is removed.
    match api.compact() {
        Ok(_) => {}
        Err(u) => skip(u),
    }
    api.put(&bound_pod(&ns, "third", &node, json!({}))).await;
    let (_, before) = wait_op(&mut updates, PodOperation::Add, "third").await;
    assert!(
        before
            .iter()
            .all(|(op, _)| !matches!(op, PodOperation::Remove | PodOperation::Delete)),
        "no pod lost across the relist: {before:?}"
    );
    if let Ok(log) = api.requests() {
        let selector = format!("spec.nodeName={node}");
        let lists = log
            .iter()
            .filter(|r| r.verb == "list" && r.resource.as_deref() == Some("pods"))
            .filter(|r| r.query_param("fieldSelector").as_deref() == Some(selector.as_str()))
            .count();
        assert!(
            lists >= 2,
            "the compaction made the source list again ({lists} lists)"
        );
        assert!(
            log.iter().any(|r| r.verb == "watch"
                && r.query_param("allowWatchBookmarks").as_deref() == Some("true")),
            "the watch asks for bookmarks"
        );
    }

    // A graceful delete is a DELETE with the deletion timestamp; the final
    // removal is a REMOVE.
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await, &ns);
    pods.delete("first", &DeleteParams::default())
        .await
        .unwrap();
    let (u, _) = wait_op(&mut updates, PodOperation::Delete, "first").await;
    assert!(u.pods[0].metadata.deletion_timestamp.is_some());
    pods.delete("first", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_op(&mut updates, PodOperation::Remove, "first").await;

    tasks
        .into_shutdown_handle()
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .ok();
    api.cleanup().await;
}
