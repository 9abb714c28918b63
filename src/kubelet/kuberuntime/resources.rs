//! Linux resources for CRI: CPU shares and CFS quota from requests and
//! limits, the memory limit, huge page limits for every page size the
//! machine has, and the pod-level resources and overhead of the sandbox.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::settings::RuntimeSettings;
use crate::cri::api::{HugepageLimit, LinuxContainerResources};
use crate::util::quantity::{self, Quantity};

const HUGE_PAGE_UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];

/// cpu.shares for a CPU request in millicores (2 for none): the container
/// manager's conversion, so pod and container cgroups agree.
fn milli_cpu_to_shares(milli_cpu: i64) -> i64 {
    crate::cm::helpers::milli_cpu_to_shares(milli_cpu) as i64
}

use crate::cm::helpers::milli_cpu_to_quota;

fn parse_or_zero(q: Option<&ApiQuantity>) -> Quantity {
    q.and_then(|q| quantity::parse(q.0.trim()).ok())
        .unwrap_or_else(|| Quantity::from_decimal(0))
}

/// LinuxContainerResources from a CPU request and limit and a memory limit
/// (zero quantities meaning unset). A missing CPU request with a limit takes
/// the limit's shares.
pub fn calculate_linux_resources(
    cpu_request: &Quantity,
    cpu_limit: &Quantity,
    memory_limit: &Quantity,
    settings: &RuntimeSettings,
) -> LinuxContainerResources {
    let mut r = LinuxContainerResources {
        cpu_shares: if cpu_request.is_zero() && !cpu_limit.is_zero() {
            milli_cpu_to_shares(cpu_limit.milli_value())
        } else {
            milli_cpu_to_shares(cpu_request.milli_value())
        },
        ..Default::default()
    };
    let mem = memory_limit.value();
    if mem != 0 {
        r.memory_limit_in_bytes = mem;
    }
    if settings.cpu_cfs_quota {
        let period = settings.cpu_cfs_quota_period_us;
        r.cpu_quota = milli_cpu_to_quota(cpu_limit.milli_value(), period);
        r.cpu_period = period;
    }
    r
}

/// The container-level resources of a container spec.
pub fn container_linux_resources(
    resources: Option<&ResourceRequirements>,
    settings: &RuntimeSettings,
) -> LinuxContainerResources {
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    calculate_linux_resources(
        &parse_or_zero(requests.and_then(|r| r.get("cpu"))),
        &parse_or_zero(limits.and_then(|l| l.get("cpu"))),
        &parse_or_zero(limits.and_then(|l| l.get("memory"))),
        settings,
    )
}

/// A huge page size that is not a whole number of its largest unit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("size: {size}{unit} must be guaranteed to divisible into the largest units")]
pub struct HugePageSizeError {
    pub size: i64,
    pub unit: &'static str,
}

/// The unit-size name of a huge page size in bytes (`2097152` → `2MB`).
pub fn hugepage_unit_size_from_byte_size(size: i64) -> Result<String, HugePageSizeError> {
    let mut size = size;
    let mut idx = 0;
    while size != 0 && size % 1024 == 0 && idx < HUGE_PAGE_UNITS.len() - 1 {
        size /= 1024;
        idx += 1;
    }
    if size > 1024 && idx < HUGE_PAGE_UNITS.len() - 1 {
        return Err(HugePageSizeError {
            size,
            unit: HUGE_PAGE_UNITS[idx],
        });
    }
    Ok(format!("{size}{}", HUGE_PAGE_UNITS[idx]))
}

/// The page sizes named by `/sys/kernel/mm/hugepages` entries
/// (`hugepages-2048kB` → `2MB`), in the order given; other names are skipped.
pub fn hugepage_sizes_from_sysfs_names<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut out = Vec::new();
    for name in names {
        let Some(kb) = name
            .strip_prefix("hugepages-")
            .and_then(|v| v.strip_suffix("kB"))
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        out.push(if kb >= 1 << 20 {
            format!("{}GB", kb >> 20)
        } else if kb >= 1 << 10 {
            format!("{}MB", kb >> 10)
        } else {
            format!("{kb}KB")
        });
    }
    out
}

/// The machine's huge page sizes, in directory order. Blocking: call from
/// `spawn_blocking`. A machine without the directory has none.
pub fn read_hugepage_sizes(sysfs_hugepages: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sysfs_hugepages) else {
        return Vec::new();
    };
    let names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    hugepage_sizes_from_sysfs_names(names.iter().map(String::as_str))
}

/// A limit for every machine page size: the container's hugepages-<size>
/// limit where it sets one, else 0.
pub fn hugepage_limits(
    resources: Option<&ResourceRequirements>,
    page_sizes: &[String],
) -> Vec<HugepageLimit> {
    let mut required: BTreeMap<String, u64> = BTreeMap::new();
    for (name, amount) in resources
        .and_then(|r| r.limits.as_ref())
        .into_iter()
        .flatten()
    {
        let Some(size) = name.strip_prefix("hugepages-") else {
            continue;
        };
        let Ok(size) = quantity::parse(size) else {
            crate::vlog!(2, resource = %name, "failed to get hugepage size from resource");
            continue;
        };
        match hugepage_unit_size_from_byte_size(size.value()) {
            Ok(unit) => {
                let v = parse_or_zero(Some(amount)).value();
                required.insert(unit, u64::try_from(v).unwrap_or(0));
            }
            Err(e) => crate::vlog!(2, resource = %name, error = %e, "hugepage size is invalid"),
        }
    }
    page_sizes
        .iter()
        .map(|ps| HugepageLimit {
            page_size: ps.clone(),
            limit: required.get(ps).copied().unwrap_or(0),
        })
        .collect()
}

fn add_list(total: &mut BTreeMap<String, Quantity>, list: Option<&BTreeMap<String, ApiQuantity>>) {
    for (name, q) in list.into_iter().flatten() {
        let v = parse_or_zero(Some(q));
        let sum = match total.get(name) {
            Some(prev) => prev.add(&v),
            None => v,
        };
        total.insert(name.clone(), sum);
    }
}

fn max_list(total: &mut BTreeMap<String, Quantity>, list: Option<&BTreeMap<String, ApiQuantity>>) {
    for (name, q) in list.into_iter().flatten() {
        let v = parse_or_zero(Some(q));
        match total.get(name) {
            Some(prev) if v.cmp_value(prev).is_le() => {}
            _ => {
                total.insert(name.clone(), v);
            }
        }
    }
}

/// The pod's requests and limits without overhead: the sum over its
/// containers, raised to any init container's larger value.
pub fn pod_requests_and_limits_without_overhead(
    pod: &Pod,
) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let mut reqs = BTreeMap::new();
    let mut limits = BTreeMap::new();
    if let Some(spec) = pod.spec.as_ref() {
        for c in &spec.containers {
            let r = c.resources.as_ref();
            add_list(&mut reqs, r.and_then(|r| r.requests.as_ref()));
            add_list(&mut limits, r.and_then(|r| r.limits.as_ref()));
        }
        for c in spec.init_containers.iter().flatten() {
            let r = c.resources.as_ref();
            max_list(&mut reqs, r.and_then(|r| r.requests.as_ref()));
            max_list(&mut limits, r.and_then(|r| r.limits.as_ref()));
        }
    }
    (reqs, limits)
}

fn get(list: &BTreeMap<String, Quantity>, name: &str) -> Quantity {
    list.get(name)
        .copied()
        .unwrap_or_else(|| Quantity::from_decimal(0))
}

/// The sandbox's pod-level resources.
pub fn sandbox_resources(pod: &Pod, settings: &RuntimeSettings) -> LinuxContainerResources {
    let (req, lim) = pod_requests_and_limits_without_overhead(pod);
    calculate_linux_resources(
        &get(&req, "cpu"),
        &get(&lim, "cpu"),
        &get(&lim, "memory"),
        settings,
    )
}

/// The sandbox's overhead, treated as guaranteed (request = limit); empty
/// when the pod declares none.
pub fn overhead_resources(pod: &Pod, settings: &RuntimeSettings) -> LinuxContainerResources {
    match pod.spec.as_ref().and_then(|s| s.overhead.as_ref()) {
        Some(overhead) => {
            let cpu = parse_or_zero(overhead.get("cpu"));
            let mem = parse_or_zero(overhead.get("memory"));
            calculate_linux_resources(&cpu, &cpu, &mem, settings)
        }
        None => LinuxContainerResources::default(),
    }
}

#[cfg(test)]
#[path = "resources_tests.rs"]
mod tests;
