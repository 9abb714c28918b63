//! The eviction manager over this machine's real signals (cgroup memory,
//! statfs, /proc), and over a real containerd: thresholds above what is
//! available raise the pressure conditions and evict a ranked, non-critical
//! pod through the kill seam; a container filling its emptyDir past the
//! sizeLimit gets its pod evicted and killed.

#[allow(dead_code)]
#[path = "kuberuntime/harness.rs"]
mod harness;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kubelet::cri::{RemoteImageService, RemoteRuntimeService};
use kubelet::kubelet::container::{ContainerState, Runtime};
use kubelet::kubelet::events::{EventRecorder, EventType, node_ref};
use kubelet::kubelet::eviction::signals::make_signal_observations;
use kubelet::kubelet::eviction::threshold::{Signal, parse_threshold_config};
use kubelet::kubelet::eviction::{
    ContainerGc, EvictionConfig, EvictionDeps, EvictionError, EvictionManager, EvictionStatus,
    ImageGc, NodeConditionType, PodKiller, admit_under_pressure,
};
use kubelet::kubelet::nodestatus::PressureSource;
use kubelet::kubelet::stats::{NodeStatsProvider, NodeStatsProviderConfig, StatsProvider};
use kubelet::util::clock::RealClock;
use serde_json::json;
use support::containerd::images;

#[derive(Default)]
struct Kills(Mutex<Vec<(String, EvictionStatus, i64)>>);

#[async_trait]
impl PodKiller for Kills {
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

#[derive(Default)]
struct Gc(Mutex<u32>);

#[async_trait]
impl ImageGc for Gc {
    async fn delete_unused_images(&self) -> Result<(), EvictionError> {
        *self.0.lock().unwrap() += 1;
        Ok(())
    }
}

#[async_trait]
impl ContainerGc for Gc {
    async fn delete_all_unused_containers(&self) -> Result<(), EvictionError> {
        *self.0.lock().unwrap() += 1;
        Ok(())
    }
}

#[derive(Default)]
struct Events(Mutex<Vec<(String, String)>>);

impl EventRecorder for Events {
    fn event(&self, _o: &ObjectReference, _t: EventType, reason: &str, message: &str) {
        self.0
            .lock()
            .unwrap()
            .push((reason.to_string(), message.to_string()));
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pod(name: &str, spec: serde_json::Value, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ev", "annotations": annotations,
                     "uid": format!("uid-{name}-{}", std::process::id())},
        "spec": spec
    }))
    .expect("pod")
}

fn host_config(root: &Path, logs: PathBuf) -> NodeStatsProviderConfig {
    let mut c = NodeStatsProviderConfig::detect("node", root, Path::new("/kubepods"), false)
        .expect("cgroup layout");
    c.pod_logs_dir = logs;
    c
}

#[tokio::test]
async fn real_signals_raise_pressure_and_evict_a_ranked_non_critical_pod() {
    let root = tempfile::tempdir().expect("root");
    let provider = Arc::new(NodeStatsProvider::new(
        host_config(root.path(), root.path().join("logs")),
        None,
        None,
    ));

    // The signals this machine gives.
    let summary = provider.summary(&[]).await.expect("summary");
    let (obs, _) = make_signal_observations(&summary);
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let mem_total_kib: i64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("MemTotal");
    let memory = obs.get(&Signal::MemoryAvailable).expect("memory.available");
    assert_eq!(memory.capacity.value(), mem_total_kib * 1024);
    assert!(memory.available.value() > 0);
    assert!(memory.available.value() < memory.capacity.value());
    let nodefs = obs.get(&Signal::NodeFsAvailable).expect("nodefs.available");
    let st = nix::sys::statvfs::statvfs(root.path()).expect("statvfs");
    assert_eq!(
        nodefs.capacity.value(),
        (st.blocks() as u64 * st.fragment_size() as u64) as i64
    );
    assert!(obs.contains_key(&Signal::NodeFsInodesFree));
    assert!(
        obs.contains_key(&Signal::ImageFsAvailable),
        "imagefs is nodefs without a runtime"
    );
    let pids = obs.get(&Signal::PidAvailable).expect("pid.available");
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("pid_max");
    assert_eq!(pids.capacity.value(), pid_max);
    assert!(pids.available.value() > 0 && pids.available.value() < pid_max);
    assert!(!provider.has_dedicated_image_fs().await.expect("dedicated"));

    // Thresholds no machine meets the other side of.
    let thresholds = parse_threshold_config(
        &[],
        &map(&[
            ("memory.available", "1000Ti"),
            ("nodefs.available", "1000Pi"),
            ("pid.available", "1000000000"),
        ]),
        &map(&[]),
        &map(&[]),
        &map(&[]),
    )
    .expect("thresholds");
    let be = Arc::new(pod(
        "best-effort",
        json!({"containers": [{"name": "c", "image": "x"}]}),
        json!({"kubernetes.io/config.source": "api"}),
    ));
    let static_pod = Arc::new(pod(
        "static",
        json!({"containers": [{"name": "c", "image": "x"}]}),
        json!({"kubernetes.io/config.source": "file"}),
    ));
    let burstable = Arc::new(pod(
        "burstable",
        json!({"priority": 100, "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"memory": "1Mi"}}}]}),
        json!({"kubernetes.io/config.source": "api"}),
    ));
    let pods = vec![static_pod.clone(), burstable.clone(), be.clone()];
    let kills = Arc::new(Kills::default());
    let gc = Arc::new(Gc::default());
    let events = Arc::new(Events::default());
    let manager = EvictionManager::new(
        EvictionConfig {
            pressure_transition_period: Duration::from_secs(300),
            max_pod_grace_period_seconds: 0,
            thresholds,
            local_storage_capacity_isolation: true,
            kernel_memcg_notification: false,
            memory_cgroup: None,
        },
        EvictionDeps {
            stats: provider,
            killer: kills.clone(),
            image_gc: gc.clone(),
            container_gc: gc.clone(),
            recorder: events.clone(),
            node_ref: node_ref("node"),
            clock: Arc::new(RealClock),
            active_pods: Arc::new(move || pods.clone()),
            pod_cleaned_up: Arc::new(|_| true),
        },
    );
    let evicted = manager
        .synchronize()
        .await
        .expect("synchronize")
        .expect("a pod evicted");
    assert_eq!(evicted.len(), 1);
    assert!(manager.memory_pressure());
    assert!(manager.disk_pressure());
    assert!(manager.pid_pressure());
    let conditions = manager.node_conditions();
    assert!(conditions.contains(&NodeConditionType::MemoryPressure));
    // Memory is acted on first; the static pod (critical) is skipped; the
    // lowest priority goes first.
    let kills = kills.0.lock().unwrap().clone();
    assert_eq!(kills.len(), 1);
    assert_eq!(kills[0].0, "best-effort");
    assert_eq!(kills[0].1.reason, "Evicted");
    assert_eq!(kills[0].1.message, "The node was low on resource: memory. ");
    assert_eq!(kills[0].2, 0);
    assert_eq!(
        *gc.0.lock().unwrap(),
        0,
        "memory pressure reclaims nothing at node level"
    );
    let events = events.0.lock().unwrap().clone();
    assert_eq!(
        events[0],
        (
            "EvictionThresholdMet".to_string(),
            "Attempting to reclaim memory".to_string()
        )
    );
    assert_eq!(events[1].0, "Evicted");

    // Admission under these conditions: nothing but critical pods.
    assert!(!admit_under_pressure(&conditions, &burstable).admit);
    assert!(admit_under_pressure(&conditions, &static_pod).admit);
}

fn test_pod(name: &str, mut spec: serde_json::Value) -> Pod {
    for (k, v) in [
        ("enableServiceLinks", json!(true)),
        ("dnsPolicy", json!("ClusterFirst")),
    ] {
        if spec.get(k).is_none() {
            spec[k] = v;
        }
    }
    for c in spec["containers"].as_array_mut().into_iter().flatten() {
        for (k, v) in [
            ("terminationMessagePath", "/dev/termination-log"),
            ("terminationMessagePolicy", "File"),
            ("imagePullPolicy", "IfNotPresent"),
        ] {
            if c.get(k).is_none() {
                c[k] = json!(v);
            }
        }
    }
    let mut p = pod(name, spec, json!({"kubernetes.io/config.source": "api"}));
    p.metadata.namespace = Some("kr".into());
    p
}

/// Kills through the runtime manager, as the pod workers would.
struct RuntimeKiller {
    runtime: Arc<kubelet::kubelet::kuberuntime::KubeGenericRuntimeManager>,
    kills: Kills,
}

#[async_trait]
impl PodKiller for RuntimeKiller {
    async fn kill_pod(
        &self,
        pod: &Arc<Pod>,
        status: EvictionStatus,
        grace: i64,
    ) -> Result<(), EvictionError> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let err = |message: String| EvictionError::KillPod {
            pod: uid.clone(),
            message,
        };
        let running = self
            .runtime
            .get_pods(false)
            .await
            .map_err(|e| err(e.to_string()))?
            .into_iter()
            .find(|p| p.id == uid)
            .ok_or_else(|| err("not running".into()))?;
        self.kills.kill_pod(pod, status, grace).await?;
        self.runtime
            .kill_pod(Some(pod), &running, Some(grace))
            .await
            .map_err(|e| err(e.to_string()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_filling_its_empty_dir_past_the_size_limit_is_evicted() {
    let Some(env) =
        harness::env("a_container_filling_its_empty_dir_past_the_size_limit_is_evicted").await
    else {
        return;
    };
    let m = env.manager.clone();
    let p = Arc::new(test_pod(
        "filler",
        json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
        "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}],
        "containers": [{
            "name": "c", "image": images().busybox,
            "command": ["sh", "-c", "dd if=/dev/zero of=/cache/fill bs=1024 count=4096; sleep 3600"],
            "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}]}),
    ));
    harness::sync_until(&m, &p, Duration::from_secs(120), |s| {
        s.find_container_status_by_name("c")
            .is_some_and(|c| c.state == ContainerState::Running)
    })
    .await;
    let fill = env
        .helper
        .pod_dir(p.metadata.uid.as_deref().unwrap_or(""))
        .join("volumes/kubernetes.io~empty-dir/cache/fill");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&fill).map(|m| m.len()).unwrap_or(0) < 4 * 1024 * 1024 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the container did not fill {fill:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let runtime = Arc::new(
        RemoteRuntimeService::connect(&env.rig.endpoint(), env.rig.timeout())
            .await
            .expect("runtime"),
    );
    let image = Arc::new(
        RemoteImageService::connect(&env.rig.endpoint(), env.rig.timeout())
            .await
            .expect("images"),
    );
    let provider = Arc::new(NodeStatsProvider::new(
        host_config(env.root.path(), env.logs_root()),
        Some(runtime),
        Some(image),
    ));
    let summary = provider
        .summary(std::slice::from_ref(&p))
        .await
        .expect("summary");
    let ps = &summary.pods[0];
    let cache = ps
        .volume_stats
        .iter()
        .find(|v| v.name == "cache")
        .expect("emptyDir stats");
    assert!(
        cache.fs.used_bytes.unwrap_or(0) >= 4 * 1024 * 1024,
        "{cache:?}"
    );
    let c = ps
        .containers
        .iter()
        .find(|c| c.name == "c")
        .expect("container stats from the CRI");
    assert!(
        c.memory
            .as_ref()
            .and_then(|m| m.working_set_bytes)
            .is_some(),
        "{c:?}"
    );

    let killer = Arc::new(RuntimeKiller {
        runtime: m.clone(),
        kills: Kills::default(),
    });
    let gc = Arc::new(Gc::default());
    let pods = vec![p.clone()];
    let manager = EvictionManager::new(
        EvictionConfig {
            pressure_transition_period: Duration::from_secs(300),
            max_pod_grace_period_seconds: 0,
            thresholds: Vec::new(),
            local_storage_capacity_isolation: true,
            kernel_memcg_notification: false,
            memory_cgroup: None,
        },
        EvictionDeps {
            stats: provider,
            killer: killer.clone(),
            image_gc: gc.clone(),
            container_gc: gc,
            recorder: Arc::new(Events::default()),
            node_ref: node_ref("node"),
            clock: Arc::new(RealClock),
            active_pods: Arc::new(move || pods.clone()),
            pod_cleaned_up: Arc::new(|_| true),
        },
    );
    let evicted = manager.synchronize().await.expect("sync").expect("evicted");
    assert_eq!(evicted.len(), 1);
    let kills = killer.kills.0.lock().unwrap().clone();
    assert_eq!(kills.len(), 1);
    assert_eq!(
        kills[0].1.message,
        "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". "
    );
    assert_eq!(kills[0].2, 0);
    assert!(
        !manager.disk_pressure(),
        "a local storage limit is not node pressure"
    );
    let status = harness::status_of(&m, &p).await;
    let c = status.find_container_status_by_name("c").expect("status");
    assert_eq!(c.state, ContainerState::Exited);
}

/// A memory cgroup made for one test, removed (with what it charged) on drop.
struct TestMemcg {
    dir: PathBuf,
    shm: PathBuf,
    child: Option<std::process::Child>,
}

impl TestMemcg {
    /// `None` (after a SKIPPED line) when there is no writable v1 memory
    /// controller here.
    fn create(test: &str, limit: u64) -> Option<TestMemcg> {
        let mount = PathBuf::from("/sys/fs/cgroup/memory");
        if !mount.join("cgroup.event_control").exists() || !support::is_root() {
            support::skip(test, "needs root and a cgroup v1 memory controller");
            return None;
        }
        let name = format!("kubelet-rs-eviction-{}-{}", test.len(), std::process::id());
        let dir = mount.join(&name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {dir:?}: {e}"));
        std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string()).expect("limit");
        Some(TestMemcg {
            dir,
            shm: PathBuf::from(format!("/dev/shm/{name}")),
            child: None,
        })
    }

    fn name(&self) -> PathBuf {
        PathBuf::from(self.dir.file_name().expect("name"))
    }

    /// Starts a process in the cgroup that charges `bytes` of shared memory.
    fn charge(&mut self, bytes: u64) {
        let script = format!(
            "echo $$ > {}/cgroup.procs && head -c {bytes} /dev/zero > {} && exec sleep 30",
            self.dir.display(),
            self.shm.display()
        );
        self.child = Some(
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .spawn()
                .expect("spawn"),
        );
    }
}

impl Drop for TestMemcg {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Anything still in the cgroup was started by this test.
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = std::fs::remove_file(&self.shm);
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {:?}", self.dir);
    }
}

/// Counts summaries taken, over the real provider.
struct Counting(NodeStatsProvider, Mutex<u32>);

#[async_trait]
impl StatsProvider for Counting {
    async fn summary(
        &self,
        pods: &[Arc<Pod>],
    ) -> Result<kubelet::kubelet::stats::Summary, kubelet::kubelet::stats::StatsError> {
        *self.1.lock().unwrap() += 1;
        self.0.summary(pods).await
    }
    async fn has_dedicated_image_fs(&self) -> Result<bool, kubelet::kubelet::stats::StatsError> {
        self.0.has_dedicated_image_fs().await
    }
}

#[tokio::test]
async fn a_memcg_notification_wakes_the_manager_before_its_interval() {
    const MI: u64 = 1024 * 1024;
    let test = "a_memcg_notification_wakes_the_manager_before_its_interval";
    let Some(mut cg) = TestMemcg::create(test, 64 * MI) else {
        return;
    };
    let root = tempfile::tempdir().expect("root");
    let mut provider_config = host_config(root.path(), root.path().join("logs"));
    provider_config.pods_cgroup = cg.name();
    let stats = Arc::new(Counting(
        NodeStatsProvider::new(provider_config.clone(), None, None),
        Mutex::new(0),
    ));
    let thresholds = parse_threshold_config(
        &[],
        &map(&[("allocatableMemory.available", "60Mi")]),
        &map(&[]),
        &map(&[]),
        &map(&[]),
    )
    .expect("thresholds");
    let gc = Arc::new(Gc::default());
    let manager = EvictionManager::new(
        EvictionConfig {
            pressure_transition_period: Duration::from_secs(300),
            max_pod_grace_period_seconds: 0,
            thresholds,
            local_storage_capacity_isolation: false,
            kernel_memcg_notification: true,
            memory_cgroup: Some(kubelet::kubelet::eviction::MemoryCgroup {
                mount: provider_config.memory_cgroup_mount.clone(),
                pods_cgroup: cg.name(),
            }),
        },
        EvictionDeps {
            stats: stats.clone(),
            killer: Arc::new(Kills::default()),
            image_gc: gc.clone(),
            container_gc: gc,
            recorder: Arc::new(Events::default()),
            node_ref: node_ref("node"),
            clock: Arc::new(RealClock),
            active_pods: Arc::new(Vec::new),
            pod_cleaned_up: Arc::new(|_| true),
        },
    );
    let tasks = kubelet::util::lifecycle::TaskSet::new();
    manager.start(&tasks, Duration::from_secs(3600));
    let wait_for = |n: u32| {
        let stats = stats.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            while *stats.1.lock().unwrap() < n {
                assert!(tokio::time::Instant::now() < deadline, "no pass {n}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    wait_for(1).await;
    assert!(
        !manager.memory_pressure(),
        "an empty cgroup has 64Mi available"
    );
    // Wait for the notifier to arm (its registration runs on the blocking
    // pool, slow on a loaded machine), then charge 8Mi: 56Mi left, under 60Mi.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while manager.armed_memcg_notifiers() < 1 {
        assert!(tokio::time::Instant::now() < deadline, "notifier not armed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cg.charge(8 * MI);
    wait_for(2).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !manager.memory_pressure() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no memory pressure after the memcg notification"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
