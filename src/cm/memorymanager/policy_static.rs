//! The Static policy: containers of Guaranteed pods get their memory and
//! huge pages from a set of NUMA nodes (the topology manager's choice, or
//! the narrowest set that fits), accounted per node in the state; the
//! container's cpuset.mems is that set. Memory held by init containers
//! goes to the pod's app containers first.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::error::MemoryManagerError;
use super::reserved::SystemReservedMemory;
use super::state::{Block, MemoryTable, NumaNodeMap, NumaNodeState, State};
use crate::cadvisor::MachineInfo;
use crate::cm::helpers::container_resources;
use crate::cm::qos::{QosClass, get_pod_qos};
use crate::cm::resources::{RESOURCE_MEMORY, hugepage_resource_name, is_hugepage_resource};
use crate::cm::topologymanager::{BitMask, TopologyHint};

pub const POLICY_STATIC: &str = "Static";

/// Memory type → bytes.
pub type Requested = BTreeMap<String, u64>;

/// The policy's view of the machine and its bookkeeping.
#[derive(Debug, Clone)]
pub struct StaticPolicy {
    pub(super) machine: MachineInfo,
    system_reserved: SystemReservedMemory,
    /// Pod UID → NUMA mask text → memory type → bytes its init containers
    /// hold that its app containers may reuse.
    reusable: HashMap<String, HashMap<String, BTreeMap<String, u64>>>,
}

pub(super) fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn is_init_container(pod: &Pod, container: &Container) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|ics| ics.iter().any(|c| c.name == container.name))
}

/// The memory and huge pages a container requests, in bytes.
pub fn requested_resources(container: &Container) -> Result<Requested, MemoryManagerError> {
    let (requests, _) = container_resources(container);
    let mut out = Requested::new();
    for (name, q) in requests {
        if name != RESOURCE_MEMORY && !is_hugepage_resource(&name) {
            continue;
        }
        let bytes = q
            .as_int64()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or(MemoryManagerError::RequestNotInt)?;
        out.insert(name, bytes);
    }
    Ok(out)
}

fn free_of(machine: &NumaNodeMap, node: u32, kind: &str) -> u64 {
    machine
        .get(&node)
        .and_then(|n| n.memory_map.get(kind))
        .map_or(0, |t| t.free)
}

/// Whether the nodes of `mask` have enough free memory of every type.
fn affinity_satisfies(machine: &NumaNodeMap, mask: BitMask, requested: &Requested) -> bool {
    requested.iter().all(|(kind, size)| {
        mask.bits()
            .iter()
            .map(|n| free_of(machine, *n, kind))
            .sum::<u64>()
            >= *size
    })
}

/// Preferred over not preferred, then the narrower (Go's findBestHint).
pub(super) fn find_best_hint(hints: &[TopologyHint]) -> TopologyHint {
    let mut best = TopologyHint::default();
    for hint in hints {
        let (Some(best_mask), Some(mask)) = (best.numa_node_affinity, hint.numa_node_affinity)
        else {
            best = *hint;
            continue;
        };
        if hint.preferred && !best.preferred {
            best = *hint;
            continue;
        }
        if hint.preferred == best.preferred && mask.is_narrower_than(best_mask) {
            best = *hint;
        }
    }
    best
}

/// Takes `size` from the nodes in order, counting the assignment on each.
fn reserve(machine: &mut NumaNodeMap, nodes: &[u32], kind: &str, mut size: u64) {
    for id in nodes {
        let Some(node) = machine.get_mut(id) else {
            continue;
        };
        node.number_of_assignments += 1;
        node.cells = nodes.to_vec();
        if size == 0 {
            continue;
        }
        let Some(table) = node.memory_map.get_mut(kind) else {
            continue;
        };
        if table.free == 0 {
            continue;
        }
        let take = table.free.min(size);
        table.reserved += take;
        table.free -= take;
        size -= take;
    }
}

impl StaticPolicy {
    /// Refuses a configuration that reserves no memory for the system.
    pub fn new(
        machine: &MachineInfo,
        system_reserved: SystemReservedMemory,
    ) -> Result<Self, MemoryManagerError> {
        let total: u64 = system_reserved
            .values()
            .filter_map(|n| n.get(RESOURCE_MEMORY))
            .sum();
        if total == 0 {
            return Err(MemoryManagerError::NoSystemReserved);
        }
        Ok(StaticPolicy {
            machine: machine.clone(),
            system_reserved,
            reusable: HashMap::new(),
        })
    }

    fn system_reserved_of(&self, node: u32, kind: &str) -> u64 {
        self.system_reserved
            .get(&node)
            .and_then(|m| m.get(kind))
            .copied()
            .unwrap_or(0)
    }

    /// Every node with all of its memory allocatable less the reservation.
    pub fn default_machine_state(&self) -> NumaNodeMap {
        let mut out = NumaNodeMap::new();
        for node in &self.machine.topology {
            let mut state = NumaNodeState {
                number_of_assignments: 0,
                memory_map: BTreeMap::new(),
                cells: vec![node.id],
            };
            let mut in_hugepages = 0u64;
            for hp in &node.hugepages {
                let page = i64::try_from(hp.page_size_kib * 1024).unwrap_or(i64::MAX);
                let name = hugepage_resource_name(page);
                let reserved = self.system_reserved_of(node.id, &name);
                let total = hp.num_pages * hp.page_size_kib * 1024;
                let allocatable = total.saturating_sub(reserved);
                state.memory_map.insert(
                    name,
                    MemoryTable {
                        total,
                        system_reserved: reserved,
                        allocatable,
                        reserved: 0,
                        free: allocatable,
                    },
                );
                in_hugepages += total;
            }
            let reserved = self.system_reserved_of(node.id, RESOURCE_MEMORY);
            let allocatable = node
                .memory
                .saturating_sub(reserved)
                .saturating_sub(in_hugepages);
            state.memory_map.insert(
                RESOURCE_MEMORY.into(),
                MemoryTable {
                    total: node.memory,
                    system_reserved: reserved,
                    allocatable,
                    reserved: 0,
                    free: allocatable,
                },
            );
            out.insert(node.id, state);
        }
        out
    }

    /// Checks a restored state against the machine and the reservation; an
    /// empty one gets the default machine state.
    pub fn start(&self, s: &mut State) -> Result<(), MemoryManagerError> {
        self.validate_state(s).inspect_err(|e| {
            tracing::error!(err = %e, "Invalid state, please drain node and remove policy state file");
        })
    }

    fn validate_state(&self, s: &mut State) -> Result<(), MemoryManagerError> {
        let machine = s.machine_state();
        if machine.is_empty() {
            if !s.assignments().is_empty() {
                return Err(MemoryManagerError::EmptyMachineState);
            }
            s.set_machine_state(self.default_machine_state());
            return Ok(());
        }
        let mut expected = self.default_machine_state();
        for (pod, containers) in s.assignments() {
            for (container, blocks) in containers {
                for b in blocks {
                    for id in &b.numa_affinity {
                        let node = expected.get(id).ok_or_else(|| {
                            MemoryManagerError::AssignmentNumaMissing {
                                pod: pod.clone(),
                                container: container.clone(),
                            }
                        })?;
                        if !node.memory_map.contains_key(&b.kind) {
                            return Err(MemoryManagerError::AssignmentResourceMissing {
                                pod: pod.clone(),
                                container: container.clone(),
                            });
                        }
                    }
                    reserve(&mut expected, &b.numa_affinity, &b.kind, b.size);
                }
            }
        }
        if !machine_states_equal(&machine, &expected) {
            return Err(MemoryManagerError::MachineStateDiffers);
        }
        Ok(())
    }

    /// What containers can be given, per node and type.
    pub fn allocatable_memory(&self, s: &State) -> Vec<Block> {
        let mut out = Vec::new();
        for (id, node) in s.machine_state() {
            for (kind, table) in &node.memory_map {
                if table.allocatable == 0 {
                    continue;
                }
                out.push(Block {
                    numa_affinity: vec![id],
                    kind: kind.clone(),
                    size: table.allocatable,
                });
            }
        }
        out
    }

    /// Gives a container of a Guaranteed pod its blocks.
    pub fn allocate(
        &mut self,
        s: &mut State,
        pod: &Pod,
        container: &Container,
        hint: TopologyHint,
    ) -> Result<(), MemoryManagerError> {
        if get_pod_qos(pod) != QosClass::Guaranteed {
            return Ok(());
        }
        let uid = pod_uid(pod);
        tracing::info!(pod = uid, container_name = %container.name, "Allocate");
        if let Some(blocks) = s.memory_blocks(uid, &container.name) {
            self.update_reusable(pod, container, &blocks);
            tracing::info!(pod = uid, container_name = %container.name, "Container already present in state, skipping");
            return Ok(());
        }
        tracing::info!(pod = uid, container_name = %container.name, hint = %hint, "Got topology affinity");
        let requested = requested_resources(container)?;
        let mut machine = s.machine_state();
        let mut best = hint;
        if hint.numa_node_affinity.is_none() {
            let hints = self.calculate_hints(&machine, pod, &requested);
            if hints.is_empty() {
                return Err(MemoryManagerError::NoDefaultAffinity);
            }
            let default = find_best_hint(hints.get(RESOURCE_MEMORY).map_or(&[][..], |v| v));
            if !default.preferred && best.preferred {
                return Err(MemoryManagerError::NoDefaultPreferredHint);
            }
            best = default;
        }
        let mask = best.numa_node_affinity.unwrap_or_default();
        if !affinity_satisfies(&machine, mask, &requested) {
            let extended = self.extend_hint(&machine, pod, &requested, mask)?;
            if !extended.preferred && best.preferred {
                return Err(MemoryManagerError::NoExtendedPreferredHint);
            }
            best = extended;
        }
        let mask = best.numa_node_affinity.unwrap_or_default();
        let bits = mask.bits();
        let mut blocks = Vec::new();
        for (kind, size) in &requested {
            blocks.push(Block {
                numa_affinity: bits.clone(),
                kind: kind.clone(),
                size: *size,
            });
            let reusable = self.pod_reusable(uid, mask, kind);
            reserve(&mut machine, &bits, kind, size.saturating_sub(reusable));
        }
        self.update_reusable(pod, container, &blocks);
        s.set_machine_state(machine);
        s.set_memory_blocks(uid, &container.name, blocks.clone());
        update_init_container_blocks(s, pod, container, &blocks);
        Ok(())
    }

    fn extend_hint(
        &self,
        machine: &NumaNodeMap,
        pod: &Pod,
        requested: &Requested,
        mask: BitMask,
    ) -> Result<TopologyHint, MemoryManagerError> {
        let hints = self.calculate_hints(machine, pod, requested);
        let within: Vec<TopologyHint> = hints
            .get(RESOURCE_MEMORY)
            .into_iter()
            .flatten()
            .filter(|h| h.numa_node_affinity.is_some_and(|m| m.and(mask) == mask))
            .copied()
            .collect();
        if within.is_empty() {
            return Err(MemoryManagerError::CannotExtendHint);
        }
        Ok(find_best_hint(&within))
    }

    pub(super) fn pod_reusable(&self, pod_uid: &str, mask: BitMask, kind: &str) -> u64 {
        self.reusable
            .get(pod_uid)
            .and_then(|m| m.get(&mask.to_string()))
            .and_then(|m| m.get(kind))
            .copied()
            .unwrap_or(0)
    }

    fn update_reusable(&mut self, pod: &Pod, container: &Container, blocks: &[Block]) {
        let uid = pod_uid(pod).to_string();
        self.reusable.retain(|k, _| *k == uid);
        let per_pod = self.reusable.entry(uid).or_default();
        if is_init_container(pod, container) {
            for b in blocks {
                let key = BitMask::of(&b.numa_affinity).to_string();
                let slot = per_pod
                    .entry(key)
                    .or_default()
                    .entry(b.kind.clone())
                    .or_default();
                *slot = (*slot).max(b.size);
            }
            return;
        }
        for b in blocks {
            let key = BitMask::of(&b.numa_affinity).to_string();
            if let Some(slot) = per_pod.get_mut(&key).and_then(|m| m.get_mut(&b.kind)) {
                *slot = slot.saturating_sub(b.size);
            }
        }
    }

    /// Gives a container's blocks back to their nodes.
    pub fn remove_container(&self, s: &mut State, pod_uid: &str, container: &str) {
        let Some(blocks) = s.memory_blocks(pod_uid, container) else {
            return;
        };
        tracing::info!(pod_uid, container_name = container, "RemoveContainer");
        s.delete(pod_uid, container);
        let mut machine = s.machine_state();
        for b in &blocks {
            let mut released = b.size;
            for id in &b.numa_affinity {
                let Some(node) = machine.get_mut(id) else {
                    continue;
                };
                node.number_of_assignments -= 1;
                if node.number_of_assignments == 0 {
                    node.cells = vec![*id];
                }
                if released == 0 {
                    continue;
                }
                let Some(table) = node.memory_map.get_mut(&b.kind) else {
                    continue;
                };
                let give = table.reserved.min(released);
                table.free += give;
                table.reserved -= give;
                released -= give;
            }
        }
        s.set_machine_state(machine);
    }
}

/// The app container reuses what the init containers before it held: their
/// blocks shrink by what it took (Go's updateInitContainersMemoryBlocks).
fn update_init_container_blocks(s: &mut State, pod: &Pod, container: &Container, blocks: &[Block]) {
    let uid = pod_uid(pod);
    let inits = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.clone())
        .unwrap_or_default();
    for block in blocks {
        let mut size = block.size;
        for init in &inits {
            if init.name == container.name || size == 0 {
                break;
            }
            let Some(mut init_blocks) = s.memory_blocks(uid, &init.name) else {
                continue;
            };
            if init_blocks.is_empty() {
                continue;
            }
            for ib in &mut init_blocks {
                if ib.size == 0
                    || ib.kind != block.kind
                    || BitMask::of(&ib.numa_affinity) != BitMask::of(&block.numa_affinity)
                {
                    continue;
                }
                let take = ib.size.min(size);
                ib.size -= take;
                size -= take;
            }
            s.set_memory_blocks(uid, &init.name, init_blocks);
        }
    }
}

fn machine_states_equal(a: &NumaNodeMap, b: &NumaNodeMap) -> bool {
    if a.len() != b.len() {
        tracing::error!(
            length_node1 = a.len(),
            length_node2 = b.len(),
            "Node states are different"
        );
        return false;
    }
    for (id, na) in a {
        let Some(nb) = b.get(id) else {
            tracing::error!(node_id = id, "Node state does not have node ID");
            return false;
        };
        if na.number_of_assignments != nb.number_of_assignments {
            tracing::error!(
                assignment1 = na.number_of_assignments,
                assignment2 = nb.number_of_assignments,
                "Node states number of assignments are different"
            );
            return false;
        }
        let (mut ca, mut cb) = (na.cells.clone(), nb.cells.clone());
        ca.sort_unstable();
        cb.sort_unstable();
        if ca != cb {
            tracing::error!(state_node1 = ?na.cells, state_node2 = ?nb.cells, "Node states groups are different");
            return false;
        }
        if na.memory_map != nb.memory_map {
            tracing::error!(node = id, memory_state1 = ?na.memory_map, memory_state2 = ?nb.memory_map, "Memory states for the NUMA node are different");
            return false;
        }
    }
    true
}
