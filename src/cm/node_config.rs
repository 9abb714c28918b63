//! The container manager's configuration (Go's `cm.NodeConfig`), built by
//! the start-up pipeline from flags and the config file, and its checks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::cgroup_manager::CgroupDriver;
use super::cpumanager::CpuManagerConfig;
use super::error::CmError;
use super::memorymanager::MemoryManagerConfig;
use super::node_allocatable::{
    ENFORCE_KUBE_RESERVED, ENFORCE_NONE, ENFORCE_PODS, ENFORCE_SYSTEM_RESERVED,
    NodeAllocatableConfig,
};
use super::topologymanager::TopologyManagerConfig;

/// Feature gates the container manager consults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmFeatureGates {
    /// QOSReserved (alpha): qosReserved memory percentages are applied.
    pub qos_reserved: bool,
    /// MemoryQoS (alpha): memory.min/high on cgroup v2.
    pub memory_qos: bool,
    /// CustomCPUCFSQuotaPeriod (alpha): cpuCFSQuotaPeriod also scales quotas.
    pub custom_cpu_cfs_quota_period: bool,
    /// localStorageCapacityIsolation: ephemeral-storage is part of capacity.
    pub local_storage_capacity_isolation: bool,
    /// CPUManager (beta, on): the CPU manager runs.
    pub cpu_manager: bool,
    /// TopologyManager (beta, on): admission aligns the managers' resources.
    pub topology_manager: bool,
    /// MemoryManager (beta, on): the memory manager runs.
    pub memory_manager: bool,
    /// DevicePlugins (beta, on): the device plugin manager runs.
    pub device_plugins: bool,
}

impl Default for CmFeatureGates {
    fn default() -> Self {
        CmFeatureGates {
            qos_reserved: false,
            memory_qos: false,
            custom_cpu_cfs_quota_period: false,
            local_storage_capacity_isolation: true,
            cpu_manager: true,
            topology_manager: true,
            memory_manager: true,
            device_plugins: true,
        }
    }
}

/// Everything the container manager is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// The node's name, for the events about node allocatable enforcement.
    pub node_name: String,
    /// `--runtime-cgroups`: reported for stats; the kubelet does not move the runtime.
    pub runtime_cgroups_name: String,
    /// `systemCgroups`: non-kernel processes of the root cgroup are moved here.
    pub system_cgroups_name: String,
    /// `kubeletCgroups`: the kubelet keeps itself here.
    pub kubelet_cgroups_name: String,
    /// `oomScoreAdj` of the kubelet process.
    pub kubelet_oom_score_adj: i32,
    /// `cgroupsPerQOS`.
    pub cgroups_per_qos: bool,
    /// `cgroupRoot`, in cgroupfs form (`/` by default with cgroupsPerQOS).
    pub cgroup_root: String,
    pub cgroup_driver: CgroupDriver,
    /// `--root-dir`: its filesystem is the node's ephemeral storage.
    pub kubelet_root_dir: PathBuf,
    /// `protectKernelDefaults`: differing kernel tunables are an error, not fixed.
    pub protect_kernel_defaults: bool,
    pub node_allocatable: NodeAllocatableConfig,
    /// `qosReserved`, parsed (resource → percent).
    pub qos_reserved: BTreeMap<String, i64>,
    /// `podPidsLimit` (-1 or 0: unlimited).
    pub pod_pids_limit: i64,
    /// `cpuCFSQuota`.
    pub enforce_cpu_limits: bool,
    /// `cpuCFSQuotaPeriod`.
    pub cpu_cfs_quota_period: Duration,
    /// `failSwapOn`.
    pub fail_swap_on: bool,
    pub features: CmFeatureGates,
    /// `cpuManagerPolicy`, its options and reconcile period.
    pub cpu_manager: CpuManagerConfig,
    /// `topologyManagerPolicy` and `topologyManagerScope`.
    pub topology_manager: TopologyManagerConfig,
    /// `memoryManagerPolicy` and `reservedMemory`.
    pub memory_manager: MemoryManagerConfig,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            node_name: String::new(),
            runtime_cgroups_name: String::new(),
            system_cgroups_name: String::new(),
            kubelet_cgroups_name: String::new(),
            kubelet_oom_score_adj: -999,
            cgroups_per_qos: true,
            cgroup_root: "/".into(),
            cgroup_driver: CgroupDriver::Cgroupfs,
            kubelet_root_dir: PathBuf::from("/var/lib/kubelet"),
            protect_kernel_defaults: false,
            node_allocatable: NodeAllocatableConfig {
                enforce_node_allocatable: [ENFORCE_PODS.to_string()].into(),
                ..Default::default()
            },
            qos_reserved: BTreeMap::new(),
            pod_pids_limit: -1,
            enforce_cpu_limits: true,
            cpu_cfs_quota_period: Duration::from_millis(100),
            fail_swap_on: true,
            features: CmFeatureGates::default(),
            cpu_manager: CpuManagerConfig::default(),
            topology_manager: TopologyManagerConfig::default(),
            memory_manager: MemoryManagerConfig {
                policy: super::memorymanager::POLICY_NONE.into(),
                reserved_memory: Vec::new(),
            },
        }
    }
}

impl NodeConfig {
    /// With cgroupsPerQOS and no cgroupRoot, the root is `/` (the start-up
    /// pipeline applies this before building the container manager, as Go does).
    pub fn apply_cgroup_root_default(&mut self) {
        if self.cgroups_per_qos && self.cgroup_root.is_empty() {
            tracing::info!(
                "--cgroups-per-qos enabled, but --cgroup-root was not specified; defaulting to /"
            );
            self.cgroup_root = "/".into();
        }
    }

    /// The CFS period in µs.
    pub fn cpu_cfs_quota_period_us(&self) -> u64 {
        self.cpu_cfs_quota_period.as_micros() as u64
    }

    /// Whether node allocatable is enforced on `key` (`pods`, `system-reserved`, `kube-reserved`).
    pub fn enforces(&self, key: &str) -> bool {
        self.node_allocatable.enforce_node_allocatable.contains(key)
    }

    /// The combinations the kubelet refuses, each naming its field and flag.
    pub fn validate(&self) -> Result<(), CmError> {
        let mut errs = Vec::new();
        let enforce = &self.node_allocatable.enforce_node_allocatable;
        if self.cgroups_per_qos && self.cgroup_root.is_empty() {
            errs.push("cgroupsPerQOS (--cgroups-per-qos) was specified and cgroupRoot (--cgroup-root) was not specified. To enable the QoS cgroup hierarchy you need to specify a valid cgroupRoot".to_string());
        }
        let enforcing = enforce.iter().any(|k| k != ENFORCE_NONE);
        if !self.cgroups_per_qos && enforcing {
            errs.push("enforceNodeAllocatable (--enforce-node-allocatable) is not supported unless cgroupsPerQOS (--cgroups-per-qos) is turned on".into());
        }
        if !self.system_cgroups_name.is_empty() && self.cgroup_root.is_empty() {
            errs.push("systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified".into());
        }
        if self.system_cgroups_name == "/" {
            errs.push("systemCgroups (--system-cgroups) cannot be the root cgroup \"/\"".into());
        }
        for key in enforce {
            match key.as_str() {
                ENFORCE_PODS => {}
                ENFORCE_SYSTEM_RESERVED => {
                    if self.node_allocatable.system_reserved_cgroup_name.is_empty() {
                        errs.push(format!("systemReservedCgroup (--system-reserved-cgroup) must be specified when {key:?} is in enforceNodeAllocatable (--enforce-node-allocatable)"));
                    }
                }
                ENFORCE_KUBE_RESERVED => {
                    if self.node_allocatable.kube_reserved_cgroup_name.is_empty() {
                        errs.push(format!("kubeReservedCgroup (--kube-reserved-cgroup) must be specified when {key:?} is in enforceNodeAllocatable (--enforce-node-allocatable)"));
                    }
                }
                ENFORCE_NONE => {
                    if enforce.len() > 1 {
                        errs.push(format!("enforceNodeAllocatable (--enforce-node-allocatable) may not contain other enforcements when {ENFORCE_NONE:?} is given"));
                    }
                }
                other => errs.push(format!(
                    "option {other:?} given for enforceNodeAllocatable (--enforce-node-allocatable); valid options are {ENFORCE_PODS:?}, {ENFORCE_SYSTEM_RESERVED:?}, {ENFORCE_KUBE_RESERVED:?} and {ENFORCE_NONE:?}"
                )),
            }
        }
        if self.cpu_cfs_quota_period < Duration::from_millis(1)
            || self.cpu_cfs_quota_period > Duration::from_secs(1)
        {
            errs.push(
                "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) must be between 1ms and 1s, inclusive"
                    .into(),
            );
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(CmError::Config(errs.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        type Edit = fn(&mut NodeConfig);
        let cases: &[(&str, Edit, Option<&str>)] = &[
            ("defaults", |_| {}, None),
            (
                "qos without root",
                |c| c.cgroup_root.clear(),
                Some("cgroupRoot (--cgroup-root) was not specified"),
            ),
            (
                "enforcement without qos",
                |c| c.cgroups_per_qos = false,
                Some("not supported unless cgroupsPerQOS"),
            ),
            (
                "no qos, enforcement none",
                |c| {
                    c.cgroups_per_qos = false;
                    c.node_allocatable.enforce_node_allocatable = ["none".to_string()].into();
                },
                None,
            ),
            (
                "system cgroups without root",
                |c| {
                    c.cgroups_per_qos = false;
                    c.node_allocatable.enforce_node_allocatable.clear();
                    c.cgroup_root.clear();
                    c.system_cgroups_name = "/system".into();
                },
                Some("systemCgroups (--system-cgroups) was specified"),
            ),
            (
                "system cgroups at root",
                |c| c.system_cgroups_name = "/".into(),
                Some("cannot be the root"),
            ),
            (
                "system-reserved needs its cgroup",
                |c| {
                    c.node_allocatable
                        .enforce_node_allocatable
                        .insert("system-reserved".into());
                },
                Some("systemReservedCgroup (--system-reserved-cgroup) must be specified"),
            ),
            (
                "kube-reserved with its cgroup",
                |c| {
                    c.node_allocatable
                        .enforce_node_allocatable
                        .insert("kube-reserved".into());
                    c.node_allocatable.kube_reserved_cgroup_name = "/kube".into();
                },
                None,
            ),
            (
                "none with others",
                |c| {
                    c.node_allocatable
                        .enforce_node_allocatable
                        .insert("none".into());
                },
                Some("may not contain other enforcements"),
            ),
            (
                "unknown key",
                |c| {
                    c.node_allocatable
                        .enforce_node_allocatable
                        .insert("everything".into());
                },
                Some("option \"everything\""),
            ),
            (
                "period too long",
                |c| c.cpu_cfs_quota_period = Duration::from_secs(2),
                Some("between 1ms and 1s"),
            ),
        ];
        let mut c = NodeConfig {
            cgroup_root: String::new(),
            ..Default::default()
        };
        c.apply_cgroup_root_default();
        assert_eq!(c.cgroup_root, "/");
        c.validate().unwrap();
        for (what, edit, want) in cases {
            let mut c = NodeConfig::default();
            edit(&mut c);
            match (c.validate(), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{what}: {e}"),
                (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
            }
        }
    }
}
