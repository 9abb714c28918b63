//! The CPU topology the static policy allocates over: which socket, NUMA
//! node and physical core each logical CPU belongs to. Built from the
//! machine description cadvisor reads from sysfs (`cpuN/topology/core_id`,
//! `physical_package_id`, the node directories' `cpulist`).

use std::collections::BTreeMap;

use super::error::CpuManagerError;
use crate::cadvisor::MachineInfo;
use crate::cm::cpuset::CpuSet;

/// Where one logical CPU sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuInfo {
    pub numa_node_id: u32,
    pub socket_id: u32,
    /// The lowest thread id of the physical core (unique machine-wide).
    pub core_id: u32,
}

/// Logical CPU id → its place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuDetails(pub BTreeMap<u32, CpuInfo>);

impl CpuDetails {
    /// Only the CPUs of `cpus`.
    pub fn keep_only(&self, cpus: &CpuSet) -> CpuDetails {
        CpuDetails(
            self.0
                .iter()
                .filter(|(id, _)| cpus.contains(**id))
                .map(|(id, info)| (*id, *info))
                .collect(),
        )
    }

    pub fn get(&self, cpu: u32) -> Option<&CpuInfo> {
        self.0.get(&cpu)
    }

    fn collect_where(
        &self,
        keep: impl Fn(&CpuInfo) -> bool,
        value: impl Fn(u32, &CpuInfo) -> u32,
    ) -> CpuSet {
        self.0
            .iter()
            .filter(|(_, info)| keep(info))
            .map(|(id, info)| value(*id, info))
            .collect()
    }

    pub fn cpus(&self) -> CpuSet {
        self.0.keys().copied().collect()
    }

    pub fn numa_nodes(&self) -> CpuSet {
        self.collect_where(|_| true, |_, i| i.numa_node_id)
    }

    pub fn sockets(&self) -> CpuSet {
        self.collect_where(|_| true, |_, i| i.socket_id)
    }

    pub fn cores(&self) -> CpuSet {
        self.collect_where(|_| true, |_, i| i.core_id)
    }

    pub fn numa_nodes_in_sockets(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.socket_id), |_, i| i.numa_node_id)
    }

    pub fn sockets_in_numa_nodes(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.numa_node_id), |_, i| i.socket_id)
    }

    pub fn cores_in_numa_nodes(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.numa_node_id), |_, i| i.core_id)
    }

    pub fn cores_in_sockets(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.socket_id), |_, i| i.core_id)
    }

    pub fn cpus_in_sockets(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.socket_id), |id, _| id)
    }

    pub fn cpus_in_numa_nodes(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.numa_node_id), |id, _| id)
    }

    pub fn cpus_in_cores(&self, ids: &[u32]) -> CpuSet {
        self.collect_where(|i| ids.contains(&i.core_id), |id, _| id)
    }
}

/// The machine's CPUs, counted and placed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTopology {
    pub num_cpus: usize,
    pub num_cores: usize,
    pub num_sockets: usize,
    pub num_numa_nodes: usize,
    pub details: CpuDetails,
}

impl CpuTopology {
    /// Threads per physical core (0 without cores).
    pub fn cpus_per_core(&self) -> usize {
        self.num_cpus.checked_div(self.num_cores).unwrap_or(0)
    }

    /// Logical CPUs per socket (0 without sockets).
    pub fn cpus_per_socket(&self) -> usize {
        self.num_cpus.checked_div(self.num_sockets).unwrap_or(0)
    }

    /// Builds the topology from the machine description.
    pub fn discover(machine: &MachineInfo) -> Result<CpuTopology, CpuManagerError> {
        if machine.num_cores == 0 {
            return Err(CpuManagerError::Topology(
                "could not detect number of cpus".into(),
            ));
        }
        let mut details = BTreeMap::new();
        let mut num_cores = 0;
        for node in &machine.topology {
            num_cores += node.cores.len();
            for core in &node.cores {
                let core_id = unique_core_id(&core.threads).inspect_err(|e| {
                    tracing::error!(socket = core.socket_id, core = core.id, threads = ?core.threads, error = %e, "Could not get unique coreID for socket");
                })?;
                for cpu in &core.threads {
                    details.insert(
                        *cpu,
                        CpuInfo {
                            numa_node_id: node.id,
                            socket_id: core.socket_id,
                            core_id,
                        },
                    );
                }
            }
        }
        let details = CpuDetails(details);
        Ok(CpuTopology {
            num_cpus: machine.num_cores as usize,
            num_sockets: machine.num_sockets as usize,
            num_cores,
            num_numa_nodes: details.numa_nodes().len(),
            details,
        })
    }
}

/// A core is named by its lowest thread id.
fn unique_core_id(threads: &[u32]) -> Result<u32, CpuManagerError> {
    let Some(min) = threads.iter().min() else {
        return Err(CpuManagerError::Topology("no cpus provided".into()));
    };
    let unique: CpuSet = threads.iter().copied().collect();
    if unique.len() != threads.len() {
        return Err(CpuManagerError::Topology(
            "cpus provided are not unique".into(),
        ));
    }
    Ok(*min)
}
