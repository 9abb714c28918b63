//! Pod worker state machine tests with a scripted sync handler.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus as ApiStatus};
use tokio::sync::{Semaphore, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::kubelet::container::{PodCache, PodStatus, RunningContainer, RunningPod};
use crate::kubelet::types::{CONFIG_SOURCE_ANNOTATION_KEY, SyncPodType};
use crate::util::clock::RealClock;
use crate::util::lifecycle::TaskSet;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Sync(String, SyncPodType, String),
    Terminating(String, Option<i64>, bool),
    Terminated(String),
}

#[derive(Default)]
struct Script {
    calls: Mutex<Vec<Call>>,
    /// Results of successive sync_pod calls (default Ok(false)).
    sync_results: Mutex<VecDeque<Result<bool, PodSyncError>>>,
    /// When set, each sync method waits for a permit.
    gate: Option<Arc<Semaphore>>,
    cancelled: Mutex<Vec<bool>>,
}

struct FakeSyncer(Arc<Script>);

impl FakeSyncer {
    async fn wait(&self, cancel: &CancellationToken) {
        if let Some(gate) = &self.0.gate {
            tokio::select! {
                p = gate.acquire() => { if let Ok(p) = p { p.forget(); } }
                _ = cancel.cancelled() => {}
            }
        }
        self.0.cancelled.lock().unwrap().push(cancel.is_cancelled());
    }
}

fn label(pod: &Pod) -> String {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("v"))
        .cloned()
        .unwrap_or_default()
}

#[async_trait]
impl PodSyncHandler for FakeSyncer {
    async fn sync_pod(
        &self,
        cancel: &CancellationToken,
        update_type: SyncPodType,
        pod: &Arc<Pod>,
        _mirror: Option<&Arc<Pod>>,
        _status: PodStatus,
    ) -> Result<bool, PodSyncError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(Call::Sync(uid_of(pod), update_type, label(pod)));
        self.wait(cancel).await;
        if cancel.is_cancelled() {
            return Err(PodSyncError::Cancelled);
        }
        self.0
            .sync_results
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Ok(false))
    }

    async fn sync_terminating_pod(
        &self,
        cancel: &CancellationToken,
        pod: &Arc<Pod>,
        _status: PodStatus,
        running: Option<&RunningPod>,
        grace: Option<i64>,
        _status_fn: Option<PodStatusFn>,
    ) -> Result<(), PodSyncError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(Call::Terminating(uid_of(pod), grace, running.is_some()));
        self.wait(cancel).await;
        if cancel.is_cancelled() {
            return Err(PodSyncError::Cancelled);
        }
        Ok(())
    }

    async fn sync_terminated_pod(
        &self,
        cancel: &CancellationToken,
        pod: &Arc<Pod>,
        _status: PodStatus,
    ) -> Result<(), PodSyncError> {
        self.0
            .calls
            .lock()
            .unwrap()
            .push(Call::Terminated(uid_of(pod)));
        self.wait(cancel).await;
        Ok(())
    }
}

struct Rig {
    workers: PodWorkers,
    script: Arc<Script>,
    queue: Arc<WorkQueue>,
    cache: Arc<PodCache>,
    tasks: TaskSet,
}

impl Rig {
    fn new(gated: bool) -> Self {
        let script = Arc::new(Script {
            gate: gated.then(|| Arc::new(Semaphore::new(0))),
            ..Default::default()
        });
        let cache = Arc::new(PodCache::new());
        let clock = Arc::new(RealClock);
        let queue = Arc::new(WorkQueue::new(clock.clone()));
        let (workers, workers_start) = PodWorkers::new(
            cache.clone(),
            queue.clone(),
            Arc::new(LoggingPodEvents),
            clock,
            PodWorkersConfig::default(),
        );
        let tasks = TaskSet::new();
        workers_start.start(&tasks, Arc::new(FakeSyncer(script.clone())));
        // A PLEG stand-in: the cache is refreshed continuously.
        let c = cache.clone();
        let stop = tasks.token();
        tasks.spawn("fake-pleg", async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(5)) => c.update_time(Instant::now()),
                }
            }
        });
        Rig {
            workers,
            script,
            queue,
            cache,
            tasks,
        }
    }

    fn calls(&self) -> Vec<Call> {
        self.script.calls.lock().unwrap().clone()
    }

    fn release(&self, n: usize) {
        if let Some(g) = &self.script.gate {
            g.add_permits(n);
        }
    }

    async fn wait_calls(&self, n: usize) -> Vec<Call> {
        for _ in 0..400 {
            let calls = self.calls();
            if calls.len() >= n {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("expected {n} calls, got {:?}", self.calls());
    }

    async fn idle(&self, uid: &str) {
        for _ in 0..400 {
            let idle = self
                .workers
                .shared
                .lock()
                .statuses
                .get(uid)
                .is_none_or(|s| !s.working);
            if idle {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("worker of {uid} never went idle");
    }

    async fn stop(self) {
        self.tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .unwrap();
    }
}

fn pod(uid: &str, version: &str) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    p.metadata.name = Some(format!("name-{uid}"));
    p.metadata.namespace = Some("ns".into());
    p.metadata.labels = Some([("v".to_string(), version.to_string())].into());
    p.spec = Some(PodSpec {
        termination_grace_period_seconds: Some(30),
        ..Default::default()
    });
    Arc::new(p)
}

fn update(t: SyncPodType, p: Arc<Pod>) -> UpdatePodOptions {
    UpdatePodOptions::new(t, p, None)
}

fn kill(p: Arc<Pod>, grace: Option<i64>, done: Option<oneshot::Sender<()>>) -> UpdatePodOptions {
    UpdatePodOptions {
        kill: Some(KillPodOptions {
            completed: done,
            grace_period_override: grace,
            ..Default::default()
        }),
        ..update(SyncPodType::Kill, p)
    }
}

#[tokio::test(start_paused = true)]
async fn updates_coalesce_to_the_latest_while_busy() {
    let rig = Rig::new(true);
    rig.workers
        .update_pod(update(SyncPodType::Create, pod("a", "1")));
    rig.wait_calls(1).await;
    for v in ["2", "3", "4"] {
        rig.workers
            .update_pod(update(SyncPodType::Update, pod("a", v)));
    }
    rig.release(1);
    let calls = rig.wait_calls(2).await;
    rig.release(1);
    rig.idle("a").await;
    assert_eq!(
        calls,
        vec![
            Call::Sync("a".into(), SyncPodType::Create, "1".into()),
            Call::Sync("a".into(), SyncPodType::Update, "4".into()),
        ]
    );
    assert_eq!(rig.calls().len(), 2, "updates 2 and 3 never ran");
    assert!(rig.workers.could_have_running_containers("a"));
    assert!(!rig.workers.is_pod_termination_requested("a"));
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn kill_terminates_then_cleans_up_and_signals_completion() {
    let rig = Rig::new(false);
    let p = pod("b", "1");
    rig.workers
        .update_pod(update(SyncPodType::Create, p.clone()));
    rig.wait_calls(1).await;
    rig.idle("b").await;
    let (tx, rx) = oneshot::channel();
    rig.workers.update_pod(kill(p.clone(), None, Some(tx)));
    tokio::time::timeout(Duration::from_secs(5), rx)
        .await
        .expect("completion within bound")
        .expect("signalled");
    let calls = rig.wait_calls(3).await;
    assert_eq!(
        calls[1..],
        [
            Call::Terminating("b".into(), Some(30), false),
            Call::Terminated("b".into())
        ]
    );
    rig.idle("b").await;
    assert!(rig.workers.is_pod_termination_requested("b"));
    assert!(rig.workers.is_pod_known_terminated("b"));
    assert!(!rig.workers.could_have_running_containers("b"));
    assert!(rig.workers.should_pod_runtime_be_removed("b"));
    assert!(
        !rig.workers.should_pod_content_be_removed("b"),
        "killed, not deleted: content stays"
    );
    // Further updates are ignored once finished.
    rig.workers.update_pod(update(SyncPodType::Sync, p.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(rig.calls().len(), 3);
    // Housekeeping forgets it once it leaves config.
    let states = rig.workers.sync_known_pods(&[]);
    assert_eq!(states.get("b"), Some(&PodWorkerState::Terminated));
    assert!(rig.workers.sync_known_pods(&[]).is_empty());
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn grace_period_only_shortens_and_cancels_the_sync_in_progress() {
    let rig = Rig::new(true);
    let p = pod("c", "1");
    rig.workers
        .update_pod(update(SyncPodType::Create, p.clone()));
    rig.wait_calls(1).await;
    // Termination requested while syncing: the sync is cancelled.
    rig.workers.update_pod(kill(p.clone(), Some(20), None));
    rig.workers.update_pod(kill(p.clone(), Some(40), None));
    let calls = rig.wait_calls(2).await;
    assert_eq!(calls[1], Call::Terminating("c".into(), Some(20), false));
    assert!(rig.script.cancelled.lock().unwrap()[0]);
    // A shorter grace period while terminating cancels that too.
    rig.workers.update_pod(kill(p.clone(), Some(5), None));
    let calls = rig.wait_calls(3).await;
    assert_eq!(calls[2], Call::Terminating("c".into(), Some(5), false));
    rig.release(10);
    let calls = rig.wait_calls(4).await;
    assert_eq!(calls[3], Call::Terminated("c".into()));
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_terminal_sync_moves_the_pod_to_termination() {
    let rig = Rig::new(false);
    rig.script.sync_results.lock().unwrap().push_back(Ok(true));
    rig.workers
        .update_pod(update(SyncPodType::Create, pod("d", "1")));
    let calls = rig.wait_calls(3).await;
    assert_eq!(
        calls,
        vec![
            Call::Sync("d".into(), SyncPodType::Create, "1".into()),
            Call::Terminating("d".into(), None, false),
            Call::Terminated("d".into()),
        ]
    );
    assert!(rig.workers.should_pod_containers_be_terminating("d"));
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn errors_are_retried_after_a_back_off_and_successes_after_resync() {
    let rig = Rig::new(false);
    rig.script
        .sync_results
        .lock()
        .unwrap()
        .extend([Err(PodSyncError::KillTimeout)]);
    rig.workers
        .update_pod(update(SyncPodType::Create, pod("e", "1")));
    rig.wait_calls(1).await;
    rig.idle("e").await;
    assert!(
        rig.queue.get_work().is_empty(),
        "not due yet (10-15 s back-off)"
    );
    assert_eq!(rig.queue.len(), 1);
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn orphans_are_killed_from_their_runtime_view_and_forgotten() {
    let rig = Rig::new(false);
    let running = RunningPod {
        id: "orphan".into(),
        name: "gone".into(),
        namespace: "ns".into(),
        containers: vec![RunningContainer {
            id: crate::kubelet::container::ContainerId::new("containerd", "c1"),
            name: "app".into(),
            image: "busybox".into(),
            image_id: String::new(),
            hash: 0,
            state: crate::kubelet::container::ContainerState::Running,
        }],
        sandboxes: vec![],
    };
    // Only kills are accepted for runtime pods.
    rig.workers.update_pod(UpdatePodOptions {
        update_type: SyncPodType::Sync,
        start_time: None,
        pod: None,
        mirror_pod: None,
        running_pod: Some(running.clone()),
        kill: None,
    });
    assert!(rig.workers.known_pods().is_empty());
    rig.workers.update_pod(UpdatePodOptions {
        update_type: SyncPodType::Kill,
        start_time: None,
        pod: None,
        mirror_pod: None,
        running_pod: Some(running),
        kill: Some(KillPodOptions {
            grace_period_override: Some(1),
            ..Default::default()
        }),
    });
    let calls = rig.wait_calls(1).await;
    assert_eq!(
        calls,
        vec![Call::Terminating("orphan".into(), Some(1), true)]
    );
    rig.idle("orphan").await;
    assert!(rig.workers.should_pod_content_be_removed("orphan"));
    assert_eq!(
        rig.workers.sync_known_pods(&[]).get("orphan"),
        Some(&PodWorkerState::Terminated)
    );
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_create_while_terminating_is_restarted_after_housekeeping() {
    let rig = Rig::new(true);
    let p = pod("f", "1");
    rig.workers
        .update_pod(update(SyncPodType::Create, p.clone()));
    rig.wait_calls(1).await;
    rig.workers.update_pod(kill(p.clone(), None, None));
    rig.workers
        .update_pod(update(SyncPodType::Create, pod("f", "2")));
    rig.release(10);
    rig.wait_calls(3).await;
    rig.idle("f").await;
    let states = rig.workers.sync_known_pods(std::slice::from_ref(&p));
    assert_eq!(
        states.get("f"),
        Some(&PodWorkerState::TerminatedAndRecreated)
    );
    // The history is gone: the UID can start again.
    rig.workers
        .update_pod(update(SyncPodType::Create, pod("f", "2")));
    let calls = rig.wait_calls(4).await;
    assert_eq!(
        calls[3],
        Call::Sync("f".into(), SyncPodType::Create, "2".into())
    );
    rig.stop().await;
}

fn static_pod(uid: &str) -> Arc<Pod> {
    let mut p = (*pod(uid, "1")).clone();
    p.metadata.name = Some("etcd-node".into());
    p.metadata.annotations =
        Some([(CONFIG_SOURCE_ANNOTATION_KEY.to_string(), "file".to_string())].into());
    Arc::new(p)
}

#[tokio::test(start_paused = true)]
async fn static_pods_of_one_name_wait_and_a_waiting_one_can_be_killed_unstarted() {
    let rig = Rig::new(true);
    let first = static_pod("s1");
    let second = static_pod("s2");
    rig.workers
        .update_pod(update(SyncPodType::Create, first.clone()));
    rig.wait_calls(1).await;
    rig.workers
        .update_pod(update(SyncPodType::Create, second.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(rig.calls().len(), 1, "s2 waits while s1 runs");
    // s2 is removed before it started: it finishes without any sync.
    rig.workers.update_pod(kill(second.clone(), None, None));
    tokio::time::sleep(Duration::from_millis(50)).await;
    rig.release(1);
    rig.idle("s1").await;
    // The requeued s2 update (from the work queue) ends the worker unstarted.
    rig.workers
        .update_pod(update(SyncPodType::Sync, second.clone()));
    rig.idle("s2").await;
    assert!(rig.workers.is_pod_known_terminated("s2"));
    assert!(
        rig.calls()
            .iter()
            .all(|c| !matches!(c, Call::Terminating(u, ..) if u == "s2")),
        "{:?}",
        rig.calls()
    );
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_terminal_pod_with_nothing_running_is_finished_at_once() {
    let rig = Rig::new(false);
    let mut p = (*pod("g", "1")).clone();
    p.status = Some(ApiStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    rig.cache
        .set("g", PodStatus::empty("g"), None, Instant::now());
    rig.workers
        .update_pod(update(SyncPodType::Create, Arc::new(p)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(rig.calls().is_empty());
    assert!(rig.workers.is_pod_known_terminated("g"));
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn queries_before_and_after_the_first_housekeeping() {
    let rig = Rig::new(false);
    assert!(rig.workers.could_have_running_containers("unknown"));
    assert!(!rig.workers.should_pod_runtime_be_removed("unknown"));
    assert!(!rig.workers.should_pod_content_be_removed("unknown"));
    assert!(!rig.workers.should_pod_containers_be_terminating("unknown"));
    rig.workers.sync_known_pods(&[]);
    assert!(!rig.workers.could_have_running_containers("unknown"));
    assert!(rig.workers.should_pod_runtime_be_removed("unknown"));
    assert!(rig.workers.should_pod_content_be_removed("unknown"));
    assert!(rig.workers.should_pod_containers_be_terminating("unknown"));
    rig.stop().await;
}

#[tokio::test(start_paused = true)]
async fn kill_pod_now_waits_for_the_containers_to_stop() {
    let rig = Rig::new(false);
    let p = pod("h", "1");
    rig.workers
        .update_pod(update(SyncPodType::Create, p.clone()));
    rig.wait_calls(1).await;
    rig.workers
        .kill_pod_now(p, true, Some(3), None)
        .await
        .expect("killed");
    assert!(rig.workers.should_pod_content_be_removed("h"), "evicted");
    rig.stop().await;
}
