//! The CPU manager: builds its policy from the configuration (pure), loads
//! its state at start, allocates at admission, tells container creation
//! which cpuset to use, and keeps running containers on their cpusets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};

use super::error::CpuManagerError;
use super::policy_options::OptionGates;
use super::policy_static::{POLICY_STATIC, StaticPolicy};
use super::reconcile::CpusetUpdater;
use super::state::{ContainerMap, State};
use super::topology::CpuTopology;
use crate::cadvisor::MachineInfo;
use crate::cm::admission::AllocationError;
use crate::cm::containermap::stale_assignments;
use crate::cm::cpuset::CpuSet;
use crate::cm::qos_container_manager::ActivePodsFn;
use crate::cm::resources::{RESOURCE_CPU, ResourceList};
use crate::cm::topologymanager::{AffinityStore, HintProvider, ProviderHints};

pub const POLICY_NONE: &str = "none";

/// Whether every pod source has been seen (stale state is only removed then).
pub type SourcesReadyFn = Arc<dyn Fn() -> bool + Send + Sync>;
/// The status the kubelet last computed for a pod, by UID.
pub type PodStatusFn = Arc<dyn Fn(&str) -> Option<PodStatus> + Send + Sync>;

/// What the CPU manager is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuManagerConfig {
    /// `cpuManagerPolicy`: `none` or `static`.
    pub policy: String,
    /// `cpuManagerPolicyOptions`.
    pub options: BTreeMap<String, String>,
    /// `cpuManagerReconcilePeriod`.
    pub reconcile_period: Duration,
    /// The gates of the option levels.
    pub option_gates: OptionGates,
    /// The topology manager's policy (some options depend on it).
    pub topology_policy: String,
}

impl Default for CpuManagerConfig {
    fn default() -> Self {
        CpuManagerConfig {
            policy: POLICY_NONE.into(),
            options: BTreeMap::new(),
            reconcile_period: Duration::from_secs(10),
            option_gates: OptionGates::default(),
            topology_policy: crate::cm::topologymanager::policy::POLICY_NONE.into(),
        }
    }
}

/// What the CPU manager works with once the runtime is up.
#[derive(Clone)]
pub struct CpuManagerSources {
    pub active_pods: ActivePodsFn,
    pub sources_ready: SourcesReadyFn,
    pub pod_status: PodStatusFn,
    pub runtime: Arc<dyn CpusetUpdater>,
}

#[derive(Debug)]
pub(super) enum Policy {
    None,
    Static(StaticPolicy),
}

pub(super) struct Inner {
    pub(super) policy: Policy,
    pub(super) state: State,
    /// The cpusets last pushed to each container.
    pub(super) last_update: State,
    /// Container id → (pod UID, container name).
    pub(super) containers: ContainerMap,
    pub(super) pending_admission: Option<Arc<Pod>>,
    pub(super) sources: Option<CpuManagerSources>,
    pub(super) allocatable: CpuSet,
}

/// The CPU manager.
pub struct CpuManager {
    policy_name: &'static str,
    pub(super) reconcile_period: Duration,
    state_dir: PathBuf,
    /// The NUMA affinity the topology manager chose per container.
    affinity: Arc<AffinityStore>,
    pub(super) inner: Mutex<Inner>,
}

impl std::fmt::Debug for CpuManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuManager")
            .field("policy", &self.policy_name)
            .finish_non_exhaustive()
    }
}

impl CpuManager {
    /// Builds the policy: the static one discovers the topology and
    /// reserves ceil(cpu reservation) CPUs (or `reserved_cpus`).
    pub fn new(
        config: &CpuManagerConfig,
        machine: &MachineInfo,
        reserved_cpus: &CpuSet,
        reservation: &ResourceList,
        state_dir: PathBuf,
        affinity: Arc<AffinityStore>,
    ) -> Result<Self, CpuManagerError> {
        let (policy_name, policy) = match config.policy.as_str() {
            POLICY_NONE => {
                if !config.options.is_empty() {
                    return Err(CpuManagerError::NoneWithOptions(go_map(&config.options)));
                }
                (POLICY_NONE, Policy::None)
            }
            POLICY_STATIC => {
                let topology = CpuTopology::discover(machine)?;
                tracing::info!(topology = ?topology, "Detected CPU topology");
                let online = topology.details.cpus();
                if !reserved_cpus.is_subset_of(&online) {
                    return Err(CpuManagerError::ReservedNotOnline {
                        reserved: reserved_cpus.clone(),
                        online,
                    });
                }
                let reserved = reservation
                    .get(RESOURCE_CPU)
                    .ok_or(CpuManagerError::NoReservation)?;
                if reserved.is_zero() {
                    return Err(CpuManagerError::ZeroReservation);
                }
                let num_reserved = usize::try_from((reserved.milli_value() + 999) / 1000)
                    .map_err(|_| CpuManagerError::ZeroReservation)?;
                let policy = StaticPolicy::new(
                    topology,
                    num_reserved,
                    reserved_cpus,
                    &config.options,
                    config.option_gates,
                    &config.topology_policy,
                )
                .map_err(|e| CpuManagerError::NewStaticPolicy(Box::new(e)))?;
                (POLICY_STATIC, Policy::Static(policy))
            }
            other => return Err(CpuManagerError::UnknownPolicy(other.into())),
        };
        Ok(CpuManager {
            policy_name,
            reconcile_period: config.reconcile_period,
            state_dir,
            affinity,
            inner: Mutex::new(Inner {
                policy,
                state: State::in_memory(),
                last_update: State::in_memory(),
                containers: ContainerMap::new(),
                pending_admission: None,
                sources: None,
                allocatable: CpuSet::new(),
            }),
        })
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy_name
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Loads (or creates) the state file and checks it against the policy
    /// (blocking). Returns whether the reconcile loop should run.
    pub fn start_blocking(
        &self,
        sources: Option<CpuManagerSources>,
        initial: ContainerMap,
    ) -> Result<bool, CpuManagerError> {
        tracing::info!(policy = self.policy_name, "Starting CPU manager");
        tracing::info!(reconcile_period = ?self.reconcile_period, "Reconciling");
        let mut state = State::checkpointed(&self.state_dir, self.policy_name, &initial)
            .inspect_err(|e| {
                tracing::error!(err = %e, "Could not initialize checkpoint manager, please drain node and remove policy state file");
            })?;
        let mut inner = self.lock();
        if let Policy::Static(p) = &inner.policy {
            p.start(&mut state)?;
        }
        inner.allocatable = match &inner.policy {
            Policy::Static(p) => p.allocatable_cpus(&state),
            Policy::None => CpuSet::new(),
        };
        inner.state = state;
        inner.containers = initial;
        inner.sources = sources;
        Ok(matches!(inner.policy, Policy::Static(_)))
    }

    /// Admission: gives the container its CPUs (after dropping the state
    /// of pods no longer active).
    pub fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), CpuManagerError> {
        self.lock().pending_admission = Some(Arc::new(pod.clone()));
        self.remove_stale_state();
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let hint = self.affinity.get_affinity(uid, &container.name);
        let mut inner = self.lock();
        let Inner { policy, state, .. } = &mut *inner;
        match policy {
            Policy::Static(p) => p
                .allocate(state, pod, container, hint.numa_node_affinity)
                .inspect_err(|e| {
                    tracing::error!(err = %e, "Allocate error");
                }),
            Policy::None => Ok(()),
        }
    }

    /// Before the hints: remember the pod being admitted and drop stale state.
    fn prepare_hints(&self, pod: &Pod) {
        self.lock().pending_admission = Some(Arc::new(pod.clone()));
        self.remove_stale_state();
    }

    /// After the container was created: remember it and what it got.
    pub fn add_container(&self, pod: &Pod, container: &Container, container_id: &str) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut inner = self.lock();
        if let Some(set) = inner.state.get_cpu_set(&uid, &container.name) {
            inner.last_update.set_cpu_set(&uid, &container.name, set);
        }
        inner
            .containers
            .insert(container_id.into(), (uid, container.name.clone()));
    }

    /// Releases the CPUs of a container by id (unknown ids are ignored).
    pub fn remove_container(&self, container_id: &str) {
        let mut inner = self.lock();
        let Some((uid, name)) = inner.containers.get(container_id).cloned() else {
            return;
        };
        inner.remove_by_ref(&uid, &name);
    }

    /// The cpuset a container runs on: its own CPUs or the shared pool
    /// (empty with the none policy).
    pub fn cpu_affinity(&self, pod_uid: &str, container: &str) -> CpuSet {
        self.lock().state.get_cpu_set_or_default(pod_uid, container)
    }

    /// The container's exclusive CPUs (empty when it has none).
    pub fn exclusive_cpus(&self, pod_uid: &str, container: &str) -> CpuSet {
        self.lock()
            .state
            .get_cpu_set(pod_uid, container)
            .unwrap_or_default()
    }

    /// The CPUs exclusive allocation could use when the manager started.
    pub fn allocatable_cpus(&self) -> CpuSet {
        self.lock().allocatable.clone()
    }

    /// The shared pool now.
    pub fn default_cpu_set(&self) -> CpuSet {
        self.lock().state.default_cpu_set()
    }

    /// Drops the assignments of containers that no active (or admitting)
    /// pod has, once every source is ready.
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
            tracing::error!(pod_uid = %uid, container_name = %name, "RemoveStaleState: removing container");
            inner.remove_by_ref(&uid, &name);
        }
    }
}

impl Inner {
    pub(super) fn remove_by_ref(&mut self, pod_uid: &str, container: &str) {
        if let Policy::Static(p) = &self.policy {
            p.remove_container(&mut self.state, pod_uid, container);
        }
        self.last_update.delete(pod_uid, container);
        self.containers
            .retain(|_, (uid, name)| !(uid == pod_uid && name == container));
    }
}

/// Go's `%v` of a map[string]string.
fn go_map(map: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", parts.join(" "))
}

impl HintProvider for CpuManager {
    fn topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.prepare_hints(pod);
        let inner = self.lock();
        match &inner.policy {
            Policy::Static(p) => p.topology_hints(&inner.state, pod, container),
            Policy::None => ProviderHints::new(),
        }
    }

    fn pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.prepare_hints(pod);
        let inner = self.lock();
        match &inner.policy {
            Policy::Static(p) => p.pod_topology_hints(&inner.state, pod),
            Policy::None => ProviderHints::new(),
        }
    }

    fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), AllocationError> {
        CpuManager::allocate(self, pod, container).map_err(AllocationError::from)
    }
}
