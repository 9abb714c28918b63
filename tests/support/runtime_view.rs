//! What containerd holds for each pod, by the pod-name label the kubelet
//! puts on sandboxes and containers: the drills compare it before and
//! after a fault.

use std::collections::{BTreeMap, BTreeSet};

use kubelet::cri::RuntimeService;
use kubelet::cri::api::{ContainerState, PodSandboxState};

const POD_NAME: &str = "io.kubernetes.pod.name";
const RESTART_COUNT: &str = "io.kubernetes.container.restartCount";

/// One pod in the runtime.
#[derive(Debug, Default, Clone)]
pub struct PodRuntime {
    pub ready_sandboxes: BTreeSet<String>,
    pub dead_sandboxes: usize,
    /// The running containers by id, each with its sandbox's id.
    pub running: BTreeMap<String, String>,
    pub not_running: usize,
    /// The highest restart count among the pod's containers (annotation).
    pub restarts: i32,
}

impl PodRuntime {
    /// The first running container's id.
    pub fn running_id(&self) -> Option<&String> {
        self.running.keys().next()
    }
}

/// Every pod the runtime has sandboxes or containers of.
pub async fn pod_runtime_view(rt: &dyn RuntimeService) -> BTreeMap<String, PodRuntime> {
    let mut out: BTreeMap<String, PodRuntime> = BTreeMap::new();
    for s in rt.list_pod_sandbox(None).await.expect("list sandboxes") {
        let Some(name) = s.labels.get(POD_NAME) else {
            continue;
        };
        let e = out.entry(name.clone()).or_default();
        if s.state == PodSandboxState::SandboxReady as i32 {
            e.ready_sandboxes.insert(s.id.clone());
        } else {
            e.dead_sandboxes += 1;
        }
    }
    for c in rt.list_containers(None).await.expect("list containers") {
        let Some(name) = c.labels.get(POD_NAME) else {
            continue;
        };
        let e = out.entry(name.clone()).or_default();
        if c.state == ContainerState::ContainerRunning as i32 {
            e.running.insert(c.id.clone(), c.pod_sandbox_id.clone());
        } else {
            e.not_running += 1;
        }
        let n = c
            .annotations
            .get(RESTART_COUNT)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        e.restarts = e.restarts.max(n);
    }
    out
}
