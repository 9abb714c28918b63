//! Probes through the kubelet on real containers: exec, httpGet, tcpSocket
//! and gRPC probes flip the readiness the kubelet reports (container
//! `ready`, pod Ready and ContainersReady on /pods), a liveness failure
//! restarts the container, a startup probe holds liveness and readiness
//! back until it succeeds, and the thresholds, periods and initial delays
//! are honoured: each flip happens no sooner than the spec allows and
//! within a period (plus the time a status takes to reach /pods).
//!
//! The tests switch probes by files in a hostPath directory the probed
//! command or server reads; the gRPC health server runs in the test
//! process, bound inside the pod's network namespace.

use std::collections::HashMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kubelet::kubelet::prober::grpc::health::health_check_response::ServingStatus;
use kubelet::kubelet::prober::grpc::health::health_server::{Health, HealthServer};
use kubelet::kubelet::prober::grpc::health::{HealthCheckRequest, HealthCheckResponse};

use crate::harness;
use crate::node::*;
use crate::support::containerd::images;

const START: Duration = Duration::from_secs(60);
/// What a result takes at most to reach /pods once the prober has it
/// (status manager, /pods, our 100 ms polling), with room for a loaded
/// 2-core machine.
const SLACK: Duration = Duration::from_secs(4);

fn touch(dir: &Path, file: &str) {
    std::fs::write(dir.join(file), "ok\n").expect("touch");
}

fn rm(dir: &Path, file: &str) {
    let _ = std::fs::remove_file(dir.join(file));
}

/// `seen - from` lies in `[lo, hi]` (lo may be zero).
fn within(what: &str, from: Instant, seen: Instant, lo: Duration, hi: Duration) {
    let took = seen.saturating_duration_since(from);
    assert!(
        took >= lo && took <= hi,
        "{what}: took {took:?}, the spec allows {lo:?} to {hi:?}"
    );
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Every probe case at the same time on the one kubelet.
pub async fn probes(node: &Node) {
    tokio::join!(
        exec_probes_with_startup_gate(node),
        initial_delay(node),
        http_probes(node),
        tcp_probes(node),
        grpc_probes(node),
    );
}

/// Exec probes: the startup probe holds readiness and (failing) liveness
/// back; then readiness needs successThreshold successes and
/// failureThreshold failures; a liveness failure restarts the container.
async fn exec_probes_with_startup_gate(node: &Node) {
    let dir = node.host_dir("gate");
    touch(&dir, "ready");
    let bb = &images().busybox;
    node.write_pod(
        "gate",
        &format!(
            "  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: probe, hostPath: {{path: {dir}, type: Directory}}}}
  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
    volumeMounts: [{{name: probe, mountPath: /probe}}]
    startupProbe:
      exec: {{command: [cat, /probe/started]}}
      periodSeconds: 1
      failureThreshold: 600
    readinessProbe:
      exec: {{command: [cat, /probe/ready]}}
      periodSeconds: 1
      successThreshold: 2
      failureThreshold: 3
    livenessProbe:
      exec: {{command: [cat, /probe/alive]}}
      periodSeconds: 1
      failureThreshold: 2
",
            dir = dir.display()
        ),
    );
    node.wait("gate", START, "running", |p| harness::is_running(p, "main"))
        .await;
    // Not started: not ready although readiness would pass, and not
    // restarted although liveness would fail.
    node.holds("gate", secs(4), "not started, not ready, no restart", |p| {
        !started(p, "main") && !ready(p, "main") && !pod_ready(p, true) && restarts(p, "main") == 0
    })
    .await;

    touch(&dir, "alive");
    let t0 = Instant::now();
    touch(&dir, "started");
    let (_, seen) = node
        .wait("gate", secs(1) + SLACK, "started", |p| started(p, "main"))
        .await;
    within("startup success", t0, seen, Duration::ZERO, secs(1) + SLACK);
    // Two successes in a row after the start. No lower bound: while a
    // container is not ready, every status update asks its readiness
    // worker for an immediate run besides the periodic ones (as Go's).
    let (_, seen) = node
        .wait("gate", secs(3) + SLACK, "ready", |p| pod_ready(p, true))
        .await;
    within(
        "ready after startup",
        t0,
        seen,
        Duration::ZERO,
        secs(3) + SLACK,
    );

    // Three failures in a row: between two and three periods.
    let t1 = Instant::now();
    rm(&dir, "ready");
    let (p, seen) = node
        .wait("gate", secs(3) + SLACK, "not ready", |p| {
            pod_ready(p, false)
        })
        .await;
    within(
        "not ready after 3 failures",
        t1,
        seen,
        secs(2),
        secs(3) + SLACK,
    );
    assert_eq!(restarts(&p, "main"), 0, "readiness never restarts");
    assert!(condition(&p, "Initialized"), "still initialized");

    let t2 = Instant::now();
    touch(&dir, "ready");
    let (_, seen) = node
        .wait("gate", secs(2) + SLACK, "ready again", |p| {
            pod_ready(p, true)
        })
        .await;
    within(
        "ready after 2 successes",
        t2,
        seen,
        Duration::ZERO,
        secs(2) + SLACK,
    );

    // Liveness: two failures restart the container (grace period 1 s).
    let t3 = Instant::now();
    rm(&dir, "alive");
    let (p, seen) = node
        .wait("gate", secs(2 + 1) + SLACK, "restarted", |p| {
            restarts(p, "main") >= 1
        })
        .await;
    touch(&dir, "alive");
    within("liveness restart", t3, seen, secs(1), secs(3) + SLACK);
    let last = cstatus(&p, "main")
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("the killed container is the last state");
    assert_eq!(last.exit_code, 137, "sleep ignores SIGTERM: killed");
    // The new container starts over: started, then ready, one restart.
    let (p, _) = node
        .wait("gate", START, "ready after the restart", |p| {
            pod_ready(p, true) && started(p, "main")
        })
        .await;
    assert_eq!(restarts(&p, "main"), 1);
    node.remove_pod("gate");
}

/// initialDelaySeconds: no probe result before the delay after the
/// container started; ready within a period after it.
async fn initial_delay(node: &Node) {
    let bb = &images().busybox;
    node.write_pod(
        "delay",
        &format!(
            "  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
    readinessProbe:
      exec: {{command: ['true']}}
      initialDelaySeconds: 5
      periodSeconds: 1
"
        ),
    );
    let (p, _) = node
        .wait("delay", START, "running", |p| {
            harness::is_running(p, "main")
        })
        .await;
    let since = started_at(&p, "main").expect("startedAt");
    let (_, _) = node
        .wait("delay", START, "ready", |p| pod_ready(p, true))
        .await;
    let now = std::time::SystemTime::now();
    let after = now.duration_since(since).unwrap_or_default();
    // startedAt is truncated to the second: the start lies in [since, since+1).
    assert!(
        after >= secs(5) && after <= secs(5 + 1 + 1) + SLACK,
        "ready {after:?} after the start second; the spec asks for 5 s to 6 s"
    );
    node.remove_pod("delay");
}

/// httpGet on the httpd image: readiness on a named port flips with the
/// page; a liveness 404 restarts the container.
async fn http_probes(node: &Node) {
    let dir = node.host_dir("web");
    touch(&dir, "healthz.html");
    touch(&dir, "live.html");
    let httpd = &images().httpd_e2e;
    node.write_pod(
        "web",
        &format!(
            "  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: docs, hostPath: {{path: {dir}, type: Directory}}}}
  containers:
  - name: web
    image: {httpd}
    ports: [{{name: http, containerPort: 80}}]
    volumeMounts: [{{name: docs, mountPath: /usr/local/apache2/htdocs}}]
    readinessProbe:
      httpGet: {{path: /healthz.html, port: http}}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      httpGet:
        path: /live.html
        port: 80
        httpHeaders: [{{name: X-Probe, value: live}}]
      periodSeconds: 1
      failureThreshold: 2
",
            dir = dir.display()
        ),
    );
    node.wait("web", START, "ready", |p| pod_ready(p, true))
        .await;
    probe_metrics_count_the_probes(node).await;
    let t = Instant::now();
    rm(&dir, "healthz.html");
    let (_, seen) = node
        .wait("web", secs(1) + SLACK, "not ready on 404", |p| {
            pod_ready(p, false)
        })
        .await;
    within(
        "http readiness failure",
        t,
        seen,
        Duration::ZERO,
        secs(1) + SLACK,
    );
    touch(&dir, "healthz.html");
    node.wait("web", secs(1) + SLACK, "ready again", |p| {
        pod_ready(p, true)
    })
    .await;

    let t = Instant::now();
    rm(&dir, "live.html");
    let (_, seen) = node
        .wait("web", secs(3) + SLACK, "restarted on 404", |p| {
            restarts(p, "web") >= 1
        })
        .await;
    touch(&dir, "live.html");
    within("http liveness restart", t, seen, secs(1), secs(3) + SLACK);
    let (p, _) = node
        .wait("web", START, "ready after the restart", |p| {
            pod_ready(p, true)
        })
        .await;
    assert_eq!(restarts(&p, "web"), 1);
    node.remove_pod("web");
}

/// /metrics/probes (both ports, as Go serves it) counts the probes run,
/// with Go's labels, and carries the process start time; /metrics does
/// not carry the probe families but does carry the process ones.
async fn probe_metrics_count_the_probes(node: &Node) {
    let port = node.ports.read_only;
    let (status, probes) =
        tokio::task::spawn_blocking(move || harness::http_get(port, "/metrics/probes"))
            .await
            .expect("scrape")
            .expect("an answer");
    assert_eq!(status, 200);
    let series = probes
        .lines()
        .find(|l| {
            l.starts_with("prober_probe_total{container=\"web\",")
                && l.contains("probe_type=\"Readiness\",result=\"successful\"}")
        })
        .unwrap_or_else(|| panic!("no successful readiness series for web: {probes}"));
    assert!(series.contains(",pod_uid=\""), "{series}");
    let count: f64 = series
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(count >= 1.0, "{series}");
    assert!(
        probes.contains("\n# TYPE process_start_time_seconds gauge\n"),
        "{probes}"
    );
    let (_, metrics) = tokio::task::spawn_blocking(move || harness::http_get(port, "/metrics"))
        .await
        .expect("scrape")
        .expect("an answer");
    assert!(
        metrics.contains(
            "kubelet_http_requests_total{long_running=\"false\",method=\"GET\",path=\"metrics/probes\",server_type=\"readonly\"} "
        ),
        "the /metrics/probes scrape is counted: {metrics}"
    );
    assert!(
        !metrics.contains("prober_probe_total"),
        "probe families only on /metrics/probes"
    );
    for family in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "kubelet_node_name",
        "kubelet_pleg_relist_duration_seconds",
        "kubelet_running_pods",
        "kubelet_running_containers",
        "kubelet_started_pods_total",
        "kubelet_started_containers_total",
        "kubelet_pod_start_duration_seconds",
        "kubelet_pod_worker_duration_seconds",
        "kubelet_pod_worker_start_duration_seconds",
        "kubelet_containers_per_pod_count",
        "kubelet_http_requests_duration_seconds",
        "kubelet_http_inflight_requests",
        "kubelet_cgroup_manager_duration_seconds",
        "kubelet_graceful_shutdown_start_time_seconds",
        "kubelet_graceful_shutdown_end_time_seconds",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {family} ")),
            "{family} missing"
        );
    }
}

/// tcpSocket: readiness follows a listener the test switches on and off;
/// liveness on another port restarts the container when it goes.
async fn tcp_probes(node: &Node) {
    let dir = node.host_dir("tcp");
    touch(&dir, "live");
    let bb = &images().busybox;
    // serve FILE PORT: listen on PORT while /probe/FILE exists.
    let script = "serve() { while true; do if [ -f /probe/$1 ]; then httpd -f -p $2 -h /tmp & p=$!; while [ -f /probe/$1 ]; do sleep 0.1; done; kill $p; wait $p; fi; sleep 0.1; done; }; serve listen 9000 & serve live 9001 & wait";
    node.write_pod(
        "tcp",
        &format!(
            "  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: probe, hostPath: {{path: {dir}, type: Directory}}}}
  containers:
  - name: main
    image: {bb}
    command: [sh, -c, '{script}']
    volumeMounts: [{{name: probe, mountPath: /probe}}]
    readinessProbe:
      tcpSocket: {{port: 9000}}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      tcpSocket: {{port: 9001}}
      periodSeconds: 1
      failureThreshold: 3
",
            dir = dir.display()
        ),
    );
    node.wait("tcp", START, "running", |p| harness::is_running(p, "main"))
        .await;
    node.holds("tcp", secs(2), "not ready with nothing listening", |p| {
        pod_ready(p, false)
    })
    .await;
    let t = Instant::now();
    touch(&dir, "listen");
    let (_, seen) = node
        .wait("tcp", secs(1) + SLACK, "ready once listening", |p| {
            pod_ready(p, true)
        })
        .await;
    within("tcp ready", t, seen, Duration::ZERO, secs(1) + SLACK);
    rm(&dir, "listen");
    node.wait("tcp", secs(1) + SLACK, "not ready once closed", |p| {
        pod_ready(p, false)
    })
    .await;
    let t = Instant::now();
    rm(&dir, "live");
    let (_, seen) = node
        .wait("tcp", secs(4) + SLACK, "restarted", |p| {
            restarts(p, "main") >= 1
        })
        .await;
    touch(&dir, "live");
    within("tcp liveness restart", t, seen, secs(2), secs(4) + SLACK);
    node.remove_pod("tcp");
}

/// A gRPC health service whose answers per service name the test sets.
#[derive(Clone, Default)]
struct HealthState(Arc<Mutex<HashMap<String, ServingStatus>>>);

impl HealthState {
    fn set(&self, service: &str, status: ServingStatus) {
        self.0
            .lock()
            .expect("lock")
            .insert(service.to_string(), status);
    }
}

#[tonic::async_trait]
impl Health for HealthState {
    async fn check(
        &self,
        req: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        let service = req.into_inner().service;
        let status = self
            .0
            .lock()
            .expect("lock")
            .get(&service)
            .copied()
            .ok_or_else(|| tonic::Status::not_found(service))?;
        Ok(tonic::Response::new(HealthCheckResponse {
            status: status as i32,
        }))
    }

    type WatchStream =
        Pin<Box<dyn futures::Stream<Item = Result<HealthCheckResponse, tonic::Status>> + Send>>;

    async fn watch(
        &self,
        _req: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("watch"))
    }
}

/// A listening socket created inside the network namespace of `pid`.
fn listen_in_netns(pid: u32, port: u16) -> std::net::TcpListener {
    std::thread::spawn(move || {
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).expect("open netns");
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let l = std::net::TcpListener::bind(("0.0.0.0", port)).expect("bind in the pod");
        l.set_nonblocking(true).expect("nonblocking");
        l
    })
    .join()
    .expect("netns thread")
}

/// gRPC: readiness and liveness through grpc.health.v1 on the pod's IP.
async fn grpc_probes(node: &Node) {
    let bb = &images().busybox;
    node.write_pod(
        "rpc",
        &format!(
            "  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
    ports: [{{containerPort: 9090}}]
    readinessProbe:
      grpc: {{port: 9090, service: ready}}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      grpc: {{port: 9090, service: live}}
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 2
"
        ),
    );
    let (p, _) = node
        .wait("rpc", START, "running", |p| harness::is_running(p, "main"))
        .await;
    // Nothing serves yet: not ready (liveness fails too, so start serving
    // before it may restart the container: two failures after 1 s).
    let pid = node.container_pid(&p, "main").await;
    let health = HealthState::default();
    health.set("ready", ServingStatus::NotServing);
    health.set("live", ServingStatus::Serving);
    let listener = tokio::net::TcpListener::from_std(listen_in_netns(pid, 9090)).expect("tokio");
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn({
        let health = health.clone();
        let stop = stop.clone();
        async move {
            let _ = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(
                    HealthServer::new(health),
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    stop.cancelled_owned(),
                )
                .await;
        }
    });
    node.holds("rpc", secs(2), "not ready while NOT_SERVING", |p| {
        pod_ready(p, false)
    })
    .await;
    let t = Instant::now();
    health.set("ready", ServingStatus::Serving);
    let (_, seen) = node
        .wait("rpc", secs(1) + SLACK, "ready when SERVING", |p| {
            pod_ready(p, true)
        })
        .await;
    within("grpc ready", t, seen, Duration::ZERO, secs(1) + SLACK);
    health.set("ready", ServingStatus::NotServing);
    node.wait("rpc", secs(1) + SLACK, "not ready again", |p| {
        pod_ready(p, false)
    })
    .await;
    health.set("ready", ServingStatus::Serving);

    let t = Instant::now();
    health.set("live", ServingStatus::NotServing);
    let (_, seen) = node
        .wait("rpc", secs(3) + SLACK, "restarted", |p| {
            restarts(p, "main") >= 1
        })
        .await;
    health.set("live", ServingStatus::Serving);
    within("grpc liveness restart", t, seen, secs(1), secs(3) + SLACK);
    node.wait("rpc", START, "ready after the restart", |p| {
        pod_ready(p, true)
    })
    .await;
    node.remove_pod("rpc");
    stop.cancel();
    let _ = server.await;
}
