//! A container's spec and one sample of its statistics, with the meanings
//! cadvisor gives them (its `info/v1` types, the subset the kubelet's
//! /metrics/cadvisor exports).

use std::time::SystemTime;

/// CPU time, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuUsage {
    pub total_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
}

/// CFS bandwidth enforcement counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CfsStats {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
}

/// Memory use of a cgroup, in bytes (page faults are counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    pub usage: u64,
    pub max_usage: u64,
    pub cache: u64,
    pub rss: u64,
    pub mapped_file: u64,
    pub swap: u64,
    pub failcnt: u64,
    /// Usage less the inactive file cache.
    pub working_set: u64,
    pub pgfault: u64,
    pub pgmajfault: u64,
}

/// Processes, threads and descriptors of a cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessStats {
    /// Processes listed in the cgroup's own `cgroup.procs`.
    pub process_count: u64,
    pub fd_count: u64,
    pub socket_count: u64,
    /// `pids.current`.
    pub threads_current: u64,
    /// `pids.max`; 0 when unlimited.
    pub threads_max: u64,
    /// Soft limits of the container's root process, by cadvisor's names
    /// (`max_open_files`); -1 for unlimited.
    pub ulimits: Vec<(String, i64)>,
}

/// One network interface's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// A filesystem's usage and its device's I/O counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsCounters {
    pub device: String,
    pub limit: u64,
    pub usage: u64,
    pub inodes: u64,
    pub inodes_free: u64,
    pub reads_completed: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub read_time_ms: u64,
    pub writes_completed: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub write_time_ms: u64,
    pub io_in_progress: u64,
    pub io_time_ms: u64,
    pub weighted_io_time_ms: u64,
}

/// One sample of a container's statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStats {
    pub timestamp: SystemTime,
    pub cpu: CpuUsage,
    pub cfs: CfsStats,
    pub memory: MemoryUsage,
    pub processes: ProcessStats,
    pub network: Vec<InterfaceCounters>,
    pub filesystem: Vec<FsCounters>,
    /// OOM kills inside the cgroup (`oom_kill` of the memory controller).
    pub oom_events: u64,
}

/// CPU settings of a cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSpec {
    /// `cpu.shares` (v2: `cpu.weight` converted to shares).
    pub shares: u64,
    pub period_us: u64,
    /// 0 when unlimited.
    pub quota_us: u64,
}

/// Memory settings of a cgroup, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySpec {
    pub limit: u64,
    pub swap_limit: u64,
    pub reservation: u64,
}

/// What a container is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    pub creation_time: SystemTime,
    pub cpu: Option<CpuSpec>,
    pub memory: Option<MemorySpec>,
}

/// A container as the Prometheus collector sees it: its cgroup name, the
/// labels the kubelet gives it, its spec and its latest sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    /// The cgroup name (`/kubepods/burstable/pod<uid>/<id>`), the `id` label.
    pub name: String,
    /// The runtime's id for runtime containers (the `name` label), else "".
    pub alias: String,
    pub image: String,
    pub pod: String,
    pub namespace: String,
    pub container: String,
    pub spec: ContainerSpec,
    pub stats: ContainerStats,
}
