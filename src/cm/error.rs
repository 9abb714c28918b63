//! Errors of the container manager and the cgroup layer beneath it.

use std::path::PathBuf;

/// Everything the container manager, its cgroup drivers and its helpers can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CmError {
    /// A file of a cgroup or of /proc could not be read or written.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A value read from a cgroup or /proc file did not parse.
    #[error("unexpected content in {path}: {detail}")]
    Parse { path: PathBuf, detail: String },
    /// No cgroup hierarchy is mounted, or a needed one is missing.
    #[error("cgroup mounts: {0}")]
    Mounts(String),
    /// The kernel clamped a cpu.shares write (as runc reports it).
    #[error("{path}: the {bound} allowed cpu-shares is {read}")]
    CpuSharesClamped {
        path: PathBuf,
        bound: &'static str,
        read: u64,
    },
    /// A memory limit below the cgroup's usage (EBUSY).
    #[error(
        "unable to set memory limit to {limit} (current usage: {usage}, peak usage: {peak}) in {path}"
    )]
    MemoryBusy {
        path: PathBuf,
        limit: i64,
        usage: u64,
        peak: u64,
    },
    /// Directories of a cgroup remained after every removal attempt.
    #[error("failed to remove cgroup paths: {}", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    Remove { paths: Vec<PathBuf> },
    /// A cgroup name that the driver cannot express.
    #[error("invalid cgroup name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    /// The systemd driver was asked for on a host where systemd is not PID 1, or a D-Bus call failed.
    #[error("systemd: {0}")]
    Systemd(String),
    /// A configuration value (flag or config field) is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The node does not meet a requirement (swap on, kernel tunables, cgroup root missing).
    #[error("{0}")]
    Requirement(String),
    /// Several independent failures, reported together (Go's aggregate error).
    #[error("[{}]", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<CmError>),
    /// A blocking task was cancelled or panicked.
    #[error("blocking cgroup task failed: {0}")]
    Join(String),
    /// The CPU manager could not be built.
    #[error(transparent)]
    CpuManager(Box<super::cpumanager::CpuManagerError>),
    /// The memory manager could not be built.
    #[error(transparent)]
    MemoryManager(Box<super::memorymanager::MemoryManagerError>),
    /// The topology manager could not be built.
    #[error("failed to initialize topology manager: {0}")]
    TopologyManager(#[source] super::topologymanager::TopologyManagerError),
    /// Machine information could not be gathered.
    #[error(transparent)]
    MachineInfo(#[from] crate::cadvisor::MachineInfoError),
}

impl From<super::memorymanager::MemoryManagerError> for CmError {
    fn from(e: super::memorymanager::MemoryManagerError) -> Self {
        CmError::MemoryManager(Box::new(e))
    }
}

impl From<super::cpumanager::CpuManagerError> for CmError {
    fn from(e: super::cpumanager::CpuManagerError) -> Self {
        CmError::CpuManager(Box::new(e))
    }
}

impl CmError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CmError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The OS error behind an I/O failure, if that is what this is.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            CmError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// Whether this is an I/O failure because a file or directory does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, CmError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// Folds a list of errors into nothing, the one error, or an aggregate.
    pub fn aggregate(mut errs: Vec<CmError>) -> Result<(), CmError> {
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(CmError::Aggregate(errs)),
        }
    }
}

/// Runs blocking cgroup or /proc work off the async runtime.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, CmError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CmError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CmError::Join(e.to_string()))?
}
