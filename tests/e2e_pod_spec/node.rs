//! One standalone kubelet over a private containerd for a group of cases
//! that do not interfere: static pods from its manifest directory, /pods on
//! its read-only port, CRI exec into the containers it runs. Stopping the
//! node stops the kubelet; the rig and the node's directories clean up the
//! rest (sandboxes, containers, cgroups, mounts, files).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kubelet::cri::{RemoteRuntimeService, RuntimeService};

use crate::harness::{self, Kubelet, NodeDirs, Ports};
use crate::support::containerd::Containerd;

/// The node's name (static pods are named `<name>-<node>`).
pub const NODE: &str = "e2e7-node";

pub struct Node {
    pub ports: Ports,
    pub kubelet: Option<Kubelet>,
    pub rt: Arc<RemoteRuntimeService>,
    pub cgroup_root: String,
    pub dirs: NodeDirs,
    pub rig: Containerd,
}

impl Node {
    /// Starts containerd and a kubelet with `extra` appended to its
    /// configuration file; `None` when the test cannot run here.
    pub async fn start(test: &str, base_port: u16, extra: &str) -> Option<Node> {
        let rig = Containerd::start(test)?;
        let dirs = NodeDirs::new();
        let cgroup_root = harness::make_cgroup_root(&rig, test);
        let ports = Ports {
            main: base_port,
            read_only: base_port + 1,
            healthz: base_port + 2,
        };
        // A resolv.conf of the node's own, so DNS results do not depend on
        // the machine running the tests.
        let resolv = dirs.path("host-resolv.conf");
        std::fs::write(&resolv, HOST_RESOLV_CONF).expect("resolv.conf");
        let cfg = harness::config(&dirs, &cgroup_root, ports, extra);
        let text = std::fs::read_to_string(&cfg).expect("config");
        let text = text.replace(
            "resolvConf: /etc/resolv.conf",
            &format!("resolvConf: {}", resolv.display()),
        );
        std::fs::write(&cfg, text).expect("config");
        let kubelet = Kubelet::start(harness::args(&dirs, &rig, &cfg, NODE), |s| {
            harness::deps(&dirs, s)
        });
        let rt = harness::cri(&rig).await;
        Some(Node {
            ports,
            kubelet: Some(kubelet),
            rt,
            cgroup_root,
            dirs,
            rig,
        })
    }

    /// A directory on the host for the pod `name` (hostPath volumes).
    pub fn host_dir(&self, name: &str) -> PathBuf {
        let d = self.dirs.path("host").join(name);
        std::fs::create_dir_all(&d).expect("host dir");
        d
    }

    /// Writes the static pod `name` (namespace `default` unless `ns`
    /// given) with the spec body (YAML lines indented by two spaces).
    pub fn write_pod(&self, name: &str, spec: &str) {
        self.write_pod_in(name, "default", "", spec);
    }

    /// Writes a static pod with extra metadata lines (indented by two).
    pub fn write_pod_in(&self, name: &str, ns: &str, metadata: &str, spec: &str) {
        let body = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n{metadata}spec:\n{spec}"
        );
        self.dirs.write_manifest(&format!("{name}.yaml"), &body);
    }

    pub fn remove_pod(&self, name: &str) {
        self.dirs.remove_manifest(&format!("{name}.yaml"));
    }

    /// The pod `name` as /pods shows it now.
    pub async fn pod(&self, name: &str) -> Option<Pod> {
        let port = self.ports.read_only;
        let full = format!("{name}-{NODE}");
        tokio::task::spawn_blocking(move || harness::pods(port).remove(&full))
            .await
            .expect("join")
    }

    /// Polls /pods every 100 ms until `f` accepts the pod; returns it with
    /// the moment it was seen. Panics with the last status after `within`.
    pub async fn wait(
        &self,
        name: &str,
        within: Duration,
        what: &str,
        f: impl Fn(&Pod) -> bool,
    ) -> (Pod, Instant) {
        let deadline = Instant::now() + within;
        loop {
            let found = self.pod(name).await;
            let seen = Instant::now();
            if let Some(p) = &found
                && f(p)
            {
                return (p.clone(), seen);
            }
            if seen >= deadline {
                panic!(
                    "{name}: timed out waiting for {what}; last status: {}",
                    serde_json::to_string_pretty(&found.map(|p| p.status)).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Asserts `f` holds for the pod on every look during `period`.
    pub async fn holds(&self, name: &str, period: Duration, what: &str, f: impl Fn(&Pod) -> bool) {
        let end = Instant::now() + period;
        while Instant::now() < end {
            if let Some(p) = self.pod(name).await {
                assert!(
                    f(&p),
                    "{name}: expected {what} throughout {period:?}; status: {}",
                    serde_json::to_string_pretty(&p.status).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The CRI id of the running container `container` of `pod`.
    pub async fn container_id(&self, pod: &Pod, container: &str) -> String {
        let uid = harness::uid(pod);
        let mut cs = harness::cri_containers(&self.rt, &uid).await;
        cs.retain(|c| {
            c.metadata.as_ref().is_some_and(|m| m.name == container)
                && c.state == kubelet::cri::api::ContainerState::ContainerRunning as i32
        });
        cs.pop()
            .map(|c| c.id)
            .unwrap_or_else(|| panic!("no running container {container} in {uid}"))
    }

    /// Runs `sh -c script` in the container: stdout, or the error with
    /// its stderr.
    pub async fn exec(&self, pod: &Pod, container: &str, script: &str) -> Result<String, String> {
        let id = self.container_id(pod, container).await;
        let cmd = ["sh".to_string(), "-c".to_string(), script.to_string()];
        match self.rt.exec_sync(&id, &cmd, Duration::from_secs(20)).await {
            Ok(out) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Like [`exec`](Self::exec), panicking on failure.
    pub async fn sh(&self, pod: &Pod, container: &str, script: &str) -> String {
        self.exec(pod, container, script)
            .await
            .unwrap_or_else(|e| panic!("exec {script:?} in {container}: {e}"))
    }

    /// The process id of the container (its namespaces are the pod's).
    pub async fn container_pid(&self, pod: &Pod, container: &str) -> u32 {
        let id = self.container_id(pod, container).await;
        let st = self.rt.container_status(&id, true).await.expect("status");
        let info: serde_json::Value =
            serde_json::from_str(st.info.get("info").map(String::as_str).unwrap_or("{}"))
                .expect("info json");
        info["pid"].as_u64().expect("pid") as u32
    }

    /// Stops the kubelet (the rig and directories clean up on drop).
    pub async fn stop(mut self) {
        if let Some(k) = self.kubelet.take() {
            k.stop().await.expect("clean stop");
        }
    }
}

/// The node's resolv.conf: what `Default` pods inherit and ClusterFirst
/// pods get their extra search domains from.
pub const HOST_RESOLV_CONF: &str = "# the test node's resolver\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example lab.example\noptions timeout:2 attempts:3\n";

/// The status of container `name`.
pub fn cstatus<'a>(p: &'a Pod, name: &str) -> &'a ContainerStatus {
    harness::container(p, name).unwrap_or_else(|| panic!("no status for {name}"))
}

pub fn ready(p: &Pod, name: &str) -> bool {
    harness::container(p, name).is_some_and(|c| c.ready)
}

pub fn started(p: &Pod, name: &str) -> bool {
    harness::container(p, name).is_some_and(|c| c.started == Some(true))
}

pub fn restarts(p: &Pod, name: &str) -> i32 {
    harness::container(p, name).map_or(0, |c| c.restart_count)
}

/// The pod condition `type_` is "True".
pub fn condition(p: &Pod, type_: &str) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Pod Ready and ContainersReady agree with `want`, and so does every
/// container's `ready`.
pub fn pod_ready(p: &Pod, want: bool) -> bool {
    condition(p, "Ready") == want
        && condition(p, "ContainersReady") == want
        && p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs.iter().all(|c| c.ready == want))
}

/// When the running container started (RFC 3339, whole seconds).
pub fn started_at(p: &Pod, name: &str) -> Option<std::time::SystemTime> {
    let t = cstatus(p, name)
        .state
        .as_ref()?
        .running
        .as_ref()?
        .started_at
        .as_ref()?;
    let secs = t.0.as_second();
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs as u64))
}
