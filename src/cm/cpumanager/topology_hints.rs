//! The static policy as a topology hint provider: which NUMA node sets
//! could hold a container's (or a pod's) exclusive CPUs, the narrowest of
//! them preferred.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::policy_static::{StaticPolicy, guaranteed_cpus};
use super::state::State;
use crate::cm::cpuset::CpuSet;
use crate::cm::helpers::container_resources;
use crate::cm::resources::RESOURCE_CPU;
use crate::cm::topologymanager::{BitMask, ProviderHints, TopologyHint};

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn requests_cpu(container: &Container) -> bool {
    container_resources(container).0.contains_key(RESOURCE_CPU)
}

/// The exclusive CPUs a pod needs at once: its largest init container or
/// the sum of its app containers, whichever is more.
pub fn pod_guaranteed_cpus(pod: &Pod) -> usize {
    let Some(spec) = &pod.spec else { return 0 };
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| requests_cpu(c))
        .map(|c| guaranteed_cpus(pod, c))
        .max()
        .unwrap_or(0);
    let app: usize = spec
        .containers
        .iter()
        .filter(|c| requests_cpu(c))
        .map(|c| guaranteed_cpus(pod, c))
        .sum();
    init.max(app)
}

fn cpu_hints(hints: Vec<TopologyHint>) -> ProviderHints {
    [(RESOURCE_CPU.to_string(), Some(hints))].into()
}

impl StaticPolicy {
    /// Hints for one container's exclusive CPUs (none when it gets none).
    pub fn topology_hints(&self, s: &State, pod: &Pod, container: &Container) -> ProviderHints {
        let requested = guaranteed_cpus(pod, container);
        if requested == 0 {
            return ProviderHints::new();
        }
        if let Some(allocated) = s.get_cpu_set(pod_uid(pod), &container.name) {
            if allocated.len() != requested {
                tracing::error!(container_name = %container.name, requested_size = requested, allocated_size = allocated.len(), "CPUs already allocated to container with different number than request");
                return cpu_hints(Vec::new());
            }
            tracing::info!(container_name = %container.name, "Regenerating TopologyHints for CPUs already allocated");
            return cpu_hints(self.generate_hints(&allocated, &CpuSet::new(), requested));
        }
        let available = self.allocatable_cpus(s);
        let reusable = self.reusable_cpus(pod_uid(pod));
        cpu_hints(self.generate_hints(&available, &reusable, requested))
    }

    /// Hints for the CPUs of the whole pod (pod scope).
    pub fn pod_topology_hints(&self, s: &State, pod: &Pod) -> ProviderHints {
        let requested = pod_guaranteed_cpus(pod);
        if requested == 0 {
            return ProviderHints::new();
        }
        let mut assigned = CpuSet::new();
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
        for container in containers {
            let by_container = guaranteed_cpus(pod, container);
            if let Some(allocated) = s.get_cpu_set(pod_uid(pod), &container.name) {
                if allocated.len() != by_container {
                    tracing::error!(container_name = %container.name, requested_by_container = by_container, allocated_size = allocated.len(), "CPUs already allocated to container with different number than request");
                    return cpu_hints(Vec::new());
                }
                assigned = assigned.union(&allocated);
            }
        }
        if assigned.len() == requested {
            tracing::info!("Regenerating TopologyHints for CPUs already allocated");
            return cpu_hints(self.generate_hints(&assigned, &CpuSet::new(), requested));
        }
        let available = self.allocatable_cpus(s);
        let reusable = self.reusable_cpus(pod_uid(pod)).union(&assigned);
        cpu_hints(self.generate_hints(&available, &reusable, requested))
    }

    /// Every NUMA node set with enough CPUs (reusable CPUs must all lie in
    /// it); the sets of the smallest size that could ever fit are preferred.
    pub fn generate_hints(
        &self,
        available: &CpuSet,
        reusable: &CpuSet,
        request: usize,
    ) -> Vec<TopologyHint> {
        let details = &self.topology().details;
        let nodes = details.numa_nodes().to_vec();
        let mut min_size = nodes.len() as u32;
        let numa_of = |cpu: u32| details.get(cpu).map(|i| i.numa_node_id);
        let mut hints = Vec::new();
        BitMask::iterate(&nodes, |mask| {
            let in_mask = details.cpus_in_numa_nodes(&mask.bits()).len();
            if in_mask >= request && mask.count() < min_size {
                min_size = mask.count();
            }
            let mut matching = 0;
            for cpu in reusable.iter() {
                if !numa_of(cpu).is_some_and(|n| mask.is_set(n)) {
                    return;
                }
                matching += 1;
            }
            matching += available
                .iter()
                .filter(|c| numa_of(*c).is_some_and(|n| mask.is_set(n)))
                .count();
            if matching >= request {
                hints.push(TopologyHint::new(mask, false));
            }
        });
        for hint in &mut hints {
            if hint.numa_node_affinity.is_some_and(|m| m.count() == min_size) {
                hint.preferred = true;
            }
        }
        hints
    }
}
