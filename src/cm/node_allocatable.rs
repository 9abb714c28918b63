//! Node allocatable: what is held back from pods (kube and system
//! reservations plus hard eviction thresholds), the absolute allocatable the
//! `kubepods` cgroup is sized to, and the cgroup limits for a resource list.

use std::collections::BTreeSet;

use super::capacity;
use super::error::CmError;
use super::helpers::{add_quantity, milli_cpu_to_shares};
use super::resources::{
    RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PID, ResourceConfig,
    ResourceList, hugepage_limits,
};
use crate::apis::eviction::{Signal, Threshold, ThresholdOperator, get_threshold_quantity};
use crate::util::quantity::Quantity;

/// `enforceNodeAllocatable` keys.
pub const ENFORCE_PODS: &str = "pods";
pub const ENFORCE_SYSTEM_RESERVED: &str = "system-reserved";
pub const ENFORCE_KUBE_RESERVED: &str = "kube-reserved";
pub const ENFORCE_NONE: &str = "none";

/// How much of the node is held back, and what is enforced (Go's NodeAllocatableConfig).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAllocatableConfig {
    /// `kubeReservedCgroup`, in cgroupfs form.
    pub kube_reserved_cgroup_name: String,
    /// `systemReservedCgroup`, in cgroupfs form.
    pub system_reserved_cgroup_name: String,
    /// `reservedSystemCPUs`, parsed.
    pub reserved_system_cpus: super::cpuset::CpuSet,
    /// `enforceNodeAllocatable`.
    pub enforce_node_allocatable: BTreeSet<String>,
    pub kube_reserved: ResourceList,
    pub system_reserved: ResourceList,
    /// Hard eviction thresholds (empty with `--experimental-allocatable-ignore-eviction`).
    pub hard_eviction_thresholds: Vec<Threshold>,
}

/// The amount the hard eviction thresholds hold back: memory.available
/// against memory capacity, nodefs.available against ephemeral storage.
pub fn hard_eviction_reservation(
    thresholds: &[Threshold],
    capacity: &ResourceList,
) -> ResourceList {
    let mut out = ResourceList::new();
    for t in thresholds {
        if t.operator != ThresholdOperator::LessThan {
            continue;
        }
        let resource = match t.signal {
            Signal::MemoryAvailable => RESOURCE_MEMORY,
            Signal::NodeFsAvailable => RESOURCE_EPHEMERAL_STORAGE,
            _ => continue,
        };
        let cap = capacity
            .get(resource)
            .copied()
            .unwrap_or_else(|| Quantity::from_decimal(0));
        out.insert(resource.to_string(), get_threshold_quantity(&t.value, &cap));
    }
    out
}

/// What is reserved from scheduling per capacity resource: system + kube
/// reserved + hard eviction; zero entries are left out.
pub fn node_allocatable_reservation(
    capacity: &ResourceList,
    nc: &NodeAllocatableConfig,
) -> ResourceList {
    let eviction = hard_eviction_reservation(&nc.hard_eviction_thresholds, capacity);
    let mut out = ResourceList::new();
    for name in capacity.keys() {
        let mut value = Quantity::from_decimal(0);
        for part in [&nc.system_reserved, &nc.kube_reserved, &eviction] {
            if let Some(q) = part.get(name) {
                value = add_quantity(&value, q);
            }
        }
        if !value.is_zero() {
            out.insert(name.clone(), value);
        }
    }
    out
}

/// Capacity minus system and kube reservations (not eviction), floored at
/// zero, memory reduced by huge pages: what the `kubepods` cgroup is sized to.
pub fn node_allocatable_absolute(
    capacity: &ResourceList,
    nc: &NodeAllocatableConfig,
) -> ResourceList {
    let mut reserved = ResourceList::new();
    for name in capacity.keys() {
        let mut value = Quantity::from_decimal(0);
        for part in [&nc.system_reserved, &nc.kube_reserved] {
            if let Some(q) = part.get(name) {
                value = add_quantity(&value, q);
            }
        }
        reserved.insert(name.clone(), value);
    }
    capacity::allocatable(capacity, &reserved)
}

/// Cgroup limits for a resource list: memory bytes, cpu as shares, pid as
/// pids limit, huge pages per size. `None` for an empty list.
pub fn cgroup_config_for(list: &ResourceList) -> Option<ResourceConfig> {
    if list.is_empty() {
        return None;
    }
    Some(ResourceConfig {
        memory: list.get(RESOURCE_MEMORY).map(Quantity::value),
        cpu_shares: list
            .get(RESOURCE_CPU)
            .map(|q| milli_cpu_to_shares(q.milli_value())),
        pids_limit: list.get(RESOURCE_PID).map(Quantity::value),
        hugepage_limit: hugepage_limits(list),
        ..Default::default()
    })
}

/// Refuses a configuration that reserves more than the node has.
pub fn validate_node_allocatable(
    capacity: &ResourceList,
    nc: &NodeAllocatableConfig,
) -> Result<(), CmError> {
    let mut errs = Vec::new();
    for (name, reserved) in node_allocatable_reservation(capacity, nc) {
        let cap = capacity
            .get(&name)
            .copied()
            .unwrap_or_else(|| Quantity::from_decimal(0));
        if cap
            .sub(&reserved)
            .cmp_value(&Quantity::from_decimal(0))
            .is_lt()
        {
            errs.push(format!(
                "resource {name:?} has a reservation of {reserved} above its capacity of {cap}"
            ));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(CmError::Config(format!(
            "invalid Node Allocatable configuration: {}",
            errs.join("; ")
        )))
    }
}
