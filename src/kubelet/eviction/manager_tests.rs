use std::sync::Mutex as StdMutex;
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;

use super::*;
use crate::kubelet::eviction::testing::*;
use crate::kubelet::eviction::threshold::parse_threshold_config;
use crate::kubelet::stats::{FsStats, MemoryStats, NodeStats, PodStats, StatsError, Summary};

struct FakeClock(StdMutex<Instant>);

impl FakeClock {
    fn advance(&self, d: Duration) {
        let mut t = self.0.lock().unwrap();
        *t += d;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
    fn monotonic(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

/// Node numbers the fake stats report; every summary gets a fresh time.
#[derive(Clone)]
struct Node {
    memory_available: u64,
    memory_ws: u64,
    nodefs_available: u64,
    nodefs_capacity: u64,
    pods: Vec<PodStats>,
}

struct FakeStats {
    node: StdMutex<Node>,
    dedicated: bool,
    calls: StdMutex<u64>,
}

#[async_trait]
impl StatsProvider for FakeStats {
    async fn summary(&self, _pods: &[Arc<Pod>]) -> Result<Summary, StatsError> {
        let n = self.node.lock().unwrap().clone();
        let mut calls = self.calls.lock().unwrap();
        *calls += 1;
        let time = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(*calls));
        Ok(Summary {
            node: NodeStats {
                node_name: "node".into(),
                memory: Some(MemoryStats {
                    time,
                    available_bytes: Some(n.memory_available),
                    usage_bytes: Some(n.memory_ws),
                    working_set_bytes: Some(n.memory_ws),
                    ..Default::default()
                }),
                allocatable_memory: None,
                fs: Some(FsStats {
                    time,
                    available_bytes: Some(n.nodefs_available),
                    capacity_bytes: Some(n.nodefs_capacity),
                    inodes_free: Some(1000),
                    inodes: Some(2000),
                    ..Default::default()
                }),
                image_fs: None,
                rlimit: None,
                ..Default::default()
            },
            pods: n.pods,
        })
    }
    async fn has_dedicated_image_fs(&self) -> Result<bool, StatsError> {
        Ok(self.dedicated)
    }
}

#[derive(Default)]
struct Killed(StdMutex<Vec<(String, EvictionStatus, i64)>>);

#[async_trait]
impl PodKiller for Killed {
    async fn kill_pod(
        &self,
        pod: &Arc<Pod>,
        status: EvictionStatus,
        grace: i64,
    ) -> Result<(), EvictionError> {
        self.0
            .lock()
            .unwrap()
            .push((pod.metadata.name.clone().unwrap_or_default(), status, grace));
        Ok(())
    }
}

/// GC that frees `frees` bytes of nodefs when called.
struct FakeGc {
    stats: Arc<FakeStats>,
    frees: u64,
    calls: StdMutex<Vec<&'static str>>,
}

#[async_trait]
impl ImageGc for FakeGc {
    async fn delete_unused_images(&self) -> Result<(), EvictionError> {
        self.calls.lock().unwrap().push("images");
        self.stats.node.lock().unwrap().nodefs_available += self.frees;
        Ok(())
    }
}

#[async_trait]
impl ContainerGc for FakeGc {
    async fn delete_all_unused_containers(&self) -> Result<(), EvictionError> {
        self.calls.lock().unwrap().push("containers");
        Ok(())
    }
}

#[derive(Default)]
struct Events(StdMutex<Vec<(String, String, String)>>);

impl EventRecorder for Events {
    fn event(&self, object: &ObjectReference, _t: EventType, reason: &str, message: &str) {
        self.0.lock().unwrap().push((
            object.kind.clone().unwrap_or_default(),
            reason.to_string(),
            message.to_string(),
        ));
    }
}

struct Rig {
    manager: Arc<EvictionManager>,
    stats: Arc<FakeStats>,
    killed: Arc<Killed>,
    gc: Arc<FakeGc>,
    events: Arc<Events>,
    clock: Arc<FakeClock>,
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn rig(
    hard: &[(&str, &str)],
    soft: &[(&str, &str)],
    grace: &[(&str, &str)],
    reclaim: &[(&str, &str)],
    node: Node,
    pods: Vec<Arc<Pod>>,
    gc_frees: u64,
    local_storage: bool,
) -> Rig {
    let thresholds =
        parse_threshold_config(&[], &map(hard), &map(soft), &map(grace), &map(reclaim)).unwrap();
    let stats = Arc::new(FakeStats {
        node: StdMutex::new(node),
        dedicated: false,
        calls: StdMutex::new(0),
    });
    let killed = Arc::new(Killed::default());
    let gc = Arc::new(FakeGc {
        stats: stats.clone(),
        frees: gc_frees,
        calls: StdMutex::new(Vec::new()),
    });
    let events = Arc::new(Events::default());
    let clock = Arc::new(FakeClock(StdMutex::new(Instant::now())));
    let deps = EvictionDeps {
        stats: stats.clone(),
        killer: killed.clone(),
        image_gc: gc.clone(),
        container_gc: gc.clone(),
        recorder: events.clone(),
        node_ref: crate::kubelet::events::node_ref("node"),
        clock: clock.clone(),
        active_pods: Arc::new(move || pods.clone()),
        pod_cleaned_up: Arc::new(|_| true),
    };
    let config = EvictionConfig {
        pressure_transition_period: Duration::from_secs(300),
        max_pod_grace_period_seconds: 42,
        thresholds,
        local_storage_capacity_isolation: local_storage,
        kernel_memcg_notification: false,
        memory_cgroup: None,
    };
    Rig {
        manager: EvictionManager::new(config, deps),
        stats,
        killed,
        gc,
        events,
        clock,
    }
}

const GI: u64 = 1024 * MI;

fn node(memory_available: u64, nodefs_available: u64, pods: Vec<PodStats>) -> Node {
    Node {
        memory_available,
        memory_ws: 4 * GI,
        nodefs_available,
        nodefs_capacity: 100 * GI,
        pods,
    }
}

fn killed_names(r: &Rig) -> Vec<String> {
    r.killed
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|k| k.0.clone())
        .collect()
}

#[tokio::test]
async fn hard_memory_threshold_evicts_the_top_ranked_pod_and_keeps_the_condition() {
    let be = pod("be", None, vec![container("c", &[], &[])]);
    let bu = pod("bu", None, vec![container("c", &[("memory", "1Gi")], &[])]);
    let critical = pod("crit", Some(2_000_000_000), vec![container("c", &[], &[])]);
    let stats = vec![
        pod_stats(&critical, &[("c", 3 * GI, 0, 0)]),
        pod_stats(&be, &[("c", 200 * MI, 0, 0)]),
        pod_stats(&bu, &[("c", 500 * MI, 0, 0)]),
    ];
    let r = rig(
        &[("memory.available", "1Gi")],
        &[],
        &[],
        &[],
        node(500 * MI, 50 * GI, stats),
        vec![bu.clone(), critical.clone(), be.clone()],
        0,
        false,
    );
    assert!(!r.manager.memory_pressure());
    let evicted = r.manager.synchronize().await.unwrap().unwrap();
    // The critical pod ranks first (usage over its zero request) but is
    // never evicted; the best-effort pod is next.
    assert_eq!(evicted.len(), 1);
    assert_eq!(killed_names(&r), vec!["be"]);
    let (_, status, grace) = r.killed.0.lock().unwrap()[0].clone();
    assert_eq!(status.phase, "Failed");
    assert_eq!(status.reason, "Evicted");
    assert_eq!(
        status.message,
        "The node was low on resource: memory. Container c was using 200Mi, which exceeds its request of 0. "
    );
    assert_eq!(grace, 0, "hard thresholds evict with no grace period");
    assert!(r.manager.memory_pressure());
    assert!(!r.manager.disk_pressure());
    assert_eq!(
        r.manager.node_conditions(),
        vec![NodeConditionType::MemoryPressure]
    );
    let events = r.events.0.lock().unwrap().clone();
    assert_eq!(
        events[0],
        (
            "Node".into(),
            "EvictionThresholdMet".into(),
            "Attempting to reclaim memory".into()
        )
    );
    assert_eq!(events[1].0, "Pod");
    assert_eq!(events[1].1, "Evicted");
    assert!(
        r.gc.calls.lock().unwrap().is_empty(),
        "memory has no node-level reclaim"
    );

    // Memory recovers: no more evictions, but the condition stays for the
    // transition period.
    r.stats.node.lock().unwrap().memory_available = 3 * GI;
    r.clock.advance(Duration::from_secs(10));
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert!(r.manager.memory_pressure());
    r.clock.advance(Duration::from_secs(300));
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert!(!r.manager.memory_pressure());
    assert_eq!(killed_names(&r), vec!["be"]);
}

#[tokio::test]
async fn soft_threshold_waits_for_its_grace_period_and_uses_max_pod_grace() {
    let be = pod("be", None, vec![container("c", &[], &[])]);
    let r = rig(
        &[],
        &[("memory.available", "2Gi")],
        &[("memory.available", "1m30s")],
        &[],
        node(GI, 50 * GI, vec![pod_stats(&be, &[("c", MI, 0, 0)])]),
        vec![be.clone()],
        0,
        false,
    );
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert!(
        r.manager.memory_pressure(),
        "the condition does not wait for the grace period"
    );
    r.clock.advance(Duration::from_secs(89));
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert!(killed_names(&r).is_empty());
    r.clock.advance(Duration::from_secs(1));
    assert!(r.manager.synchronize().await.unwrap().is_some());
    assert_eq!(r.killed.0.lock().unwrap()[0].2, 42);
}

#[tokio::test]
async fn disk_pressure_reclaims_images_before_evicting() {
    let be = pod("be", None, vec![container("c", &[], &[])]);
    let stats = vec![pod_stats(&be, &[("c", MI, 10 * MI, 0)])];
    // 5Gi available under a 10% (10Gi) threshold; GC frees 20Gi.
    let r = rig(
        &[("nodefs.available", "10%")],
        &[],
        &[],
        &[],
        node(8 * GI, 5 * GI, stats.clone()),
        vec![be.clone()],
        20 * GI,
        false,
    );
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert_eq!(*r.gc.calls.lock().unwrap(), vec!["containers", "images"]);
    assert!(killed_names(&r).is_empty());
    assert!(r.manager.disk_pressure());

    // GC that frees too little (counting minimum reclaim): evict.
    let r = rig(
        &[("nodefs.available", "10%")],
        &[],
        &[],
        &[("nodefs.available", "5Gi")],
        node(8 * GI, 5 * GI, stats),
        vec![be.clone()],
        8 * GI,
        false,
    );
    assert!(r.manager.synchronize().await.unwrap().is_some());
    assert_eq!(killed_names(&r), vec!["be"]);
    let msg = r.killed.0.lock().unwrap()[0].1.message.clone();
    assert_eq!(
        msg,
        "The node was low on resource: ephemeral-storage. Container c was using 10Mi, which exceeds its request of 0. "
    );
}

#[tokio::test]
async fn min_reclaim_keeps_a_threshold_met_until_enough_is_free() {
    let be = pod("be", None, vec![container("c", &[], &[])]);
    let r = rig(
        &[("memory.available", "1Gi")],
        &[],
        &[],
        &[("memory.available", "1Gi")],
        node(500 * MI, 50 * GI, vec![pod_stats(&be, &[("c", MI, 0, 0)])]),
        vec![be.clone()],
        0,
        false,
    );
    assert!(r.manager.synchronize().await.unwrap().is_some());
    // 1.5Gi available: above the threshold, below threshold + min reclaim.
    r.stats.node.lock().unwrap().memory_available = 1536 * MI;
    assert!(r.manager.synchronize().await.unwrap().is_some());
    assert_eq!(killed_names(&r).len(), 2);
    r.stats.node.lock().unwrap().memory_available = 2048 * MI + 1;
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert_eq!(killed_names(&r).len(), 2);
}

#[tokio::test]
async fn local_storage_violations_evict_without_thresholds() {
    let ed = with_empty_dir(
        pod("ed", None, vec![container("c", &[], &[])]),
        "v",
        Some("1Mi"),
    );
    let fine = pod("fine", None, vec![container("c", &[], &[])]);
    let stats = vec![
        with_volume(pod_stats(&ed, &[("c", 0, 0, 0)]), "v", 2 * MI),
        pod_stats(&fine, &[("c", 0, 0, 0)]),
    ];
    let r = rig(
        &[],
        &[],
        &[],
        &[],
        node(8 * GI, 50 * GI, stats.clone()),
        vec![ed.clone(), fine.clone()],
        0,
        true,
    );
    let evicted = r.manager.synchronize().await.unwrap().unwrap();
    assert_eq!(evicted.len(), 1);
    let (name, status, grace) = r.killed.0.lock().unwrap()[0].clone();
    assert_eq!(name, "ed");
    assert_eq!(grace, 0);
    assert_eq!(
        status.message,
        "Usage of EmptyDir volume \"v\" exceeds the limit \"1Mi\". "
    );
    assert!(!r.manager.disk_pressure());

    // Isolation off: nothing happens.
    let r = rig(
        &[],
        &[],
        &[],
        &[],
        node(8 * GI, 50 * GI, stats),
        vec![ed, fine],
        0,
        false,
    );
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert!(killed_names(&r).is_empty());
}

#[tokio::test]
async fn stale_stats_are_not_acted_on_twice() {
    let be = pod("be", None, vec![container("c", &[], &[])]);
    let r = rig(
        &[("memory.available", "1Gi")],
        &[],
        &[],
        &[],
        node(500 * MI, 50 * GI, vec![pod_stats(&be, &[("c", MI, 0, 0)])]),
        vec![be.clone()],
        0,
        false,
    );
    assert!(r.manager.synchronize().await.unwrap().is_some());
    // Same stats time as the last pass: no second eviction.
    *r.stats.calls.lock().unwrap() -= 1;
    assert!(r.manager.synchronize().await.unwrap().is_none());
    assert_eq!(killed_names(&r).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn start_synchronizes_every_interval_until_shutdown() {
    let be = pod("be", None, vec![container("c", &[], &[])]);
    let r = rig(
        &[("memory.available", "1Gi")],
        &[],
        &[],
        &[],
        node(3 * GI, 50 * GI, vec![pod_stats(&be, &[("c", MI, 0, 0)])]),
        vec![be.clone()],
        0,
        false,
    );
    let tasks = TaskSet::new();
    r.manager.start(&tasks, MONITORING_INTERVAL);
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(
        *r.stats.calls.lock().unwrap(),
        3,
        "passes at 0s, 10s and 20s"
    );
    assert!(killed_names(&r).is_empty());
    let handle = tasks.into_shutdown_handle();
    handle.shutdown(Duration::from_secs(5)).await.unwrap();
}
