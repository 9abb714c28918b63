//! Node-wide settings the CRI config generation depends on, fixed at build
//! time from the KubeletConfiguration, feature gates and machine info.

use std::path::PathBuf;

/// The default CFS period, 100 ms.
pub const DEFAULT_CPU_CFS_QUOTA_PERIOD_US: i64 = 100_000;

/// Settings shared by every pod's CRI configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// `cpuCFSQuota`: enforce CPU limits with CFS quota.
    pub cpu_cfs_quota: bool,
    /// The CFS period in microseconds: `cpuCFSQuotaPeriod` when the
    /// CustomCPUCFSQuotaPeriod gate is on, else 100000.
    pub cpu_cfs_quota_period_us: i64,
    /// `<root-dir>/seccomp`, where Localhost seccomp profiles live.
    pub seccomp_profile_root: PathBuf,
    /// `seccompDefault` with the SeccompDefault gate: RuntimeDefault instead
    /// of Unconfined for containers that ask for nothing.
    pub seccomp_default: bool,
    /// The machine's memory in bytes (for the Burstable OOM score).
    pub memory_capacity: i64,
    /// The machine's huge page sizes (`2MB`, `1GB`), in the order the kernel
    /// lists them; every container gets a limit for each.
    pub hugepage_sizes: Vec<String>,
    /// Whether SELinux is enabled on the host (mounts ask for relabeling
    /// only then).
    pub selinux_enabled: bool,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            cpu_cfs_quota: true,
            cpu_cfs_quota_period_us: DEFAULT_CPU_CFS_QUOTA_PERIOD_US,
            seccomp_profile_root: PathBuf::from("/var/lib/kubelet/seccomp"),
            seccomp_default: false,
            memory_capacity: 0,
            hugepage_sizes: Vec::new(),
            selinux_enabled: false,
        }
    }
}
