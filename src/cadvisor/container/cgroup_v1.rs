//! A cgroup's statistics and settings on cgroup v1, from the cpuacct, cpu,
//! memory and pids controllers' files, as libcontainer reads them for
//! cadvisor.

use std::path::{Path, PathBuf};

use super::files::{read_keyed, read_line, read_u64};
use super::sample::CgroupSample;
use super::types::{CfsStats, CpuSpec, CpuUsage, MemorySpec, MemoryUsage};

/// Nanoseconds per USER_HZ tick (`cpuacct.stat` counts ticks of 1/100 s).
const NS_PER_TICK: u64 = 10_000_000;

fn cpu(cpuacct: Option<&Path>) -> CpuUsage {
    let Some(dir) = cpuacct else {
        return CpuUsage::default();
    };
    let stat = read_keyed(&dir.join("cpuacct.stat"));
    CpuUsage {
        total_ns: read_u64(&dir.join("cpuacct.usage")).unwrap_or(0),
        user_ns: stat
            .get("user")
            .copied()
            .unwrap_or(0)
            .saturating_mul(NS_PER_TICK),
        system_ns: stat
            .get("system")
            .copied()
            .unwrap_or(0)
            .saturating_mul(NS_PER_TICK),
    }
}

fn cfs(cpu: Option<&Path>) -> CfsStats {
    let Some(dir) = cpu else {
        return CfsStats::default();
    };
    let stat = read_keyed(&dir.join("cpu.stat"));
    let get = |k: &str| stat.get(k).copied().unwrap_or(0);
    CfsStats {
        periods: get("nr_periods"),
        throttled_periods: get("nr_throttled"),
        throttled_ns: get("throttled_time"),
    }
}

fn memory(dir: &Path) -> (MemoryUsage, u64) {
    let stat = read_keyed(&dir.join("memory.stat"));
    let get = |k: &str| stat.get(k).copied().unwrap_or(0);
    let usage = read_u64(&dir.join("memory.usage_in_bytes")).unwrap_or(0);
    let hierarchical = read_u64(&dir.join("memory.use_hierarchy")) == Some(1);
    let key = |k: &'static str| {
        if hierarchical {
            get(&format!("total_{k}"))
        } else {
            get(k)
        }
    };
    let oom = read_keyed(&dir.join("memory.oom_control"));
    let m = MemoryUsage {
        usage,
        max_usage: read_u64(&dir.join("memory.max_usage_in_bytes")).unwrap_or(0),
        cache: key("cache"),
        rss: key("rss"),
        mapped_file: key("mapped_file"),
        swap: key("swap"),
        failcnt: read_u64(&dir.join("memory.failcnt")).unwrap_or(0),
        working_set: usage.saturating_sub(get("total_inactive_file")),
        pgfault: get("pgfault"),
        pgmajfault: get("pgmajfault"),
    };
    (m, oom.get("oom_kill").copied().unwrap_or(0))
}

/// The controller directories of one cgroup.
pub(super) struct V1Dirs {
    pub cpu: Option<PathBuf>,
    pub cpuacct: Option<PathBuf>,
    pub memory: PathBuf,
    pub pids: Option<PathBuf>,
}

impl V1Dirs {
    fn existing(p: Option<PathBuf>) -> Option<PathBuf> {
        p.filter(|d| d.is_dir())
    }

    pub fn new(
        cpu: Option<PathBuf>,
        cpuacct: Option<PathBuf>,
        memory: PathBuf,
        pids: Option<PathBuf>,
    ) -> Self {
        V1Dirs {
            cpu: Self::existing(cpu),
            cpuacct: Self::existing(cpuacct),
            memory,
            pids: Self::existing(pids),
        }
    }

    /// The directories whose ages date the cgroup.
    pub fn all(&self) -> Vec<&Path> {
        let mut v = vec![self.memory.as_path()];
        v.extend(self.cpu.as_deref());
        v.extend(self.cpuacct.as_deref());
        v.extend(self.pids.as_deref());
        v
    }
}

/// One sample of the cgroup's counters.
pub(super) fn sample(d: &V1Dirs) -> CgroupSample {
    let (memory, oom_events) = memory(&d.memory);
    let pids = d.pids.as_deref();
    CgroupSample {
        cpu: cpu(d.cpuacct.as_deref()),
        cfs: cfs(d.cpu.as_deref()),
        memory,
        threads_current: pids
            .and_then(|p| read_u64(&p.join("pids.current")))
            .unwrap_or(0),
        threads_max: pids
            .and_then(|p| read_u64(&p.join("pids.max")))
            .filter(|&m| m != u64::MAX)
            .unwrap_or(0),
        oom_events,
    }
}

/// CPU and memory settings.
pub(super) fn spec(d: &V1Dirs) -> (Option<CpuSpec>, Option<MemorySpec>) {
    let cpu = d.cpu.as_deref().map(|dir| CpuSpec {
        shares: read_u64(&dir.join("cpu.shares")).unwrap_or(0),
        period_us: read_u64(&dir.join("cpu.cfs_period_us")).unwrap_or(0),
        quota_us: read_line(&dir.join("cpu.cfs_quota_us"))
            .and_then(|q| q.parse::<u64>().ok())
            .unwrap_or(0),
    });
    let dir = &d.memory;
    let memory = Some(MemorySpec {
        limit: read_u64(&dir.join("memory.limit_in_bytes")).unwrap_or(0),
        swap_limit: read_u64(&dir.join("memory.memsw.limit_in_bytes")).unwrap_or(0),
        reservation: read_u64(&dir.join("memory.soft_limit_in_bytes")).unwrap_or(0),
    });
    (cpu, memory)
}
