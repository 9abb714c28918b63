//! Conversions from pod specs to cgroup limits: milli-CPU to shares and CFS
//! quota, summed pod requests and limits (init containers and overhead
//! included), and the resource config of a pod cgroup (ResourceConfigForPod).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::qos::{QosClass, get_pod_qos};
use super::resources::{
    RESOURCE_CPU, RESOURCE_MEMORY, ResourceConfig, ResourceList, hugepage_limits,
};
use crate::util::quantity::Quantity;

/// The smallest cpu.shares value (what a zero request maps to).
pub const MIN_SHARES: u64 = 2;
/// The largest cpu.shares value the kernel accepts.
pub const MAX_SHARES: u64 = 262_144;
pub const SHARES_PER_CPU: i64 = 1024;
pub const MILLI_CPU_TO_CPU: i64 = 1000;
/// The default CFS period, 100 ms in µs.
pub const QUOTA_PERIOD: i64 = 100_000;
/// The smallest CFS quota, 1 ms in µs.
pub const MIN_QUOTA_PERIOD: i64 = 1000;

/// cpu.shares for a CPU request in milli-CPU: 0 → 2, clamped to [2, 262144].
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    let shares = milli_cpu.saturating_mul(SHARES_PER_CPU) / MILLI_CPU_TO_CPU;
    if shares < MIN_SHARES as i64 {
        return MIN_SHARES;
    }
    (shares as u64).min(MAX_SHARES)
}

/// The CFS quota in µs for a CPU limit in milli-CPU over `period` µs; 0 for
/// no limit, at least 1 ms otherwise.
pub fn milli_cpu_to_quota(milli_cpu: i64, period: i64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let quota = milli_cpu.saturating_mul(period) / MILLI_CPU_TO_CPU;
    quota.max(MIN_QUOTA_PERIOD)
}

/// Parses an API resource map, skipping (and logging) values that are not quantities.
pub fn resource_list(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> ResourceList {
    let mut out = ResourceList::new();
    for (name, q) in map.into_iter().flatten() {
        match q.0.parse::<Quantity>() {
            Ok(v) => {
                out.insert(name.clone(), v);
            }
            Err(e) => {
                tracing::warn!(resource = %name, error = %e, "ignoring unparsable resource quantity")
            }
        }
    }
    out
}

/// A container's (requests, limits).
pub fn container_resources(c: &Container) -> (ResourceList, ResourceList) {
    let r = c.resources.as_ref();
    (
        resource_list(r.and_then(|r| r.requests.as_ref())),
        resource_list(r.and_then(|r| r.limits.as_ref())),
    )
}

fn add_into(total: &mut ResourceList, list: &ResourceList) {
    for (name, q) in list {
        let sum = match total.get(name) {
            Some(prev) => add_quantity(prev, q),
            None => *q,
        };
        total.insert(name.clone(), sum);
    }
}

fn max_into(total: &mut ResourceList, list: &ResourceList) {
    for (name, q) in list {
        match total.get(name) {
            Some(prev) if prev.cmp_value(q).is_ge() => {}
            _ => {
                total.insert(name.clone(), *q);
            }
        }
    }
}

/// a + b, where a zero `a` takes `b`'s format (as Go's `Quantity.Add` does).
pub fn add_quantity(a: &Quantity, b: &Quantity) -> Quantity {
    if a.is_zero() { b.add(a) } else { a.add(b) }
}

/// The pod's summed requests and limits: containers add up, each init
/// container raises a resource to at least its own value, and the pod
/// overhead is added to every request and to the limits that are set.
pub fn pod_requests_and_limits(pod: &Pod) -> (ResourceList, ResourceList) {
    let mut reqs = ResourceList::new();
    let mut limits = ResourceList::new();
    let Some(spec) = pod.spec.as_ref() else {
        return (reqs, limits);
    };
    for c in &spec.containers {
        let (r, l) = container_resources(c);
        add_into(&mut reqs, &r);
        add_into(&mut limits, &l);
    }
    for c in spec.init_containers.iter().flatten() {
        let (r, l) = container_resources(c);
        max_into(&mut reqs, &r);
        max_into(&mut limits, &l);
    }
    let overhead = resource_list(spec.overhead.as_ref());
    if !overhead.is_empty() {
        add_into(&mut reqs, &overhead);
        for (name, q) in &overhead {
            if let Some(prev) = limits.get(name) {
                let sum = add_quantity(prev, q);
                limits.insert(name.clone(), sum);
            }
        }
    }
    (reqs, limits)
}

/// How pod cgroups are sized, from the node configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodResourceOptions {
    /// `cpuCFSQuota`: enforce CPU limits with a CFS quota.
    pub enforce_cpu_limits: bool,
    /// `cpuCFSQuotaPeriod` in µs.
    pub cpu_period_us: u64,
    /// The CustomCPUCFSQuotaPeriod feature gate: without it the quota is
    /// computed over the default 100 ms period.
    pub custom_cpu_cfs_quota_period: bool,
    /// MemoryQoS on cgroup v2: write the memory request as `memory.min`.
    pub enforce_memory_qos: bool,
}

impl Default for PodResourceOptions {
    fn default() -> Self {
        PodResourceOptions {
            enforce_cpu_limits: true,
            cpu_period_us: QUOTA_PERIOD as u64,
            custom_cpu_cfs_quota_period: false,
            enforce_memory_qos: false,
        }
    }
}

fn is_zero_or_missing(list: &ResourceList, name: &str) -> bool {
    list.get(name).is_none_or(Quantity::is_zero)
}

/// The limits of a pod's cgroup: shares from the CPU requests; for
/// Guaranteed pods quota, period and memory from the limits; for Burstable
/// pods the same only where every container sets that limit; BestEffort pods
/// get the minimum shares. Huge page limits come from the requests.
pub fn resource_config_for_pod(pod: &Pod, opts: &PodResourceOptions) -> ResourceConfig {
    let (reqs, limits) = pod_requests_and_limits(pod);
    let cpu_requests = reqs.get(RESOURCE_CPU).map_or(0, Quantity::milli_value);
    let cpu_limits = limits.get(RESOURCE_CPU).map_or(0, Quantity::milli_value);
    let memory_limits = limits.get(RESOURCE_MEMORY).map_or(0, Quantity::value);

    let cpu_shares = milli_cpu_to_shares(cpu_requests);
    let quota_period = if opts.custom_cpu_cfs_quota_period {
        opts.cpu_period_us as i64
    } else {
        QUOTA_PERIOD
    };
    let mut cpu_quota = milli_cpu_to_quota(cpu_limits, quota_period);
    if !opts.enforce_cpu_limits {
        cpu_quota = -1;
    }
    let cpu_period = opts.cpu_period_us;

    let mut cpu_limits_declared = true;
    let mut memory_limits_declared = true;
    let mut hugepages: BTreeMap<i64, i64> = BTreeMap::new();
    let spec = pod.spec.as_ref();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        let (r, l) = container_resources(c);
        cpu_limits_declared &= !is_zero_or_missing(&l, RESOURCE_CPU);
        memory_limits_declared &= !is_zero_or_missing(&l, RESOURCE_MEMORY);
        for (size, v) in hugepage_limits(&r) {
            *hugepages.entry(size).or_insert(0) += v;
        }
    }
    for c in spec
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
    {
        let (r, l) = container_resources(c);
        cpu_limits_declared &= !is_zero_or_missing(&l, RESOURCE_CPU);
        memory_limits_declared &= !is_zero_or_missing(&l, RESOURCE_MEMORY);
        for (size, v) in hugepage_limits(&r) {
            let entry = hugepages.entry(size).or_insert(v);
            *entry = (*entry).max(v);
        }
    }

    let mut result = ResourceConfig::default();
    match get_pod_qos(pod) {
        QosClass::Guaranteed => {
            result.cpu_shares = Some(cpu_shares);
            result.cpu_quota = Some(cpu_quota);
            result.cpu_period = Some(cpu_period);
            result.memory = Some(memory_limits);
        }
        QosClass::Burstable => {
            result.cpu_shares = Some(cpu_shares);
            if cpu_limits_declared {
                result.cpu_quota = Some(cpu_quota);
                result.cpu_period = Some(cpu_period);
            }
            if memory_limits_declared {
                result.memory = Some(memory_limits);
            }
        }
        QosClass::BestEffort => {
            result.cpu_shares = Some(MIN_SHARES);
        }
    }
    result.hugepage_limit = hugepages;
    if opts.enforce_memory_qos {
        let memory_min = reqs.get(RESOURCE_MEMORY).map_or(0, Quantity::value);
        if memory_min > 0 {
            result
                .unified
                .insert("memory.min".to_string(), memory_min.to_string());
        }
    }
    result
}
