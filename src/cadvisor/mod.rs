//! Machine information, the part cadvisor plays for the kubelet at start-up:
//! CPUs and their topology, memory, huge pages, machine/boot/system ids,
//! kernel and OS, and filesystem capacity. Read from procfs and sysfs under
//! an injectable root, so tests can describe any machine.

pub mod container;
mod fs;
mod machine;
pub mod prometheus;
pub mod static_machine;
pub(crate) mod topology;
mod types;

pub use fs::fs_info_at;
pub use machine::HostMachineInfo;
pub use static_machine::{MachineSpec, StaticMachine};
pub use types::{Core, FsInfo, HugePagesInfo, MachineInfo, NumaNode, VersionInfo};

use std::path::{Path, PathBuf};

/// Gathering machine information failed.
#[derive(Debug, thiserror::Error)]
pub enum MachineInfoError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {detail}")]
    Parse { path: PathBuf, detail: String },
    #[error("statfs {path}: {source}")]
    Statfs {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
}

/// What the kubelet asks of cadvisor at start-up. Methods block (file I/O).
pub trait MachineInfoProvider: Send + Sync + 'static {
    /// The machine: CPUs, topology, memory, huge pages, ids.
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError>;
    /// Kernel version and OS image.
    fn version_info(&self) -> Result<VersionInfo, MachineInfoError>;
    /// Capacity and usage of the filesystem holding `path` (the kubelet root
    /// directory for `nodefs`, the image store for `imagefs`).
    fn fs_info(&self, path: &Path) -> Result<FsInfo, MachineInfoError>;
}

#[cfg(test)]
mod tests;
