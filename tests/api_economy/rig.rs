//! One node in API-server mode over a private containerd, a batch of pause
//! pods bound to it at once, and what the batch cost: the API requests by
//! verb and resource (per pod where they name one), the status writes that
//! changed nothing, each pod's time from creation to Running and ready.
//!
//! The kubelet runs in this process (the acceptance test) or as the built
//! binary (the density figures, so that its RSS and CPU are its own).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::harness::{Kubelet, NodeDirs, Ports, args, config, deps, make_cgroup_root};
use crate::support::apiserver::{RequestRecord, TestApi};
use crate::support::containerd::{Containerd, images};

/// How long a batch may take before the run gives up.
pub const BATCH_LIMIT: Duration = Duration::from_secs(300);

/// The node's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub qps: i32,
    pub burst: i32,
    pub event_qps: i32,
    pub event_burst: i32,
    pub cluster_dns: bool,
    pub ports: Ports,
    /// The kubelet binary to run; in this process when none.
    pub binary: Option<PathBuf>,
}

impl Settings {
    /// The v1.25 defaults (kubeAPIQPS 5, burst 10, events the same), no
    /// clusterDNS.
    pub fn defaults(ports: Ports) -> Self {
        Settings {
            qps: 5,
            burst: 10,
            event_qps: 5,
            event_burst: 10,
            cluster_dns: false,
            ports,
            binary: None,
        }
    }
}

enum Runner {
    InProcess(Kubelet),
    Process(std::process::Child),
}

/// A running node.
pub struct NodeRig {
    pub api: Arc<TestApi>,
    pub ns: String,
    pub node: String,
    runner: Option<Runner>,
    // Dropped after the kubelet: the rig removes the pods' containers.
    _containerd: Containerd,
    pub dirs: NodeDirs,
}

fn host_ip() -> Option<String> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:9").ok()?;
    Some(s.local_addr().ok()?.ip().to_string())
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether the pod is Running with every container ready.
pub fn running_and_ready(p: &Pod) -> bool {
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    s.phase.as_deref() == Some("Running")
        && s.container_statuses
            .as_ref()
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready))
}

impl NodeRig {
    /// Starts containerd, the API server (double or real), and the kubelet;
    /// None where the test cannot run here (no root).
    pub async fn start(test: &str, s: &Settings) -> Option<NodeRig> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dirs = NodeDirs::new();
        let rig = Containerd::start(test)?;
        let api = Arc::new(TestApi::start().await);
        let ns = api.create_namespace("econ").await;
        let node = api.unique_name("econode");
        let root = make_cgroup_root(&rig, test);
        let extra = format!(
            "kubeAPIQPS: {}\nkubeAPIBurst: {}\neventRecordQPS: {}\neventBurst: {}\nmaxPods: 250\n",
            s.qps, s.burst, s.event_qps, s.event_burst
        );
        let cfg = config(&dirs, &root, s.ports, &extra);
        // The defaults where the test harness shortens them: syncFrequency
        // (1m); clusterDNS unless asked for.
        let body = std::fs::read_to_string(&cfg).expect("config");
        let body: String = body
            .lines()
            .filter(|l| !l.starts_with("syncFrequency:"))
            .filter(|l| s.cluster_dns || !l.starts_with("clusterDNS:"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&cfg, body).expect("config");
        let kubeconfig = api.kubeconfig_for_node(dirs.dir.path(), &node).await;
        let mut argv = args(&dirs, &rig, &cfg, &node);
        argv.push(format!("--kubeconfig={}", kubeconfig.display()));
        if let Some(ip) = host_ip() {
            argv.push(format!("--node-ip={ip}"));
        }
        // The kubelet's log at this verbosity (on stderr; to its log file
        // when it runs as its own process).
        if let Ok(v) = std::env::var("ECONOMY_LOG_V") {
            argv.push(format!("--v={v}"));
            if s.binary.is_none() {
                kubelet::logs::init_default();
                kubelet::logs::set_verbosity(v.parse().unwrap_or(2));
            }
        }
        let runner = match &s.binary {
            None => Runner::InProcess(Kubelet::start(argv, |srv| deps(&dirs, srv))),
            Some(bin) => {
                let log = std::fs::File::create(dirs.path("kubelet.log")).expect("log file");
                let child = std::process::Command::new(bin)
                    .args(argv.iter().skip(1))
                    .env("KUBELET_RS_LOG_ROOT", dirs.path("logs"))
                    .stdout(std::process::Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("start the kubelet binary");
                Runner::Process(child)
            }
        };
        api.wait_for::<Node>(None, &node, Duration::from_secs(60), node_ready)
            .await;
        Some(NodeRig {
            api,
            ns,
            node,
            runner: Some(runner),
            _containerd: rig,
            dirs,
        })
    }

    /// The kubelet's process id when it runs as its own process.
    pub fn pid(&self) -> Option<u32> {
        match &self.runner {
            Some(Runner::Process(c)) => Some(c.id()),
            _ => None,
        }
    }

    /// Stops the kubelet and removes what the test made on a real server.
    pub async fn stop(mut self) {
        match self.runner.take() {
            Some(Runner::InProcess(k)) => {
                let _ = k.stop().await;
            }
            Some(Runner::Process(mut c)) => stop_child(&mut c),
            None => {}
        }
        if self.api.is_real() {
            self.api.remove::<Node>(None, &self.node).await;
        }
        self.api.cleanup().await;
    }
}

fn stop_child(c: &mut std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(c.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    for _ in 0..100 {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = c.kill();
    let _ = c.wait();
}

impl Drop for NodeRig {
    fn drop(&mut self) {
        if let Some(Runner::Process(c)) = &mut self.runner {
            stop_child(c);
        }
    }
}

/// A pause pod bound to `node`.
pub fn pause_pod(ns: &str, name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "pause", "image": images().pause}],
        },
    }))
    .expect("pod")
}

/// What the watch saw of each pod.
#[derive(Debug, Default)]
struct Seen {
    /// The distinct resourceVersions of each pod.
    versions: HashMap<String, HashSet<String>>,
    /// When each pod was first Running and ready.
    ready_at: HashMap<String, Instant>,
    last: HashMap<String, Pod>,
}

/// One batch.
#[derive(Debug)]
pub struct Batch {
    pub names: Vec<String>,
    pub wall: Duration,
    pub latencies: Vec<Duration>,
    /// Each pod's changes after its creation, as the watch saw them.
    pub changes: HashMap<String, usize>,
    /// Each pod as last seen.
    pub last: HashMap<String, Pod>,
}

/// Creates `n` pause pods at once and waits until all are Running and
/// ready; then until the kubelet's writes have settled (`settle`).
pub async fn run_batch(rig: &NodeRig, n: usize, prefix: &str, settle: Duration) -> Batch {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let pods: Api<Pod> = Api::namespaced(rig.api.admin_client().await, &rig.ns);
    let mut w = watcher::watcher(pods, watcher::Config::default()).boxed();
    // Initial list done before the pods exist.
    while let Some(ev) = w.next().await {
        if matches!(ev, Ok(watcher::Event::InitDone)) {
            break;
        }
    }
    let watch = tokio::spawn({
        let seen = seen.clone();
        async move {
            while let Some(ev) = w.next().await {
                let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = ev else {
                    continue;
                };
                let name = p.metadata.name.clone().unwrap_or_default();
                let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(rv) = p.metadata.resource_version.clone() {
                    s.versions.entry(name.clone()).or_default().insert(rv);
                }
                if running_and_ready(&p) {
                    s.ready_at.entry(name.clone()).or_insert_with(Instant::now);
                }
                s.last.insert(name, p);
            }
        }
    });
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let _ = rig.api.clear_requests();
    let start = Instant::now();
    let mut created = HashMap::new();
    for name in &names {
        created.insert(name.clone(), Instant::now());
        rig.api.put(&pause_pod(&rig.ns, name, &rig.node)).await;
    }
    loop {
        let ready = seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ready_at
            .len();
        if ready >= n {
            break;
        }
        assert!(
            start.elapsed() < BATCH_LIMIT,
            "{ready} of {n} pods Running and ready after {BATCH_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let wall = start.elapsed();
    // Events go out at eventRecordQPS: a few a pod, so up to ~1.5 s each.
    let limit = Duration::from_secs(60) + Duration::from_millis(1500) * n as u32;
    settle_writes(rig, settle, limit).await;
    watch.abort();
    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    let mut latencies: Vec<Duration> = names
        .iter()
        .filter_map(|n| Some(*s.ready_at.get(n)? - *created.get(n)?))
        .collect();
    latencies.sort();
    Batch {
        names: names.clone(),
        wall,
        latencies,
        changes: names
            .iter()
            .map(|n| {
                let v = s.versions.get(n).map_or(0, HashSet::len);
                (n.clone(), v.saturating_sub(1))
            })
            .collect(),
        last: s.last.clone(),
    }
}

/// Waits until the double has seen no pod status or event write for
/// `quiet` (at most `limit`); on a real server, waits `quiet`.
async fn settle_writes(rig: &NodeRig, quiet: Duration, limit: Duration) {
    let writes = |log: &[RequestRecord]| {
        log.iter()
            .filter(|r| r.method != "GET" && r.resource.as_deref() != Some("leases"))
            .filter(|r| r.resource.as_deref() != Some("nodes"))
            .count()
    };
    let Ok(log) = rig.api.requests() else {
        tokio::time::sleep(quiet).await;
        return;
    };
    let mut count = writes(&log);
    let mut since = Instant::now();
    let deadline = Instant::now() + limit;
    while since.elapsed() < quiet && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = rig.api.requests().map(|l| writes(&l)).unwrap_or(count);
        if now != count {
            count = now;
            since = Instant::now();
        }
    }
}

/// `p`-th percentile (nearest rank) of sorted `v`.
pub fn percentile(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let k = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[k]
}

/// What an event request was about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventTarget {
    pub kind: String,
    pub name: String,
    pub reason: String,
}

fn target_of(e: &Value) -> EventTarget {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    EventTarget {
        kind: s(&e["involvedObject"]["kind"]),
        name: s(&e["involvedObject"]["name"]),
        reason: s(&e["reason"]),
    }
}

/// The requests of a batch, counted.
#[derive(Debug, Default)]
pub struct Counts {
    /// (method, resource[/subresource]) → requests.
    pub by_verb: BTreeMap<(String, String), usize>,
    /// Pod name → (method, resource[/subresource]) → requests naming it.
    pub per_pod: HashMap<String, BTreeMap<(String, String), usize>>,
    /// Event writes (POST, PATCH) by what they were about.
    pub event_writes: BTreeMap<EventTarget, (usize, usize)>,
}

impl Counts {
    /// Requests of `method` on `resource` naming pod `pod`.
    pub fn pod(&self, pod: &str, method: &str, resource: &str) -> usize {
        self.per_pod
            .get(pod)
            .and_then(|m| m.get(&(method.to_string(), resource.to_string())))
            .copied()
            .unwrap_or(0)
    }

    /// Event writes (POST + PATCH) about `kind`/`name`, by reason.
    pub fn events_on(&self, kind: &str, name: &str) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for (t, (post, patch)) in &self.event_writes {
            if t.kind == kind && t.name == name {
                *out.entry(t.reason.clone()).or_default() += post + patch;
            }
        }
        out
    }
}

/// Counts the kubelet's requests at the double (None on a real server).
/// PATCHes of events are attributed through the events the server holds.
pub async fn count_requests(rig: &NodeRig) -> Option<Counts> {
    let log = rig.api.requests().ok()?;
    let mut by_name: HashMap<(String, String), EventTarget> = HashMap::new();
    for ns in [rig.ns.as_str(), "default"] {
        for e in rig.api.list::<Event>(Some(ns)).await {
            let v = serde_json::to_value(&e).unwrap_or_default();
            by_name.insert(
                (ns.to_string(), e.metadata.name.clone().unwrap_or_default()),
                target_of(&v),
            );
        }
    }
    let mut c = Counts::default();
    let kubelet = format!("system:node:{}", rig.node);
    for r in log.iter().filter(|r| r.user.name == kubelet) {
        let Some(res) = r.resource.clone() else {
            continue;
        };
        let res = match &r.subresource {
            Some(sub) => format!("{res}/{sub}"),
            None => res,
        };
        let key = (r.method.clone(), res.clone());
        *c.by_verb.entry(key.clone()).or_default() += 1;
        if res.starts_with("pods")
            && r.namespace.as_deref() == Some(rig.ns.as_str())
            && let Some(name) = &r.name
        {
            *c.per_pod
                .entry(name.clone())
                .or_default()
                .entry(key)
                .or_default() += 1;
        }
        if res == "events" && (r.method == "POST" || r.method == "PATCH") {
            let target = if r.method == "POST" {
                serde_json::from_slice::<Value>(&r.body)
                    .map(|v| target_of(&v))
                    .ok()
            } else {
                by_name
                    .get(&(
                        r.namespace.clone().unwrap_or_default(),
                        r.name.clone().unwrap_or_default(),
                    ))
                    .cloned()
            };
            let t = target.unwrap_or(EventTarget {
                kind: "?".into(),
                name: r.name.clone().unwrap_or_default(),
                reason: "?".into(),
            });
            let slot = c.event_writes.entry(t).or_default();
            if r.method == "POST" {
                slot.0 += 1;
            } else {
                slot.1 += 1;
            }
        }
    }
    Some(c)
}
