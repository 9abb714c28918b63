//! The Static policy as a topology hint provider: the NUMA node sets whose
//! allocatable memory could hold the request and whose free memory (plus
//! what the pod's init containers hold) does, the smallest sets preferred;
//! a node already in a multi-node group only fits that very group.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::policy_static::{Requested, StaticPolicy, pod_uid, requested_resources};
use super::state::{Block, NumaNodeMap, State};
use crate::cm::qos::{QosClass, get_pod_qos};
use crate::cm::topologymanager::{BitMask, ProviderHints, TopologyHint};

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

/// The hints of memory already assigned (or none when it no longer fits
/// the request).
fn regenerate(container: &str, blocks: &[Block], requested: &Requested) -> ProviderHints {
    if blocks.len() != requested.len() {
        tracing::error!(
            container_name = container,
            "The number of requested resources by the container differs from the number of memory blocks"
        );
        return ProviderHints::new();
    }
    let mut hints: ProviderHints = requested
        .keys()
        .map(|k| (k.clone(), Some(Vec::new())))
        .collect();
    for b in blocks {
        let Some(size) = requested.get(&b.kind) else {
            tracing::error!(container_name = container, kind = %b.kind, "Container requested resources do not have resource of this type");
            return ProviderHints::new();
        };
        if b.size != *size {
            tracing::error!(container_name = container, kind = %b.kind, requested_resource = size, allocated_size = b.size, "Memory already allocated with different numbers than requested");
            return ProviderHints::new();
        }
        tracing::info!(resource_name = %b.kind, container_name = container, "Regenerating TopologyHints, resource was already allocated to pod");
        if let Some(Some(list)) = hints.get_mut(&b.kind) {
            list.push(TopologyHint::new(BitMask::of(&b.numa_affinity), true));
        }
    }
    hints
}

/// The memory a pod needs at once: per type, its largest init container or
/// the sum of its app containers, whichever is more.
fn pod_requested(pod: &Pod) -> Option<Requested> {
    let spec = pod.spec.as_ref()?;
    let mut init = Requested::new();
    for c in spec.init_containers.iter().flatten() {
        for (kind, size) in requested_resources(c).ok()? {
            let slot = init.entry(kind).or_default();
            *slot = (*slot).max(size);
        }
    }
    let mut app = Requested::new();
    for c in &spec.containers {
        for (kind, size) in requested_resources(c).ok()? {
            *app.entry(kind).or_default() += size;
        }
    }
    for (kind, size) in app.iter_mut() {
        *size = (*size).max(init.get(kind).copied().unwrap_or(0));
    }
    Some(app)
}

impl StaticPolicy {
    pub fn topology_hints(&self, s: &State, pod: &Pod, container: &Container) -> ProviderHints {
        if get_pod_qos(pod) != QosClass::Guaranteed {
            return ProviderHints::new();
        }
        let requested = match requested_resources(container) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(err = %e, container_name = %container.name, "Failed to get container requested resources");
                return ProviderHints::new();
            }
        };
        if let Some(blocks) = s.memory_blocks(pod_uid(pod), &container.name) {
            return regenerate(&container.name, &blocks, &requested);
        }
        self.calculate_hints(&s.machine_state(), pod, &requested)
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect()
    }

    pub fn pod_topology_hints(&self, s: &State, pod: &Pod) -> ProviderHints {
        if get_pod_qos(pod) != QosClass::Guaranteed {
            return ProviderHints::new();
        }
        let Some(requested) = pod_requested(pod) else {
            tracing::error!("Failed to get pod requested resources");
            return ProviderHints::new();
        };
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
        for c in containers {
            if let Some(blocks) = s.memory_blocks(pod_uid(pod), &c.name) {
                return regenerate(&c.name, &blocks, &requested);
            }
        }
        self.calculate_hints(&s.machine_state(), pod, &requested)
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect()
    }

    /// Hints per memory type over every set of NUMA nodes.
    pub fn calculate_hints(
        &self,
        machine: &NumaNodeMap,
        pod: &Pod,
        requested: &Requested,
    ) -> std::collections::BTreeMap<String, Vec<TopologyHint>> {
        let nodes: Vec<u32> = machine.keys().copied().collect();
        let mut min_size = nodes.len() as u32;
        let mut hints: std::collections::BTreeMap<String, Vec<TopologyHint>> = Default::default();
        let table = |id: u32, kind: &str| machine.get(&id).and_then(|n| n.memory_map.get(kind));
        BitMask::iterate(&nodes, |mask| {
            let bits = mask.bits();
            let single = bits.len() == 1;
            let total = |pick: fn(&super::state::MemoryTable) -> u64, kind: &str| -> u64 {
                bits.iter()
                    .filter_map(|id| table(*id, kind))
                    .map(pick)
                    .sum()
            };
            if requested
                .iter()
                .any(|(kind, size)| total(|t| t.allocatable, kind) < *size)
            {
                return;
            }
            if mask.count() < min_size {
                min_size = mask.count();
            }
            if single && machine.get(&bits[0]).is_some_and(|n| n.cells.len() > 1) {
                return;
            }
            for id in &bits {
                let Some(node) = machine.get(id) else {
                    continue;
                };
                if !single && node.number_of_assignments > 0 {
                    if node.cells.len() == 1 {
                        return;
                    }
                    if sorted(node.cells.clone()) != bits {
                        return;
                    }
                }
            }
            let uid = pod_uid(pod);
            if requested.iter().any(|(kind, size)| {
                total(|t| t.free, kind) + self.pod_reusable(uid, mask, kind) < *size
            }) {
                return;
            }
            for kind in requested.keys() {
                hints
                    .entry(kind.clone())
                    .or_default()
                    .push(TopologyHint::new(mask, false));
            }
        });
        for list in hints.values_mut() {
            for hint in list.iter_mut() {
                hint.preferred = hint
                    .numa_node_affinity
                    .is_some_and(|m| m.count() == min_size);
            }
        }
        hints
    }
}
