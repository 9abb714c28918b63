//! `container_*`: per-container families of the metric sets the kubelet
//! enables, the spec families and `cadvisor_version_info`.

use std::time::{SystemTime, UNIX_EPOCH};

use super::{Families, millis};
use crate::cadvisor::VersionInfo;
use crate::cadvisor::container::{ContainerInfo, FsCounters, InterfaceCounters};
use crate::metrics::constant::ConstFamily;

/// Sizes above this count as unlimited (the kernel rounds its maximum).
const UNLIMITED: u64 = 1 << 62;

const NS: f64 = 1e9;

fn base(c: &ContainerInfo) -> Vec<(String, String)> {
    vec![
        ("container".to_string(), c.container.clone()),
        ("id".to_string(), c.name.clone()),
        ("image".to_string(), c.image.clone()),
        ("name".to_string(), c.alias.clone()),
        ("namespace".to_string(), c.namespace.clone()),
        ("pod".to_string(), c.pod.clone()),
    ]
}

fn with(c: &ContainerInfo, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut l = base(c);
    l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    l
}

fn spec_memory(v: u64) -> f64 {
    if v > UNLIMITED { 0.0 } else { v as f64 }
}

type Scalar = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ContainerInfo) -> f64,
);

/// Families with one sample per container and no extra label.
const SCALARS: &[Scalar] = &[
    (
        "container_cpu_user_seconds_total",
        "counter",
        "User-mode CPU time the container has used, in seconds.",
        |c| c.stats.cpu.user_ns as f64 / NS,
    ),
    (
        "container_cpu_system_seconds_total",
        "counter",
        "Kernel-mode CPU time the container has used, in seconds.",
        |c| c.stats.cpu.system_ns as f64 / NS,
    ),
    (
        "container_cpu_load_average_10s",
        "gauge",
        "The container's CPU load averaged over 10 seconds (0 without the load reader).",
        |_| 0.0,
    ),
    (
        "container_memory_cache",
        "gauge",
        "Page cache charged to the container, in bytes.",
        |c| c.stats.memory.cache as f64,
    ),
    (
        "container_memory_rss",
        "gauge",
        "Anonymous and swap cache memory of the container (RSS), in bytes.",
        |c| c.stats.memory.rss as f64,
    ),
    (
        "container_memory_mapped_file",
        "gauge",
        "Memory-mapped files of the container, in bytes.",
        |c| c.stats.memory.mapped_file as f64,
    ),
    (
        "container_memory_swap",
        "gauge",
        "Swap used by the container, in bytes.",
        |c| c.stats.memory.swap as f64,
    ),
    (
        "container_memory_failcnt",
        "counter",
        "Times the container's memory usage hit its limit.",
        |c| c.stats.memory.failcnt as f64,
    ),
    (
        "container_memory_usage_bytes",
        "gauge",
        "All memory charged to the container, however recently used, in bytes.",
        |c| c.stats.memory.usage as f64,
    ),
    (
        "container_memory_max_usage_bytes",
        "gauge",
        "Highest memory usage recorded for the container, in bytes.",
        |c| c.stats.memory.max_usage as f64,
    ),
    (
        "container_memory_working_set_bytes",
        "gauge",
        "The container's memory working set (usage less inactive file cache), in bytes.",
        |c| c.stats.memory.working_set as f64,
    ),
    (
        "container_processes",
        "gauge",
        "Processes in the container.",
        |c| c.stats.processes.process_count as f64,
    ),
    (
        "container_file_descriptors",
        "gauge",
        "File descriptors open in the container.",
        |c| c.stats.processes.fd_count as f64,
    ),
    (
        "container_sockets",
        "gauge",
        "Sockets open in the container.",
        |c| c.stats.processes.socket_count as f64,
    ),
    (
        "container_threads_max",
        "gauge",
        "Most threads the container may run; 0 means no limit.",
        |c| c.stats.processes.threads_max as f64,
    ),
    (
        "container_threads",
        "gauge",
        "Threads running in the container.",
        |c| c.stats.processes.threads_current as f64,
    ),
    (
        "container_oom_events_total",
        "counter",
        "Out-of-memory kills seen in the container.",
        |c| c.stats.oom_events as f64,
    ),
];

/// CFS families, only for containers with a CPU quota.
const CFS: &[Scalar] = &[
    (
        "container_cpu_cfs_periods_total",
        "counter",
        "CFS enforcement periods that have elapsed.",
        |c| c.stats.cfs.periods as f64,
    ),
    (
        "container_cpu_cfs_throttled_periods_total",
        "counter",
        "CFS enforcement periods in which the container was throttled.",
        |c| c.stats.cfs.throttled_periods as f64,
    ),
    (
        "container_cpu_cfs_throttled_seconds_total",
        "counter",
        "Time the container has spent throttled, in seconds.",
        |c| c.stats.cfs.throttled_ns as f64 / NS,
    ),
];

type PerFs = (
    &'static str,
    &'static str,
    &'static str,
    fn(&FsCounters) -> f64,
);

const FS: &[PerFs] = &[
    (
        "container_fs_inodes_free",
        "gauge",
        "Free inodes on the filesystem.",
        |f| f.inodes_free as f64,
    ),
    (
        "container_fs_inodes_total",
        "gauge",
        "Inodes of the filesystem.",
        |f| f.inodes as f64,
    ),
    (
        "container_fs_limit_bytes",
        "gauge",
        "Bytes the container may use on the filesystem.",
        |f| f.limit as f64,
    ),
    (
        "container_fs_usage_bytes",
        "gauge",
        "Bytes the container uses on the filesystem.",
        |f| f.usage as f64,
    ),
    (
        "container_fs_reads_total",
        "counter",
        "Reads completed on the device.",
        |f| f.reads_completed as f64,
    ),
    (
        "container_fs_sector_reads_total",
        "counter",
        "Sectors read from the device.",
        |f| f.sectors_read as f64,
    ),
    (
        "container_fs_reads_merged_total",
        "counter",
        "Adjacent reads merged on the device.",
        |f| f.reads_merged as f64,
    ),
    (
        "container_fs_read_seconds_total",
        "counter",
        "Time spent reading from the device, in seconds.",
        |f| f.read_time_ms as f64 / 1e3,
    ),
    (
        "container_fs_writes_total",
        "counter",
        "Writes completed on the device.",
        |f| f.writes_completed as f64,
    ),
    (
        "container_fs_sector_writes_total",
        "counter",
        "Sectors written to the device.",
        |f| f.sectors_written as f64,
    ),
    (
        "container_fs_writes_merged_total",
        "counter",
        "Adjacent writes merged on the device.",
        |f| f.writes_merged as f64,
    ),
    (
        "container_fs_write_seconds_total",
        "counter",
        "Time spent writing to the device, in seconds.",
        |f| f.write_time_ms as f64 / 1e3,
    ),
    (
        "container_fs_io_current",
        "gauge",
        "I/Os in flight on the device.",
        |f| f.io_in_progress as f64,
    ),
    (
        "container_fs_io_time_seconds_total",
        "counter",
        "Time the device spent doing I/O, in seconds.",
        |f| f.io_time_ms as f64 / 1e3,
    ),
    (
        "container_fs_io_time_weighted_seconds_total",
        "counter",
        "I/O time weighted by the I/Os in flight, in seconds.",
        |f| f.weighted_io_time_ms as f64 / 1e3,
    ),
];

type PerIface = (&'static str, &'static str, fn(&InterfaceCounters) -> u64);

const NET: &[PerIface] = &[
    (
        "container_network_receive_bytes_total",
        "Bytes received on the interface.",
        |i| i.rx_bytes,
    ),
    (
        "container_network_receive_packets_total",
        "Packets received on the interface.",
        |i| i.rx_packets,
    ),
    (
        "container_network_receive_packets_dropped_total",
        "Packets dropped while receiving on the interface.",
        |i| i.rx_dropped,
    ),
    (
        "container_network_receive_errors_total",
        "Errors while receiving on the interface.",
        |i| i.rx_errors,
    ),
    (
        "container_network_transmit_bytes_total",
        "Bytes sent on the interface.",
        |i| i.tx_bytes,
    ),
    (
        "container_network_transmit_packets_total",
        "Packets sent on the interface.",
        |i| i.tx_packets,
    ),
    (
        "container_network_transmit_packets_dropped_total",
        "Packets dropped while sending on the interface.",
        |i| i.tx_dropped,
    ),
    (
        "container_network_transmit_errors_total",
        "Errors while sending on the interface.",
        |i| i.tx_errors,
    ),
];

fn spec_families(f: &mut Families, c: &ContainerInfo) {
    let created = c
        .spec
        .creation_time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as f64)
        .unwrap_or(0.0);
    f.add(
        "container_start_time_seconds",
        "gauge",
        "When the container started, in seconds since the Unix epoch.",
        base(c),
        created,
        None,
    );
    if let Some(cpu) = &c.spec.cpu {
        f.add(
            "container_spec_cpu_period",
            "gauge",
            "The container's CFS period, in microseconds.",
            base(c),
            cpu.period_us as f64,
            None,
        );
        if cpu.quota_us != 0 {
            f.add(
                "container_spec_cpu_quota",
                "gauge",
                "The container's CFS quota per period, in microseconds.",
                base(c),
                cpu.quota_us as f64,
                None,
            );
        }
        f.add(
            "container_spec_cpu_shares",
            "gauge",
            "The container's CPU shares.",
            base(c),
            cpu.shares as f64,
            None,
        );
    }
    if let Some(m) = &c.spec.memory {
        f.add(
            "container_spec_memory_limit_bytes",
            "gauge",
            "The container's memory limit in bytes (0: none).",
            base(c),
            spec_memory(m.limit),
            None,
        );
        f.add(
            "container_spec_memory_swap_limit_bytes",
            "gauge",
            "The container's memory and swap limit in bytes (0: none).",
            base(c),
            spec_memory(m.swap_limit),
            None,
        );
        f.add(
            "container_spec_memory_reservation_limit_bytes",
            "gauge",
            "The container's memory reservation (soft limit) in bytes (0: none).",
            base(c),
            spec_memory(m.reservation),
            None,
        );
    }
}

fn sample_families(f: &mut Families, c: &ContainerInfo, now: SystemTime) {
    let s = &c.stats;
    let ts = Some(millis(s.timestamp));
    f.add(
        "container_last_seen",
        "gauge",
        "When the exporter last saw the container, in seconds since the Unix epoch.",
        base(c),
        now.duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as f64)
            .unwrap_or(0.0),
        Some(millis(now)),
    );
    for (name, kind, help, get) in SCALARS {
        f.add(name, kind, help, base(c), get(c), ts);
    }
    if c.spec.cpu.as_ref().is_some_and(|cpu| cpu.quota_us != 0) {
        for (name, kind, help, get) in CFS {
            f.add(name, kind, help, base(c), get(c), ts);
        }
    }
    if s.cpu.total_ns > 0 {
        f.add(
            "container_cpu_usage_seconds_total",
            "counter",
            "CPU time the container has used, in seconds.",
            with(c, &[("cpu", "total")]),
            s.cpu.total_ns as f64 / NS,
            ts,
        );
    }
    let states = [
        "sleeping",
        "running",
        "stopped",
        "uninterruptible",
        "iowaiting",
    ];
    for state in states {
        f.add(
            "container_tasks_state",
            "gauge",
            "Tasks of the container in each state (0 without the load reader).",
            with(c, &[("state", state)]),
            0.0,
            ts,
        );
    }
    let faults = [
        ("pgfault", "container", s.memory.pgfault),
        ("pgmajfault", "container", s.memory.pgmajfault),
        ("pgfault", "hierarchy", s.memory.pgfault),
        ("pgmajfault", "hierarchy", s.memory.pgmajfault),
    ];
    for (kind, scope, v) in faults {
        f.add(
            "container_memory_failures_total",
            "counter",
            "Page faults of the container, by type and scope.",
            with(c, &[("failure_type", kind), ("scope", scope)]),
            v as f64,
            ts,
        );
    }
    for fs in &s.filesystem {
        for (name, kind, help, get) in FS {
            f.add(
                name,
                kind,
                help,
                with(c, &[("device", &fs.device)]),
                get(fs),
                ts,
            );
        }
    }
    for iface in &s.network {
        for (name, help, get) in NET {
            f.add(
                name,
                "counter",
                help,
                with(c, &[("interface", &iface.name)]),
                get(iface) as f64,
                ts,
            );
        }
    }
    for (ulimit, v) in &s.processes.ulimits {
        f.add(
            "container_ulimits_soft",
            "gauge",
            "Soft limits of the container's first process; -1 means unlimited.",
            with(c, &[("ulimit", ulimit)]),
            *v as f64,
            ts,
        );
    }
}

/// The container families of `containers` (`None`: listing failed), and
/// `cadvisor_version_info` from `version`.
pub fn container_families(
    containers: Option<&[ContainerInfo]>,
    version: Option<&VersionInfo>,
    now: SystemTime,
) -> Vec<ConstFamily> {
    let mut f = Families::default();
    let failed = containers.is_none() || version.is_none();
    f.add(
        "container_scrape_error",
        "gauge",
        "1 when gathering the container metrics failed, else 0.",
        vec![],
        if failed { 1.0 } else { 0.0 },
        None,
    );
    if let Some(v) = version {
        let labels = [
            ("cadvisorRevision", ""),
            ("cadvisorVersion", ""),
            ("dockerVersion", ""),
            ("kernelVersion", v.kernel_version.as_str()),
            ("osVersion", v.os_image.as_str()),
        ];
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        f.add(
            "cadvisor_version_info",
            "gauge",
            "Always 1, labelled by the kernel, OS, Docker and cadvisor versions.",
            labels,
            1.0,
            None,
        );
    }
    for c in containers.unwrap_or_default() {
        spec_families(&mut f, c);
        sample_families(&mut f, c, now);
    }
    f.into_vec()
}
