//! The QoS tier cgroups: `burstable` and `besteffort` under the node
//! allocatable cgroup (Guaranteed pods sit in it directly). Their cpu shares
//! follow the active pods' requests; with the QOSReserved gate and a
//! `qosReserved` memory percentage, the lower tiers' memory limits leave room
//! for the requests of the tiers above them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::cgroup_manager::CgroupManager;
use super::cgroup_name::CgroupName;
use super::error::CmError;
use super::helpers::{MIN_SHARES, milli_cpu_to_shares, pod_requests_and_limits};
use super::qos::{QosClass, get_pod_qos};
use super::resources::{
    CgroupConfig, RESOURCE_CPU, RESOURCE_MEMORY, ResourceConfig, ResourceList,
    hugepage_unit_size_bytes,
};
use crate::util::quantity::Quantity;

/// How often the QoS tiers are brought back in line with the active pods.
pub const PERIODIC_QOS_CGROUP_UPDATE_INTERVAL: Duration = Duration::from_secs(60);

/// The pods the kubelet considers active.
pub type ActivePodsFn = Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>;
/// A resource list computed on demand (node allocatable).
pub type ResourceListFn = Arc<dyn Fn() -> ResourceList + Send + Sync>;

/// The cgroup of each QoS tier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosContainersInfo {
    pub guaranteed: CgroupName,
    pub burstable: CgroupName,
    pub best_effort: CgroupName,
}

impl QosContainersInfo {
    /// The tiers under the node allocatable cgroup `root`.
    pub fn under(root: &CgroupName) -> Result<Self, CmError> {
        Ok(QosContainersInfo {
            guaranteed: root.clone(),
            burstable: root.child(QosClass::Burstable.cgroup_dir())?,
            best_effort: root.child(QosClass::BestEffort.cgroup_dir())?,
        })
    }

    /// The parent cgroup of a pod of `class`.
    pub fn parent_of(&self, class: QosClass) -> &CgroupName {
        match class {
            QosClass::Guaranteed => &self.guaranteed,
            QosClass::Burstable => &self.burstable,
            QosClass::BestEffort => &self.best_effort,
        }
    }
}

/// Settings of the QoS tiers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosSettings {
    /// `qosReserved` (resource → percent), parsed.
    pub qos_reserved: BTreeMap<String, i64>,
    /// The QOSReserved feature gate.
    pub qos_reserved_enabled: bool,
    /// The MemoryQoS gate on a cgroup v2 host: memory.min from requests.
    pub memory_qos: bool,
    /// The host's huge page sizes (`2MB`), left unbounded on the tiers.
    pub hugepage_sizes: Vec<String>,
}

type Inputs = (ResourceListFn, ActivePodsFn);

/// Creates and maintains the QoS tiers.
pub struct QosContainerManager {
    cgroups: Arc<dyn CgroupManager>,
    info: QosContainersInfo,
    settings: QosSettings,
    inputs: Mutex<Option<Inputs>>,
    update: Mutex<()>,
}

const UNBOUNDED_HUGEPAGES: i64 = 1 << 62;

impl QosContainerManager {
    pub fn new(
        cgroups: Arc<dyn CgroupManager>,
        root: &CgroupName,
        settings: QosSettings,
    ) -> Result<Self, CmError> {
        Ok(QosContainerManager {
            cgroups,
            info: QosContainersInfo::under(root)?,
            settings,
            inputs: Mutex::new(None),
            update: Mutex::new(()),
        })
    }

    pub fn info(&self) -> &QosContainersInfo {
        &self.info
    }

    fn unbounded_hugepages(&self, r: &mut ResourceConfig) {
        for size in &self.settings.hugepage_sizes {
            if let Some(bytes) = hugepage_unit_size_bytes(size) {
                r.hugepage_limit.insert(bytes, UNBOUNDED_HUGEPAGES);
            }
        }
    }

    /// Creates the burstable and besteffort tiers (or brings existing ones to
    /// their start-up settings) and remembers where allocatable and the
    /// active pods come from. Blocking.
    pub fn setup(
        &self,
        allocatable: ResourceListFn,
        active_pods: ActivePodsFn,
    ) -> Result<(), CmError> {
        if !self.cgroups.exists(&self.info.guaranteed) {
            return Err(CmError::Requirement(format!(
                "root container {} doesn't exist",
                self.info.guaranteed
            )));
        }
        for (class, name) in [
            (QosClass::Burstable, &self.info.burstable),
            (QosClass::BestEffort, &self.info.best_effort),
        ] {
            let mut r = ResourceConfig::default();
            if class == QosClass::BestEffort {
                r.cpu_shares = Some(MIN_SHARES);
            }
            self.unbounded_hugepages(&mut r);
            let config = CgroupConfig::new(name.clone(), r);
            if !self.cgroups.exists(name) {
                self.cgroups.create(&config).map_err(|e| {
                    CmError::Requirement(format!(
                        "failed to create top level {class} QOS cgroup: {e}"
                    ))
                })?;
            } else {
                self.cgroups.update(&config).map_err(|e| {
                    CmError::Requirement(format!(
                        "failed to update top level {class} QOS cgroup: {e}"
                    ))
                })?;
            }
        }
        if let Ok(mut guard) = self.inputs.lock() {
            *guard = Some((allocatable, active_pods));
        }
        Ok(())
    }

    fn inputs(&self) -> Option<Inputs> {
        self.inputs.lock().ok().and_then(|g| g.clone())
    }

    /// Recomputes and writes the tiers' settings from the active pods. Blocking.
    pub fn update_cgroups(&self) -> Result<(), CmError> {
        let Some((allocatable, active_pods)) = self.inputs() else {
            return Ok(());
        };
        let _serial = self
            .update
            .lock()
            .map_err(|_| CmError::Join("QoS update lock poisoned".into()))?;
        let pods = active_pods();
        let mut configs: Vec<(QosClass, CgroupConfig)> = [
            (QosClass::Guaranteed, &self.info.guaranteed),
            (QosClass::Burstable, &self.info.burstable),
            (QosClass::BestEffort, &self.info.best_effort),
        ]
        .into_iter()
        .map(|(c, n)| (c, CgroupConfig::new(n.clone(), ResourceConfig::default())))
        .collect();

        let sums = qos_request_sums(&pods);
        for (class, config) in configs.iter_mut() {
            match class {
                QosClass::Burstable => {
                    config.resources.cpu_shares =
                        Some(milli_cpu_to_shares(sums.burstable_cpu_milli))
                }
                QosClass::BestEffort => config.resources.cpu_shares = Some(MIN_SHARES),
                QosClass::Guaranteed => {}
            }
            self.unbounded_hugepages(&mut config.resources);
        }
        if self.settings.memory_qos {
            set_memory_qos(&mut configs, &sums);
        }
        if self.settings.qos_reserved_enabled {
            if let Some(pct) = self.settings.qos_reserved.get(RESOURCE_MEMORY).copied() {
                set_memory_reserve(&mut configs, &sums, &allocatable(), pct);
            }
            let failed = configs
                .iter()
                .filter(|(_, c)| self.cgroups.update(c).is_err())
                .count();
            if failed == 0 {
                crate::vlog!(4, "updated QoS cgroup configuration");
                return Ok(());
            }
            if self.settings.qos_reserved.contains_key(RESOURCE_MEMORY) {
                self.retry_memory_reserve(&mut configs);
            }
        }
        for (_, config) in &configs {
            if let Err(e) = self.cgroups.update(config) {
                tracing::error!(cgroup = %config.name, error = %e, "failed to update QoS cgroup configuration");
                return Err(e);
            }
        }
        crate::vlog!(4, "updated QoS cgroup configuration");
        Ok(())
    }

    /// A tier whose usage is already above its new limit is limited at its
    /// usage instead, to stop it growing.
    fn retry_memory_reserve(&self, configs: &mut [(QosClass, CgroupConfig)]) {
        for (_, config) in configs.iter_mut() {
            let usage = match self.cgroups.memory_usage(&config.name) {
                Ok(u) => u,
                Err(e) => {
                    crate::vlog!(2, error = %e, "failed to get resource stats");
                    return;
                }
            };
            if config.resources.memory.is_some_and(|m| usage > m) {
                config.resources.memory = Some(usage);
            }
        }
    }
}

/// Request sums of the active pods per tier.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QosRequestSums {
    pub burstable_cpu_milli: i64,
    pub guaranteed_memory: i64,
    pub burstable_memory: i64,
}

/// Sums the CPU requests of Burstable pods and the memory requests of
/// Guaranteed and Burstable pods.
pub fn qos_request_sums(pods: &[Arc<Pod>]) -> QosRequestSums {
    let mut sums = QosRequestSums::default();
    for pod in pods {
        let class = get_pod_qos(pod);
        if class == QosClass::BestEffort {
            continue;
        }
        let (reqs, _) = pod_requests_and_limits(pod);
        let memory = reqs.get(RESOURCE_MEMORY).map_or(0, Quantity::value);
        match class {
            QosClass::Guaranteed => sums.guaranteed_memory += memory,
            QosClass::Burstable => {
                sums.burstable_memory += memory;
                sums.burstable_cpu_milli += reqs.get(RESOURCE_CPU).map_or(0, Quantity::milli_value);
            }
            QosClass::BestEffort => {}
        }
    }
    sums
}

fn set_memory_reserve(
    configs: &mut [(QosClass, CgroupConfig)],
    sums: &QosRequestSums,
    allocatable: &ResourceList,
    percent: i64,
) {
    let Some(memory) = allocatable.get(RESOURCE_MEMORY) else {
        crate::vlog!(
            2,
            "allocatable memory value could not be determined, not setting QoS memory limits"
        );
        return;
    };
    let allocatable = memory.value();
    if allocatable == 0 {
        crate::vlog!(
            2,
            "allocatable memory reported as 0, might be in standalone mode, not setting QoS memory limits"
        );
        return;
    }
    let burstable_limit = allocatable - sums.guaranteed_memory * percent / 100;
    let best_effort_limit = burstable_limit - sums.burstable_memory * percent / 100;
    for (class, config) in configs.iter_mut() {
        match class {
            QosClass::Burstable => config.resources.memory = Some(burstable_limit),
            QosClass::BestEffort => config.resources.memory = Some(best_effort_limit),
            QosClass::Guaranteed => {}
        }
    }
}

fn set_memory_qos(configs: &mut [(QosClass, CgroupConfig)], sums: &QosRequestSums) {
    let burstable_min = sums.burstable_memory;
    let guaranteed_min = sums.guaranteed_memory + burstable_min;
    for (class, config) in configs.iter_mut() {
        let min = match class {
            QosClass::Burstable => burstable_min,
            QosClass::Guaranteed => guaranteed_min,
            QosClass::BestEffort => 0,
        };
        if min > 0 {
            config
                .resources
                .unified
                .insert("memory.min".into(), min.to_string());
        }
    }
}
