//! The memory manager's state: per NUMA node, how much of each memory type
//! (`memory`, `hugepages-<size>`) exists, is reserved for the system, is
//! allocatable, handed to containers and free; and the blocks each
//! container of a Guaranteed pod holds. Kept in memory and written to
//! `<root-dir>/memory_manager_state` after every change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::checkpoint::MemoryManagerCheckpoint;
use super::error::MemoryManagerError;

/// The state file's name under the kubelet's root directory.
pub const MEMORY_MANAGER_STATE_FILE_NAME: &str = "memory_manager_state";

/// One memory type on one NUMA node, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTable {
    #[serde(rename = "total")]
    pub total: u64,
    #[serde(rename = "systemReserved")]
    pub system_reserved: u64,
    pub allocatable: u64,
    pub reserved: u64,
    pub free: u64,
}

/// One NUMA node: its memory types and the group of nodes (`cells`) its
/// assignments span.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNodeState {
    #[serde(rename = "numberOfAssignments")]
    pub number_of_assignments: i64,
    #[serde(rename = "memoryMap", default)]
    pub memory_map: BTreeMap<String, MemoryTable>,
    #[serde(default)]
    pub cells: Vec<u32>,
}

/// NUMA node id → its state.
pub type NumaNodeMap = BTreeMap<u32, NumaNodeState>;

/// Memory of one type a container holds on a set of NUMA nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    #[serde(rename = "numaAffinity", default)]
    pub numa_affinity: Vec<u32>,
    #[serde(rename = "type")]
    pub kind: String,
    pub size: u64,
}

/// Pod UID → container name → blocks.
pub type ContainerMemoryAssignments = BTreeMap<String, BTreeMap<String, Vec<Block>>>;

/// The machine state and the assignments; persisted when it has a file.
#[derive(Debug, Clone, Default)]
pub struct State {
    machine: NumaNodeMap,
    assignments: ContainerMemoryAssignments,
    /// Where to write (and the policy name to write) after each change.
    file: Option<(PathBuf, String)>,
}

impl State {
    /// A state only in memory.
    pub fn in_memory() -> Self {
        State::default()
    }

    /// Restores `dir/memory_manager_state` for `policy_name` (or creates
    /// it). A file of another policy that assigns nothing is replaced (Go
    /// refuses it and the node stays down until someone deletes it); one
    /// with assignments, a corrupt one or one that does not parse is
    /// refused with Go's advice to drain the node and delete it.
    pub fn checkpointed(dir: &Path, policy_name: &str) -> Result<State, MemoryManagerError> {
        let path = dir.join(MEMORY_MANAGER_STATE_FILE_NAME);
        let mut state = State {
            file: Some((path.clone(), policy_name.to_string())),
            ..State::default()
        };
        state
            .restore(&path, policy_name)
            .map_err(|e| MemoryManagerError::Restore {
                path,
                source: Box::new(e),
            })?;
        Ok(state)
    }

    fn restore(&mut self, path: &Path, policy_name: &str) -> Result<(), MemoryManagerError> {
        let blob = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return self.store(),
            Err(source) => {
                return Err(MemoryManagerError::Read {
                    path: path.into(),
                    source,
                });
            }
        };
        let checkpoint = MemoryManagerCheckpoint::unmarshal(&blob)?;
        let entries = checkpoint.entries.clone().unwrap_or_default();
        if checkpoint.policy_name != policy_name {
            if !entries.values().any(|c| !c.is_empty()) {
                tracing::warn!(configured = policy_name, checkpoint = %checkpoint.policy_name, path = %path.display(), "Memory manager state file of another policy holds no assignments; starting from a fresh state");
                return self.store();
            }
            return Err(MemoryManagerError::PolicyMismatch {
                configured: policy_name.into(),
                checkpoint: checkpoint.policy_name,
            });
        }
        self.machine = checkpoint.numa_node_map()?;
        self.assignments = entries;
        crate::vlog!(2, "State checkpoint: restored state from checkpoint");
        Ok(())
    }

    /// The checkpoint this state writes.
    pub fn to_checkpoint(&self, policy_name: &str) -> MemoryManagerCheckpoint {
        MemoryManagerCheckpoint::new(policy_name, &self.machine, &self.assignments)
    }

    fn store(&self) -> Result<(), MemoryManagerError> {
        let Some((path, policy)) = &self.file else {
            return Ok(());
        };
        let blob = self.to_checkpoint(policy).marshal()?;
        crate::util::atomic_file::write_atomic(path, &blob, 0o600).map_err(|source| {
            MemoryManagerError::Write {
                path: path.clone(),
                source,
            }
        })
    }

    fn stored(&self) {
        if let Err(e) = self.store() {
            tracing::error!(err = %e, "Failed to store state to checkpoint");
        }
    }

    pub fn machine_state(&self) -> NumaNodeMap {
        self.machine.clone()
    }

    pub fn memory_blocks(&self, pod_uid: &str, container: &str) -> Option<Vec<Block>> {
        self.assignments.get(pod_uid)?.get(container).cloned()
    }

    pub fn assignments(&self) -> &ContainerMemoryAssignments {
        &self.assignments
    }

    pub fn set_machine_state(&mut self, machine: NumaNodeMap) {
        self.machine = machine;
        self.stored();
    }

    pub fn set_memory_blocks(&mut self, pod_uid: &str, container: &str, blocks: Vec<Block>) {
        self.assignments
            .entry(pod_uid.into())
            .or_default()
            .insert(container.into(), blocks);
        self.stored();
    }

    /// Drops a container's blocks (and the pod's entry when it was the last).
    pub fn delete(&mut self, pod_uid: &str, container: &str) {
        if let Some(pod) = self.assignments.get_mut(pod_uid) {
            pod.remove(container);
            if pod.is_empty() {
                self.assignments.remove(pod_uid);
            }
        }
        self.stored();
    }
}
