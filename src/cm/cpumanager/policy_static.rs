//! The static policy: containers of Guaranteed pods that request whole
//! CPUs get those CPUs to themselves; everything else runs on the shared
//! pool (every CPU not owned by a container, the reserved ones included).
//! CPUs given to init containers go back to the app containers of the
//! same pod first.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::cpu_assignment::take_by_topology;
use super::cpu_distribute::take_by_topology_numa_distributed;
use super::error::CpuManagerError;
use super::policy_options::{OptionGates, StaticPolicyOptions};
use super::state::State;
use super::topology::CpuTopology;
use crate::cm::cpuset::CpuSet;
use crate::cm::helpers::container_resources;
use crate::cm::qos::{QosClass, get_pod_qos};
use crate::cm::resources::RESOURCE_CPU;
use crate::cm::topologymanager::BitMask;

pub const POLICY_STATIC: &str = "static";

/// The static policy's configuration and bookkeeping.
#[derive(Debug, Clone)]
pub struct StaticPolicy {
    topology: CpuTopology,
    reserved: CpuSet,
    options: StaticPolicyOptions,
    /// Pod UID → CPUs its init containers held, free for its app containers.
    cpus_to_reuse: HashMap<String, CpuSet>,
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

impl StaticPolicy {
    /// `num_reserved`: ceil of the cpu reservation; `reserved_cpus`: the
    /// `reservedSystemCPUs` list, which wins when given.
    pub fn new(
        topology: CpuTopology,
        num_reserved: usize,
        reserved_cpus: &CpuSet,
        options: &BTreeMap<String, String>,
        gates: OptionGates,
        topology_policy: &str,
    ) -> Result<Self, CpuManagerError> {
        let options = StaticPolicyOptions::new(options, gates)
            .map_err(|e| CpuManagerError::Options(Box::new(e)))?;
        options.validate(&topology, topology_policy)?;
        tracing::info!(options = ?options, "Static policy created with configuration");
        let reserved = if !reserved_cpus.is_empty() {
            reserved_cpus.clone()
        } else {
            take(&topology, options, &topology.details.cpus(), num_reserved).unwrap_or_default()
        };
        if reserved.len() != num_reserved {
            return Err(CpuManagerError::ReservationSize {
                reserved,
                wanted: num_reserved,
            });
        }
        tracing::info!(reserved_size = reserved.len(), reserved = %reserved, "Reserved CPUs not available for exclusive assignment");
        Ok(StaticPolicy {
            topology,
            reserved,
            options,
            cpus_to_reuse: HashMap::new(),
        })
    }

    /// CPUs the pod's init containers held, free for its other containers.
    pub fn reusable_cpus(&self, pod_uid: &str) -> CpuSet {
        self.cpus_to_reuse.get(pod_uid).cloned().unwrap_or_default()
    }

    pub fn options(&self) -> StaticPolicyOptions {
        self.options
    }

    pub fn reserved(&self) -> &CpuSet {
        &self.reserved
    }

    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// Checks a restored state against the machine and the reservation;
    /// an empty state gets every CPU as its shared pool.
    pub fn start(&self, s: &mut State) -> Result<(), CpuManagerError> {
        self.validate_state(s).inspect_err(|e| {
            tracing::error!(err = %e, "Static policy invalid state, please drain node and remove policy state file");
        })
    }

    fn validate_state(&self, s: &mut State) -> Result<(), CpuManagerError> {
        let default = s.default_cpu_set();
        let all = self.topology.details.cpus();
        if default.is_empty() {
            if !s.assignments().is_empty() {
                return Err(CpuManagerError::InvalidState(
                    "default cpuset cannot be empty".into(),
                ));
            }
            s.set_default_cpu_set(all);
            return Ok(());
        }
        if !self.reserved.is_subset_of(&default) {
            return Err(CpuManagerError::InvalidState(format!(
                "not all reserved cpus: \"{}\" are present in defaultCpuSet: \"{default}\"",
                self.reserved
            )));
        }
        let mut known = default.clone();
        for (pod, containers) in s.assignments() {
            for (container, set) in containers {
                if !default.intersection(set).is_empty() {
                    return Err(CpuManagerError::InvalidState(format!(
                        "pod: {pod}, container: {container} cpuset: \"{set}\" overlaps with default cpuset \"{default}\""
                    )));
                }
                known = known.union(set);
            }
        }
        if known != all {
            return Err(CpuManagerError::InvalidState(format!(
                "current set of available CPUs \"{all}\" doesn't match with CPUs in state \"{known}\""
            )));
        }
        Ok(())
    }

    /// The shared pool less the reserved CPUs: what can be handed out.
    pub fn allocatable_cpus(&self, s: &State) -> CpuSet {
        s.default_cpu_set().difference(&self.reserved)
    }

    fn update_cpus_to_reuse(&mut self, pod: &Pod, container: &Container, set: &CpuSet) {
        let uid = pod_uid(pod).to_string();
        self.cpus_to_reuse.retain(|k, _| *k == uid);
        let reuse = self.cpus_to_reuse.entry(uid).or_default();
        let is_init = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|ics| ics.iter().any(|ic| ic.name == container.name));
        *reuse = if is_init {
            reuse.union(set)
        } else {
            reuse.difference(set)
        };
    }

    /// Gives the container its exclusive CPUs when it qualifies.
    /// `numa_affinity`: the NUMA nodes the topology manager chose (CPUs
    /// there are taken first).
    pub fn allocate(
        &mut self,
        s: &mut State,
        pod: &Pod,
        container: &Container,
        numa_affinity: Option<BitMask>,
    ) -> Result<(), CpuManagerError> {
        let num_cpus = guaranteed_cpus(pod, container);
        if num_cpus == 0 {
            return Ok(());
        }
        tracing::info!(pod = %pod_name(pod), container_name = %container.name, "Static policy: Allocate");
        let per_core = self.topology.cpus_per_core();
        if self.options.full_physical_cpus_only
            && per_core != 0
            && !num_cpus.is_multiple_of(per_core)
        {
            return Err(CpuManagerError::SmtAlignment {
                requested: num_cpus,
                cpus_per_core: per_core,
            });
        }
        let uid = pod_uid(pod);
        if let Some(set) = s.get_cpu_set(uid, &container.name) {
            self.update_cpus_to_reuse(pod, container, &set);
            tracing::info!(pod = %pod_name(pod), container_name = %container.name, "Static policy: container already present in state, skipping");
            return Ok(());
        }
        let reusable = self.cpus_to_reuse.get(uid).cloned().unwrap_or_default();
        let set = self
            .allocate_cpus(s, num_cpus, numa_affinity, &reusable)
            .inspect_err(|e| {
            tracing::error!(err = %e, pod = %pod_name(pod), container_name = %container.name, num_cpus, "Unable to allocate CPUs");
        })?;
        s.set_cpu_set(uid, &container.name, set.clone());
        self.update_cpus_to_reuse(pod, container, &set);
        Ok(())
    }

    fn allocate_cpus(
        &self,
        s: &mut State,
        num_cpus: usize,
        numa_affinity: Option<BitMask>,
        reusable: &CpuSet,
    ) -> Result<CpuSet, CpuManagerError> {
        tracing::info!(num_cpus, socket = ?numa_affinity.map(|m| m.to_string()), "AllocateCPUs");
        let allocatable = self.allocatable_cpus(s).union(reusable);
        let mut result = CpuSet::new();
        if let Some(mask) = numa_affinity {
            let details = &self.topology.details;
            let in_nodes = if self.options.align_by_socket {
                let sockets = details.sockets_in_numa_nodes(&mask.bits()).to_vec();
                details.cpus_in_sockets(&sockets)
            } else {
                details.cpus_in_numa_nodes(&mask.bits())
            };
            let aligned = allocatable.intersection(&in_nodes);
            let count = num_cpus.min(aligned.len());
            result = take(&self.topology, self.options, &aligned, count)?;
        }
        let rest = take(
            &self.topology,
            self.options,
            &allocatable.difference(&result),
            num_cpus - result.len(),
        )?;
        let result = result.union(&rest);
        s.set_default_cpu_set(s.default_cpu_set().difference(&result));
        tracing::info!(result = %result, "AllocateCPUs");
        Ok(result)
    }

    /// Returns a container's CPUs to the shared pool.
    pub fn remove_container(&self, s: &mut State, pod_uid: &str, container: &str) {
        tracing::info!(
            pod_uid,
            container_name = container,
            "Static policy: RemoveContainer"
        );
        if let Some(release) = s.get_cpu_set(pod_uid, container) {
            s.delete(pod_uid, container);
            s.set_default_cpu_set(s.default_cpu_set().union(&release));
        }
    }
}

/// Picks CPUs: spread over NUMA nodes with `distribute-cpus-across-numa`
/// (in whole cores with `full-pcpus-only`), else packed.
fn take(
    topology: &CpuTopology,
    options: StaticPolicyOptions,
    available: &CpuSet,
    num_cpus: usize,
) -> Result<CpuSet, CpuManagerError> {
    if options.distribute_cpus_across_numa {
        let group = if options.full_physical_cpus_only {
            topology.cpus_per_core()
        } else {
            1
        };
        return take_by_topology_numa_distributed(topology, available, num_cpus, group);
    }
    take_by_topology(topology, available, num_cpus)
}

/// The whole CPUs a container of a Guaranteed pod requests (0 otherwise,
/// and for fractional requests).
pub fn guaranteed_cpus(pod: &Pod, container: &Container) -> usize {
    if get_pod_qos(pod) != QosClass::Guaranteed {
        return 0;
    }
    let (requests, _) = container_resources(container);
    let Some(q) = requests.get(RESOURCE_CPU) else {
        return 0;
    };
    if q.value() * 1000 != q.milli_value() {
        return 0;
    }
    usize::try_from(q.value()).unwrap_or(0)
}
