//! The status sync: patches only on change with the right content, versions,
//! admission rejections, static pods through their mirror, and graceful
//! deletion ending in the final delete.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, DeleteParams};
use kubelet::kubelet::lifecycle::rejected_pod_status;
use kubelet::kubelet::pod::{BasicMirrorClient, PodManager, sync_mirror_pod};
use kubelet::kubelet::status::StatusManager;
use kubelet::kubelet::status::sync::{PodStatusUpdate, ReclaimChecks, StatusSyncer};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use serde_json::json;

use crate::common::{WAIT, bound_pod};
use crate::support::apiserver::testkit::obj;
use crate::support::apiserver::{KubeUser, RequestRecord, TestApi};

struct Rig {
    api: TestApi,
    ns: String,
    node: String,
    pods: Arc<PodManager>,
    running: Arc<AtomicBool>,
    syncer: StatusSyncer,
}

async fn rig(prefix: &str) -> Rig {
    let api = TestApi::start().await;
    let ns = api.create_namespace(prefix).await;
    let node = api.unique_name("stnode");
    let pods = Arc::new(PodManager::new());
    let running = Arc::new(AtomicBool::new(false));
    let r = running.clone();
    let checks = ReclaimChecks {
        could_have_running_containers: Arc::new(move |_| r.load(Ordering::SeqCst)),
        pod_volumes_exist: Arc::new(|_| Box::pin(async { false })),
        pod_cgroups: None,
        keep_terminated_pod_volumes: false,
    };
    let syncer = StatusSyncer::new(
        api.client(&KubeUser::Node(node.clone())).await,
        pods.clone(),
        Arc::new(checks),
        Arc::new(RealClock),
    );
    Rig {
        api,
        ns,
        node,
        pods,
        running,
        syncer,
    }
}

fn update(pod: &Pod, version: u64, status: serde_json::Value) -> PodStatusUpdate {
    PodStatusUpdate {
        pod_uid: pod.metadata.uid.clone().unwrap(),
        version,
        pod_name: pod.metadata.name.clone().unwrap(),
        pod_namespace: pod.metadata.namespace.clone().unwrap(),
        status: obj(status),
    }
}

fn status_patches(log: &[RequestRecord], name: &str) -> Vec<RequestRecord> {
    log.iter()
        .filter(|r| {
            r.method == "PATCH"
                && r.subresource.as_deref() == Some("status")
                && r.name.as_deref() == Some(name)
        })
        .cloned()
        .collect()
}

fn pending(now: &str) -> serde_json::Value {
    json!({
        "phase": "Pending", "qosClass": "BestEffort", "hostIP": "10.88.0.1", "startTime": now,
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
             "message": "containers with unready status: [c]", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady",
             "message": "containers with unready status: [c]", "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
            "image": "kubelet-rs.local/busybox:1.35", "imageID": "", "started": false,
            "state": {"waiting": {"reason": "ContainerCreating"}}}],
    })
}

fn running(now: &str) -> serde_json::Value {
    json!({
        "phase": "Running", "qosClass": "BestEffort", "hostIP": "10.88.0.1", "startTime": now,
        "podIP": "10.88.0.7", "podIPs": [{"ip": "10.88.0.7"}],
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0,
            "image": "kubelet-rs.local/busybox:1.35", "imageID": "sha256:abc",
            "containerID": "containerd://c1", "started": true,
            "state": {"running": {"startedAt": now}}}],
    })
}

fn finished(now: &str) -> serde_json::Value {
    let mut s = running(now);
    s["phase"] = json!("Succeeded");
    s["containerStatuses"][0]["ready"] = json!(false);
    s["containerStatuses"][0]["started"] = json!(false);
    s["containerStatuses"][0]["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed",
        "startedAt": now, "finishedAt": now, "containerID": "containerd://c1"}});
    s
}

const T0: &str = "2024-05-01T10:00:00Z";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_patches_only_on_change_with_versions_and_rejections() {
    let mut r = rig("status").await;
    let pod = r
        .api
        .put(&bound_pod(&r.ns, "web", &r.node, json!({})))
        .await;
    r.pods.add_pod(Arc::new(pod.clone()));
    let _ = r.api.clear_requests();

    // v1: Pending with the kubelet's conditions reaches the API.
    let v1 = update(&pod, 1, pending(T0));
    r.syncer.record(v1.clone());
    r.syncer.sync_pod("web-uid-unused", &v1).await; // unknown UID: GET finds another pod
    let uid = pod.metadata.uid.clone().unwrap();
    r.syncer.sync_pod(&uid, &v1).await;
    let got: Pod = r.api.get(Some(&r.ns), "web").await.unwrap();
    let st = got.status.clone().unwrap();
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert_eq!(st.host_ip.as_deref(), Some("10.88.0.1"));
    let types: Vec<_> = st
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
    );
    assert_eq!(
        st.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("ContainerCreating")
    );
    assert_eq!(r.syncer.api_version(&uid), Some(1));

    // The same version again: nothing is sent. A new version with the same
    // content: read, but no patch.
    r.syncer.sync_pod(&uid, &v1).await;
    let v2 = update(&pod, 2, pending(T0));
    r.syncer.record(v2.clone());
    r.syncer.sync_pod(&uid, &v2).await;
    assert_eq!(r.syncer.api_version(&uid), Some(2));

    // v3: Running with the pod IP and the container's state.
    let v3 = update(&pod, 3, running(T0));
    r.syncer.record(v3.clone());
    r.syncer.sync_pod(&uid, &v3).await;
    // An older version arriving late never overwrites a newer one.
    assert!(!r.syncer.record(v2.clone()));
    r.syncer.sync_pod(&uid, &v2).await;
    let got: Pod = r.api.get(Some(&r.ns), "web").await.unwrap();
    let st = got.status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.pod_ip.as_deref(), Some("10.88.0.7"));
    assert_eq!(st.pod_ips.unwrap()[0].ip, "10.88.0.7");
    let cs = &st.container_statuses.unwrap()[0];
    assert!(cs.ready);
    assert_eq!(cs.container_id.as_deref(), Some("containerd://c1"));

    if let Ok(log) = r.api.requests() {
        let patches = status_patches(&log, "web");
        assert_eq!(patches.len(), 2, "one patch per change: {patches:#?}");
        for p in &patches {
            assert_eq!(
                p.content_type.as_deref(),
                Some("application/strategic-merge-patch+json")
            );
        }
    }

    // An admission rejection: phase Failed with the handler's reason.
    let rejected = r
        .api
        .put(&bound_pod(&r.ns, "greedy", &r.node, json!({})))
        .await;
    r.pods.add_pod(Arc::new(rejected.clone()));
    let mut st = rejected_pod_status(
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 2000",
    );
    st.start_time = Some(obj(json!(T0)));
    let ru = PodStatusUpdate {
        pod_uid: rejected.metadata.uid.clone().unwrap(),
        version: 1,
        pod_name: "greedy".into(),
        pod_namespace: r.ns.clone(),
        status: st,
    };
    r.syncer.record(ru.clone());
    r.syncer.sync_pod(&ru.pod_uid, &ru).await;
    let got: Pod = r.api.get(Some(&r.ns), "greedy").await.unwrap();
    let st = got.status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(
        st.message.as_deref(),
        Some("Pod Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 2000")
    );
    r.api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_ends_with_the_final_delete() {
    let mut r = rig("gdel").await;
    let pod = r
        .api
        .put(&bound_pod(&r.ns, "job", &r.node, json!({})))
        .await;
    let uid = pod.metadata.uid.clone().unwrap();
    r.pods.add_pod(Arc::new(pod.clone()));
    let v1 = update(&pod, 1, running(T0));
    r.syncer.record(v1.clone());
    r.syncer.sync_pod(&uid, &v1).await;

    // The user deletes the pod: it stays, with a deletion timestamp.
    let api: Api<Pod> = Api::namespaced(r.api.admin_client().await, &r.ns);
    api.delete("job", &DeleteParams::default().grace_period(30))
        .await
        .unwrap();
    let deleting: Pod = r.api.get(Some(&r.ns), "job").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    r.pods.update_pod(Arc::new(deleting));

    // While containers may run, the terminal phase waits and nothing is deleted.
    r.running.store(true, Ordering::SeqCst);
    let v2 = update(&pod, 2, finished(T0));
    r.syncer.record(v2.clone());
    r.syncer.sync_pod(&uid, &v2).await;
    let still: Pod = r.api.get(Some(&r.ns), "job").await.unwrap();
    assert_eq!(still.status.unwrap().phase.as_deref(), Some("Running"));

    // Everything stopped and reclaimed: the final status, then the delete.
    r.running.store(false, Ordering::SeqCst);
    r.syncer.sync_batch().await;
    let gone = crate::support::eventually(WAIT, || async {
        r.api
            .get::<Pod>(Some(&r.ns), "job")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the pod was deleted for good");
    if let Ok(log) = r.api.requests() {
        let del = log
            .iter()
            .rfind(|x| x.method == "DELETE" && x.name.as_deref() == Some("job"))
            .expect("a DELETE");
        assert_eq!(del.user.name, format!("system:node:{}", r.node));
        let patched_terminal = status_patches(&log, "job").len();
        assert!(
            patched_terminal >= 2,
            "the terminal status was patched before the delete"
        );
    }
    r.api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_pod_status_goes_to_its_mirror_and_waits_for_it() {
    let mut r = rig("stat").await;
    let node: k8s_openapi::api::core::v1::Node =
        r.api.put(&obj(json!({"metadata": {"name": r.node}}))).await;
    let mut static_pod = bound_pod(&r.ns, &format!("etcd-{}", r.node), &r.node, json!({}));
    static_pod.metadata.uid = Some("static-hash".into());
    static_pod.metadata.annotations = Some(
        [
            (
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            ),
            (
                "kubernetes.io/config.hash".to_string(),
                "static-hash".to_string(),
            ),
        ]
        .into(),
    );
    r.pods.add_pod(Arc::new(static_pod.clone()));
    let v1 = update(&static_pod, 1, running(T0));
    r.syncer.record(v1);
    // No mirror yet: the batch skips the pod.
    let _ = r.api.clear_requests();
    r.syncer.sync_batch().await;
    if let Ok(log) = r.api.requests() {
        assert!(
            log.iter().all(|x| x.resource.as_deref() != Some("pods")),
            "nothing sent without a mirror pod: {log:#?}"
        );
    }

    // The mirror appears (created, then seen through the api source).
    let mirrors = BasicMirrorClient::new(
        r.api
            .client(&crate::support::apiserver::KubeUser::Node(r.node.clone()))
            .await,
        &r.node,
        None,
    );
    sync_mirror_pod(&mirrors, &static_pod, None, Some(&node)).await;
    let mirror: Pod = r
        .api
        .wait_for(
            Some(&r.ns),
            static_pod.metadata.name.as_deref().unwrap(),
            WAIT,
            |_| true,
        )
        .await;
    r.pods.add_pod(Arc::new(mirror.clone()));
    r.syncer.sync_batch().await;
    let got: Pod = r
        .api
        .get(Some(&r.ns), static_pod.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(got.metadata.uid, mirror.metadata.uid);
    let st: PodStatus = got.status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.pod_ip.as_deref(), Some("10.88.0.7"));
    assert_eq!(
        r.syncer
            .api_version(mirror.metadata.uid.as_deref().unwrap()),
        Some(1)
    );
    r.api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_task_follows_the_status_manager_and_reconciles_drift() {
    let r = rig("loop").await;
    let pod = r
        .api
        .put(&bound_pod(&r.ns, "loop", &r.node, json!({})))
        .await;
    r.pods.add_pod(Arc::new(pod.clone()));
    let Rig {
        api,
        ns,
        pods,
        syncer,
        ..
    } = r;
    // The kubelet's status manager, as the pod workers drive it.
    let manager = StatusManager::new(pods.clone(), Arc::new(RealClock));
    let tasks = TaskSet::new();
    syncer.start_with(&manager, &tasks);
    manager.set_pod_status(&pod, obj(running(T0)));
    let got = api
        .wait_for::<Pod>(Some(&ns), "loop", WAIT, |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await;
    let st = got.status.unwrap();
    assert_eq!(st.pod_ip.as_deref(), Some("10.88.0.7"));
    assert_eq!(st.start_time, Some(obj(json!(T0))));

    // Someone else overwrites the status; the pod manager sees it (as the
    // api source would report it) and the next batch puts it back.
    let mut drifted: Pod = api.get(Some(&ns), "loop").await.unwrap();
    drifted.status.as_mut().unwrap().phase = Some("Pending".into());
    let drifted = api.put(&drifted).await;
    pods.update_pod(Arc::new(drifted));
    api.wait_for::<Pod>(Some(&ns), "loop", Duration::from_secs(25), |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    api.cleanup().await;
}

/// A mirror pod the pod manager has not seen yet looks like a recreated
/// pod to the sync: the status is forgotten in the kubelet's status manager
/// too (Go's deletePodStatus), so the pod's next status is a new version
/// and reaches the mirror once it is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unseen_mirror_makes_the_status_forgotten_then_resent() {
    let r = rig("forget").await;
    let node: k8s_openapi::api::core::v1::Node =
        r.api.put(&obj(json!({"metadata": {"name": r.node}}))).await;
    let mut static_pod = bound_pod(&r.ns, &format!("kas-{}", r.node), &r.node, json!({}));
    static_pod.metadata.uid = Some("static-forget".into());
    static_pod.metadata.annotations = Some(
        [
            ("kubernetes.io/config.source", "file"),
            ("kubernetes.io/config.hash", "static-forget"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    r.pods.add_pod(Arc::new(static_pod.clone()));
    let mirrors = BasicMirrorClient::new(
        r.api.client(&KubeUser::Node(r.node.clone())).await,
        &r.node,
        None,
    );
    sync_mirror_pod(&mirrors, &static_pod, None, Some(&node)).await;
    let name = static_pod.metadata.name.clone().unwrap();
    let mirror: Pod = r.api.wait_for(Some(&r.ns), &name, WAIT, |_| true).await;

    let manager = Arc::new(StatusManager::new(r.pods.clone(), Arc::new(RealClock)));
    let forget_in = manager.clone();
    let tasks = TaskSet::new();
    r.syncer
        .with_forget(Arc::new(move |uid| forget_in.delete_pod_status(uid)))
        .start_with(&manager, &tasks);
    manager.set_pod_status(&static_pod, obj(running(T0)));
    let forgotten = crate::support::eventually(WAIT, || async {
        manager
            .get_pod_status("static-forget")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(forgotten.is_some(), "the status manager forgot the status");

    r.pods.add_pod(Arc::new(mirror.clone()));
    manager.set_pod_status(&static_pod, obj(running(T0)));
    let got = r
        .api
        .wait_for::<Pod>(Some(&r.ns), &name, WAIT, |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await;
    assert_eq!(got.metadata.uid, mirror.metadata.uid);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(3))
        .await
        .expect("stops");
}

/// Statuses made while an earlier write waited (here: all queued before the
/// sync task runs) are coalesced: one PATCH carrying the newest version,
/// never the ones it replaced, and no GET while the pod manager holds the
/// API's copy (issue 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_versions_are_coalesced_into_one_write_of_the_newest() {
    let r = rig("coalesce").await;
    if r.api.is_real() {
        crate::support::apiserver::testkit::skip(crate::support::apiserver::Unsupported(
            "the request log",
        ));
        return;
    }
    let pod = r.api.put(&bound_pod(&r.ns, "co", &r.node, json!({}))).await;
    r.pods.add_pod(Arc::new(pod.clone()));
    r.api.clear_requests().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tx.send(update(&pod, 1, pending(T0))).unwrap();
    tx.send(update(&pod, 2, pending(T0))).unwrap();
    tx.send(update(&pod, 3, running(T0))).unwrap();
    let tasks = TaskSet::new();
    r.syncer.start(
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
        &tasks,
    );
    r.api
        .wait_for::<Pod>(Some(&r.ns), "co", WAIT, |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = r.api.requests().unwrap();
    let patches = status_patches(&log, "co");
    assert_eq!(patches.len(), 1, "one write for three queued versions");
    let gets = log
        .iter()
        .filter(|q| q.method == "GET" && q.name.as_deref() == Some("co"))
        .count();
    assert_eq!(gets, 0, "no read: the watch's copy stands for the server's");
    drop(tx);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    r.api.cleanup().await;
}
