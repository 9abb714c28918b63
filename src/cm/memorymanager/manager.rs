//! The memory manager: builds its policy from the configuration (pure),
//! loads its state at start, allocates at admission (as a topology hint
//! provider), and tells container creation which NUMA nodes' memory
//! (cpuset.mems) a container may use.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::error::MemoryManagerError;
use super::policy_static::{POLICY_STATIC, StaticPolicy};
use super::reserved::system_reserved_memory;
use super::state::{Block, State};
use crate::apis::config::types::MemoryReservation;
use crate::cadvisor::MachineInfo;
use crate::cm::admission::AllocationError;
use crate::cm::containermap::stale_assignments;
use crate::cm::cpumanager::SourcesReadyFn;
use crate::cm::qos_container_manager::ActivePodsFn;
use crate::cm::resources::ResourceList;
use crate::cm::topologymanager::{AffinityStore, HintProvider, ProviderHints};

pub const POLICY_NONE: &str = "None";

/// What the memory manager is configured with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryManagerConfig {
    /// `memoryManagerPolicy`: `None` or `Static`.
    pub policy: String,
    /// `reservedMemory`.
    pub reserved_memory: Vec<MemoryReservation>,
}

/// What the memory manager works with once the kubelet runs.
#[derive(Clone)]
pub struct MemoryManagerSources {
    pub active_pods: ActivePodsFn,
    pub sources_ready: SourcesReadyFn,
}

#[derive(Debug)]
enum Policy {
    None,
    Static(Box<StaticPolicy>),
}

struct Inner {
    policy: Policy,
    state: State,
    /// Container id → (pod UID, container name).
    containers: HashMap<String, (String, String)>,
    pending_admission: Option<Arc<Pod>>,
    sources: Option<MemoryManagerSources>,
    allocatable: Vec<Block>,
}

/// Go's memory manager.
pub struct MemoryManager {
    policy_name: &'static str,
    state_dir: PathBuf,
    affinity: Arc<AffinityStore>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for MemoryManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryManager")
            .field("policy", &self.policy_name)
            .finish()
    }
}

impl MemoryManager {
    /// Builds the policy; the Static one checks `reservedMemory` against
    /// the node allocatable reservation.
    pub fn new(
        config: &MemoryManagerConfig,
        machine: &MachineInfo,
        node_reservation: &ResourceList,
        state_dir: PathBuf,
        affinity: Arc<AffinityStore>,
    ) -> Result<Self, MemoryManagerError> {
        let (policy_name, policy) = match config.policy.as_str() {
            POLICY_NONE => (POLICY_NONE, Policy::None),
            POLICY_STATIC => {
                let reserved =
                    system_reserved_memory(machine, node_reservation, &config.reserved_memory)?;
                (
                    POLICY_STATIC,
                    Policy::Static(Box::new(StaticPolicy::new(machine, reserved)?)),
                )
            }
            other => return Err(MemoryManagerError::UnknownPolicy(other.into())),
        };
        Ok(MemoryManager {
            policy_name,
            state_dir,
            affinity,
            inner: Mutex::new(Inner {
                policy,
                state: State::in_memory(),
                containers: HashMap::new(),
                pending_admission: None,
                sources: None,
                allocatable: Vec::new(),
            }),
        })
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy_name
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads (or creates) the state file and checks it (blocking).
    pub fn start_blocking(
        &self,
        sources: Option<MemoryManagerSources>,
        initial: HashMap<String, (String, String)>,
    ) -> Result<(), MemoryManagerError> {
        tracing::info!(policy = self.policy_name, "Starting memorymanager");
        let mut state = State::checkpointed(&self.state_dir, self.policy_name).inspect_err(|e| {
            tracing::error!(err = %e, "Could not initialize checkpoint manager, please drain node and remove policy state file");
        })?;
        let mut inner = self.lock();
        if let Policy::Static(p) = &inner.policy {
            p.start(&mut state).inspect_err(|e| {
                tracing::error!(err = %e, "Policy start error");
            })?;
        }
        inner.allocatable = match &inner.policy {
            Policy::Static(p) => p.allocatable_memory(&state),
            Policy::None => Vec::new(),
        };
        inner.state = state;
        inner.containers = initial;
        inner.sources = sources;
        Ok(())
    }

    /// Admission: the container's blocks, on the affinity the topology
    /// manager chose.
    pub fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), MemoryManagerError> {
        self.prepare(pod);
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let hint = self.affinity.get_affinity(uid, &container.name);
        let mut inner = self.lock();
        let Inner { policy, state, .. } = &mut *inner;
        match policy {
            Policy::Static(p) => p.allocate(state, pod, container, hint).inspect_err(|e| {
                tracing::error!(err = %e, "Allocate error");
            }),
            Policy::None => Ok(()),
        }
    }

    /// The container started: remember its id; the init containers before
    /// it have finished and give their memory back.
    pub fn add_container(&self, pod: &Pod, container: &Container, container_id: &str) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut inner = self.lock();
        inner
            .containers
            .insert(container_id.into(), (uid.clone(), container.name.clone()));
        let inits = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten());
        for init in inits {
            if init.name == container.name {
                break;
            }
            inner.remove_by_ref(&uid, &init.name);
        }
    }

    /// Releases a container's memory by id (unknown ids are ignored).
    pub fn remove_container(&self, container_id: &str) {
        let mut inner = self.lock();
        let Some((uid, name)) = inner.containers.get(container_id).cloned() else {
            tracing::info!(container_id, "Failed to get container from container map");
            return;
        };
        inner.remove_by_ref(&uid, &name);
    }

    /// The NUMA nodes whose memory the container may use (empty: any).
    pub fn memory_numa_nodes(&self, pod_uid: &str, container: &str) -> Vec<u32> {
        let blocks = self.lock().state.memory_blocks(pod_uid, container);
        let nodes: BTreeSet<u32> = blocks
            .iter()
            .flatten()
            .flat_map(|b| b.numa_affinity.iter().copied())
            .collect();
        if !nodes.is_empty() {
            tracing::info!(pod_uid, container_name = container, numa_nodes = ?nodes, "Memory affinity");
        }
        nodes.into_iter().collect()
    }

    /// What containers could be given when the manager started.
    pub fn allocatable_memory(&self) -> Vec<Block> {
        self.lock().allocatable.clone()
    }

    /// The blocks a container holds.
    pub fn memory(&self, pod_uid: &str, container: &str) -> Vec<Block> {
        self.lock()
            .state
            .memory_blocks(pod_uid, container)
            .unwrap_or_default()
    }

    fn prepare(&self, pod: &Pod) {
        self.lock().pending_admission = Some(Arc::new(pod.clone()));
        self.remove_stale_state();
    }

    /// Drops the blocks of containers no active (or admitting) pod has,
    /// once every source is ready.
    pub fn remove_stale_state(&self) {
        let mut inner = self.lock();
        let Some(sources) = inner.sources.clone() else {
            return;
        };
        let assigned = inner
            .state
            .assignments()
            .iter()
            .flat_map(|(uid, cs)| cs.keys().map(move |c| (uid, c)));
        let stale = stale_assignments(
            sources.sources_ready.as_ref(),
            sources.active_pods.as_ref(),
            inner.pending_admission.as_ref(),
            assigned,
        );
        for (uid, name) in stale {
            tracing::info!(pod_uid = %uid, container_name = %name, "RemoveStaleState removing state");
            inner.remove_by_ref(&uid, &name);
        }
    }
}

impl Inner {
    fn remove_by_ref(&mut self, pod_uid: &str, container: &str) {
        if let Policy::Static(p) = &self.policy {
            p.remove_container(&mut self.state, pod_uid, container);
        }
        self.containers
            .retain(|_, (uid, name)| !(uid == pod_uid && name == container));
    }
}

impl HintProvider for MemoryManager {
    fn topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.prepare(pod);
        let inner = self.lock();
        match &inner.policy {
            Policy::Static(p) => p.topology_hints(&inner.state, pod, container),
            Policy::None => ProviderHints::new(),
        }
    }

    fn pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.prepare(pod);
        let inner = self.lock();
        match &inner.policy {
            Policy::Static(p) => p.pod_topology_hints(&inner.state, pod),
            Policy::None => ProviderHints::new(),
        }
    }

    fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), AllocationError> {
        MemoryManager::allocate(self, pod, container).map_err(AllocationError::from)
    }
}
