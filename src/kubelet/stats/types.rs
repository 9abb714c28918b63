//! The summary the stats provider returns: the fields of the kubelet's
//! stats/v1alpha1 summary that eviction uses, every value optional as there.

use std::time::SystemTime;

pub use super::network::{InterfaceStats, NetworkStats};

/// Memory of a cgroup (node root, the pods cgroup, a pod or a container).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryStats {
    pub time: Option<SystemTime>,
    /// Capacity (the memory limit, or machine memory) minus the working set.
    pub available_bytes: Option<u64>,
    /// Total usage, page cache included.
    pub usage_bytes: Option<u64>,
    /// Usage minus the inactive file cache: what cannot be reclaimed cheaply.
    pub working_set_bytes: Option<u64>,
    /// Anonymous memory (and swap cache).
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// Usage of a filesystem, or of what one object stores on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FsStats {
    pub time: Option<SystemTime>,
    pub available_bytes: Option<u64>,
    pub capacity_bytes: Option<u64>,
    pub used_bytes: Option<u64>,
    pub inodes_free: Option<u64>,
    pub inodes: Option<u64>,
    pub inodes_used: Option<u64>,
}

/// The node's process limit and the processes running.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RlimitStats {
    pub time: Option<SystemTime>,
    pub max_pid: Option<i64>,
    pub num_of_running_processes: Option<i64>,
}

/// Node-level statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeStats {
    pub node_name: String,
    pub memory: Option<MemoryStats>,
    /// The memory of the cgroup all pods run under (the "pods" system
    /// container), whose limit is node allocatable.
    pub allocatable_memory: Option<MemoryStats>,
    /// The filesystem of the kubelet's root directory.
    pub fs: Option<FsStats>,
    /// The filesystem the runtime stores images on.
    pub image_fs: Option<FsStats>,
    pub rlimit: Option<RlimitStats>,
    /// When the node booted.
    pub start_time: Option<SystemTime>,
    /// When the cgroup all pods run under was made.
    pub allocatable_start_time: Option<SystemTime>,
    /// The host network namespace's interfaces.
    pub network: Option<NetworkStats>,
}

/// One container of a pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerStats {
    pub name: String,
    pub memory: Option<MemoryStats>,
    /// The container's writable layer.
    pub rootfs: Option<FsStats>,
    /// The container's log directory.
    pub logs: Option<FsStats>,
    /// When the container was created.
    pub start_time: Option<SystemTime>,
}

/// One volume of a pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeStats {
    pub name: String,
    pub fs: FsStats,
}

/// Processes in a pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    pub process_count: Option<u64>,
}

/// One pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodStats {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub containers: Vec<ContainerStats>,
    /// The pod cgroup's memory.
    pub memory: Option<MemoryStats>,
    pub volume_stats: Vec<VolumeStats>,
    /// Everything the pod stores locally: writable layers, logs, local
    /// ephemeral volumes.
    pub ephemeral_storage: Option<FsStats>,
    pub process_stats: Option<ProcessStats>,
    /// When the pod's sandbox was created.
    pub start_time: Option<SystemTime>,
    /// The pod network namespace's interfaces.
    pub network: Option<NetworkStats>,
}

/// Node and pod statistics taken together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}
