//! One container's spec and sample, read from its cgroup directories and
//! procfs: the cgroup counters (v1 or v2), processes and descriptors, and
//! for the root and runtime containers the network namespace of one of
//! their processes; the root container also gets the machine's disks.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::files::read_pids;
use super::layout::CgroupLayout;
use super::types::{CfsStats, ContainerSpec, ContainerStats, CpuUsage, MemoryUsage, ProcessStats};
use super::{ContainerReadError, cgroup_v1, cgroup_v2, disks, netdev, procs};

/// The cgroup counters of one sample.
#[derive(Debug, Default)]
pub(super) struct CgroupSample {
    pub cpu: CpuUsage,
    pub cfs: CfsStats,
    pub memory: MemoryUsage,
    pub threads_current: u64,
    pub threads_max: u64,
    pub oom_events: u64,
}

/// Which handler cadvisor would give the cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// `/`: the machine (network of pid 1, every disk, no pids counters).
    Root,
    /// Any other cgroup (QoS classes, pods, system slices).
    Raw,
    /// A runtime's container or sandbox, created at this time.
    Runtime(SystemTime),
}

/// Reads containers on this host.
#[derive(Debug, Clone)]
pub struct ContainerReader {
    layout: CgroupLayout,
    proc_root: PathBuf,
    boot_time: SystemTime,
    /// The root container's filesystems, as listed at start.
    partitions: Vec<disks::Partition>,
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

impl ContainerReader {
    /// `partitions`: the filesystems the root container reports (see
    /// [`disks::partitions`]).
    pub fn new(
        layout: CgroupLayout,
        proc_root: PathBuf,
        boot_time: SystemTime,
        partitions: Vec<disks::Partition>,
    ) -> Self {
        ContainerReader {
            layout,
            proc_root,
            boot_time,
            partitions,
        }
    }

    pub fn layout(&self) -> &CgroupLayout {
        &self.layout
    }

    /// The oldest of the cgroup directories' (and their marker files')
    /// modification times, never before boot: cadvisor's creation time of
    /// a cgroup.
    fn creation_time(&self, dirs: &[&Path], now: SystemTime) -> SystemTime {
        let marker = if self.layout.is_unified() {
            "cgroup.events"
        } else {
            "cgroup.clone_children"
        };
        dirs.iter()
            .flat_map(|d| [modified(d), modified(&d.join(marker))])
            .flatten()
            .fold(now, SystemTime::min)
            .max(self.boot_time)
    }

    /// The spec and a sample of cgroup `name`.
    pub fn read(
        &self,
        name: &str,
        kind: ContainerKind,
        now: SystemTime,
    ) -> Result<(ContainerSpec, ContainerStats), ContainerReadError> {
        let missing = || ContainerReadError::NotFound {
            name: name.to_string(),
        };
        let (sample, cpu_spec, memory_spec, procs_dir, created) = match &self.layout {
            CgroupLayout::V2(_) => {
                let dir = self.layout.dir("memory", name).ok_or_else(missing)?;
                if !dir.is_dir() {
                    return Err(missing());
                }
                let (c, m) = cgroup_v2::spec(&dir);
                let created = self.creation_time(&[&dir], now);
                (cgroup_v2::sample(&dir), c, m, dir, created)
            }
            CgroupLayout::V1(_) => {
                let memory = self.layout.dir("memory", name).ok_or_else(missing)?;
                if !memory.is_dir() {
                    return Err(missing());
                }
                let pids = if kind == ContainerKind::Root {
                    None
                } else {
                    self.layout.dir("pids", name)
                };
                let dirs = cgroup_v1::V1Dirs::new(
                    self.layout.dir("cpu", name),
                    self.layout.dir("cpuacct", name),
                    memory,
                    pids,
                );
                let (c, m) = cgroup_v1::spec(&dirs);
                let created = self.creation_time(&dirs.all(), now);
                let procs_dir = dirs.cpu.clone().unwrap_or_else(|| dirs.memory.clone());
                (cgroup_v1::sample(&dirs), c, m, procs_dir, created)
            }
        };
        let pids = read_pids(&procs_dir);
        let (fd_count, socket_count) = procs::fds_and_sockets(&self.proc_root, &pids);
        let (net_pid, creation_time) = match kind {
            ContainerKind::Root => (Some(1), created),
            ContainerKind::Raw => (None, created),
            ContainerKind::Runtime(t) => (pids.first().copied(), t),
        };
        let mut threads = (sample.threads_current, sample.threads_max);
        if kind == ContainerKind::Root {
            threads = (0, 0);
        }
        let stats = ContainerStats {
            timestamp: now,
            cpu: sample.cpu,
            cfs: sample.cfs,
            memory: sample.memory,
            processes: ProcessStats {
                process_count: pids.len() as u64,
                fd_count,
                socket_count,
                threads_current: threads.0,
                threads_max: threads.1,
                ulimits: net_pid
                    .map(|p| procs::ulimits(&self.proc_root, p))
                    .unwrap_or_default(),
            },
            network: net_pid
                .and_then(|p| {
                    netdev::read_net_dev(&self.proc_root.join(p.to_string()).join("net/dev"))
                })
                .unwrap_or_default(),
            filesystem: if kind == ContainerKind::Root {
                let diskstats =
                    std::fs::read_to_string(self.proc_root.join("diskstats")).unwrap_or_default();
                disks::filesystems(&self.partitions, &diskstats)
            } else {
                Vec::new()
            },
            oom_events: sample.oom_events,
        };
        let spec = ContainerSpec {
            creation_time,
            cpu: cpu_spec,
            memory: memory_spec,
        };
        Ok((spec, stats))
    }
}
