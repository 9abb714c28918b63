//! What the container manager needs from the rest of the kubelet once the
//! runtime is up (the resource managers' inputs), and the CPU and memory
//! managers' start.

use std::sync::Arc;

use super::cpumanager::{
    ContainerMap, CpuManager, CpuManagerError, CpuManagerSources, CriCpusetUpdater, PodStatusFn,
    SourcesReadyFn,
};
use super::error::CmError;
use super::memorymanager::{MemoryManager, MemoryManagerError, MemoryManagerSources};
use super::qos_container_manager::ActivePodsFn;
use crate::cri::RuntimeService;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";

/// The runtime-side inputs of start.
#[derive(Clone)]
pub struct CmRuntimeDeps {
    pub sources_ready: SourcesReadyFn,
    pub pod_status: PodStatusFn,
    pub runtime: Arc<dyn RuntimeService>,
    pub clock: Arc<dyn Clock>,
}

/// The runtime's containers by id (for migrating old state files).
async fn container_map(runtime: &dyn RuntimeService) -> Result<ContainerMap, CpuManagerError> {
    let containers =
        runtime
            .list_containers(None)
            .await
            .map_err(|source| CpuManagerError::Runtime {
                container_id: String::new(),
                source: Box::new(source),
            })?;
    Ok(containers
        .into_iter()
        .filter_map(|c| {
            let uid = c.labels.get(POD_UID_LABEL)?.clone();
            let name = c.metadata?.name;
            Some((c.id, (uid, name)))
        })
        .collect())
}

/// Starts the CPU manager, then the memory manager (Go's order), each from
/// its state file; with the static CPU policy, the reconcile loop on `tasks`.
pub(super) async fn start_resource_managers(
    cpu: Option<&Arc<CpuManager>>,
    memory: Option<&Arc<MemoryManager>>,
    tasks: &TaskSet,
    active_pods: ActivePodsFn,
    deps: Option<CmRuntimeDeps>,
) -> Result<(), CmError> {
    let initial = match &deps {
        Some(d) => container_map(d.runtime.as_ref())
            .await
            .map_err(|e| CmError::Requirement(format!("start cpu manager error: {e}")))?,
        None => ContainerMap::new(),
    };
    if let Some(cpu) = cpu {
        start_cpu_manager(
            cpu,
            tasks,
            active_pods.clone(),
            deps.clone(),
            initial.clone(),
        )
        .await
        .map_err(|e| CmError::Requirement(format!("start cpu manager error: {e}")))?;
    }
    if let Some(memory) = memory {
        let sources = deps.map(|d| MemoryManagerSources {
            active_pods,
            sources_ready: d.sources_ready,
        });
        let me = memory.clone();
        tokio::task::spawn_blocking(move || me.start_blocking(sources, initial))
            .await
            .map_err(|e| MemoryManagerError::Join(e.to_string()))
            .and_then(|r| r)
            .map_err(|e| CmError::Requirement(format!("start memory manager error: {e}")))?;
    }
    Ok(())
}

/// Starts the CPU manager: state from its file, then (static policy) the
/// reconcile loop on `tasks`.
async fn start_cpu_manager(
    cpu: &Arc<CpuManager>,
    tasks: &TaskSet,
    active_pods: ActivePodsFn,
    deps: Option<CmRuntimeDeps>,
    initial: ContainerMap,
) -> Result<(), CpuManagerError> {
    let (sources, clock) = match deps {
        Some(d) => {
            let sources = CpuManagerSources {
                active_pods,
                sources_ready: d.sources_ready,
                pod_status: d.pod_status,
                runtime: Arc::new(CriCpusetUpdater(d.runtime)),
            };
            (Some(sources), d.clock)
        }
        None => (
            None,
            Arc::new(crate::util::clock::RealClock) as Arc<dyn Clock>,
        ),
    };
    let me = cpu.clone();
    let reconcile = tokio::task::spawn_blocking(move || me.start_blocking(sources, initial))
        .await
        .map_err(|e| CpuManagerError::Join(e.to_string()))??;
    if reconcile {
        cpu.spawn_reconcile(tasks, clock);
    }
    Ok(())
}
