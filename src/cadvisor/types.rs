//! The machine description, with cadvisor's field meanings.

/// Huge pages of one size.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HugePagesInfo {
    /// Page size in KiB.
    pub page_size_kib: u64,
    /// Pages reserved (`nr_hugepages`).
    pub num_pages: u64,
}

/// A physical core and the logical CPUs (threads) on it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Core {
    /// `topology/core_id`.
    pub id: u32,
    /// Logical CPU ids on this core.
    pub threads: Vec<u32>,
    /// `topology/physical_package_id`.
    pub socket_id: u32,
}

/// A NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NumaNode {
    pub id: u32,
    /// Memory of the node in bytes.
    pub memory: u64,
    pub hugepages: Vec<HugePagesInfo>,
    pub cores: Vec<Core>,
    /// Distances to every node, as the node's `distance` file lists them.
    pub distances: Vec<u64>,
}

/// The machine as cadvisor reports it to the kubelet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineInfo {
    /// Logical CPUs (online threads over all nodes).
    pub num_cores: u32,
    /// Distinct `core id` values of /proc/cpuinfo.
    pub num_physical_cores: u32,
    /// Distinct `physical id` values of /proc/cpuinfo.
    pub num_sockets: u32,
    pub cpu_vendor_id: String,
    /// Maximum CPU frequency in kHz (0 when unknown).
    pub cpu_frequency_khz: u64,
    /// MemTotal of /proc/meminfo, in bytes.
    pub memory_capacity: u64,
    /// SwapTotal of /proc/meminfo, in bytes.
    pub swap_capacity: u64,
    /// Huge pages per size, machine-wide.
    pub hugepages: Vec<HugePagesInfo>,
    pub topology: Vec<NumaNode>,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
}

impl MachineInfo {
    /// Every logical CPU id in the topology, ascending.
    pub fn cpu_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .topology
            .iter()
            .flat_map(|n| n.cores.iter().flat_map(|c| c.threads.iter().copied()))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Kernel and operating system.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionInfo {
    /// `uname -r`.
    pub kernel_version: String,
    /// PRETTY_NAME of /etc/os-release (the node's `osImage`).
    pub os_image: String,
}

/// A filesystem's capacity and usage.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FsInfo {
    /// The mounted device (`/dev/vda`), when known.
    pub device: String,
    /// Where it is mounted, when known.
    pub mountpoint: String,
    /// Total bytes (blocks × fragment size).
    pub capacity: u64,
    /// Bytes free to root.
    pub free: u64,
    /// Bytes available to unprivileged users.
    pub available: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}
