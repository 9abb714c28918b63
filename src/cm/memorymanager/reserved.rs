//! `reservedMemory`: the memory each NUMA node keeps for the system. It must
//! add up, per memory type, to what node allocatable reserves (kube and
//! system reserved plus the hard eviction threshold), as Go checks at start.

use std::collections::{BTreeMap, BTreeSet};

use super::error::MemoryManagerError;
use crate::apis::config::types::MemoryReservation;
use crate::cadvisor::MachineInfo;
use crate::cm::resources::{RESOURCE_MEMORY, ResourceList, is_hugepage_resource};
use crate::util::quantity::Quantity;

/// NUMA node → memory type → reserved bytes.
pub type SystemReservedMemory = BTreeMap<u32, BTreeMap<String, u64>>;

/// The sum in the format of its first term (Go adds to a zero quantity,
/// which takes the format of what is added first).
fn sum<'a>(items: impl Iterator<Item = &'a Quantity>) -> Quantity {
    items
        .cloned()
        .reduce(|acc, q| acc.add(&q))
        .unwrap_or_else(|| Quantity::from_decimal(0))
}

/// Checks `reserved` against the machine and the node allocatable
/// reservation, and converts it to bytes per node.
pub fn system_reserved_memory(
    machine: &MachineInfo,
    node_reservation: &ResourceList,
    reserved: &[MemoryReservation],
) -> Result<SystemReservedMemory, MemoryManagerError> {
    let nodes: BTreeSet<u32> = machine.topology.iter().map(|n| n.id).collect();
    let mut totals: BTreeMap<String, Vec<&Quantity>> = BTreeMap::new();
    for r in reserved {
        if !u32::try_from(r.numa_node).is_ok_and(|id| nodes.contains(&id)) {
            return Err(MemoryManagerError::NoSuchNumaNode(r.numa_node));
        }
        for (name, q) in &r.limits {
            totals.entry(name.clone()).or_default().push(q);
        }
    }
    let mut types: BTreeSet<String> = totals.keys().cloned().collect();
    types.extend(
        node_reservation
            .keys()
            .filter(|k| k.as_str() == RESOURCE_MEMORY || is_hugepage_resource(k))
            .cloned(),
    );
    for name in types {
        let allocatable = sum(node_reservation.get(&name).into_iter());
        let total = sum(totals.get(&name).into_iter().flatten().copied());
        if allocatable.cmp_value(&total) != std::cmp::Ordering::Equal {
            return Err(MemoryManagerError::ReservedMismatch {
                reserved: total.to_canonical_string(),
                resource: name,
                allocatable: allocatable.to_canonical_string(),
            });
        }
    }
    let mut out: SystemReservedMemory = nodes.iter().map(|id| (*id, BTreeMap::new())).collect();
    for r in reserved {
        let Ok(id) = u32::try_from(r.numa_node) else {
            continue;
        };
        for (name, q) in &r.limits {
            let bytes = q
                .as_int64()
                .and_then(|v| u64::try_from(v).ok())
                .ok_or(MemoryManagerError::ReservedNotInt)?;
            out.entry(id).or_default().insert(name.clone(), bytes);
        }
    }
    Ok(out)
}
