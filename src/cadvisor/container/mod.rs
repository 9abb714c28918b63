//! Containers as cadvisor's raw and runtime handlers see them: every
//! cgroup's CPU, memory, processes and settings (v1 and v2), the network
//! namespace of a process inside, and the machine's disks for the root
//! container. The kubelet names and labels them (pods, runtime
//! containers); this module only reads the host.

mod cgroup_v1;
mod cgroup_v2;
mod disks;
mod files;
mod layout;
mod netdev;
mod procs;
mod sample;
mod types;

pub use disks::{Partition, partitions};
pub use layout::CgroupLayout;
pub use netdev::{parse_net_dev, read_net_dev};
pub use sample::{ContainerKind, ContainerReader};
pub use types::{
    CfsStats, ContainerInfo, ContainerSpec, ContainerStats, CpuSpec, CpuUsage, FsCounters,
    InterfaceCounters, MemorySpec, MemoryUsage, ProcessStats,
};

/// A container that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ContainerReadError {
    #[error("cgroup {name} not found")]
    NotFound { name: String },
}

#[cfg(test)]
mod tests;
