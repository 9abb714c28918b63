//! The generic PLEG against a fake runtime: event generation, cache
//! updates, reinspection after failures, health.

use super::*;
use crate::kubelet::container::{
    ContainerId, ContainerStatus, GcPolicy, Image, PodSyncResult, RunningContainer, RuntimeStatus,
};
use crate::kubelet::pleg::events::event_stream;
use crate::util::clock::RealClock;
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};
use std::collections::HashSet;
use std::sync::Mutex as StdMutex;

#[derive(Default)]
struct FakeRuntime {
    pods: StdMutex<Vec<RunningPod>>,
    failing_status: StdMutex<HashSet<String>>,
    status_calls: StdMutex<Vec<String>>,
    ips: StdMutex<HashMap<String, Vec<String>>>,
}

fn container(id: &str, state: ContainerState) -> RunningContainer {
    RunningContainer {
        id: ContainerId::new("test", id),
        name: format!("name-{id}"),
        image: String::new(),
        image_id: String::new(),
        hash: 0,
        state,
    }
}

fn pod(
    uid: &str,
    containers: Vec<RunningContainer>,
    sandboxes: Vec<RunningContainer>,
) -> RunningPod {
    RunningPod {
        id: uid.into(),
        name: format!("pod-{uid}"),
        namespace: "ns".into(),
        containers,
        sandboxes,
    }
}

#[async_trait]
impl Runtime for FakeRuntime {
    fn runtime_type(&self) -> &str {
        "test"
    }
    async fn version(&self) -> Result<String, RuntimeError> {
        Ok("test://0".into())
    }
    async fn status(&self) -> Result<RuntimeStatus, RuntimeError> {
        Ok(RuntimeStatus::default())
    }
    async fn get_pods(&self, _all: bool) -> Result<Vec<RunningPod>, RuntimeError> {
        Ok(self.pods.lock().unwrap().clone())
    }
    async fn get_pod_status(
        &self,
        uid: &str,
        name: &str,
        namespace: &str,
    ) -> Result<PodStatus, RuntimeError> {
        self.status_calls.lock().unwrap().push(uid.to_string());
        if self.failing_status.lock().unwrap().contains(uid) {
            return Err(RuntimeError::Call {
                op: "PodSandboxStatus",
                message: "boom".into(),
            });
        }
        let pods = self.pods.lock().unwrap().clone();
        let p = pods.iter().find(|p| p.id == uid);
        Ok(PodStatus {
            id: uid.into(),
            name: name.into(),
            namespace: namespace.into(),
            ips: self
                .ips
                .lock()
                .unwrap()
                .get(uid)
                .cloned()
                .unwrap_or_default(),
            container_statuses: p
                .into_iter()
                .flat_map(|p| p.containers.iter())
                .map(|c| ContainerStatus {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    state: c.state,
                    created_at: None,
                    started_at: None,
                    finished_at: None,
                    exit_code: if c.state == ContainerState::Exited {
                        3
                    } else {
                        0
                    },
                    image: String::new(),
                    image_id: String::new(),
                    hash: 0,
                    restart_count: 0,
                    reason: String::new(),
                    message: String::new(),
                })
                .collect(),
            sandbox_statuses: vec![],
        })
    }
    async fn sync_pod(&self, _: &Pod, _: &PodStatus, _: &[Secret]) -> PodSyncResult {
        PodSyncResult::default()
    }
    async fn kill_pod(
        &self,
        _: Option<&Pod>,
        _: &RunningPod,
        _: Option<i64>,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn garbage_collect(&self, _: GcPolicy, _: bool, _: bool) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn delete_container(&self, _: &ContainerId) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeError> {
        Ok(vec![])
    }
    async fn remove_image(&self, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }
}

fn drain(
    rx: &mut crate::kubelet::pleg::EventStream,
) -> Vec<(String, PodLifecycleEventType, String)> {
    let mut v = Vec::new();
    while let Some(e) = rx.try_recv() {
        v.push((e.id, e.event_type, e.data));
    }
    v.sort_by_key(|e| (e.0.clone(), e.2.clone()));
    v
}

fn ev(pod: &str, t: PodLifecycleEventType, c: &str) -> (String, PodLifecycleEventType, String) {
    (pod.into(), t, c.into())
}

use PodLifecycleEventType::*;

#[test]
fn transition_table() {
    use PlegContainerState as S;
    let cases = [
        (S::NonExistent, S::Running, vec![ContainerStarted]),
        (S::NonExistent, S::Exited, vec![ContainerDied]),
        (S::Running, S::Exited, vec![ContainerDied]),
        (S::Running, S::Unknown, vec![ContainerChanged]),
        (S::Exited, S::NonExistent, vec![ContainerRemoved]),
        (
            S::Running,
            S::NonExistent,
            vec![ContainerDied, ContainerRemoved],
        ),
        (
            S::Unknown,
            S::NonExistent,
            vec![ContainerDied, ContainerRemoved],
        ),
        (S::Running, S::Running, vec![]),
    ];
    for (old, new, want) in cases {
        let got: Vec<PodLifecycleEventType> = generate_events("p", "c", old, new)
            .into_iter()
            .map(|e| e.event_type)
            .collect();
        assert_eq!(got, want, "{old:?} -> {new:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn relisting_emits_events_and_fills_the_cache() {
    let runtime = Arc::new(FakeRuntime::default());
    let cache = Arc::new(PodCache::new());
    let (tx, mut rx) = event_stream();
    let pleg = GenericPleg::new(runtime.clone(), cache.clone(), tx, Arc::new(RealClock));

    assert_eq!(pleg.healthy(), Err(PlegError::NeverRelisted));
    pleg.relist().await;
    assert!(drain(&mut rx).is_empty(), "nothing yet");
    assert!(pleg.healthy().is_ok());

    *runtime.pods.lock().unwrap() = vec![
        pod(
            "1234",
            vec![
                container("c1", ContainerState::Running),
                container("c2", ContainerState::Exited),
                container("c3", ContainerState::Created),
            ],
            vec![container("s1", ContainerState::Running)],
        ),
        pod(
            "4567",
            vec![container("c4", ContainerState::Exited)],
            vec![],
        ),
    ];
    let (by_state, running) = super::running_counts(&runtime.pods.lock().unwrap());
    assert_eq!(
        by_state.into_iter().collect::<Vec<_>>(),
        vec![("created", 1), ("exited", 2), ("running", 1)]
    );
    assert_eq!(running, 1, "one pod has a running sandbox");
    pleg.relist().await;
    crate::metrics::kubelet::register_unlabeled();
    let text = crate::metrics::render_text();
    for family in [
        "kubelet_pleg_relist_duration_seconds_count ",
        "kubelet_pleg_relist_interval_seconds_count ",
        "kubelet_pleg_last_seen_seconds ",
        "kubelet_pleg_discard_events 0\n",
        "kubelet_running_pods ",
        "kubelet_running_containers{container_state=\"exited\"} ",
    ] {
        assert!(text.contains(family), "{family}: {text}");
    }
    assert_eq!(
        drain(&mut rx),
        vec![
            ev("1234", ContainerStarted, "c1"),
            ev("1234", ContainerDied, "c2"),
            ev("1234", PodSync, "s1"),
            ev("4567", ContainerDied, "c4"),
        ],
        "created counts as unknown and is not reported"
    );
    let cached = cache.get("1234");
    assert_eq!(cached.status.container_statuses.len(), 3);
    assert_eq!(cached.status.name, "pod-1234");

    // Nothing changed: no events, no inspections.
    runtime.status_calls.lock().unwrap().clear();
    pleg.relist().await;
    assert!(drain(&mut rx).is_empty());
    assert!(runtime.status_calls.lock().unwrap().is_empty());

    *runtime.pods.lock().unwrap() = vec![
        pod(
            "1234",
            vec![
                container("c2", ContainerState::Exited),
                container("c3", ContainerState::Running),
            ],
            vec![container("s1", ContainerState::Exited)],
        ),
        pod(
            "4567",
            vec![container("c4", ContainerState::Running)],
            vec![],
        ),
    ];
    pleg.relist().await;
    assert_eq!(
        drain(&mut rx),
        vec![
            ev("1234", ContainerDied, "c1"),
            ev("1234", ContainerRemoved, "c1"),
            ev("1234", ContainerStarted, "c3"),
            ev("1234", PodSync, "s1"),
            ev("4567", ContainerStarted, "c4"),
        ]
    );

    // A pod disappears: its cache entry goes.
    *runtime.pods.lock().unwrap() = vec![pod(
        "4567",
        vec![container("c4", ContainerState::Running)],
        vec![],
    )];
    pleg.relist().await;
    let got = drain(&mut rx);
    assert!(got.contains(&ev("1234", ContainerRemoved, "c2")), "{got:?}");
    assert!(got.contains(&ev("1234", PodSync, "s1")), "{got:?}");
    assert!(cache.get("1234").status.container_statuses.is_empty());

    tokio::time::advance(RELIST_THRESHOLD + Duration::from_secs(1)).await;
    match pleg.healthy() {
        Err(PlegError::Stale { elapsed, threshold }) => {
            assert_eq!(threshold, "3m0s");
            assert_eq!(elapsed, "3m1s");
        }
        other => panic!("expected stale, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn failed_inspection_withholds_events_and_retries() {
    let runtime = Arc::new(FakeRuntime::default());
    let cache = Arc::new(PodCache::new());
    let (tx, mut rx) = event_stream();
    let pleg = GenericPleg::new(runtime.clone(), cache.clone(), tx, Arc::new(RealClock));
    *runtime.pods.lock().unwrap() = vec![
        pod("ok", vec![container("a", ContainerState::Running)], vec![]),
        pod("bad", vec![container("b", ContainerState::Running)], vec![]),
    ];
    runtime.failing_status.lock().unwrap().insert("bad".into());
    pleg.relist().await;
    assert_eq!(drain(&mut rx), vec![ev("ok", ContainerStarted, "a")]);
    assert!(cache.get("bad").error.is_some(), "the error is cached");

    // Still failing: the change is seen again and it is inspected again.
    runtime.status_calls.lock().unwrap().clear();
    pleg.relist().await;
    assert!(drain(&mut rx).is_empty());
    assert_eq!(
        *runtime.status_calls.lock().unwrap(),
        vec!["bad".to_string()]
    );

    // Recovered: the withheld event arrives.
    runtime.failing_status.lock().unwrap().clear();
    pleg.relist().await;
    assert_eq!(drain(&mut rx), vec![ev("bad", ContainerStarted, "b")]);
    assert!(cache.get("bad").error.is_none());
}

#[tokio::test(start_paused = true)]
async fn pods_that_failed_without_new_events_are_reinspected() {
    let runtime = Arc::new(FakeRuntime::default());
    let cache = Arc::new(PodCache::new());
    let (tx, mut rx) = event_stream();
    let pleg = GenericPleg::new(runtime.clone(), cache.clone(), tx, Arc::new(RealClock));
    *runtime.pods.lock().unwrap() = vec![pod(
        "p",
        vec![container("a", ContainerState::Running)],
        vec![],
    )];
    pleg.relist().await;
    drain(&mut rx);
    // A change whose inspection fails...
    *runtime.pods.lock().unwrap() = vec![pod(
        "p",
        vec![container("a", ContainerState::Exited)],
        vec![],
    )];
    runtime.failing_status.lock().unwrap().insert("p".into());
    pleg.relist().await;
    assert!(drain(&mut rx).is_empty());
    runtime.failing_status.lock().unwrap().clear();
    runtime.status_calls.lock().unwrap().clear();
    pleg.relist().await;
    assert_eq!(drain(&mut rx), vec![ev("p", ContainerDied, "a")]);
    assert_eq!(
        *runtime.status_calls.lock().unwrap(),
        vec!["p".to_string()],
        "inspected once"
    );
}

#[tokio::test(start_paused = true)]
async fn cache_timestamp_releases_waiters_after_every_pod_is_written() {
    let runtime = Arc::new(FakeRuntime::default());
    let cache = Arc::new(PodCache::new());
    let (tx, _rx) = event_stream();
    let pleg = Arc::new(GenericPleg::new(
        runtime.clone(),
        cache.clone(),
        tx,
        Arc::new(RealClock),
    ));
    let many: Vec<RunningPod> = (0..50)
        .map(|i| {
            pod(
                &format!("p{i}"),
                vec![container(&format!("c{i}"), ContainerState::Running)],
                vec![],
            )
        })
        .collect();
    *runtime.pods.lock().unwrap() = many;
    let since = tokio::time::Instant::now();
    tokio::time::advance(Duration::from_millis(1)).await;
    let c = cache.clone();
    let waiter = tokio::spawn(async move { c.get_newer_than("p49", since).await });
    pleg.relist().await;
    let got = waiter.await.expect("waiter");
    assert_eq!(got.status.container_statuses.len(), 1);
    assert_eq!(runtime.status_calls.lock().unwrap().len(), 50);
}

#[tokio::test(start_paused = true)]
async fn pod_ips_survive_sandbox_teardown() {
    let runtime = Arc::new(FakeRuntime::default());
    let cache = Arc::new(PodCache::new());
    let (tx, _rx) = event_stream();
    let pleg = GenericPleg::new(runtime.clone(), cache.clone(), tx, Arc::new(RealClock));
    runtime
        .ips
        .lock()
        .unwrap()
        .insert("p".into(), vec!["10.0.0.7".into()]);
    *runtime.pods.lock().unwrap() = vec![pod(
        "p",
        vec![container("a", ContainerState::Running)],
        vec![],
    )];
    pleg.relist().await;
    assert_eq!(cache.get("p").status.ips, vec!["10.0.0.7"]);
    runtime.ips.lock().unwrap().clear();
    *runtime.pods.lock().unwrap() = vec![pod(
        "p",
        vec![container("a", ContainerState::Exited)],
        vec![],
    )];
    pleg.relist().await;
    assert_eq!(
        cache.get("p").status.ips,
        vec!["10.0.0.7"],
        "kept for the finished pod"
    );
}

/// The relist loop runs at once when the cache says a fresher status is
/// wanted (a worker's request, or a reader waiting), not only every period.
#[tokio::test(start_paused = true)]
async fn a_wanted_relist_runs_before_the_period() {
    let runtime = Arc::new(FakeRuntime::default());
    let cache = Arc::new(PodCache::new());
    let (tx, _rx) = event_stream();
    let pleg = Arc::new(
        GenericPleg::new(runtime.clone(), cache.clone(), tx, Arc::new(RealClock))
            .with_tuning(Duration::from_secs(3600), 1),
    );
    let tasks = crate::util::lifecycle::TaskSet::new();
    pleg.start(&tasks);
    let relists = |p: &GenericPleg| *p.last_relist.lock().unwrap();
    // The first relist runs at start.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let first = relists(&pleg).expect("relisted at start");

    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(relists(&pleg), Some(first), "nothing before the period");
    cache.want_relist();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = relists(&pleg).expect("relisted");
    assert!(second > first, "a requested relist runs at once");

    // A reader waiting for a status newer than now gets one at once.
    *runtime.pods.lock().unwrap() = vec![pod(
        "p",
        vec![container("c", ContainerState::Running)],
        vec![],
    )];
    tokio::time::sleep(Duration::from_secs(5)).await;
    let since = tokio::time::Instant::now();
    tokio::time::advance(Duration::from_millis(1)).await;
    let got = tokio::time::timeout(Duration::from_secs(1), cache.get_newer_than("p", since))
        .await
        .expect("the wait asks for a relist");
    assert_eq!(got.status.container_statuses.len(), 1);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .expect("stops");
}
