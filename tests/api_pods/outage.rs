//! The API server goes away: the pod source and the status sync keep
//! running, nothing crashes, and both catch up when it is back. (The whole
//! kubelet rides out a full minute in tests/api_kubelet.rs; here a shorter
//! outage, long enough for watch and sync retries to back off.)

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet::kubelet::pod::PodManager;
use kubelet::kubelet::status::sync::{PodStatusUpdate, ReclaimChecks, StatusSyncer};
use kubelet::kubelet::types::PodOperation;
use kubelet::util::clock::RealClock;
use serde_json::json;

use crate::common::{bound_pod, start_api_source, summary, wait_op, wait_op_within};
use crate::support::apiserver::testkit::{obj, skip};
use crate::support::apiserver::{KubeUser, TestApi};

const OUTAGE: Duration = Duration::from_secs(15);

fn update(pod: &Pod, version: u64, restarts: i32) -> PodStatusUpdate {
    PodStatusUpdate {
        pod_uid: pod.metadata.uid.clone().unwrap(),
        version,
        pod_name: pod.metadata.name.clone().unwrap(),
        pod_namespace: pod.metadata.namespace.clone().unwrap(),
        status: obj(json!({
            "phase": "Running",
            "startTime": "2024-05-01T10:00:00Z",
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": restarts,
                "image": "kubelet-rs.local/busybox:1.35", "imageID": "sha256:abc",
                "state": {"running": {"startedAt": "2024-05-01T10:00:00Z"}}}],
        })),
    }
}

fn restarts(p: &Pod) -> Option<i32> {
    Some(
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .restart_count,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_away_then_everything_catches_up() {
    let api = TestApi::start().await;
    if api.is_real() {
        skip(crate::support::apiserver::Unsupported(
            "stopping a real API server",
        ));
        return;
    }
    let ns = api.create_namespace("outage").await;
    let node = api.unique_name("onode");
    let client = api.client(&KubeUser::Node(node.clone())).await;
    let pod = api.put(&bound_pod(&ns, "steady", &node, json!({}))).await;

    let (_config, mut updates, tasks) = start_api_source(client.clone(), &node);
    wait_op(&mut updates, PodOperation::Add, "steady").await;

    let pods = Arc::new(PodManager::new());
    pods.add_pod(Arc::new(pod.clone()));
    let checks = ReclaimChecks {
        could_have_running_containers: Arc::new(|_| true),
        pod_volumes_exist: Arc::new(|_| Box::pin(async { false })),
        pod_cgroups: None,
        keep_terminated_pod_volumes: false,
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    StatusSyncer::new(client, pods.clone(), Arc::new(checks), Arc::new(RealClock)).start(
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
        &tasks,
    );
    tx.send(update(&pod, 1, 0)).unwrap();
    api.wait_for::<Pod>(Some(&ns), "steady", Duration::from_secs(20), |p| {
        restarts(p) == Some(0)
    })
    .await;

    // The API server goes away. The kubelet keeps producing statuses, and a
    // pod gets bound to the node meanwhile.
    api.stop().await.unwrap();
    tx.send(update(&pod, 2, 1)).unwrap();
    api.put(&bound_pod(&ns, "during", &node, json!({}))).await;
    tokio::time::sleep(OUTAGE / 2).await;
    tx.send(update(&pod, 3, 2)).unwrap();
    tokio::time::sleep(OUTAGE / 2).await;
    assert!(!tx.is_closed(), "the status sync is still running");
    while let Some(u) = updates.try_recv() {
        let (op, names) = summary(&u);
        assert!(
            !matches!(op, PodOperation::Remove | PodOperation::Delete),
            "no pod lost while the API server is away: {op} {names:?}"
        );
    }

    // Back: the newest status lands and the new pod arrives.
    api.restart().await.unwrap();
    let got = api
        .wait_for::<Pod>(Some(&ns), "steady", Duration::from_secs(45), |p| {
            restarts(p) == Some(2)
        })
        .await;
    assert_eq!(got.status.unwrap().phase.as_deref(), Some("Running"));
    let back = Duration::from_secs(45);
    let (_, before) = wait_op_within(&mut updates, PodOperation::Add, "during", back).await;
    assert!(
        before
            .iter()
            .all(|(op, _)| !matches!(op, PodOperation::Remove | PodOperation::Delete)),
        "{before:?}"
    );
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    api.cleanup().await;
}
