//! The density figures (bench/density.sh): one batch of pause pods against
//! the API server double, or the real kube-apiserver KUBELET_RS_TEST_KUBECONFIG
//! names, with the kubelet binary as its own process. Prints figures only:
//! batch time, per-pod start latency (creation to Running and ready:
//! p50/p90/p99), API requests per pod by verb and resource, the kubelet's
//! RSS (idle, peak during the batch, with the pods running) and CPU.
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
use crate::support::process::{cpu_secs, rss_kib};

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
    let idle_rss = rss_kib(pid);
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
    node.stop().await;
}
