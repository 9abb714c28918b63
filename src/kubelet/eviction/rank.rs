//! Ranking pods for eviction. Memory: pods using more than they request
//! first, then lower priority, then the most usage above request. Disk: the
//! same with the local storage the pressured filesystem holds. PIDs: lower
//! priority, then the most processes. A pod without stats goes first.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::signals::PodStatsIndex;
use super::threshold::Signal;
use crate::cm::helpers::resource_list;
use crate::kubelet::stats::{FsStats, MemoryStats, PodStats};

/// Which of a pod's local storage a disk signal counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsStatsType {
    /// Container writable layers.
    Root,
    /// Container logs.
    Logs,
    /// Local volumes (hostPath, emptyDir on disk, configMap, gitRepo).
    LocalVolumeSource,
}

/// A disk resource: bytes or inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskResource {
    EphemeralStorage,
    Inodes,
}

/// How pods are ranked for one signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankFunc {
    Memory,
    Pid,
    Disk(Vec<FsStatsType>, DiskResource),
}

impl RankFunc {
    /// Orders `pods`, first to evict first.
    pub fn rank(&self, pods: &mut [Arc<Pod>], stats: &PodStatsIndex) {
        match self {
            RankFunc::Memory => pods.sort_by(|a, b| {
                exceed_memory_requests(a, b, stats)
                    .then_with(|| priority(a, b))
                    .then_with(|| memory(a, b, stats))
            }),
            RankFunc::Pid => pods.sort_by(|a, b| priority(a, b).then_with(|| process(a, b, stats))),
            RankFunc::Disk(types, resource) => pods.sort_by(|a, b| {
                exceed_disk_requests(a, b, stats, types, *resource)
                    .then_with(|| priority(a, b))
                    .then_with(|| disk(a, b, stats, types, *resource))
            }),
        }
    }
}

/// The ranking of each signal: with a dedicated image filesystem, nodefs
/// counts logs and local volumes and imagefs counts writable layers;
/// without, both count everything.
pub fn rank_func_for(signal: Signal, dedicated_image_fs: bool) -> RankFunc {
    use FsStatsType::*;
    let all = vec![Root, Logs, LocalVolumeSource];
    let (node_types, image_types) = if dedicated_image_fs {
        (vec![Logs, LocalVolumeSource], vec![Root])
    } else {
        (all.clone(), all)
    };
    match signal {
        Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => RankFunc::Memory,
        Signal::PidAvailable => RankFunc::Pid,
        Signal::NodeFsAvailable => RankFunc::Disk(node_types, DiskResource::EphemeralStorage),
        Signal::NodeFsInodesFree => RankFunc::Disk(node_types, DiskResource::Inodes),
        Signal::ImageFsAvailable => RankFunc::Disk(image_types, DiskResource::EphemeralStorage),
        Signal::ImageFsInodesFree => RankFunc::Disk(image_types, DiskResource::Inodes),
    }
}

/// `true` sorts before `false`.
fn cmp_bool(a: bool, b: bool) -> Ordering {
    b.cmp(&a)
}

/// A pod without stats sorts first; `None` when both have stats.
fn missing_stats_first<'a>(
    a: &Pod,
    b: &Pod,
    stats: &'a PodStatsIndex,
) -> Result<(&'a PodStats, &'a PodStats), Ordering> {
    match (stats.get(a), stats.get(b)) {
        (Some(x), Some(y)) => Ok((x, y)),
        (x, y) => Err(cmp_bool(x.is_none(), y.is_none())),
    }
}

/// The pod's priority (0 when unset).
pub fn pod_priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Lower priority first.
fn priority(a: &Pod, b: &Pod) -> Ordering {
    pod_priority(a).cmp(&pod_priority(b))
}

/// The pod's request of a resource, as the scheduler sums it: containers
/// add up, an init container raises it to its own request, and the pod
/// overhead is added to a non-zero request.
pub fn pod_request(pod: &Pod, resource: &str) -> i64 {
    let Some(spec) = pod.spec.as_ref() else {
        return 0;
    };
    let request = |c: &k8s_openapi::api::core::v1::Container| {
        resource_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
            .get(resource)
            .map(|q| q.value())
    };
    let mut total: i64 = spec.containers.iter().filter_map(request).sum();
    for c in spec.init_containers.iter().flatten() {
        if let Some(r) = request(c) {
            total = total.max(r);
        }
    }
    if total != 0
        && let Some(o) = resource_list(spec.overhead.as_ref()).get(resource)
    {
        total += o.value();
    }
    total
}

/// Working set bytes (0 when unknown).
pub fn memory_usage(m: Option<&MemoryStats>) -> i64 {
    m.and_then(|m| m.working_set_bytes).unwrap_or(0) as i64
}

fn exceed_memory_requests(a: &Pod, b: &Pod, stats: &PodStatsIndex) -> Ordering {
    let (sa, sb) = match missing_stats_first(a, b, stats) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let ea = memory_usage(sa.memory.as_ref()) > pod_request(a, "memory");
    let eb = memory_usage(sb.memory.as_ref()) > pod_request(b, "memory");
    cmp_bool(ea, eb)
}

/// The most usage above request first.
fn memory(a: &Pod, b: &Pod, stats: &PodStatsIndex) -> Ordering {
    let (sa, sb) = match missing_stats_first(a, b, stats) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let ua = memory_usage(sa.memory.as_ref()) - pod_request(a, "memory");
    let ub = memory_usage(sb.memory.as_ref()) - pod_request(b, "memory");
    ub.cmp(&ua)
}

/// The most processes first.
fn process(a: &Pod, b: &Pod, stats: &PodStatsIndex) -> Ordering {
    let (sa, sb) = match missing_stats_first(a, b, stats) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let count = |s: &PodStats| {
        s.process_stats
            .as_ref()
            .and_then(|p| p.process_count)
            .unwrap_or(0)
    };
    count(sb).cmp(&count(sa))
}

fn fs_used(fs: Option<&FsStats>, resource: DiskResource) -> i64 {
    let fs = match fs {
        Some(f) => f,
        None => return 0,
    };
    match resource {
        DiskResource::EphemeralStorage => fs.used_bytes.unwrap_or(0) as i64,
        DiskResource::Inodes => fs.inodes_used.unwrap_or(0) as i64,
    }
}

/// The names of the pod's volumes that store on the node's disk
/// (hostPath, emptyDir not backed by memory, configMap, gitRepo).
pub fn local_volume_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| {
            v.host_path.is_some()
                || v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
                || v.config_map.is_some()
                || v.git_repo.is_some()
        })
        .map(|v| v.name.clone())
        .collect()
}

/// The names of the pod's local ephemeral volumes (emptyDir not backed by
/// memory, configMap, downwardAPI, gitRepo).
pub fn local_ephemeral_volume_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| {
            v.git_repo.is_some()
                || v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
                || v.config_map.is_some()
                || v.downward_api.is_some()
        })
        .map(|v| v.name.clone())
        .collect()
}

/// What the pod stores on the pressured filesystem.
pub fn pod_disk_usage(
    stats: &PodStats,
    pod: &Pod,
    types: &[FsStatsType],
    resource: DiskResource,
) -> i64 {
    let mut total = 0;
    for c in &stats.containers {
        if types.contains(&FsStatsType::Root) {
            total += fs_used(c.rootfs.as_ref(), resource);
        }
        if types.contains(&FsStatsType::Logs) {
            total += fs_used(c.logs.as_ref(), resource);
        }
    }
    if types.contains(&FsStatsType::LocalVolumeSource) {
        for name in local_volume_names(pod) {
            if let Some(v) = stats.volume_stats.iter().find(|v| v.name == name) {
                total += fs_used(Some(&v.fs), resource);
            }
        }
    }
    total
}

fn disk_request(pod: &Pod, resource: DiskResource) -> i64 {
    match resource {
        DiskResource::EphemeralStorage => pod_request(pod, "ephemeral-storage"),
        DiskResource::Inodes => 0,
    }
}

fn exceed_disk_requests(
    a: &Pod,
    b: &Pod,
    stats: &PodStatsIndex,
    types: &[FsStatsType],
    resource: DiskResource,
) -> Ordering {
    let (sa, sb) = match missing_stats_first(a, b, stats) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let ea = pod_disk_usage(sa, a, types, resource) > disk_request(a, resource);
    let eb = pod_disk_usage(sb, b, types, resource) > disk_request(b, resource);
    cmp_bool(ea, eb)
}

/// The most usage above the ephemeral-storage request first (the request
/// is subtracted from inode usage too, as Go does).
fn disk(
    a: &Pod,
    b: &Pod,
    stats: &PodStatsIndex,
    types: &[FsStatsType],
    resource: DiskResource,
) -> Ordering {
    let (sa, sb) = match missing_stats_first(a, b, stats) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let ua = pod_disk_usage(sa, a, types, resource) - pod_request(a, "ephemeral-storage");
    let ub = pod_disk_usage(sb, b, types, resource) - pod_request(b, "ephemeral-storage");
    ub.cmp(&ua)
}

#[cfg(test)]
#[path = "rank_tests.rs"]
mod tests;
