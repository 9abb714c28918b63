//! Where the container manager finds the host: /proc, the sysctl tree, the
//! systemd marker and the hugepage directory. Real paths by default; tests
//! point them into a temporary tree (never at the real sysctls).

use std::path::{Path, PathBuf};

/// Roots of the host files the container manager reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    /// procfs: `self/mountinfo`, `self/cgroup`, `swaps`, `<pid>/...`.
    pub proc: PathBuf,
    /// The sysctl tree (`/proc/sys`), where kernel tunables are checked and set.
    pub sysctl: PathBuf,
    /// The directory whose presence means systemd is the init system.
    pub run_systemd_system: PathBuf,
    /// The directory listing the huge page sizes (`/sys/kernel/mm/hugepages`).
    pub hugepages: PathBuf,
}

impl Default for HostPaths {
    fn default() -> Self {
        HostPaths {
            proc: PathBuf::from("/proc"),
            sysctl: PathBuf::from("/proc/sys"),
            run_systemd_system: PathBuf::from("/run/systemd/system"),
            hugepages: PathBuf::from("/sys/kernel/mm/hugepages"),
        }
    }
}

impl HostPaths {
    pub fn mountinfo(&self) -> PathBuf {
        self.proc.join("self/mountinfo")
    }

    pub fn self_cgroup(&self) -> PathBuf {
        self.proc.join("self/cgroup")
    }

    pub fn swaps(&self) -> PathBuf {
        self.proc.join("swaps")
    }

    pub fn pid_dir(&self, pid: u32) -> PathBuf {
        self.proc.join(pid.to_string())
    }

    /// Whether systemd runs as init (runc's check: the marker directory exists).
    pub fn systemd_running(&self) -> bool {
        is_dir_no_follow(&self.run_systemd_system)
    }
}

fn is_dir_no_follow(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}
