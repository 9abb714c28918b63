//! The prober against a real containerd (deploy/rig): exec, httpGet,
//! tcpSocket and gRPC probes of real containers flip readiness, a liveness
//! failure produces the `Failure` result the runtime manager restarts on
//! (with an `Unhealthy` event), a new container resets the worker, and the
//! startup probe holds the others back.
//!
//! The kubelet's status manager is not part of this test: a small refresher
//! builds each pod's API status from CRI (as the syncLoop would) and passes
//! it through `ProberManager::update_pod_status`, as the Go kubelet does.

mod support;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodStatus};
use kubelet::cri::{RemoteRuntimeService, RuntimeService, api};
use kubelet::kubelet::container::ContainerId;
use kubelet::kubelet::prober::grpc::health::health_check_response::ServingStatus;
use kubelet::kubelet::prober::grpc::health::health_server::{Health, HealthServer};
use kubelet::kubelet::prober::grpc::health::{HealthCheckRequest, HealthCheckResponse};
use kubelet::kubelet::prober::{
    CriCommandRunner, EventRecorder, EventType, PodStatusProvider, ProbeResult, ProberDeps,
    ProberManager, ProberOptions,
};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use support::containerd::{Containerd, images};
use support::cri_requests::{self, container};
use support::eventually;

// ---------------------------------------------------------------------------
// Test parts: an event recorder that keeps events, and pod statuses from CRI.

#[derive(Default)]
struct Events(Mutex<Vec<(ObjectReference, EventType, String, String)>>);

impl EventRecorder for Events {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        self.0.lock().expect("lock").push((
            object.clone(),
            event_type,
            reason.to_string(),
            message.to_string(),
        ));
    }
}

impl Events {
    /// Messages of events about `container` of pod `pod`, with their reasons.
    fn about(&self, pod: &str, container: &str) -> Vec<(String, String)> {
        let field = format!("spec.containers{{{container}}}");
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|(o, ..)| {
                o.name.as_deref() == Some(pod) && o.field_path.as_deref() == Some(field.as_str())
            })
            .map(|(_, t, r, m)| {
                assert_eq!(*t, EventType::Warning, "probe events are warnings");
                (r.clone(), m.clone())
            })
            .collect()
    }
}

/// Container name → CRI container ID, in spec order.
type Containers = Vec<(String, String)>;

/// One pod the refresher follows.
struct Tracked {
    pod_ip: String,
    containers: Containers,
    status: Option<PodStatus>,
}

/// The latest API status of each pod, rebuilt from CRI every 200 ms.
#[derive(Default)]
struct Statuses(Mutex<HashMap<String, Tracked>>);

impl PodStatusProvider for Statuses {
    fn get_pod_status(&self, pod_uid: &str) -> Option<PodStatus> {
        self.0.lock().expect("lock").get(pod_uid)?.status.clone()
    }
}

impl Statuses {
    fn track(&self, uid: &str, pod_ip: &str, containers: &[(&str, &str)]) {
        self.0.lock().expect("lock").insert(
            uid.to_string(),
            Tracked {
                pod_ip: pod_ip.to_string(),
                containers: containers
                    .iter()
                    .map(|(n, i)| (n.to_string(), i.to_string()))
                    .collect(),
                status: None,
            },
        );
    }

    fn replace(&self, uid: &str, name: &str, id: &str) {
        let mut all = self.0.lock().expect("lock");
        let t = all.get_mut(uid).expect("tracked pod");
        for (n, i) in &mut t.containers {
            if n == name {
                *i = id.to_string();
            }
        }
    }

    /// `started` and `ready` of a container in the latest status.
    fn flags(&self, uid: &str, name: &str) -> Option<(bool, bool)> {
        let all = self.0.lock().expect("lock");
        let status = all.get(uid)?.status.as_ref()?;
        let c = status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == name)?;
        Some((c.started == Some(true), c.ready))
    }

    async fn refresh(&self, rt: &dyn RuntimeService, manager: &ProberManager) {
        let pods: Vec<(String, String, Containers)> = self
            .0
            .lock()
            .expect("lock")
            .iter()
            .map(|(uid, t)| (uid.clone(), t.pod_ip.clone(), t.containers.clone()))
            .collect();
        for (uid, ip, containers) in pods {
            let mut statuses = Vec::new();
            for (name, id) in &containers {
                let Ok(resp) = rt.container_status(id, false).await else {
                    continue;
                };
                let Some(s) = resp.status else { continue };
                let state = if s.state == api::ContainerState::ContainerRunning as i32 {
                    let ts = jiff::Timestamp::from_nanosecond(i128::from(s.started_at))
                        .expect("start time");
                    serde_json::json!({"running": {"startedAt": ts.to_string()}})
                } else if s.state == api::ContainerState::ContainerExited as i32 {
                    serde_json::json!({"terminated": {"exitCode": s.exit_code}})
                } else {
                    serde_json::json!({"waiting": {"reason": "ContainerCreating"}})
                };
                statuses.push(serde_json::json!({
                    "name": name,
                    "containerID": format!("containerd://{id}"),
                    "image": "busybox",
                    "imageID": "",
                    "ready": false,
                    "restartCount": 0,
                    "state": state,
                }));
            }
            let mut status: PodStatus = serde_json::from_value(serde_json::json!({
                "phase": "Running",
                "podIP": ip,
                "containerStatuses": statuses,
            }))
            .expect("pod status");
            manager.update_pod_status(&uid, &mut status);
            if let Some(t) = self.0.lock().expect("lock").get_mut(&uid) {
                t.status = Some(status);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Set-up: a rig, the CRI client, and the prober manager started on a task set.

struct Harness {
    rig: Containerd,
    rt: Arc<RemoteRuntimeService>,
    statuses: Arc<Statuses>,
    events: Arc<Events>,
    manager: ProberManager,
    tasks: TaskSet,
}

impl Harness {
    async fn start(test: &str) -> Option<Harness> {
        let rig = Containerd::start(test)?;
        let rt = Arc::new(
            RemoteRuntimeService::connect(&rig.endpoint(), rig.timeout())
                .await
                .unwrap_or_else(|e| panic!("connect: {e}\n{}", rig.log())),
        );
        let statuses = Arc::new(Statuses::default());
        let events = Arc::new(Events::default());
        let (manager, _streams) = ProberManager::new(ProberDeps {
            status: statuses.clone(),
            runner: Arc::new(CriCommandRunner::new(rt.clone())),
            recorder: events.clone(),
            clock: Arc::new(RealClock),
            options: ProberOptions::default(),
        });
        let tasks = TaskSet::new();
        manager.start(&tasks);
        let (s, r, m, token) = (statuses.clone(), rt.clone(), manager.clone(), tasks.token());
        tasks.spawn("status-refresher", async move {
            loop {
                s.refresh(r.as_ref(), &m).await;
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        });
        Some(Harness {
            rig,
            rt,
            statuses,
            events,
            manager,
            tasks,
        })
    }

    /// Runs the pod's sandbox and its containers (each `(name, image,
    /// command)`), tracks it, and hands it to the prober.
    async fn run_pod(&self, pod: &Pod, containers: &[(&str, &str, &[&str])]) -> RunningPod {
        let name = pod.metadata.name.clone().expect("name");
        let cri = cri_requests::pod(&self.rig, &name, "probes");
        // The API pod takes the UID the sandbox carries.
        let uid = cri.uid.clone();
        let sandbox = self
            .rt
            .run_pod_sandbox(&cri.config, "")
            .await
            .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", self.rig.log()));
        let ip = self
            .rt
            .pod_sandbox_status(&sandbox, false)
            .await
            .expect("sandbox status")
            .status
            .and_then(|s| s.network)
            .map(|n| n.ip)
            .expect("pod IP");
        let mut ids = Vec::new();
        for (cname, image, cmd) in containers {
            let config = container(&cri, cname, image, cmd);
            let id = self
                .rt
                .create_container(&sandbox, &config, &cri.config)
                .await
                .expect("CreateContainer");
            self.rt.start_container(&id).await.expect("StartContainer");
            ids.push((cname.to_string(), id));
        }
        let pairs: Vec<(&str, &str)> = ids.iter().map(|(n, i)| (n.as_str(), i.as_str())).collect();
        self.statuses.track(&uid, &ip, &pairs);
        let mut api_pod = pod.clone();
        api_pod.metadata.uid = Some(uid.clone());
        self.manager.add_pod(&api_pod);
        RunningPod {
            api: api_pod,
            cri,
            sandbox,
            uid,
            ip,
            ids: ids.into_iter().collect(),
        }
    }

    /// Runs `sh -c script` in a container.
    async fn sh(&self, id: &str, script: &str) {
        let cmd = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        self.rt
            .exec_sync(id, &cmd, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("exec {script}: {e}"));
    }

    /// Waits until `started`/`ready` of the container read `want`.
    async fn wait_flags(&self, p: &RunningPod, name: &str, want: (bool, bool), within: Duration) {
        let got = eventually(within, || async {
            (self.statuses.flags(&p.uid, name) == Some(want)).then_some(())
        })
        .await;
        assert!(
            got.is_some(),
            "{}/{name}: want (started, ready) = {want:?}, have {:?}; events {:?}",
            p.api.metadata.name.as_deref().unwrap_or(""),
            self.statuses.flags(&p.uid, name),
            self.events
                .about(p.api.metadata.name.as_deref().unwrap_or(""), name)
        );
    }

    async fn stop(self) {
        self.tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(30))
            .await
            .expect("prober workers stop");
        drop(self.rig);
    }
}

struct RunningPod {
    api: Pod,
    cri: cri_requests::Pod,
    sandbox: String,
    uid: String,
    ip: String,
    ids: HashMap<String, String>,
}

impl RunningPod {
    fn id(&self, name: &str) -> &str {
        self.ids.get(name).expect("container")
    }

    fn cid(&self, name: &str) -> ContainerId {
        ContainerId::new("containerd", self.id(name))
    }
}

fn api_pod(name: &str, spec: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "probes", "uid": "set-at-run"},
        "spec": spec,
    }))
    .expect("pod")
}

fn exec(cmd: &[&str], extra: serde_json::Value) -> serde_json::Value {
    let mut p = serde_json::json!({"exec": {"command": cmd}, "periodSeconds": 1});
    if let (Some(o), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    p
}

const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_probes_readiness_liveness_startup_on_real_containers() {
    let Some(h) = Harness::start("exec_probes_readiness_liveness_startup_on_real_containers").await
    else {
        return;
    };
    let busybox = images().busybox.as_str();
    let sleep: &[&str] = &["sleep", "3600"];

    // --- readiness follows a file; liveness fails when another appears.
    let spec = serde_json::json!({"containers": [{
        "name": "app",
        "readinessProbe": exec(&["test", "-f", "/tmp/ready"], serde_json::json!({"failureThreshold": 1})),
        "livenessProbe": exec(&["sh", "-c", "test ! -f /tmp/dead"], serde_json::json!({"failureThreshold": 2})),
    }]});
    let p = h
        .run_pod(&api_pod("exec", spec), &[("app", busybox, sleep)])
        .await;
    h.wait_flags(&p, "app", (true, false), WAIT).await;
    h.sh(p.id("app"), "touch /tmp/ready").await;
    h.wait_flags(&p, "app", (true, true), WAIT).await;
    h.sh(p.id("app"), "rm /tmp/ready").await;
    h.wait_flags(&p, "app", (true, false), WAIT).await;
    assert!(
        h.events
            .about("exec", "app")
            .contains(&("Unhealthy".into(), "Readiness probe failed: ".into())),
        "{:?}",
        h.events.about("exec", "app")
    );

    let live = h.manager.liveness_results();
    assert_eq!(live.get(&p.cid("app")), Some(ProbeResult::Success));
    let touched = Instant::now();
    h.sh(p.id("app"), "touch /tmp/dead").await;
    let failed = eventually(WAIT, || async {
        (live.get(&p.cid("app")) == Some(ProbeResult::Failure)).then(Instant::now)
    })
    .await
    .expect("liveness fails");
    // Two failures one period apart: never sooner than one period.
    assert!(
        failed - touched >= Duration::from_millis(900),
        "failed after {:?}",
        failed - touched
    );
    let liveness_events = |h: &Harness| {
        h.events
            .about("exec", "app")
            .into_iter()
            .filter(|(_, m)| m.starts_with("Liveness"))
            .collect::<Vec<_>>()
    };
    let seen = liveness_events(&h);
    assert_eq!(
        seen,
        vec![
            (
                "Unhealthy".to_string(),
                "Liveness probe failed: ".to_string()
            );
            2
        ]
    );
    // On hold until the container is replaced: no more probing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(liveness_events(&h).len(), 2);
    assert_eq!(live.get(&p.cid("app")), Some(ProbeResult::Failure));

    // The runtime manager's restart, by hand: a new container replaces it.
    h.rt.stop_container(p.id("app"), 0).await.expect("stop");
    let mut config = container(&p.cri, "app", busybox, sleep);
    config.metadata.as_mut().expect("metadata").attempt = 1;
    config.log_path = "app/1.log".into();
    let new_id =
        h.rt.create_container(&p.sandbox, &config, &p.cri.config)
            .await
            .expect("create attempt 1");
    h.rt.start_container(&new_id)
        .await
        .expect("start attempt 1");
    h.statuses.replace(&p.uid, "app", &new_id);
    let new_cid = ContainerId::new("containerd", &new_id);
    eventually(WAIT, || async {
        (live.get(&new_cid) == Some(ProbeResult::Success)).then_some(())
    })
    .await
    .expect("a new container starts from a clean liveness result");
    assert_eq!(
        live.get(&p.cid("app")),
        None,
        "the old container's result is gone"
    );
    // Fresh root filesystem: not ready until the file appears again.
    h.wait_flags(&p, "app", (true, false), WAIT).await;

    // --- an exec probe that outlives its timeout fails.
    let spec = serde_json::json!({"containers": [{
        "name": "slow",
        "readinessProbe": exec(&["sleep", "5"], serde_json::json!({"timeoutSeconds": 1, "failureThreshold": 1})),
    }]});
    let slow = h
        .run_pod(&api_pod("slowexec", spec), &[("slow", busybox, sleep)])
        .await;
    let msg = "Readiness probe failed: command \"sleep 5\" timed out".to_string();
    eventually(WAIT, || async {
        h.events
            .about("slowexec", "slow")
            .contains(&("Unhealthy".to_string(), msg.clone()))
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("timeout event: {:?}", h.events.about("slowexec", "slow")));
    assert_eq!(h.statuses.flags(&slow.uid, "slow"), Some((true, false)));

    // --- the startup probe holds liveness and readiness back.
    let spec = serde_json::json!({"containers": [{
        "name": "boot",
        "startupProbe": exec(&["test", "-f", "/tmp/started"], serde_json::json!({"failureThreshold": 60})),
        "livenessProbe": exec(&["false"], serde_json::json!({"failureThreshold": 1})),
        "readinessProbe": exec(&["true"], serde_json::json!({})),
    }]});
    let boot = h
        .run_pod(&api_pod("boot", spec), &[("boot", busybox, sleep)])
        .await;
    h.wait_flags(&boot, "boot", (false, false), WAIT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.manager.liveness_results().get(&boot.cid("boot")),
        Some(ProbeResult::Success),
        "liveness has not run before start-up"
    );
    let before: Vec<_> = h.events.about("boot", "boot");
    assert!(
        before
            .iter()
            .all(|(_, m)| m.starts_with("Startup probe failed")),
        "{before:?}"
    );
    h.sh(boot.id("boot"), "touch /tmp/started").await;
    h.wait_flags(&boot, "boot", (true, true), WAIT).await;
    eventually(WAIT, || async {
        (h.manager.liveness_results().get(&boot.cid("boot")) == Some(ProbeResult::Failure))
            .then_some(())
    })
    .await
    .expect("liveness runs once started");
    assert_eq!(
        h.manager.startup_results().get(&boot.cid("boot")),
        Some(ProbeResult::Success)
    );

    // Removing the pods stops their workers and drops their results.
    for pod in [&p, &slow, &boot] {
        h.manager.remove_pod(&pod.api);
    }
    eventually(WAIT, || async {
        (h.manager.worker_count() == 0).then_some(())
    })
    .await
    .expect("workers stop");
    assert_eq!(h.manager.readiness_results().get(&slow.cid("slow")), None);
    h.stop().await;
}

/// A gRPC health service whose answer the test sets.
#[derive(Clone, Default)]
struct HealthState(Arc<Mutex<ServingStatus>>);

#[tonic::async_trait]
impl Health for HealthState {
    async fn check(
        &self,
        _req: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        let status = *self.0.lock().expect("lock") as i32;
        Ok(tonic::Response::new(HealthCheckResponse { status }))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tcp_and_grpc_probes_on_real_containers() {
    let Some(h) = Harness::start("http_tcp_and_grpc_probes_on_real_containers").await else {
        return;
    };
    let httpd = images().httpd_e2e.as_str();
    let busybox = images().busybox.as_str();

    // busybox httpd serves / on port 80; /missing is a 404.
    let spec = serde_json::json!({"containers": [
        {
            "name": "web",
            "ports": [{"name": "http", "containerPort": 80}],
            "startupProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1, "failureThreshold": 30},
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
            "livenessProbe": {"httpGet": {"path": "/missing", "port": 80, "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                              "periodSeconds": 1, "failureThreshold": 1},
        },
        {
            "name": "side",
            "readinessProbe": {"tcpSocket": {"port": 81}, "periodSeconds": 1, "failureThreshold": 1},
        },
    ]});
    let web = h
        .run_pod(
            &api_pod("web", spec),
            &[("web", httpd, &[]), ("side", busybox, &["sleep", "3600"])],
        )
        .await;
    h.wait_flags(&web, "web", (true, true), WAIT).await;
    eventually(WAIT, || async {
        (h.manager.liveness_results().get(&web.cid("web")) == Some(ProbeResult::Failure))
            .then_some(())
    })
    .await
    .expect("liveness on a missing path fails");
    assert!(
        h.events.about("web", "web").contains(&(
            "Unhealthy".into(),
            "Liveness probe failed: HTTP probe failed with statuscode: 404".into()
        )),
        "{:?}",
        h.events.about("web", "web")
    );
    // Nothing listens on 81 in the pod's network namespace.
    h.wait_flags(&web, "side", (true, false), WAIT).await;
    let refused = format!(
        "Readiness probe failed: dial tcp {}:81: connect: connection refused",
        web.ip
    );
    eventually(WAIT, || async {
        h.events
            .about("web", "side")
            .contains(&("Unhealthy".to_string(), refused.clone()))
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{:?}", h.events.about("web", "side")));
    // Once something listens there, the side container turns ready.
    h.sh(web.id("side"), "httpd -p 81 -h /tmp").await;
    h.wait_flags(&web, "side", (true, true), WAIT).await;

    // gRPC: a health server on loopback stands in for the pod's server
    // (this pod's status gives 127.0.0.1 as its IP).
    let health = HealthState::default();
    *health.0.lock().expect("lock") = ServingStatus::Serving;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server = health.clone();
    let token = h.tasks.token();
    h.tasks.spawn("grpc-health", async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(
                HealthServer::new(server),
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                token.cancelled_owned(),
            )
            .await;
    });
    let spec = serde_json::json!({"containers": [{
        "name": "rpc",
        "readinessProbe": {"grpc": {"port": port}, "periodSeconds": 1, "failureThreshold": 1},
    }]});
    let rpc = h
        .run_pod(
            &api_pod("rpc", spec),
            &[("rpc", busybox, &["sleep", "3600"])],
        )
        .await;
    {
        let mut all = h.statuses.0.lock().expect("lock");
        all.get_mut(&rpc.uid).expect("tracked").pod_ip = "127.0.0.1".into();
    }
    h.wait_flags(&rpc, "rpc", (true, true), WAIT).await;
    *health.0.lock().expect("lock") = ServingStatus::NotServing;
    h.wait_flags(&rpc, "rpc", (true, false), WAIT).await;
    assert!(
        h.events.about("rpc", "rpc").contains(&(
            "Unhealthy".into(),
            "Readiness probe failed: service unhealthy (responded with \"NOT_SERVING\")".into()
        )),
        "{:?}",
        h.events.about("rpc", "rpc")
    );
    *health.0.lock().expect("lock") = ServingStatus::Serving;
    h.wait_flags(&rpc, "rpc", (true, true), WAIT).await;
    h.stop().await;
}
