//! What the summary reads about the host beyond memory and CPU: boot time
//! (the node's start), a cgroup's start (its directory's modification
//! time, as cadvisor takes it), memory counters of `memory.stat`, and a
//! process inside a pod cgroup (to reach the pod's network namespace).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::memory::read_memory_stat;

/// The boot time from `btime` of `/proc/stat`.
pub fn boot_time(proc_root: &Path) -> Option<SystemTime> {
    let text = std::fs::read_to_string(proc_root.join("stat")).ok()?;
    let secs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// When a cgroup was made (its directory's modification time).
pub fn cgroup_start_time(dir: &Path) -> Option<SystemTime> {
    std::fs::metadata(dir).ok()?.modified().ok()
}

/// Memory counters: (rss, page faults, major page faults). v1 reads the
/// hierarchical `total_*` values, v2 `anon` and the fault counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryCounters {
    pub rss: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

pub fn cgroup_memory_counters(dir: &Path, unified: bool) -> MemoryCounters {
    let Ok(stat) = read_memory_stat(&dir.join("memory.stat")) else {
        return MemoryCounters::default();
    };
    let (rss, pgfault, pgmajfault) = if unified {
        ("anon", "pgfault", "pgmajfault")
    } else {
        ("total_rss", "total_pgfault", "total_pgmajfault")
    };
    MemoryCounters {
        rss: stat.get(rss).copied(),
        page_faults: stat.get(pgfault).copied(),
        major_page_faults: stat.get(pgmajfault).copied(),
    }
}

/// The host's counters on cgroup v2, which has no root `memory.stat`:
/// `AnonPages` of meminfo and the fault counters of `/proc/vmstat`.
pub fn host_memory_counters(proc_root: &Path) -> MemoryCounters {
    let vmstat = read_memory_stat(&proc_root.join("vmstat")).unwrap_or_default();
    let meminfo = super::memory::read_meminfo(&proc_root.join("meminfo")).unwrap_or_default();
    MemoryCounters {
        rss: meminfo.get("AnonPages").copied(),
        page_faults: vmstat.get("pgfault").copied(),
        major_page_faults: vmstat.get("pgmajfault").copied(),
    }
}

/// A process in the cgroup or one of its children (the pod's containers).
pub fn any_pid_in(dir: &Path) -> Option<u32> {
    let first = |d: &Path| -> Option<u32> {
        std::fs::read_to_string(d.join("cgroup.procs"))
            .ok()?
            .lines()
            .find_map(|l| l.trim().parse().ok())
    };
    if let Some(pid) = first(dir) {
        return Some(pid);
    }
    let children: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    children.iter().find_map(|c| first(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_time_counters_and_pids_from_fake_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("stat"),
            "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n",
        )
        .unwrap();
        assert_eq!(
            boot_time(d),
            Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        std::fs::write(
            d.join("memory.stat"),
            "rss 1\ntotal_rss 10\ntotal_pgfault 20\ntotal_pgmajfault 3\nanon 7\npgfault 8\npgmajfault 9\n",
        )
        .unwrap();
        let v1 = cgroup_memory_counters(d, false);
        assert_eq!(
            (v1.rss, v1.page_faults, v1.major_page_faults),
            (Some(10), Some(20), Some(3))
        );
        let v2 = cgroup_memory_counters(d, true);
        assert_eq!(
            (v2.rss, v2.page_faults, v2.major_page_faults),
            (Some(7), Some(8), Some(9))
        );
        std::fs::write(d.join("vmstat"), "pgfault 100\npgmajfault 4\n").unwrap();
        std::fs::write(d.join("meminfo"), "MemTotal: 10 kB\nAnonPages: 2 kB\n").unwrap();
        let host = host_memory_counters(d);
        assert_eq!(
            (host.rss, host.page_faults, host.major_page_faults),
            (Some(2048), Some(100), Some(4))
        );
        // The pod cgroup holds no process itself; its container's does.
        std::fs::create_dir_all(d.join("pod/c1")).unwrap();
        std::fs::write(d.join("pod/cgroup.procs"), "").unwrap();
        std::fs::write(d.join("pod/c1/cgroup.procs"), "4242\n4243\n").unwrap();
        assert_eq!(any_pid_in(&d.join("pod")), Some(4242));
        assert!(cgroup_start_time(&d.join("pod")).is_some());
    }
}
