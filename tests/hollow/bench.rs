//! The hollow bench (bench/hollow.sh): N hollow nodes × M pods per node in
//! one `kubelet hollow` process (the built binary, so its RSS and CPU are
//! its own) against the API server double or the real kube-apiserver.
//! Printed figures only: time to all Nodes Ready, pod creation → Running
//! p50/p99, RSS (in total and per node), steady CPU per node, and the API
//! requests per node per minute by verb and resource.

use std::time::{Duration, Instant};

use crate::rig;
use crate::support::apiserver::TestApi;

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// RSS in bytes of `pid`.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// CPU time (user + system) of `pid`.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // Fields after the command: state is not numeric, so utime/stime are
    // the 11th and 12th numbers.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..100 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "bench: run by bench/hollow.sh"]
async fn hollow_bench() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nodes: u32 = env_or("HOLLOW_NODES", 100);
    let per_node: usize = env_or("HOLLOW_PODS", 10);
    let steady = Duration::from_secs(env_or("HOLLOW_STEADY_SECS", 60));
    let binary = std::env::var("HOLLOW_KUBELET").expect("HOLLOW_KUBELET names the kubelet binary");
    let api = TestApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = rig::hollow_kubeconfig(&api, dir.path()).await;
    let prefix = api.unique_name("hollow");
    let names: Vec<String> = (0..nodes).map(|i| format!("{prefix}-{i}")).collect();
    let log = match std::env::var_os("HOLLOW_LOG") {
        Some(path) => std::process::Stdio::from(std::fs::File::create(path).expect("log file")),
        None => std::process::Stdio::null(),
    };
    let started = Instant::now();
    let child = Child(
        std::process::Command::new(&binary)
            .arg("hollow")
            .arg(format!("--nodes={nodes}"))
            .arg(format!("--node-name-prefix={prefix}"))
            .arg(format!(
                "--state-dir={}",
                dir.path().join("state").display()
            ))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--max-pods={}", per_node.max(110)))
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start kubelet hollow"),
    );
    let pid = child.0.id();
    let limit = Duration::from_secs(120) + Duration::from_millis(500) * nodes;
    rig::wait_nodes_ready(&api, &names, limit).await;
    let to_ready = started.elapsed();
    let rss_idle = rss(pid);
    println!("{nodes} hollow nodes Ready in {to_ready:.1?} after the process started");
    println!(
        "RSS with no pods: {:.1} MiB ({:.2} MiB per node)",
        mib(rss_idle),
        mib(rss_idle) / nodes as f64
    );

    let ns = api.create_namespace("hollow").await;
    let limit = Duration::from_secs(120) + Duration::from_millis(200) * (nodes * per_node as u32);
    let batch = rig::run_batch(&api, &ns, &names, per_node, limit).await;
    println!(
        "{} pods ({per_node} per node) Running in {:.1?}: creation → Running p50 {:?}, p99 {:?}",
        batch.names.len(),
        batch.wall,
        rig::percentile(&batch.latencies, 50.0),
        rig::percentile(&batch.latencies, 99.0)
    );
    // Let the batch's status and event writes drain before the window.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let _ = api.clear_requests();
    let changes = rig::ChangeCounter::start(&api, &names).await;
    let (cpu0, t0) = (cpu(pid), Instant::now());
    tokio::time::sleep(steady).await;
    let (cpu1, window) = (cpu(pid), t0.elapsed());
    let (lease_writes, node_writes) = changes.stop();
    let rss_pods = rss(pid);
    println!(
        "RSS with the pods: {:.1} MiB ({:.2} MiB per node)",
        mib(rss_pods),
        mib(rss_pods) / nodes as f64
    );
    let used = cpu1.saturating_sub(cpu0).as_secs_f64() / window.as_secs_f64();
    println!(
        "steady CPU over {window:.0?}: {:.1}% of a core in total, {:.3}% per node",
        used * 100.0,
        used * 100.0 / nodes as f64
    );
    // As the API server's watch saw them (real server or double).
    let minutes = window.as_secs_f64() / 60.0;
    let per_node_rate = |m: &std::collections::HashMap<String, u64>| {
        let mut rates: Vec<f64> = names
            .iter()
            .map(|n| m.get(n).copied().unwrap_or(0) as f64 / minutes)
            .collect();
        rates.sort_by(f64::total_cmp);
        let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        (
            mean,
            rates.first().copied().unwrap_or(0.0),
            rates.last().copied().unwrap_or(0.0),
        )
    };
    let (mean, min, max) = per_node_rate(&lease_writes);
    println!(
        "Lease renewals per node per minute (watched): mean {mean:.2}, min {min:.2}, max {max:.2} (a Go kubelet: 6.00)"
    );
    let (mean, min, max) = per_node_rate(&node_writes);
    println!(
        "Node object writes per node per minute (watched): mean {mean:.2}, min {min:.2}, max {max:.2}"
    );
    match api.requests() {
        Ok(log) => {
            let counts = rig::count(&log, &names);
            let minutes = window.as_secs_f64() / 60.0;
            println!("API requests per node per minute (steady state):");
            for ((method, resource), n) in &counts.total {
                println!(
                    "  {method:6} {resource:20} {:.2}",
                    *n as f64 / nodes as f64 / minutes
                );
            }
        }
        Err(_) => println!("API request counts need the API server double; not shown"),
    }
    drop(child);
    if api.is_real() {
        for name in &names {
            api.remove::<k8s_openapi::api::coordination::v1::Lease>(Some("kube-node-lease"), name)
                .await;
            api.remove::<k8s_openapi::api::core::v1::Node>(None, name)
                .await;
        }
    }
    api.cleanup().await;
}
