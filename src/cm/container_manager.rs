//! The ContainerManager: built from a [`NodeConfig`] in the build phase
//! (validation, swap check, machine capacity, cgroup root check), started in
//! the start phase (node allocatable and QoS cgroups, enforcement, system
//! containers, periodic upkeep on a TaskSet).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::admission::AllocationError;
use super::capacity::{capacity_from_machine_info, ephemeral_storage_capacity};
use super::cgroup_manager::{CgroupManager, CgroupManagerImpl};
use super::cgroup_name::CgroupName;
use super::cpumanager::CpuManager;
use super::devicemanager::{
    DeviceManager, DeviceManagerError, DevicePluginCapacity, DeviceRunContainerOptions,
};
use super::error::{CmError, blocking};
use super::helpers::PodResourceOptions;
use super::host::HostPaths;
use super::internal_lifecycle::{
    InternalContainerLifecycle, NoopLifecycle, ResourceManagersLifecycle,
};
use super::kernel::{self, KernelTunableBehavior};
use super::memorymanager::MemoryManager;
use super::node_allocatable::{
    ENFORCE_KUBE_RESERVED, ENFORCE_PODS, ENFORCE_SYSTEM_RESERVED, cgroup_config_for,
    node_allocatable_absolute, node_allocatable_reservation, validate_node_allocatable,
};
use super::node_config::NodeConfig;
use super::pod_container_manager::{
    PodContainerManager, PodContainerManagerImpl, PodContainerManagerNoop,
};
use super::qos_container_manager::{
    ActivePodsFn, PERIODIC_QOS_CGROUP_UPDATE_INTERVAL, QosContainerManager, QosContainersInfo,
    QosSettings, ResourceListFn,
};
use super::resources::{CgroupConfig, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_PID, ResourceList};
use super::start_deps::{CmRuntimeDeps, start_resource_managers};
use super::system_containers::{self, SystemContainer};
use super::topologymanager::{AffinityStore, HintProvider, TopologyManager};
use crate::cadvisor::{MachineInfo, MachineInfoProvider};
use crate::util::clock::RealClock;
use crate::util::lifecycle::{Period, TaskSet};
use crate::util::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Pod};

/// The node allocatable cgroup's name under cgroupRoot.
pub const DEFAULT_NODE_ALLOCATABLE_CGROUP_NAME: &str = "kubepods";
/// Event reasons about node allocatable enforcement.
pub const EVENT_NODE_ALLOCATABLE_ENFORCED: &str = "NodeAllocatableEnforced";
pub const EVENT_FAILED_NODE_ALLOCATABLE_ENFORCEMENT: &str = "FailedNodeAllocatableEnforcement";
const ENSURE_STATE_INTERVAL: Duration = Duration::from_secs(60);
const PERIODIC_TASKS_INTERVAL: Duration = Duration::from_secs(300);
const NODE_ALLOCATABLE_RETRY: Duration = Duration::from_secs(60);

/// Event type (the kubelet's).
pub use crate::util::event_type::EventType;

/// Where the container manager reports events about the node.
pub trait NodeEventRecorder: Send + Sync + 'static {
    fn node_event(&self, event_type: EventType, reason: &str, message: &str);
}

/// A recorder that only logs (until the event recorder is wired in).
#[derive(Debug, Default)]
pub struct LoggingRecorder;

impl NodeEventRecorder for LoggingRecorder {
    fn node_event(&self, event_type: EventType, reason: &str, message: &str) {
        match event_type {
            EventType::Normal => tracing::info!(reason, message, "node event"),
            EventType::Warning => tracing::warn!(reason, message, "node event"),
        }
    }
}

/// Problems the node can run with, reported in node status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Set when CPU limits cannot be enforced (no CFS quota).
    pub soft_requirements: Option<String>,
}

/// What the kubelet asks of the container manager.
#[async_trait::async_trait]
pub trait ContainerManager: Send + Sync + 'static {
    /// Creates the node's cgroups and spawns their upkeep on `tasks`; starts
    /// the CPU manager (its reconcile loop needs `runtime`).
    async fn start(
        &self,
        tasks: &TaskSet,
        active_pods: ActivePodsFn,
        runtime: Option<CmRuntimeDeps>,
    ) -> Result<(), CmError>;
    /// cpu, memory, hugepages-* and (once started, or when asked) ephemeral-storage.
    async fn get_capacity(&self, local_storage_capacity_isolation: bool) -> ResourceList;
    /// What is withheld from pods: reservations and hard eviction thresholds.
    fn get_node_allocatable_reservation(&self) -> ResourceList;
    /// Capacity minus reservations (not eviction): the size of `kubepods`.
    fn get_node_allocatable_absolute(&self) -> ResourceList;
    fn get_node_config(&self) -> &NodeConfig;
    fn get_qos_containers_info(&self) -> QosContainersInfo;
    /// The driver literal of the node allocatable cgroup (`/kubepods`).
    fn get_pod_cgroup_root(&self) -> String;
    fn new_pod_container_manager(&self) -> Arc<dyn PodContainerManager>;
    /// Recomputes the QoS tiers; called after pod cgroups come and go.
    async fn update_qos_cgroups(&self) -> Result<(), CmError>;
    fn status(&self) -> Status;
    /// The kubelet's own cgroup (configured, or as last observed).
    fn kubelet_cgroups_name(&self) -> String;
    fn system_cgroups_name(&self) -> String;
    fn runtime_cgroups_name(&self) -> String;
    /// The machine the capacity was computed from.
    fn machine_info(&self) -> &MachineInfo;
    /// Admission: the resource managers allocate for every container of
    /// the pod (init containers first).
    fn allocate_resources(&self, _pod: &Pod) -> Result<(), AllocationError> {
        Ok(())
    }
    /// The hooks around container creation.
    fn internal_container_lifecycle(&self) -> Arc<dyn InternalContainerLifecycle> {
        Arc::new(NoopLifecycle)
    }
    /// The CPU manager, when the CPUManager gate is on.
    fn cpu_manager(&self) -> Option<Arc<CpuManager>> {
        None
    }
    /// The device plugin manager, when the DevicePlugins gate is on.
    fn device_manager(&self) -> Option<Arc<DeviceManager>> {
        None
    }
    /// The memory manager, when the MemoryManager gate is on.
    fn memory_manager(&self) -> Option<Arc<MemoryManager>> {
        None
    }
    /// Extended resources from the device plugins: capacity, allocatable,
    /// and resources whose plugin is gone for good (Go's
    /// GetDevicePluginResourceCapacity).
    fn get_device_plugin_resource_capacity(&self) -> DevicePluginCapacity {
        DevicePluginCapacity::default()
    }
    /// The device plugin resources admission may count on (healthy devices,
    /// never fewer than are allocated).
    fn device_plugin_admission_allocatable(&self) -> ResourceList {
        ResourceList::new()
    }
    /// What the device plugins put into the container's runtime config
    /// (Go's GetResources); PreStartContainer is called here when asked for.
    async fn get_resources(
        &self,
        _pod: &Pod,
        _container: &Container,
    ) -> Result<DeviceRunContainerOptions, DeviceManagerError> {
        Ok(DeviceRunContainerOptions::default())
    }
}

struct Inner {
    config: NodeConfig,
    host: HostPaths,
    machine: Arc<dyn MachineInfoProvider>,
    machine_info: MachineInfo,
    cgroups: Arc<dyn CgroupManager>,
    capacity: Mutex<ResourceList>,
    internal_capacity: Mutex<ResourceList>,
    cgroup_root: CgroupName,
    qos: Option<Arc<QosContainerManager>>,
    qos_info: QosContainersInfo,
    recorder: Arc<dyn NodeEventRecorder>,
    status: Mutex<Status>,
    kubelet_cgroups: Mutex<String>,
    cpu_manager: Option<Arc<CpuManager>>,
    memory_manager: Option<Arc<MemoryManager>>,
    device_manager: Option<Arc<DeviceManager>>,
    topology: Arc<TopologyManager>,
}

/// The container manager of a Linux node.
pub struct ContainerManagerImpl {
    inner: Arc<Inner>,
}

fn pid_limit(host: &HostPaths) -> Option<i64> {
    ["kernel/pid_max", "kernel/threads-max"]
        .iter()
        .filter_map(|f| kernel::get_sysctl(&host.sysctl, f).ok())
        .min()
}

fn lock<T: Clone>(m: &Mutex<T>) -> T {
    match m.lock() {
        Ok(g) => g.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

impl ContainerManagerImpl {
    /// Builds the container manager for this host (blocking: reads mountinfo,
    /// machine information and /proc; connects to systemd for that driver).
    pub fn new(
        config: NodeConfig,
        machine: Arc<dyn MachineInfoProvider>,
        host: HostPaths,
        recorder: Arc<dyn NodeEventRecorder>,
    ) -> Result<Self, CmError> {
        config.validate()?;
        let cgroups: Arc<dyn CgroupManager> =
            Arc::new(CgroupManagerImpl::for_host(config.cgroup_driver, &host)?);
        Self::with_cgroup_manager(config, machine, host, cgroups, recorder)
    }

    /// Builds the container manager over a given cgroup manager.
    pub fn with_cgroup_manager(
        config: NodeConfig,
        machine: Arc<dyn MachineInfoProvider>,
        host: HostPaths,
        cgroups: Arc<dyn CgroupManager>,
        recorder: Arc<dyn NodeEventRecorder>,
    ) -> Result<Self, CmError> {
        config.validate()?;
        if config.fail_swap_on {
            kernel::check_swap(&host.swaps())?;
        }
        let machine_info = machine.machine_info()?;
        let capacity = capacity_from_machine_info(&machine_info);
        let mut internal_capacity = capacity.clone();
        if let Some(max) = pid_limit(&host) {
            internal_capacity.insert(RESOURCE_PID.into(), Quantity::from_decimal(max));
        }
        let mut cgroup_root = CgroupName::from_cgroupfs(&config.cgroup_root);
        let mut qos = None;
        if config.cgroups_per_qos {
            if !cgroups.exists(&cgroup_root) {
                return Err(CmError::Config(format!(
                    "cgroupRoot (--cgroup-root) {} doesn't exist",
                    config.cgroup_root
                )));
            }
            tracing::info!(cgroup_root = %config.cgroup_root, "container manager verified user specified cgroup-root exists");
            cgroup_root = cgroup_root.child(DEFAULT_NODE_ALLOCATABLE_CGROUP_NAME)?;
            let settings = QosSettings {
                qos_reserved: config.qos_reserved.clone(),
                qos_reserved_enabled: config.features.qos_reserved,
                memory_qos: config.features.memory_qos && cgroups.subsystems().is_unified(),
                hugepage_sizes: super::resources::host_hugepage_sizes(&host.hugepages),
            };
            qos = Some(Arc::new(QosContainerManager::new(
                cgroups.clone(),
                &cgroup_root,
                settings,
            )?));
        }
        let qos_info = qos.as_ref().map(|q| q.info().clone()).unwrap_or_default();
        tracing::info!(node_config = ?config, "creating container manager object based on node config");
        let kubelet_cgroups = config.kubelet_cgroups_name.clone();
        let affinity = Arc::new(AffinityStore::default());
        let mut providers: Vec<Arc<dyn HintProvider>> = Vec::new();
        // Go's providers in order: device, CPU, memory.
        let device_manager = config.features.device_plugins.then(|| {
            let numa_nodes = machine_info.topology.iter().map(|n| n.id).collect();
            let dm = Arc::new(DeviceManager::new(
                config
                    .kubelet_root_dir
                    .join(super::devicemanager::api::DEVICE_PLUGINS_DIR),
                numa_nodes,
                affinity.clone(),
                Arc::new(RealClock),
            ));
            providers.push(dm.clone() as Arc<dyn HintProvider>);
            dm
        });
        let cpu_manager = if config.features.cpu_manager {
            let reservation = node_allocatable_reservation(&capacity, &config.node_allocatable);
            let cpu = CpuManager::new(
                &config.cpu_manager,
                &machine_info,
                &config.node_allocatable.reserved_system_cpus,
                &reservation,
                config.kubelet_root_dir.clone(),
                affinity.clone(),
            )
            .inspect_err(|e| tracing::error!(err = %e, "Failed to initialize cpu manager"))?;
            let cpu = Arc::new(cpu);
            providers.push(cpu.clone());
            Some(cpu)
        } else {
            None
        };
        let memory_manager = if config.features.memory_manager {
            let reservation = node_allocatable_reservation(&capacity, &config.node_allocatable);
            let memory = MemoryManager::new(
                &config.memory_manager,
                &machine_info,
                &reservation,
                config.kubelet_root_dir.clone(),
                affinity.clone(),
            )
            .inspect_err(|e| tracing::error!(err = %e, "Failed to initialize memory manager"))?;
            let memory = Arc::new(memory);
            providers.push(memory.clone());
            Some(memory)
        } else {
            None
        };
        let topology = build_topology_manager(&config, &machine_info, affinity, providers)?;
        Ok(ContainerManagerImpl {
            inner: Arc::new(Inner {
                config,
                host,
                machine,
                machine_info,
                cgroups,
                capacity: Mutex::new(capacity),
                internal_capacity: Mutex::new(internal_capacity),
                cgroup_root,
                qos,
                qos_info,
                recorder,
                status: Mutex::new(Status::default()),
                kubelet_cgroups: Mutex::new(kubelet_cgroups),
                cpu_manager,
                memory_manager,
                device_manager,
                topology: Arc::new(topology),
            }),
        })
    }

    /// The cgroup manager underneath.
    pub fn cgroup_manager(&self) -> Arc<dyn CgroupManager> {
        self.inner.cgroups.clone()
    }

    /// The node allocatable cgroup (cgroupRoot/kubepods with cgroupsPerQOS).
    pub fn cgroup_root(&self) -> &CgroupName {
        &self.inner.cgroup_root
    }
}

impl Inner {
    fn absolute(&self) -> ResourceList {
        node_allocatable_absolute(&lock(&self.capacity), &self.config.node_allocatable)
    }

    fn internal_absolute(&self) -> ResourceList {
        node_allocatable_absolute(
            &lock(&self.internal_capacity),
            &self.config.node_allocatable,
        )
    }

    /// What `kubepods` is sized to: allocatable when enforced on pods, else capacity.
    fn node_allocatable_limits(&self) -> ResourceList {
        if self.config.cgroups_per_qos && self.config.enforces(ENFORCE_PODS) {
            self.internal_absolute()
        } else {
            lock(&self.internal_capacity)
        }
    }

    fn set_soft_requirements(&self, message: Option<String>) {
        if let Ok(mut s) = self.status.lock() {
            s.soft_requirements = message;
        }
    }

    fn node_event(&self, t: EventType, reason: &str, message: &str) {
        self.recorder.node_event(t, reason, message);
    }

    /// Blocking part of start: requirements, tunables, node allocatable and QoS cgroups.
    fn setup_node(self: &Arc<Self>, active_pods: ActivePodsFn) -> Result<(), CmError> {
        let features = kernel::validate_system_requirements(self.cgroups.subsystems())?;
        if !features.cpu_hardcapping {
            tracing::info!("CPU CFS quotas are not enabled; CPU limits will not be enforced");
            self.set_soft_requirements(Some("CPU hardcapping unsupported".into()));
        }
        let behavior = if self.config.protect_kernel_defaults {
            KernelTunableBehavior::Error
        } else {
            KernelTunableBehavior::Modify
        };
        kernel::setup_kernel_tunables(&self.host.sysctl, behavior)?;
        if let Some(qos) = &self.qos {
            let limits = cgroup_config_for(&self.node_allocatable_limits()).unwrap_or_default();
            let config = CgroupConfig::new(self.cgroup_root.clone(), limits);
            if !self.cgroups.exists(&config.name) {
                self.cgroups.create(&config).inspect_err(|e| {
                    tracing::error!(cgroup = %self.cgroup_root, error = %e, "failed to create the node allocatable cgroup");
                })?;
            }
            let me = self.clone();
            let allocatable: ResourceListFn = Arc::new(move || me.absolute());
            qos.setup(allocatable, active_pods).map_err(|e| {
                CmError::Requirement(format!(
                    "failed to initialize top level QOS containers: {e}"
                ))
            })?;
        }
        self.enforce_reserved()
    }

    /// Applies system-reserved and kube-reserved limits to their existing cgroups.
    fn enforce_reserved(&self) -> Result<(), CmError> {
        let nc = &self.config.node_allocatable;
        let targets = [
            (
                ENFORCE_SYSTEM_RESERVED,
                "System",
                &nc.system_reserved_cgroup_name,
                &nc.system_reserved,
            ),
            (
                ENFORCE_KUBE_RESERVED,
                "Kube",
                &nc.kube_reserved_cgroup_name,
                &nc.kube_reserved,
            ),
        ];
        for (key, what, cgroup, reserved) in targets {
            if !self.config.enforces(key) {
                continue;
            }
            crate::vlog!(2, cgroup = %cgroup, limits = ?reserved, "enforcing {what} reserved");
            let name = self.cgroups.cgroup_name(cgroup);
            let result = match cgroup_config_for(reserved) {
                None => Err(CmError::Config(format!(
                    "{name} cgroup is not configured properly"
                ))),
                Some(_) if !self.cgroups.exists(&name) => {
                    Err(CmError::Config(format!("{name} cgroup does not exist")))
                }
                Some(r) => self.cgroups.update(&CgroupConfig::new(name.clone(), r)),
            };
            if let Err(e) = result {
                let message =
                    format!("Failed to enforce {what} Reserved Cgroup Limits on {cgroup:?}: {e}");
                self.node_event(
                    EventType::Warning,
                    EVENT_FAILED_NODE_ALLOCATABLE_ENFORCEMENT,
                    &message,
                );
                return Err(CmError::Requirement(message));
            }
            self.node_event(
                EventType::Normal,
                EVENT_NODE_ALLOCATABLE_ENFORCED,
                &format!(
                    "Updated limits on {} reserved cgroup {cgroup}",
                    what.to_lowercase()
                ),
            );
        }
        Ok(())
    }

    /// One pass over the system containers (every minute).
    fn ensure_state(&self) {
        let subsystems = self.cgroups.subsystems();
        let writer = Default::default();
        if !self.config.system_cgroups_name.is_empty() {
            let c = SystemContainer::new(&self.config.system_cgroups_name, subsystems, writer);
            if let Err(e) = system_containers::ensure_system_cgroups(&self.host, subsystems, &c) {
                tracing::info!(container = %c.name, error = %e, "failed to ensure state");
            }
        }
        if !self.config.kubelet_cgroups_name.is_empty() {
            let c = SystemContainer::new(&self.config.kubelet_cgroups_name, subsystems, writer);
            if let Err(e) = system_containers::ensure_process_in_container_with_oom_score(
                &self.host,
                subsystems,
                std::process::id(),
                self.config.kubelet_oom_score_adj,
                Some(&c),
            ) {
                tracing::info!(container = %c.name, error = %e, "failed to ensure state");
            }
        }
    }

    /// Without kubeletCgroups: keep the oom score and note where the kubelet runs (every 5 minutes).
    fn observe_kubelet(&self) {
        let subsystems = self.cgroups.subsystems();
        let pid = std::process::id();
        if let Err(e) = system_containers::ensure_process_in_container_with_oom_score(
            &self.host,
            subsystems,
            pid,
            self.config.kubelet_oom_score_adj,
            None,
        ) {
            tracing::error!(error = %e, "failed to ensure process in container with oom score");
            return;
        }
        match system_containers::get_container(&self.host, subsystems, pid) {
            Ok(name) => {
                if let Ok(mut k) = self.kubelet_cgroups.lock() {
                    *k = name;
                }
            }
            Err(e) => tracing::error!(error = %e, "failed to find cgroups of kubelet"),
        }
    }
}

/// Runs `f` on the blocking pool now and then `every` after each run
/// (Go's `wait.Until`), until cancelled.
fn spawn_periodic<F>(tasks: &TaskSet, name: &'static str, every: Duration, f: F)
where
    F: Fn() + Send + Sync + 'static,
{
    let f = Arc::new(f);
    tasks.spawn_periodic(
        name,
        Period::sliding(every),
        Arc::new(RealClock),
        move || {
            let f = f.clone();
            async move {
                let _ = tokio::task::spawn_blocking(move || f()).await;
            }
        },
    );
}

#[async_trait::async_trait]
impl ContainerManager for ContainerManagerImpl {
    async fn start(
        &self,
        tasks: &TaskSet,
        active_pods: ActivePodsFn,
        runtime: Option<CmRuntimeDeps>,
    ) -> Result<(), CmError> {
        let inner = self.inner.clone();
        let sources_ready = runtime.as_ref().map(|d| d.sources_ready.clone());
        start_resource_managers(
            inner.cpu_manager.as_ref(),
            inner.memory_manager.as_ref(),
            tasks,
            active_pods.clone(),
            runtime,
        )
        .await?;
        if inner.config.features.local_storage_capacity_isolation {
            let (machine, dir) = (inner.machine.clone(), inner.config.kubelet_root_dir.clone());
            let rootfs = blocking(move || {
                machine
                    .fs_info(&dir)
                    .map_err(|e| CmError::Requirement(format!("failed to get rootfs info: {e}")))
            })
            .await?;
            let storage = ephemeral_storage_capacity(&rootfs);
            for cap in [&inner.capacity, &inner.internal_capacity] {
                if let Ok(mut c) = cap.lock() {
                    c.insert(RESOURCE_EPHEMERAL_STORAGE.into(), storage);
                }
            }
        }
        validate_node_allocatable(&lock(&inner.capacity), &inner.config.node_allocatable)?;
        let setup = inner.clone();
        let setup_pods = active_pods.clone();
        blocking(move || setup.setup_node(setup_pods)).await?;

        if !inner.cgroup_root.is_empty() {
            let config = CgroupConfig::new(
                inner.cgroup_root.clone(),
                cgroup_config_for(&inner.node_allocatable_limits()).unwrap_or_default(),
            );
            let me = inner.clone();
            let token = tasks.token();
            tasks.spawn("node-allocatable-enforcement", async move {
                loop {
                    let (cm, cfg) = (me.cgroups.clone(), config.clone());
                    let result = blocking(move || cm.update(&cfg)).await;
                    match result {
                        Ok(()) => {
                            me.node_event(
                                EventType::Normal,
                                EVENT_NODE_ALLOCATABLE_ENFORCED,
                                "Updated Node Allocatable limit across pods",
                            );
                            return;
                        }
                        Err(e) => {
                            let message = format!(
                                "Failed to update Node Allocatable Limits {:?}: {e}",
                                me.cgroup_root.to_cgroupfs()
                            );
                            me.node_event(
                                EventType::Warning,
                                EVENT_FAILED_NODE_ALLOCATABLE_ENFORCEMENT,
                                &message,
                            );
                        }
                    }
                    tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tokio::time::sleep(NODE_ALLOCATABLE_RETRY) => {}
                    }
                }
            });
        }
        if let Some(qos) = inner.qos.clone() {
            spawn_periodic(
                tasks,
                "qos-cgroup-update",
                PERIODIC_QOS_CGROUP_UPDATE_INTERVAL,
                move || {
                    if let Err(e) = qos.update_cgroups() {
                        tracing::info!(error = %e, "failed to reserve QoS requests");
                    }
                },
            );
        }
        if !inner.config.system_cgroups_name.is_empty()
            || !inner.config.kubelet_cgroups_name.is_empty()
        {
            let me = inner.clone();
            spawn_periodic(
                tasks,
                "system-containers",
                ENSURE_STATE_INTERVAL,
                move || me.ensure_state(),
            );
        }
        if inner.config.kubelet_cgroups_name.is_empty() {
            let me = inner.clone();
            spawn_periodic(
                tasks,
                "kubelet-container",
                PERIODIC_TASKS_INTERVAL,
                move || me.observe_kubelet(),
            );
        }
        // Last, as in Go: plugins may register from here on.
        if let Some(dm) = &inner.device_manager {
            let ready = sources_ready.unwrap_or_else(|| Arc::new(|| true));
            dm.start(tasks, active_pods, ready)
                .await
                .map_err(|e| CmError::Requirement(e.to_string()))?;
        }
        Ok(())
    }

    async fn get_capacity(&self, local_storage_capacity_isolation: bool) -> ResourceList {
        let mut capacity = lock(&self.inner.capacity);
        if local_storage_capacity_isolation && !capacity.contains_key(RESOURCE_EPHEMERAL_STORAGE) {
            let (machine, dir) = (
                self.inner.machine.clone(),
                self.inner.config.kubelet_root_dir.clone(),
            );
            match blocking(move || machine.fs_info(&dir).map_err(CmError::from)).await {
                Ok(rootfs) => {
                    capacity.insert(
                        RESOURCE_EPHEMERAL_STORAGE.into(),
                        ephemeral_storage_capacity(&rootfs),
                    );
                }
                Err(e) => tracing::error!(error = %e, "unable to get rootfs data"),
            }
        }
        capacity
    }

    fn get_node_allocatable_reservation(&self) -> ResourceList {
        node_allocatable_reservation(
            &lock(&self.inner.capacity),
            &self.inner.config.node_allocatable,
        )
    }

    fn get_node_allocatable_absolute(&self) -> ResourceList {
        self.inner.absolute()
    }

    fn get_node_config(&self) -> &NodeConfig {
        &self.inner.config
    }

    fn get_qos_containers_info(&self) -> QosContainersInfo {
        self.inner.qos_info.clone()
    }

    fn get_pod_cgroup_root(&self) -> String {
        self.inner
            .cgroups
            .name(&self.inner.cgroup_root)
            .unwrap_or_else(|_| self.inner.cgroup_root.to_cgroupfs())
    }

    fn new_pod_container_manager(&self) -> Arc<dyn PodContainerManager> {
        let inner = &self.inner;
        if inner.qos.is_none() {
            return Arc::new(PodContainerManagerNoop {
                cgroup_root: inner.cgroup_root.clone(),
            });
        }
        let options = PodResourceOptions {
            enforce_cpu_limits: inner.config.enforce_cpu_limits,
            cpu_period_us: inner.config.cpu_cfs_quota_period_us(),
            custom_cpu_cfs_quota_period: inner.config.features.custom_cpu_cfs_quota_period,
            enforce_memory_qos: inner.config.features.memory_qos
                && inner.cgroups.subsystems().is_unified(),
        };
        Arc::new(PodContainerManagerImpl::new(
            inner.qos_info.clone(),
            inner.cgroups.clone(),
            inner.config.pod_pids_limit,
            options,
        ))
    }

    async fn update_qos_cgroups(&self) -> Result<(), CmError> {
        match self.inner.qos.clone() {
            Some(qos) => blocking(move || qos.update_cgroups()).await,
            None => Ok(()),
        }
    }

    fn status(&self) -> Status {
        lock(&self.inner.status)
    }

    fn kubelet_cgroups_name(&self) -> String {
        lock(&self.inner.kubelet_cgroups)
    }

    fn system_cgroups_name(&self) -> String {
        self.inner.config.system_cgroups_name.clone()
    }

    fn runtime_cgroups_name(&self) -> String {
        self.inner.config.runtime_cgroups_name.clone()
    }

    fn machine_info(&self) -> &MachineInfo {
        &self.inner.machine_info
    }

    fn allocate_resources(&self, pod: &Pod) -> Result<(), AllocationError> {
        self.inner.topology.admit(pod)
    }

    fn internal_container_lifecycle(&self) -> Arc<dyn InternalContainerLifecycle> {
        Arc::new(ResourceManagersLifecycle {
            cpu: self.inner.cpu_manager.clone(),
            memory: self.inner.memory_manager.clone(),
            topology: self.inner.topology.clone(),
        })
    }

    fn cpu_manager(&self) -> Option<Arc<CpuManager>> {
        self.inner.cpu_manager.clone()
    }

    fn device_manager(&self) -> Option<Arc<DeviceManager>> {
        self.inner.device_manager.clone()
    }

    fn memory_manager(&self) -> Option<Arc<MemoryManager>> {
        self.inner.memory_manager.clone()
    }

    fn get_device_plugin_resource_capacity(&self) -> DevicePluginCapacity {
        self.inner
            .device_manager
            .as_ref()
            .map(|d| d.get_capacity())
            .unwrap_or_default()
    }

    fn device_plugin_admission_allocatable(&self) -> ResourceList {
        self.inner
            .device_manager
            .as_ref()
            .map(|d| d.admission_allocatable())
            .unwrap_or_default()
    }

    async fn get_resources(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<DeviceRunContainerOptions, DeviceManagerError> {
        let Some(dm) = &self.inner.device_manager else {
            return Ok(DeviceRunContainerOptions::default());
        };
        Ok(dm
            .get_device_run_container_options(pod, container)
            .await?
            .unwrap_or_default())
    }
}

/// The topology manager over the providers (device, CPU, memory, in Go's
/// order); with the TopologyManager gate off it only lets them allocate.
fn build_topology_manager(
    config: &NodeConfig,
    machine: &MachineInfo,
    affinity: Arc<AffinityStore>,
    providers: Vec<Arc<dyn HintProvider>>,
) -> Result<TopologyManager, CmError> {
    let mut tm = config.topology_manager.clone();
    if !config.features.topology_manager {
        tm = Default::default();
    }
    let numa_nodes: Vec<u32> = machine.topology.iter().map(|n| n.id).collect();
    TopologyManager::new(&tm, &numa_nodes, affinity, providers).map_err(|e| {
        tracing::error!(err = %e, "Failed to initialize topology manager");
        CmError::TopologyManager(e)
    })
}
