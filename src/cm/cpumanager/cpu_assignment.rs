//! Picking CPUs by topology (Go's takeByTopologyNUMAPacked): whole NUMA
//! nodes or sockets first (whichever is the bigger unit), then whole
//! physical cores, then single threads; at each level the candidates with
//! the fewest free CPUs go first, ties by lowest id, so allocations pack.

use super::error::CpuManagerError;
use super::topology::{CpuDetails, CpuTopology};
use crate::cm::cpuset::CpuSet;

pub(super) struct Accumulator<'a> {
    topo: &'a CpuTopology,
    /// What is still free to take.
    pub(super) details: CpuDetails,
    needed: i64,
    pub(super) result: CpuSet,
    /// NUMA nodes hold sockets (one NUMA node per socket or more sockets
    /// than nodes): nodes are the first level; otherwise sockets are.
    numa_first: bool,
}

impl<'a> Accumulator<'a> {
    pub(super) fn new(topo: &'a CpuTopology, available: &CpuSet, num_cpus: usize) -> Self {
        Accumulator {
            topo,
            details: topo.details.keep_only(available),
            needed: num_cpus as i64,
            result: CpuSet::new(),
            numa_first: topo.num_sockets >= topo.num_numa_nodes,
        }
    }

    /// Ascending by free CPUs in each id, then by id.
    fn sorted(&self, ids: CpuSet, cpus_of: impl Fn(&CpuDetails, &[u32]) -> CpuSet) -> Vec<u32> {
        let mut v: Vec<(usize, u32)> = ids
            .iter()
            .map(|id| (cpus_of(&self.details, &[id]).len(), id))
            .collect();
        v.sort();
        v.into_iter().map(|(_, id)| id).collect()
    }

    pub(super) fn sorted_numa_nodes(&self) -> Vec<u32> {
        if self.numa_first {
            self.sorted(self.details.numa_nodes(), CpuDetails::cpus_in_numa_nodes)
        } else {
            self.sorted_sockets()
                .into_iter()
                .flat_map(|s| {
                    self.sorted(
                        self.details.numa_nodes_in_sockets(&[s]),
                        CpuDetails::cpus_in_numa_nodes,
                    )
                })
                .collect()
        }
    }

    fn sorted_sockets(&self) -> Vec<u32> {
        if self.numa_first {
            self.sorted_numa_nodes()
                .into_iter()
                .flat_map(|n| {
                    self.sorted(
                        self.details.sockets_in_numa_nodes(&[n]),
                        CpuDetails::cpus_in_sockets,
                    )
                })
                .collect()
        } else {
            self.sorted(self.details.sockets(), CpuDetails::cpus_in_sockets)
        }
    }

    fn sorted_cores(&self) -> Vec<u32> {
        if self.numa_first {
            self.sorted_sockets()
                .into_iter()
                .flat_map(|s| {
                    self.sorted(
                        self.details.cores_in_sockets(&[s]),
                        CpuDetails::cpus_in_cores,
                    )
                })
                .collect()
        } else {
            self.sorted_numa_nodes()
                .into_iter()
                .flat_map(|n| {
                    self.sorted(
                        self.details.cores_in_numa_nodes(&[n]),
                        CpuDetails::cpus_in_cores,
                    )
                })
                .collect()
        }
    }

    fn sorted_cpus(&self) -> Vec<u32> {
        self.sorted_cores()
            .into_iter()
            .flat_map(|c| self.details.cpus_in_cores(&[c]).to_vec())
            .collect()
    }

    pub(super) fn take(&mut self, cpus: &CpuSet) {
        self.result = self.result.union(cpus);
        self.details = self
            .details
            .keep_only(&self.details.cpus().difference(&self.result));
        self.needed -= cpus.len() as i64;
    }

    /// CPUs still to take (negative: too many taken).
    pub(super) fn needed(&self) -> i64 {
        self.needed
    }

    /// The fewest and most NUMA nodes the request could span, counting
    /// in groups of `group` CPUs.
    pub(super) fn numa_nodes_needed(&self, group: usize) -> (usize, usize) {
        let group = group.max(1);
        let num_numa = self.topo.details.numa_nodes().len().max(1);
        let available_numa = self.details.numa_nodes().len();
        let num_cpus = self.topo.details.cpus().len();
        let groups = num_cpus.saturating_sub(1) / group + 1;
        let groups_per_numa = groups.saturating_sub(1) / num_numa + 1;
        let needed = usize::try_from(self.needed).unwrap_or(0);
        let groups_needed = needed.saturating_sub(1) / group + 1;
        let min = groups_needed.saturating_sub(1) / groups_per_numa + 1;
        (min, groups_needed.min(available_numa))
    }

    fn needs(&self, n: usize) -> bool {
        self.needed >= n as i64
    }

    pub(super) fn is_satisfied(&self) -> bool {
        self.needed < 1
    }

    pub(super) fn is_failed(&self) -> bool {
        self.needed > self.details.cpus().len() as i64
    }

    fn take_full_numa_nodes(&mut self) {
        let free: Vec<u32> = self
            .sorted_numa_nodes()
            .into_iter()
            .filter(|n| {
                self.details.cpus_in_numa_nodes(&[*n]).len()
                    == self.topo.details.cpus_in_numa_nodes(&[*n]).len()
            })
            .collect();
        for numa in free {
            let cpus = self.topo.details.cpus_in_numa_nodes(&[numa]);
            if self.needs(cpus.len()) {
                crate::vlog!(4, numa, "takeFullNUMANodes: claiming NUMA node");
                self.take(&cpus);
            }
        }
    }

    fn take_full_sockets(&mut self) {
        let free: Vec<u32> = self
            .sorted_sockets()
            .into_iter()
            .filter(|s| self.details.cpus_in_sockets(&[*s]).len() == self.topo.cpus_per_socket())
            .collect();
        for socket in free {
            let cpus = self.topo.details.cpus_in_sockets(&[socket]);
            if self.needs(cpus.len()) {
                crate::vlog!(4, socket, "takeFullSockets: claiming socket");
                self.take(&cpus);
            }
        }
    }

    fn take_full_cores(&mut self) {
        let free: Vec<u32> = self
            .sorted_cores()
            .into_iter()
            .filter(|c| self.details.cpus_in_cores(&[*c]).len() == self.topo.cpus_per_core())
            .collect();
        for core in free {
            let cpus = self.topo.details.cpus_in_cores(&[core]);
            if self.needs(cpus.len()) {
                crate::vlog!(4, core, "takeFullCores: claiming core");
                self.take(&cpus);
            }
        }
    }

    fn take_remaining_cpus(&mut self) {
        for cpu in self.sorted_cpus() {
            crate::vlog!(4, cpu, "takeRemainingCPUs: claiming CPU");
            self.take(&CpuSet::of(cpu));
            if self.is_satisfied() {
                return;
            }
        }
    }
}

/// Takes `num_cpus` of `available`, packed by topology.
pub fn take_by_topology(
    topo: &CpuTopology,
    available: &CpuSet,
    num_cpus: usize,
) -> Result<CpuSet, CpuManagerError> {
    let mut acc = Accumulator::new(topo, available, num_cpus);
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(CpuManagerError::NotEnoughCpus);
    }
    if acc.numa_first {
        acc.take_full_numa_nodes();
    } else {
        acc.take_full_sockets();
    }
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.numa_first {
        acc.take_full_sockets();
    } else {
        acc.take_full_numa_nodes();
    }
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    acc.take_full_cores();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    acc.take_remaining_cpus();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    Err(CpuManagerError::AllocationFailed)
}
