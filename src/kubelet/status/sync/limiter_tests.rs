//! The sync task behind a saturated client limiter (paused tokio time): a
//! fake API server behind the kubelet's own rate limiter layer records
//! every request; statuses arrive while a write waits for its token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Value, json};
use tokio::time::Instant;
use tower::ServiceBuilder;

use super::{PodStatusUpdate, ReclaimChecks, StatusSyncer};
use crate::kubelet::client::ratelimit::{RateLimitLayer, TokenBucket};
use crate::kubelet::client::testing::{Answer, fake_service};
use crate::kubelet::pod::PodManager;
use crate::util::clock::RealClock;
use crate::util::lifecycle::TaskSet;

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    pod: String,
    /// The patched phase, for PATCHes.
    phase: Option<String>,
    at: Instant,
}

/// A store of pods by name answering GET and PATCH of their status.
#[derive(Clone)]
struct FakeApi {
    pods: Arc<Mutex<HashMap<String, Value>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// The pod a path names: `/api/v1/namespaces/<ns>/pods/<name>[/status]`.
fn pod_name(path: &str) -> String {
    let mut parts = path.split('/').skip_while(|p| *p != "pods");
    parts.nth(1).unwrap_or_default().to_string()
}

impl FakeApi {
    fn new(pods: &[&Pod]) -> Self {
        let pods = pods
            .iter()
            .map(|p| {
                (
                    p.metadata.name.clone().unwrap(),
                    serde_json::to_value(p).unwrap(),
                )
            })
            .collect();
        FakeApi {
            pods: Arc::new(Mutex::new(pods)),
            seen: Arc::default(),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn pod(&self, name: &str) -> Value {
        self.pods.lock().unwrap()[name].clone()
    }
}

impl Answer for FakeApi {
    fn answer(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        let name = pod_name(path);
        let mut pods = self.pods.lock().unwrap();
        let pod = pods.get_mut(&name).unwrap();
        let mut phase = None;
        if method == "PATCH" {
            let patch: Value = serde_json::from_slice(body).unwrap();
            if let Some(p) = patch["status"]["phase"].as_str() {
                pod["status"]["phase"] = json!(p);
                phase = Some(p.to_string());
            }
            if let Some(c) = patch["status"].get("containerStatuses") {
                pod["status"]["containerStatuses"] = c.clone();
            }
            let rv: u64 = pod["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            pod["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        }
        self.seen.lock().unwrap().push(Seen {
            method: method.to_string(),
            pod: name,
            phase,
            at: Instant::now(),
        });
        (200, pod.clone())
    }
}

fn client(api: FakeApi, bucket: Arc<TokenBucket>) -> kube::Client {
    let svc = ServiceBuilder::new()
        .layer(RateLimitLayer::new(bucket))
        .service(fake_service(api));
    kube::Client::new(svc, "default")
}

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "1",
            "annotations": {"kubernetes.io/config.source": "api"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending"},
    }))
    .unwrap()
}

fn version(v: u64, phase: &str, ready: bool) -> PodStatusUpdate {
    let status: PodStatus = serde_json::from_value(json!({
        "phase": phase,
        "containerStatuses": [{"name": "c", "ready": ready, "restartCount": 0,
            "image": "i", "imageID": ""}],
    }))
    .unwrap();
    PodStatusUpdate {
        pod_uid: "u1".into(),
        version: v,
        pod_name: "p".into(),
        pod_namespace: "ns".into(),
        status,
    }
}

fn checks() -> Arc<ReclaimChecks> {
    Arc::new(ReclaimChecks {
        could_have_running_containers: Arc::new(|_| true),
        pod_volumes_exist: Arc::new(|_| Box::pin(async { false })),
        pod_cgroups: None,
        keep_terminated_pod_volumes: false,
    })
}

/// A status syncer over `api` behind `bucket`, started; its update channel
/// and the task set that owns it.
fn start_syncer(
    api: &FakeApi,
    bucket: Arc<TokenBucket>,
    pods: Arc<PodManager>,
) -> (tokio::sync::mpsc::UnboundedSender<PodStatusUpdate>, TaskSet) {
    let syncer = StatusSyncer::new(
        client(api.clone(), bucket.clone()),
        pods,
        checks(),
        Arc::new(RealClock),
    )
    .with_limiter(Some(bucket));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let tasks = TaskSet::new();
    syncer.start(
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
        &tasks,
    );
    (tx, tasks)
}

async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn newest_status_wins_behind_a_saturated_limiter() {
    let pod = pod();
    let api = FakeApi::new(&[&pod]);
    // 1 QPS, and 6 s of tokens already taken by the kubelet's other writers.
    let bucket = Arc::new(TokenBucket::new(1.0, 1, Instant::now()));
    for _ in 0..6 {
        let _ = bucket.reserve(Instant::now());
    }
    let pods = Arc::new(PodManager::new());
    pods.add_pod(Arc::new(pod));
    let (tx, tasks) = start_syncer(&api, bucket, pods);
    let start = Instant::now();

    // v1 waits for a token; v2, v3 are made meanwhile, and v2 arrives
    // again late (a stale copy of an older computation).
    tx.send(version(1, "Pending", false)).unwrap();
    settle().await;
    tx.send(version(2, "Running", false)).unwrap();
    tx.send(version(3, "Running", true)).unwrap();
    tx.send(version(2, "Running", false)).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;

    let seen = api.seen();
    let patches: Vec<&Seen> = seen.iter().filter(|s| s.method == "PATCH").collect();
    assert!(
        seen.iter().all(|s| s.method != "GET"),
        "the watch's copy answers: {seen:?}"
    );
    // Only the newest is written, once the limiter lets it: v1 and v2
    // were replaced while waiting, the late v2 is refused.
    assert_eq!(patches.len(), 1, "{seen:?}");
    assert!(
        patches[0].at - start >= Duration::from_secs(5),
        "the write waited for the limiter"
    );
    assert_eq!(patches[0].phase.as_deref(), Some("Running"));
    let pod_now = api.pod("p");
    assert_eq!(pod_now["status"]["phase"], json!("Running"));
    assert_eq!(
        pod_now["status"]["containerStatuses"][0]["ready"],
        json!(true),
        "the final status (v3) is what the server has"
    );

    // A new version equal to what the server has: nothing is sent.
    tx.send(version(4, "Running", true)).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(api.seen().len(), seen.len(), "{:?}", api.seen());
    drop(tx);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .unwrap();
}

/// A pod's statuses while the limiter holds the writes of other pods: each
/// pod's newest version is written, once, in the order their first
/// unsent version came.
#[tokio::test(start_paused = true)]
async fn queued_pods_each_get_their_newest_once() {
    let bucket = Arc::new(TokenBucket::new(1.0, 1, Instant::now()));
    let a = pod();
    let mut b = pod();
    b.metadata.name = Some("q".into());
    b.metadata.uid = Some("u2".into());
    let api = FakeApi::new(&[&a, &b]);
    let pods = Arc::new(PodManager::new());
    pods.add_pod(Arc::new(a));
    pods.add_pod(Arc::new(b));
    let (tx, tasks) = start_syncer(&api, bucket, pods);
    let q = |v, phase: &str, ready| {
        let mut u = version(v, phase, ready);
        u.pod_uid = "u2".into();
        u.pod_name = "q".into();
        u
    };
    tx.send(version(1, "Pending", false)).unwrap();
    tx.send(q(1, "Pending", false)).unwrap();
    settle().await;
    // While p's write holds the token, both pods move on.
    tx.send(q(2, "Running", true)).unwrap();
    tx.send(version(2, "Running", true)).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let writes: Vec<(String, Option<String>)> = api
        .seen()
        .into_iter()
        .filter(|s| s.method == "PATCH")
        .map(|s| (s.pod, s.phase))
        .collect();
    let w = |pod: &str, phase: &str| (pod.to_string(), Some(phase.to_string()));
    // p v1 (the token was there; still Pending, so no phase in the patch),
    // q v2 (its v1 replaced while waiting for the next token), p v2.
    assert_eq!(
        writes,
        vec![
            ("p".to_string(), None),
            w("q", "Running"),
            w("p", "Running")
        ]
    );
    assert_eq!(api.pod("q")["status"]["phase"], json!("Running"));
    assert_eq!(api.pod("p")["status"]["phase"], json!("Running"));
    drop(tx);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .unwrap();
}
