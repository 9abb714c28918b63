//! Node capacity and allocatable: capacity from machine info and the root
//! filesystem, the pods resource, allocatable as capacity minus the
//! reservation (floored at zero, huge pages taken out of memory), and the
//! parsing of kube/system reservations, reserved CPUs and QoS reservations.

use std::collections::BTreeMap;

use super::cpuset::CpuSet;
use super::error::CmError;
use super::resources::{
    RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PID, ResourceList,
    hugepage_resource_name, is_hugepage_resource,
};
use crate::cadvisor::{FsInfo, MachineInfo};
use crate::util::quantity::{Quantity, parse as parse_quantity};

/// cpu (whole logical CPUs, in milli), memory and `hugepages-<size>` of a machine.
pub fn capacity_from_machine_info(info: &MachineInfo) -> ResourceList {
    let mut c = ResourceList::new();
    c.insert(
        RESOURCE_CPU.into(),
        Quantity::from_milli(i64::from(info.num_cores) * 1000),
    );
    c.insert(
        RESOURCE_MEMORY.into(),
        Quantity::from_binary(info.memory_capacity as i64),
    );
    for hp in &info.hugepages {
        let page_bytes = (hp.page_size_kib * 1024) as i64;
        c.insert(
            hugepage_resource_name(page_bytes),
            Quantity::from_binary(page_bytes.saturating_mul(hp.num_pages as i64)),
        );
    }
    c
}

/// ephemeral-storage capacity: the size of the filesystem holding the kubelet root directory.
pub fn ephemeral_storage_capacity(rootfs: &FsInfo) -> Quantity {
    Quantity::from_binary(rootfs.capacity as i64)
}

/// The `pods` capacity: maxPods, or fewer when podsPerCore × cores is smaller.
pub fn pods_capacity(max_pods: i64, pods_per_core: i64, num_cores: u32) -> Quantity {
    let mut pods = max_pods;
    if pods_per_core > 0 {
        pods = pods.min(pods_per_core.saturating_mul(i64::from(num_cores)));
    }
    Quantity::from_decimal(pods)
}

/// Zero in `q`'s format (so a floored value prints as its capacity does).
fn zero_like(q: &Quantity) -> Quantity {
    q.sub(q)
}

fn floor_zero(q: Quantity) -> Quantity {
    if q.cmp_value(&Quantity::from_decimal(0)).is_lt() {
        zero_like(&q)
    } else {
        q
    }
}

/// Allocatable as the node reports it: each capacity minus its reservation,
/// floored at zero, and memory further reduced by every huge page capacity.
pub fn allocatable(capacity: &ResourceList, reservation: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    for (name, cap) in capacity {
        let value = match reservation.get(name) {
            Some(r) => cap.sub(r),
            None => *cap,
        };
        out.insert(name.clone(), floor_zero(value));
    }
    for (name, cap) in capacity {
        if is_hugepage_resource(name)
            && let Some(mem) = out.get(RESOURCE_MEMORY).copied()
        {
            out.insert(RESOURCE_MEMORY.into(), floor_zero(mem.sub(cap)));
        }
    }
    out
}

/// Parses kubeReserved / systemReserved: cpu, memory, ephemeral-storage and
/// pid only, non-negative quantities. Empty input is an empty list.
pub fn parse_resource_list(map: &BTreeMap<String, String>) -> Result<ResourceList, CmError> {
    let mut out = ResourceList::new();
    for (name, value) in map {
        match name.as_str() {
            RESOURCE_CPU | RESOURCE_MEMORY | RESOURCE_EPHEMERAL_STORAGE | RESOURCE_PID => {
                let q = parse_quantity(value).map_err(|e| {
                    CmError::Config(format!(
                        "failed to parse quantity {value:?} for {name:?} resource: {e}"
                    ))
                })?;
                if q.cmp_value(&Quantity::from_decimal(0)).is_lt() {
                    return Err(CmError::Config(format!(
                        "resource quantity for {name:?} cannot be negative: {value}"
                    )));
                }
                out.insert(name.clone(), q);
            }
            other => {
                return Err(CmError::Config(format!(
                    "cannot reserve {other:?} resource"
                )));
            }
        }
    }
    Ok(out)
}

/// `reservedSystemCPUs`: the CPU list, which must name online CPUs of the machine.
pub fn reserved_cpus(info: &MachineInfo, text: &str) -> Result<CpuSet, CmError> {
    if text.is_empty() {
        return Ok(CpuSet::new());
    }
    let set = CpuSet::parse(text)
        .map_err(|e| CmError::Config(format!("unable to parse reserved-cpus list: {e}")))?;
    let all: CpuSet = info.cpu_ids().into_iter().collect();
    if !set.is_subset_of(&all) {
        return Err(CmError::Config(format!(
            "reserved-cpus: {text} is not a subset of online-cpus: {all}"
        )));
    }
    Ok(set)
}

/// With reserved CPUs, the cpu reservation is their count, held as a system
/// reservation (any kube-reserved cpu is dropped).
pub fn apply_reserved_cpus(
    kube_reserved: &mut BTreeMap<String, String>,
    system_reserved: &mut BTreeMap<String, String>,
    reserved: &CpuSet,
) {
    if reserved.is_empty() {
        return;
    }
    tracing::info!(
        kube_reserved = ?kube_reserved,
        system_reserved = ?system_reserved,
        "option --reserved-cpus is specified, it overwrites the cpu setting of kube-reserved and system-reserved"
    );
    kube_reserved.remove(RESOURCE_CPU);
    system_reserved.insert(RESOURCE_CPU.into(), reserved.len().to_string());
}

/// `qosReserved`: memory only, as a whole percentage 0–100.
pub fn parse_qos_reserved(
    map: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, i64>, CmError> {
    let mut out = BTreeMap::new();
    for (name, value) in map {
        if name != RESOURCE_MEMORY {
            return Err(CmError::Config(format!("cannot reserve {name:?} resource")));
        }
        let number = value
            .strip_suffix('%')
            .ok_or_else(|| CmError::Config(format!("percentage expected, got '{value}'")))?;
        let pct: i64 = number
            .parse()
            .map_err(|_| CmError::Config(format!("invalid number in percentage '{value}'")))?;
        if !(0..=100).contains(&pct) {
            return Err(CmError::Config(
                "percentage must be between 0 and 100".into(),
            ));
        }
        out.insert(name.clone(), pct);
    }
    Ok(out)
}
