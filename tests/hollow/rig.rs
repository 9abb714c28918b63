//! Hollow nodes against the API server double (or the real kube-apiserver
//! KUBELET_RS_TEST_KUBECONFIG names): start N nodes, bind M pods to each,
//! watch them reach Running, count the nodes' API requests.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;

use crate::support::apiserver::{KubeUser, RequestRecord, TestApi};

/// The user the hollow nodes' shared kubeconfig names (an admin, so one
/// identity serves every node).
pub const HOLLOW_USER: &str = "hollow-kubelets";

/// A kubeconfig for the hollow nodes in `dir`.
pub async fn hollow_kubeconfig(api: &TestApi, dir: &Path) -> std::path::PathBuf {
    api.write_kubeconfig(
        &dir.join("hollow.kubeconfig"),
        &KubeUser::Cert {
            user: HOLLOW_USER.into(),
            groups: vec!["system:masters".into()],
        },
    )
    .await
}

/// The kubelet configuration `args` give (flags only, as `kubelet hollow`
/// parses them after its own).
pub fn hollow_server<I: IntoIterator<Item = String>>(
    args: I,
) -> std::sync::Arc<kubelet::apis::config::server::KubeletServer> {
    match kubelet::app::command::build(args, &mut std::io::sink()) {
        Ok(kubelet::app::command::Outcome::Run { server, .. }) => server,
        other => panic!("kubelet flags: {other:?}"),
    }
}

/// The common set-up of a hollow-node test: the API server, a scratch
/// directory, the nodes' shared admin kubeconfig, their flags, options and
/// names. Turns the nodes' log on at `HOLLOW_LOG_V`'s verbosity.
pub struct Fleet {
    pub api: TestApi,
    pub dir: tempfile::TempDir,
    pub server: std::sync::Arc<kubelet::apis::config::server::KubeletServer>,
    pub options: kubelet::app::hollow::HollowOptions,
    pub names: Vec<String>,
}

/// `nodes` hollow nodes named `<prefix>-…` with `--max-pods=20` and the
/// further flags `extra`.
pub async fn fleet(prefix: &str, nodes: u32, extra: &[&str]) -> Fleet {
    if let Ok(v) = std::env::var("HOLLOW_LOG_V") {
        kubelet::logs::init_default();
        kubelet::logs::set_verbosity(v.parse().unwrap_or(2));
    }
    let api = TestApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = hollow_kubeconfig(&api, dir.path()).await;
    let server = hollow_server(
        [
            format!("--kubeconfig={}", kubeconfig.display()),
            "--max-pods=20".to_string(),
        ]
        .into_iter()
        .chain(extra.iter().map(|a| a.to_string())),
    );
    let options = kubelet::app::hollow::HollowOptions {
        nodes,
        prefix: api.unique_name(prefix),
        state_dir: dir.path().join("state"),
        ..Default::default()
    };
    let names = (0..nodes).map(|n| options.node_name(n)).collect();
    Fleet {
        api,
        dir,
        server,
        options,
        names,
    }
}

/// On a real API server, the hollow nodes' Leases and Nodes outlive the
/// test: removes them (nothing on the double, which goes with the test).
pub async fn remove_nodes(api: &TestApi, names: &[String]) {
    if !api.is_real() {
        return;
    }
    for name in names {
        api.remove::<Lease>(Some("kube-node-lease"), name).await;
        api.remove::<Node>(None, name).await;
    }
}

pub fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub fn pod_running(p: &Pod) -> bool {
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    s.phase.as_deref() == Some("Running")
        && s.container_statuses.as_ref().is_some_and(|cs| {
            !cs.is_empty()
                && cs.iter().all(|c| {
                    c.state
                        .as_ref()
                        .and_then(|st| st.running.as_ref())
                        .is_some()
                })
        })
}

/// Polls until every named Node reports the images its pods pulled: the
/// status change that follows the pods' start (the image list is read
/// every 30 s, as Go's image cache) has been written.
pub async fn wait_images_reported(api: &TestApi, names: &[String], limit: Duration) {
    let start = Instant::now();
    loop {
        let nodes: Vec<Node> = api.list(None).await;
        let missing: Vec<&String> = names
            .iter()
            .filter(|m| {
                !nodes.iter().any(|n| {
                    n.metadata.name.as_ref() == Some(*m)
                        && n.status
                            .as_ref()
                            .and_then(|s| s.images.as_ref())
                            .is_some_and(|i| !i.is_empty())
                })
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "no images in the status of {missing:?} after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls until every named Node is Ready; the time it took.
pub async fn wait_nodes_ready(api: &TestApi, names: &[String], limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let nodes: Vec<Node> = api.list(None).await;
        let ready = nodes
            .iter()
            .filter(|n| names.iter().any(|m| Some(m) == n.metadata.name.as_ref()) && node_ready(n))
            .count();
        if ready == names.len() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{ready} of {} hollow nodes Ready after {limit:?}",
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A pod bound to `node` (the image is never pulled from anywhere).
pub fn hollow_pod(
    ns: &str,
    name: &str,
    node: &str,
    annotations: serde_json::Value,
    restart: &str,
) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.8"}],
        },
    }))
    .expect("pod")
}

/// Each pod's creation → Running time.
#[derive(Debug)]
pub struct Batch {
    pub names: Vec<String>,
    pub wall: Duration,
    pub latencies: Vec<Duration>,
}

/// Creates `per_node` pods on each node at once (a few creations in
/// flight) and waits until all run.
pub async fn run_batch(
    api: &TestApi,
    ns: &str,
    nodes: &[String],
    per_node: usize,
    limit: Duration,
) -> Batch {
    let running_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let pods: Vec<(String, String)> = (0..per_node)
        .flat_map(|j| nodes.iter().map(move |n| (format!("{n}-p{j}"), n.clone())))
        .collect();
    // Only the batch's own pods count (others may run in the namespace).
    let batch: Arc<std::collections::HashSet<String>> =
        Arc::new(pods.iter().map(|(name, _)| name.clone()).collect());
    let api_pods: Api<Pod> = Api::namespaced(api.admin_client().await, ns);
    let mut w = watcher::watcher(api_pods, watcher::Config::default()).boxed();
    while let Some(ev) = w.next().await {
        if matches!(ev, Ok(watcher::Event::InitDone)) {
            break;
        }
    }
    let watch = tokio::spawn({
        let running_at = running_at.clone();
        let batch = batch.clone();
        async move {
            while let Some(ev) = w.next().await {
                let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = ev else {
                    continue;
                };
                let name = p.metadata.name.clone().unwrap_or_default();
                if batch.contains(&name) && pod_running(&p) {
                    let mut r = running_at.lock().unwrap_or_else(|e| e.into_inner());
                    r.entry(name).or_insert_with(Instant::now);
                }
            }
        }
    });
    let start = Instant::now();
    let created: HashMap<String, Instant> = futures::stream::iter(pods.iter())
        .map(|(name, node)| async move {
            let at = Instant::now();
            api.put(&hollow_pod(ns, name, node, json!({}), "Always"))
                .await;
            (name.clone(), at)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    loop {
        let n = running_at.lock().unwrap_or_else(|e| e.into_inner()).len();
        if n >= pods.len() {
            break;
        }
        assert!(
            start.elapsed() < limit,
            "{n} of {} pods Running after {limit:?}",
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let wall = start.elapsed();
    watch.abort();
    let r = running_at.lock().unwrap_or_else(|e| e.into_inner());
    let mut latencies: Vec<Duration> = created
        .iter()
        .filter_map(|(n, c)| Some(r.get(n)?.saturating_duration_since(*c)))
        .collect();
    latencies.sort();
    Batch {
        names: pods.into_iter().map(|(n, _)| n).collect(),
        wall,
        latencies,
    }
}

pub fn percentile(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let k = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[k]
}

/// Each node's lease renewTime (as the API has it).
pub async fn lease_renewals(api: &TestApi, nodes: &[String]) -> HashMap<String, String> {
    let leases: Vec<Lease> = api.list(Some("kube-node-lease")).await;
    leases
        .into_iter()
        .filter_map(|l| {
            let name = l.metadata.name.clone()?;
            nodes.contains(&name).then_some(())?;
            let renew = l.spec?.renew_time?;
            Some((name, format!("{:?}", renew.0)))
        })
        .collect()
}

/// `(method, resource[/subresource])`.
pub type Key = (String, String);

fn key(r: &RequestRecord) -> Option<Key> {
    let res = r.resource.clone()?;
    Some((
        r.method.clone(),
        match &r.subresource {
            Some(s) => format!("{res}/{s}"),
            None => res,
        },
    ))
}

/// The hollow nodes' requests by verb and resource, in total and per node
/// for what names a node (its Node, its Lease).
#[derive(Debug, Default)]
pub struct Counts {
    pub total: BTreeMap<Key, usize>,
    pub per_node: HashMap<String, BTreeMap<Key, usize>>,
}

/// The bodies of the node status writes of `node` in `log`, as text.
pub fn status_writes(log: &[RequestRecord], node: &str) -> Vec<String> {
    log.iter()
        .filter(|r| r.name.as_deref() == Some(node))
        .filter(|r| r.subresource.as_deref() == Some("status") && r.method != "GET")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

/// Counts the hollow user's requests in `log`.
pub fn count(log: &[RequestRecord], nodes: &[String]) -> Counts {
    let mut c = Counts::default();
    for r in log.iter().filter(|r| r.user.name == HOLLOW_USER) {
        let Some(k) = key(r) else { continue };
        *c.total.entry(k.clone()).or_default() += 1;
        let own = matches!(r.resource.as_deref(), Some("nodes" | "leases"));
        if own
            && let Some(name) = &r.name
            && nodes.contains(name)
        {
            *c.per_node
                .entry(name.clone())
                .or_default()
                .entry(k)
                .or_default() += 1;
        }
    }
    c
}

/// Counts, from the API server's watch, the writes to the named nodes'
/// Leases and Node objects while it runs: what the heartbeats cost as the
/// server saw them (works on a real kube-apiserver, where the request log
/// of the double is not available). Abort the handle and read the counts.
pub struct ChangeCounter {
    pub leases: Arc<Mutex<HashMap<String, u64>>>,
    pub nodes: Arc<Mutex<HashMap<String, u64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ChangeCounter {
    pub async fn start(api: &TestApi, names: &[String]) -> Self {
        let wanted: Arc<std::collections::HashSet<String>> =
            Arc::new(names.iter().cloned().collect());
        let client = api.admin_client().await;
        let leases: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let nodes: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let lease_api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
        let node_api: Api<Node> = Api::all(client);
        let t1 = tokio::spawn(count_changes(lease_api, wanted.clone(), leases.clone()));
        let t2 = tokio::spawn(count_changes(node_api, wanted, nodes.clone()));
        ChangeCounter {
            leases,
            nodes,
            tasks: vec![t1, t2],
        }
    }

    /// Stops counting; (Lease writes, Node writes) per node.
    pub fn stop(self) -> (HashMap<String, u64>, HashMap<String, u64>) {
        for t in &self.tasks {
            t.abort();
        }
        let take = |m: &Arc<Mutex<HashMap<String, u64>>>| {
            m.lock().unwrap_or_else(|e| e.into_inner()).clone()
        };
        (take(&self.leases), take(&self.nodes))
    }
}

async fn count_changes<K>(
    api: Api<K>,
    wanted: Arc<std::collections::HashSet<String>>,
    counts: Arc<Mutex<HashMap<String, u64>>>,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut w = watcher::watcher(api, watcher::Config::default()).boxed();
    let mut started = false;
    while let Some(ev) = w.next().await {
        match ev {
            Ok(watcher::Event::InitDone) => started = true,
            Ok(watcher::Event::Apply(o)) if started => {
                let name = o.meta().name.clone().unwrap_or_default();
                if wanted.contains(&name) {
                    *counts
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(name)
                        .or_default() += 1;
                }
            }
            _ => {}
        }
    }
}
