//! The `memory_manager_state` file in the Go kubelet's format, both ways:
//! `{"policyName":…,"machineState":{node:{…}},"entries":{podUID:{container:[blocks]}},"checksum":…}`.
//!
//! The checksum is FNV-32a over the text go-spew prints for Go's checkpoint
//! struct with its checksum zeroed, so either kubelet loads the other's file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::error::MemoryManagerError;
use super::state::{Block, ContainerMemoryAssignments, MemoryTable, NumaNodeMap, NumaNodeState};
use crate::util::gospew::{self, fnv32a};

/// The checkpoint as stored. Node ids are map keys in text form, ordered
/// as Go's JSON encoder orders them (as strings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryManagerCheckpoint {
    #[serde(rename = "policyName", default)]
    pub policy_name: String,
    #[serde(rename = "machineState", default)]
    pub machine_state: Option<BTreeMap<String, NumaNodeState>>,
    #[serde(
        rename = "entries",
        default = "empty_entries",
        skip_serializing_if = "entries_empty"
    )]
    pub entries: Option<ContainerMemoryAssignments>,
    #[serde(default)]
    pub checksum: u64,
}

fn empty_entries() -> Option<ContainerMemoryAssignments> {
    Some(BTreeMap::new())
}

fn entries_empty(e: &Option<ContainerMemoryAssignments>) -> bool {
    e.as_ref().is_none_or(BTreeMap::is_empty)
}

fn spew_table(out: &mut String, t: &MemoryTable) {
    let _ = write!(
        out,
        "<*>{{TotalMemSize:(uint64){} SystemReserved:(uint64){} Allocatable:(uint64){} Reserved:(uint64){} Free:(uint64){}}}",
        t.total, t.system_reserved, t.allocatable, t.reserved, t.free
    );
}

fn spew_node(out: &mut String, n: &NumaNodeState) {
    let _ = write!(
        out,
        "<*>{{NumberOfAssignments:(int){} MemoryMap:(map[v1.ResourceName]*state.MemoryTable)",
        n.number_of_assignments
    );
    gospew::map(out, Some(&n.memory_map), spew_table);
    out.push_str(" Cells:([]int)");
    gospew::plain_list(out, Some(&n.cells));
    out.push('}');
}

fn spew_block(out: &mut String, b: &Block) {
    out.push_str("{NUMAAffinity:([]int)");
    gospew::plain_list(out, Some(&b.numa_affinity));
    let _ = write!(
        out,
        " Type:(v1.ResourceName){} Size:(uint64){}}}",
        b.kind, b.size
    );
}

impl MemoryManagerCheckpoint {
    /// A checkpoint of `state` for `policy_name` (checksum not yet set).
    pub fn new(
        policy_name: &str,
        machine: &NumaNodeMap,
        entries: &ContainerMemoryAssignments,
    ) -> Self {
        MemoryManagerCheckpoint {
            policy_name: policy_name.into(),
            machine_state: Some(
                machine
                    .iter()
                    .map(|(id, n)| (id.to_string(), n.clone()))
                    .collect(),
            ),
            entries: Some(entries.clone()),
            checksum: 0,
        }
    }

    /// The machine state by numeric node id.
    pub fn numa_node_map(&self) -> Result<NumaNodeMap, MemoryManagerError> {
        let mut map = NumaNodeMap::new();
        for (id, node) in self.machine_state.iter().flatten() {
            let id: u32 = id
                .parse()
                .map_err(|_| MemoryManagerError::BadNodeId(id.clone()))?;
            map.insert(id, node.clone());
        }
        Ok(map)
    }

    /// Go's checksum of this checkpoint (its own checksum field ignored).
    pub fn compute_checksum(&self) -> Result<u64, MemoryManagerError> {
        let mut out = String::new();
        let _ = write!(
            out,
            "(*state.MemoryManagerCheckpoint){{PolicyName:(string){} MachineState:(state.NUMANodeMap)",
            self.policy_name
        );
        let machine = self
            .machine_state
            .as_ref()
            .map(|_| self.numa_node_map())
            .transpose()?;
        gospew::map(&mut out, machine.as_ref(), spew_node);
        out.push_str(" Entries:(state.ContainerMemoryAssignments)");
        gospew::map(&mut out, self.entries.as_ref(), |out, containers| {
            gospew::map(out, Some(containers), |out, blocks| {
                gospew::list(out, Some(blocks), spew_block)
            })
        });
        out.push_str(" Checksum:(checksum.Checksum)0}");
        Ok(u64::from(fnv32a(out.as_bytes())))
    }

    /// The file's bytes, with the checksum filled in.
    pub fn marshal(&mut self) -> Result<Vec<u8>, MemoryManagerError> {
        self.checksum = self.compute_checksum()?;
        Ok(serde_json::to_vec(self)?)
    }

    /// Parses and verifies a file (a zero checksum is accepted).
    pub fn unmarshal(blob: &[u8]) -> Result<Self, MemoryManagerError> {
        let cp: MemoryManagerCheckpoint = serde_json::from_slice(blob)?;
        if cp.checksum != 0 && cp.checksum != cp.compute_checksum()? {
            return Err(MemoryManagerError::CorruptCheckpoint);
        }
        Ok(cp)
    }
}
