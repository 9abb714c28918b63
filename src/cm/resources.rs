//! The resource settings of one cgroup (Go's `ResourceConfig` and
//! `CgroupConfig`), resource lists, and huge page size names.

use std::collections::BTreeMap;
use std::path::Path;

use super::cgroup_name::CgroupName;
use crate::util::quantity::Quantity;

/// Resource name → quantity, as a node's capacity or a reservation.
pub type ResourceList = BTreeMap<String, Quantity>;

pub const RESOURCE_CPU: &str = "cpu";
pub const RESOURCE_MEMORY: &str = "memory";
pub const RESOURCE_EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const RESOURCE_PODS: &str = "pods";
/// The internal process-id resource (`pid` in kube/system reserved).
pub const RESOURCE_PID: &str = "pid";
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

/// Limits to write to one cgroup. `None` leaves the kernel's value alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// Memory limit in bytes (`memory.limit_in_bytes` / `memory.max`); -1 is unlimited.
    pub memory: Option<i64>,
    /// CPU shares (v1 `cpu.shares`; converted to `cpu.weight` on v2).
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs per period; -1 is unlimited.
    pub cpu_quota: Option<i64>,
    /// CFS period in µs.
    pub cpu_period: Option<u64>,
    /// Huge page size in bytes → limit in bytes. Sizes the host offers but
    /// this map omits are limited to 0 when written (as the Go kubelet does).
    pub hugepage_limit: BTreeMap<i64, i64>,
    /// Maximum number of processes; -1 is `max`.
    pub pids_limit: Option<i64>,
    /// `cpuset.cpus`, in list form.
    pub cpuset_cpus: Option<String>,
    /// `cpuset.mems`, in list form.
    pub cpuset_mems: Option<String>,
    /// Raw cgroup v2 files to write (`memory.min`, …); ignored on v1.
    pub unified: BTreeMap<String, String>,
}

/// A cgroup and the limits it should have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupConfig {
    pub name: CgroupName,
    pub resources: ResourceConfig,
}

impl CgroupConfig {
    pub fn new(name: CgroupName, resources: ResourceConfig) -> Self {
        CgroupConfig { name, resources }
    }
}

/// Whether `name` is a `hugepages-<size>` resource.
pub fn is_hugepage_resource(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
}

/// The resource name for a page size in bytes: `hugepages-2Mi`.
pub fn hugepage_resource_name(page_size: i64) -> String {
    format!(
        "{HUGEPAGES_PREFIX}{}",
        Quantity::from_binary(page_size).to_canonical_string()
    )
}

/// The page size in bytes named by a `hugepages-<size>` resource.
pub fn hugepage_size_from_resource(name: &str) -> Option<i64> {
    let size = name.strip_prefix(HUGEPAGES_PREFIX)?;
    let q: Quantity = size.parse().ok()?;
    (q.value() > 0).then(|| q.value())
}

/// Page size → summed bytes, from the `hugepages-*` entries of a resource list.
pub fn hugepage_limits(list: &ResourceList) -> BTreeMap<i64, i64> {
    let mut out = BTreeMap::new();
    for (name, q) in list {
        if let Some(size) = hugepage_size_from_resource(name) {
            *out.entry(size).or_insert(0) += q.value();
        }
    }
    out
}

const UNIT_SIZES: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];

/// The cgroup file spelling of a page size in bytes (`2MB`, `1GB`), as the
/// hugetlb controller names its files.
pub fn hugepage_unit_size(bytes: i64) -> Option<String> {
    if bytes <= 0 {
        return None;
    }
    let mut size = bytes;
    let mut idx = 0;
    while size % 1024 == 0 && idx < UNIT_SIZES.len() - 1 {
        size /= 1024;
        idx += 1;
    }
    if size > 1024 && idx < UNIT_SIZES.len() - 1 {
        return None;
    }
    Some(format!("{size}{}", UNIT_SIZES[idx]))
}

/// Bytes of a page size spelled the hugetlb way (`2MB` → 2097152).
pub fn hugepage_unit_size_bytes(text: &str) -> Option<i64> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let idx = UNIT_SIZES.iter().position(|u| *u == unit)?;
    let n: i64 = digits.parse().ok()?;
    n.checked_mul(1i64.checked_shl(10 * idx as u32)?)
}

/// The huge page sizes the host offers (`2MB`, `1GB`), in directory order,
/// read from a directory of `hugepages-<n>kB` entries. Missing directory: none.
pub fn host_hugepage_sizes(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let kb: i64 = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            hugepage_unit_size(kb.checked_mul(1024)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugepage_names() {
        let cases = [
            (2 * 1024 * 1024, "hugepages-2Mi", "2MB"),
            (1024 * 1024 * 1024, "hugepages-1Gi", "1GB"),
            (64 * 1024, "hugepages-64Ki", "64KB"),
        ];
        for (bytes, resource, unit) in cases {
            assert_eq!(hugepage_resource_name(bytes), resource);
            assert_eq!(hugepage_size_from_resource(resource), Some(bytes));
            assert_eq!(hugepage_unit_size(bytes).as_deref(), Some(unit));
        }
        assert_eq!(hugepage_size_from_resource("memory"), None);
        assert_eq!(hugepage_unit_size_bytes("2MB"), Some(2 << 20));
        assert_eq!(hugepage_unit_size_bytes("1GB"), Some(1 << 30));
        assert_eq!(hugepage_unit_size_bytes("2XB"), None);
        assert_eq!(hugepage_unit_size(3000), None);
    }

    #[test]
    fn hugepage_limits_sum_per_size() {
        let mut list = ResourceList::new();
        list.insert("hugepages-2Mi".into(), "4Mi".parse().unwrap());
        list.insert("hugepages-1Gi".into(), "2Gi".parse().unwrap());
        list.insert("memory".into(), "1Gi".parse().unwrap());
        let got = hugepage_limits(&list);
        assert_eq!(got.get(&(2 << 20)), Some(&(4 << 20)));
        assert_eq!(got.get(&(1 << 30)), Some(&(2 << 30)));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn host_sizes_from_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("hugepages-2048kB")).unwrap();
        std::fs::create_dir(dir.path().join("hugepages-1048576kB")).unwrap();
        std::fs::create_dir(dir.path().join("other")).unwrap();
        let mut sizes = host_hugepage_sizes(dir.path());
        sizes.sort();
        assert_eq!(sizes, ["1GB", "2MB"]);
        assert!(host_hugepage_sizes(&dir.path().join("missing")).is_empty());
    }
}
