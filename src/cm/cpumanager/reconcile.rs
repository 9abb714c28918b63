//! The reconcile loop: every `cpuManagerReconcilePeriod`, stale assignments
//! go and every running container of an active pod whose cpuset differs
//! from the one last pushed gets it through CRI UpdateContainerResources.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};

use super::error::CpuManagerError;
use super::manager::CpuManager;
use crate::cm::cpuset::CpuSet;
use crate::cri::api::{ContainerResources, LinuxContainerResources};
use crate::cri::{CriError, RuntimeService};
use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet};

/// A container the loop looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciledContainer {
    pub pod_name: String,
    pub container_name: String,
    pub container_id: String,
}

fn rc(pod: &str, container: &str, id: &str) -> ReconciledContainer {
    ReconciledContainer {
        pod_name: pod.into(),
        container_name: container.into(),
        container_id: id.into(),
    }
}

fn find_status<'a>(status: &'a PodStatus, name: &str) -> Option<&'a ContainerStatus> {
    status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .find(|s| s.name == name)
}

/// `containerd://abc` → `abc`.
fn container_id_of(status: &PodStatus, name: &str) -> Option<String> {
    status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .filter(|s| s.name == name)
        .find_map(|s| s.container_id.as_deref().filter(|id| !id.is_empty()))
        .and_then(|id| id.split_once("://").map(|(_, id)| id.to_string()))
}

/// What to do with one container, decided under the lock.
enum Step {
    Skip,
    Done,
    Update(CpuSet),
}

impl CpuManager {
    /// One pass; returns the containers reconciled and those skipped or failed.
    pub async fn reconcile_state(&self) -> (Vec<ReconciledContainer>, Vec<ReconciledContainer>) {
        let (mut success, mut failure) = (Vec::new(), Vec::new());
        self.remove_stale_state();
        let Some(sources) = self.lock().sources.clone() else {
            return (success, failure);
        };
        for pod in (sources.active_pods)() {
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let Some(status) = (sources.pod_status)(&uid) else {
                crate::vlog!(4, pod = %pod_name, "ReconcileState: skipping pod; status not found");
                failure.push(rc(&pod_name, "", ""));
                continue;
            };
            let Some(spec) = &pod.spec else { continue };
            for container in spec
                .init_containers
                .iter()
                .flatten()
                .chain(&spec.containers)
            {
                let name = container.name.as_str();
                let Some(id) = container_id_of(&status, name) else {
                    crate::vlog!(4, pod = %pod_name, container_name = name, "ReconcileState: skipping container; ID not found in pod status");
                    failure.push(rc(&pod_name, name, ""));
                    continue;
                };
                let state = find_status(&status, name).and_then(|s| s.state.as_ref());
                let running = state.is_some_and(|s| s.running.is_some());
                let terminated = state.is_some_and(|s| s.terminated.is_some());
                let waiting =
                    state.is_none_or(|s| s.waiting.is_some() || (!running && !terminated));
                if waiting {
                    crate::vlog!(4, pod = %pod_name, container_name = name, "ReconcileState: skipping container; container still in the waiting state");
                    failure.push(rc(&pod_name, name, ""));
                    continue;
                }
                let step = {
                    let mut inner = self.lock();
                    if terminated {
                        if inner.containers.contains_key(&id) {
                            crate::vlog!(4, pod = %pod_name, container_id = %id, "ReconcileState: ignoring terminated container");
                        }
                        continue;
                    }
                    inner
                        .containers
                        .insert(id.clone(), (uid.clone(), name.into()));
                    let set = inner.state.get_cpu_set_or_default(&uid, name);
                    if set.is_empty() {
                        Step::Skip
                    } else if set != inner.last_update.get_cpu_set_or_default(&uid, name) {
                        Step::Update(set)
                    } else {
                        Step::Done
                    }
                };
                match step {
                    Step::Skip => {
                        crate::vlog!(4, pod = %pod_name, container_name = name, "ReconcileState: skipping container; assigned cpuset is empty");
                        failure.push(rc(&pod_name, name, &id));
                        continue;
                    }
                    Step::Update(set) => {
                        crate::vlog!(4, pod = %pod_name, container_name = name, container_id = %id, cpu_set = %set, "ReconcileState: updating container");
                        if let Err(e) = update_container_cpuset(&sources, &id, &set).await {
                            tracing::error!(err = %e, pod = %pod_name, container_name = name, container_id = %id, cpu_set = %set, "ReconcileState: failed to update container");
                            failure.push(rc(&pod_name, name, &id));
                            continue;
                        }
                        self.lock().last_update.set_cpu_set(&uid, name, set);
                    }
                    Step::Done => {}
                }
                success.push(rc(&pod_name, name, &id));
            }
        }
        (success, failure)
    }

    /// Runs [`CpuManager::reconcile_state`] now and every reconcile period.
    pub fn spawn_reconcile(self: &Arc<Self>, tasks: &TaskSet, clock: Arc<dyn Clock>) {
        let me = self.clone();
        tasks.spawn_periodic(
            "cpu-manager-reconcile",
            Period::sliding(self.reconcile_period),
            clock,
            move || {
                let me = me.clone();
                async move {
                    me.reconcile_state().await;
                }
            },
        );
    }
}

/// Where the loop pushes cpusets (CRI UpdateContainerResources).
#[async_trait::async_trait]
pub trait CpusetUpdater: Send + Sync + 'static {
    async fn update_cpuset(&self, container_id: &str, cpus: &CpuSet) -> Result<(), CriError>;
}

/// Pushes cpusets through the CRI runtime service.
pub struct CriCpusetUpdater(pub Arc<dyn RuntimeService>);

#[async_trait::async_trait]
impl CpusetUpdater for CriCpusetUpdater {
    async fn update_cpuset(&self, container_id: &str, cpus: &CpuSet) -> Result<(), CriError> {
        let resources = ContainerResources {
            linux: Some(LinuxContainerResources {
                cpuset_cpus: cpus.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.0
            .update_container_resources(container_id, &resources)
            .await
    }
}

async fn update_container_cpuset(
    sources: &super::manager::CpuManagerSources,
    container_id: &str,
    set: &CpuSet,
) -> Result<(), CpuManagerError> {
    sources
        .runtime
        .update_cpuset(container_id, set)
        .await
        .map_err(|source| CpuManagerError::Runtime {
            container_id: container_id.into(),
            source: Box::new(source),
        })
}
