//! The density figures (bench/density.sh): one batch of pause pods against
//! the API server double, or the real kube-apiserver KUBELET_RS_TEST_KUBECONFIG
//! names, with the kubelet binary as its own process. Prints figures only:
//! batch time, per-pod start latency (creation to Running and ready:
//! p50/p90/p99), API requests per pod by verb and resource, the events by
//! object and reason, where the time went (the kubelet's own histograms:
//! CRI calls, pod worker syncs, PLEG relists), the kubelet's RSS (idle,
//! peak during the batch, with the pods running, and at steady state
//! 25 s later, anonymous memory and threads too) and CPU.
//!
//! Settings from the environment: DENSITY_PODS (30), DENSITY_QPS (5),
//! DENSITY_BURST (2 × QPS), DENSITY_EVENT_QPS / DENSITY_EVENT_BURST (the
//! client's), DENSITY_CLUSTER_DNS (1: clusterDNS 10.96.0.10), BENCH_KUBELET
//! (the binary; default: the one cargo built with this test).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::harness::Ports;
use crate::rig::{self, NodeRig, Settings};
use crate::support::process::{cpu_secs, rss_anon_kib, rss_kib, thread_names, threads};

fn env_num(key: &str, default: i64) -> i64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// `apiserver_request_total` of a real server, by (verb, resource[/sub]).
async fn server_request_totals(rig: &NodeRig) -> Option<BTreeMap<(String, String), f64>> {
    let client = rig.api.admin_client().await;
    let req = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let text = client.request_text(req).await.ok()?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |k: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let mut res = label("resource");
        let sub = label("subresource");
        if !sub.is_empty() {
            res = format!("{res}/{sub}");
        }
        *out.entry((label("verb"), res)).or_default() += value.parse::<f64>().unwrap_or(0.0);
    }
    Some(out)
}

pub async fn run() {
    let pods = env_num("DENSITY_PODS", 30).max(1) as usize;
    let qps = env_num("DENSITY_QPS", 5) as i32;
    let burst = env_num("DENSITY_BURST", 2 * qps as i64) as i32;
    let mut settings = Settings::defaults(Ports {
        main: 22330,
        read_only: 22331,
        healthz: 22332,
    });
    settings.qps = qps;
    settings.burst = burst;
    settings.event_qps = env_num("DENSITY_EVENT_QPS", 5) as i32;
    settings.event_burst = env_num("DENSITY_EVENT_BURST", 10) as i32;
    settings.cluster_dns = env_num("DENSITY_CLUSTER_DNS", 0) == 1;
    let binary = std::env::var_os("BENCH_KUBELET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kubelet")));
    settings.binary = Some(binary.clone());
    let Some(node) = NodeRig::start("density", &settings).await else {
        return;
    };
    let pid = node.pid().unwrap_or(0);
    let backend = if node.api.is_real() {
        "real kube-apiserver"
    } else {
        "API server double"
    };
    println!(
        "density: {pods} pause pods at once; kubeAPIQPS {qps} burst {burst}, eventRecordQPS {} burst {}; clusterDNS {}; {backend}; kubelet {} (pid {pid}); {} CPUs",
        settings.event_qps,
        settings.event_burst,
        if settings.cluster_dns { "set" } else { "none" },
        binary.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    save_heap_profile(settings.ports.main, "idle");
    let idle_rss = rss_kib(pid);
    let idle_anon = rss_anon_kib(pid);
    let idle_threads = threads(pid);
    let before = if node.api.is_real() {
        server_request_totals(&node).await
    } else {
        None
    };
    let peak = Arc::new(AtomicU64::new(idle_rss));
    let sampler = tokio::spawn({
        let peak = peak.clone();
        async move {
            loop {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let cpu0 = cpu_secs(pid);
    let t0 = Instant::now();
    let batch = rig::run_batch(&node, pods, "density", Duration::from_secs(3)).await;
    let cpu = cpu_secs(pid) - cpu0;
    let busy = t0.elapsed();
    sampler.abort();
    let l = &batch.latencies;
    println!("batch time: {:.2} s", secs(batch.wall));
    println!(
        "pod start latency: p50 {:.2} s, p90 {:.2} s, p99 {:.2} s",
        secs(rig::percentile(l, 50.0)),
        secs(rig::percentile(l, 90.0)),
        secs(rig::percentile(l, 99.0)),
    );
    println!(
        "kubelet RSS: idle {:.1} MiB, peak during batch {:.1} MiB, with {pods} pods {:.1} MiB",
        mib(idle_rss),
        mib(peak.load(Ordering::Relaxed)),
        mib(rss_kib(pid)),
    );
    println!(
        "kubelet anonymous RSS: idle {:.1} MiB, with {pods} pods {:.1} MiB; threads: idle {idle_threads}, with {pods} pods {}",
        mib(idle_anon),
        mib(rss_anon_kib(pid)),
        threads(pid),
    );
    println!(
        "kubelet CPU: {cpu:.2} s over {:.1} s (batch and settling), {:.0}% of one CPU",
        secs(busy),
        100.0 * cpu / secs(busy).max(0.001)
    );
    let by_verb: Option<BTreeMap<(String, String), f64>> = match rig::count_requests(&node).await {
        Some(c) => Some(c.by_verb.into_iter().map(|(k, v)| (k, v as f64)).collect()),
        None => match (before, server_request_totals(&node).await) {
            (Some(b), Some(a)) => Some(
                a.into_iter()
                    .map(|(k, v)| {
                        let was = b.get(&k).copied().unwrap_or(0.0);
                        (k, v - was)
                    })
                    .filter(|(_, v)| *v > 0.0)
                    .collect(),
            ),
            _ => None,
        },
    };
    match by_verb {
        Some(m) => {
            println!(
                "API requests per pod by verb and resource ({}):",
                if node.api.is_real() {
                    "apiserver_request_total, all clients"
                } else {
                    "the kubelet's, at the double"
                }
            );
            for ((verb, res), n) in m {
                println!("  {verb:<6} {res:<28} {:>6.2}", n / pods as f64);
            }
        }
        None => println!("API requests: not available"),
    }
    print_events(&node).await;
    // Steady state: after the allocator's decay time (10 s) and the idle
    // time of the blocking pool's threads (10 s), what the pods themselves
    // hold.
    tokio::time::sleep(STEADY_AFTER).await;
    println!(
        "kubelet steady, {} s later: RSS {:.1} MiB ({:.3} MiB per pod over idle), anonymous {:.1} MiB ({:.3} MiB per pod), threads {}",
        STEADY_AFTER.as_secs(),
        mib(rss_kib(pid)),
        mib(rss_kib(pid).saturating_sub(idle_rss)) / pods as f64,
        mib(rss_anon_kib(pid)),
        mib(rss_anon_kib(pid).saturating_sub(idle_anon)) / pods as f64,
        threads(pid),
    );
    println!("kubelet threads by name: {}", thread_names(pid));
    print_breakdown(settings.ports.read_only);
    save_heap_profile(settings.ports.main, &format!("steady-{pods}"));
    node.stop().await;
}

/// With DENSITY_HEAP_DIR set, saves the kubelet's live heap profile
/// (`/debug/pprof/heap`) there as `<name>.pb.gz`, to compare with
/// `go tool pprof -base idle.pb.gz <kubelet binary> steady-100.pb.gz`.
/// Finer samples: `_RJEM_MALLOC_CONF=lg_prof_sample:12` in the environment.
fn save_heap_profile(port: u16, name: &str) {
    let Some(dir) = std::env::var_os("DENSITY_HEAP_DIR").map(PathBuf::from) else {
        return;
    };
    let out = dir.join(format!("{name}.pb.gz"));
    let status = std::process::Command::new("curl")
        .args(["-skf", "-o"])
        .arg(&out)
        .arg(format!("https://127.0.0.1:{port}/debug/pprof/heap"))
        .status();
    match status {
        Ok(s) if s.success() => println!("heap profile: {}", out.display()),
        other => println!("heap profile {name}: not saved ({other:?})"),
    }
}

/// How long after the batch the steady-state memory is read.
const STEADY_AFTER: Duration = Duration::from_secs(25);

/// The events the kubelet recorded on the pods and on its Node, by reason:
/// objects (distinct events) and the sum of their counts.
async fn print_events(rig: &NodeRig) {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::{Api, ListParams};
    let client = rig.api.admin_client().await;
    let on_pods = Api::<Event>::namespaced(client.clone(), &rig.ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let on_node = Api::<Event>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(rig.node.as_str()));
    let mut by_reason: BTreeMap<(String, String), (usize, i64)> = BTreeMap::new();
    for e in on_pods.into_iter().chain(on_node) {
        let kind = e.involved_object.kind.clone().unwrap_or_default();
        let reason = e.reason.clone().unwrap_or_default();
        let entry = by_reason.entry((kind, reason)).or_default();
        entry.0 += 1;
        entry.1 += i64::from(e.count.unwrap_or(1));
    }
    println!("events by object kind and reason (objects, sum of counts):");
    for ((kind, reason), (objects, count)) in by_reason {
        println!("  {kind:<6} {reason:<28} {objects:>5} {count:>6}");
    }
}

/// Where the batch's time went, from the kubelet's own histograms on its
/// read-only port: count and mean of each operation (CRI calls by
/// operation_type, pod worker syncs, PLEG relists, pod start).
fn print_breakdown(port: u16) {
    let Some((200, text)) = crate::harness::http_get(port, "/metrics") else {
        println!("kubelet metrics: not available");
        return;
    };
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in text.lines() {
        let Some((name_labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = name_labels.split_once('{').unwrap_or((name_labels, ""));
        let (family, is_sum) = if let Some(f) = name.strip_suffix("_sum") {
            (f, true)
        } else if let Some(f) = name.strip_suffix("_count") {
            (f, false)
        } else {
            continue;
        };
        if !BREAKDOWN.contains(&family) {
            continue;
        }
        let op = labels
            .split(',')
            .find_map(|kv| kv.strip_prefix("operation_type=\""))
            .map(|v| v.trim_end_matches('}').trim_end_matches('"'))
            .unwrap_or("");
        let key = if op.is_empty() {
            family.to_string()
        } else {
            format!("{family}{{{op}}}")
        };
        let e = sums.entry(key).or_default();
        if is_sum {
            e.0 += value;
        } else {
            e.1 += value;
        }
    }
    println!("where the time went (the kubelet's histograms: count, mean, total):");
    for (key, (sum, count)) in sums.iter().filter(|(_, (_, c))| *c > 0.0) {
        println!(
            "  {key:<62} {count:>6.0} {:>8.3} s {sum:>8.2} s",
            sum / count
        );
    }
}

/// The histograms `print_breakdown` reads.
const BREAKDOWN: &[&str] = &[
    "kubelet_runtime_operations_duration_seconds",
    "kubelet_pod_worker_duration_seconds",
    "kubelet_pod_start_duration_seconds",
    "kubelet_pleg_relist_duration_seconds",
    "kubelet_image_pull_duration_seconds",
    "kubelet_cgroup_manager_duration_seconds",
];
