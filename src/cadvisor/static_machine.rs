//! A machine described by numbers rather than read from the host: what a
//! hollow node reports (CPUs, memory, disk, ids). Nothing is read.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::{
    Core, FsInfo, MachineInfo, MachineInfoError, MachineInfoProvider, NumaNode, VersionInfo,
};

/// The shape of a described machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSpec {
    /// Logical CPUs (one thread per core, one socket, one NUMA node).
    pub cpus: u32,
    /// Memory in bytes.
    pub memory: u64,
    /// Capacity of the node's (and image) filesystem in bytes; half is free.
    pub disk: u64,
}

impl Default for MachineSpec {
    /// A small real node: 4 CPUs, 16 GiB, 100 GiB of disk.
    fn default() -> Self {
        MachineSpec {
            cpus: 4,
            memory: 16 << 30,
            disk: 100 << 30,
        }
    }
}

/// A machine answering from its spec; ids derive from the node's name.
#[derive(Debug, Clone)]
pub struct StaticMachine {
    info: MachineInfo,
    fs: FsInfo,
}

fn id_from(name: &str, salt: &str) -> String {
    let digest = Sha256::digest(format!("{salt}/{name}").as_bytes());
    format!("{digest:x}")[..32].to_string()
}

impl StaticMachine {
    pub fn new(spec: &MachineSpec, node_name: &str) -> Self {
        let cores = (0..spec.cpus)
            .map(|i| Core {
                id: i,
                threads: vec![i],
                socket_id: 0,
            })
            .collect();
        let uuid = id_from(node_name, "system-uuid");
        let info = MachineInfo {
            num_cores: spec.cpus,
            num_physical_cores: spec.cpus,
            num_sockets: 1,
            cpu_vendor_id: "hollow".into(),
            cpu_frequency_khz: 0,
            memory_capacity: spec.memory,
            swap_capacity: 0,
            hugepages: Vec::new(),
            topology: vec![NumaNode {
                id: 0,
                memory: spec.memory,
                hugepages: Vec::new(),
                cores,
                distances: vec![10],
            }],
            machine_id: id_from(node_name, "machine-id"),
            system_uuid: format!(
                "{}-{}-{}-{}-{}",
                &uuid[..8],
                &uuid[8..12],
                &uuid[12..16],
                &uuid[16..20],
                &uuid[20..32]
            ),
            boot_id: id_from(node_name, "boot-id"),
        };
        let fs = FsInfo {
            device: "hollow".into(),
            mountpoint: "/".into(),
            capacity: spec.disk,
            free: spec.disk / 2,
            available: spec.disk / 2,
            inodes: 1 << 20,
            inodes_free: 1 << 19,
        };
        StaticMachine { info, fs }
    }
}

impl MachineInfoProvider for StaticMachine {
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError> {
        Ok(self.info.clone())
    }

    fn version_info(&self) -> Result<VersionInfo, MachineInfoError> {
        Ok(VersionInfo {
            kernel_version: "hollow".into(),
            os_image: "kubelet-rs hollow node".into(),
        })
    }

    fn fs_info(&self, _path: &Path) -> Result<FsInfo, MachineInfoError> {
        Ok(self.fs.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_from_spec() {
        let spec = MachineSpec {
            cpus: 2,
            memory: 4 << 30,
            disk: 10 << 30,
        };
        let (a, b) = (
            StaticMachine::new(&spec, "h-0"),
            StaticMachine::new(&spec, "h-1"),
        );
        let info = a.machine_info().unwrap();
        assert_eq!((info.num_cores, info.memory_capacity), (2, 4 << 30));
        assert_eq!(info.cpu_ids(), vec![0, 1]);
        assert_eq!(a.fs_info(Path::new("/x")).unwrap().capacity, 10 << 30);
        // Ids are per node, and stable.
        let other = b.machine_info().unwrap();
        assert_ne!(info.system_uuid, other.system_uuid);
        assert_eq!(
            info.system_uuid,
            StaticMachine::new(&spec, "h-0").info.system_uuid
        );
        assert_eq!(info.system_uuid.len(), 36);
    }
}
