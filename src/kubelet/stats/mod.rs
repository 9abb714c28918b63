//! Node and pod resource statistics, the subset of the kubelet's summary the
//! eviction manager reads (Go's `pkg/kubelet/stats` and the stats summary
//! types): node memory and the pods cgroup's memory, the node and image
//! filesystems, the PID limit, and per-pod container memory and disk usage.

mod cadvisor;
mod fsusage;
mod host;
mod memory;
mod network;
mod provider;
mod resource;
mod summary_json;
mod types;

pub use cadvisor::{
    CadvisorContainers, CadvisorSource, HOUSEKEEPING_INTERVAL, pod_uid_of_leaf, runtime_id_of_leaf,
};
pub use fsusage::{FsUsageError, dir_fs_stats, dir_usage, statfs_usage};
pub use memory::{
    MemoryReadError, cgroup_memory_limit, cgroup_v1_working_set, cgroup_v2_working_set,
    read_meminfo, read_memory_stat, unified_root_working_set,
};
pub use provider::{NodeStatsProvider, NodeStatsProviderConfig, StatsError, StatsProvider};
pub use resource::{ContainerUsage, CpuMemory, PodUsage, ResourceUsage, cgroup_cpu_usage_ns};
pub use summary_json::{CpuRates, summary_json};
pub use types::{
    ContainerStats, FsStats, InterfaceStats, MemoryStats, NetworkStats, NodeStats, PodStats,
    ProcessStats, RlimitStats, Summary, VolumeStats,
};
