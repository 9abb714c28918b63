//! Errors of the memory manager, worded as the Go kubelet words them.

use std::path::PathBuf;

/// Everything the memory manager can fail with.
#[derive(Debug, thiserror::Error)]
pub enum MemoryManagerError {
    /// `memoryManagerPolicy` names no policy.
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    /// `reservedMemory` names a NUMA node the machine does not have.
    #[error(
        "reservedMemory: the reserved memory configuration references a NUMA node {0} that does not exist on this machine"
    )]
    NoSuchNumaNode(i32),
    /// `reservedMemory` does not add up to the node allocatable reservation.
    #[error(
        "reservedMemory: the total amount \"{reserved}\" of type \"{resource}\" is not equal to the value \"{allocatable}\" determined by Node Allocatable feature"
    )]
    ReservedMismatch {
        reserved: String,
        resource: String,
        allocatable: String,
    },
    #[error("reservedMemory: could not covert a variable of type Quantity to int64")]
    ReservedNotInt,
    #[error("[memorymanager] you should specify the system reserved memory")]
    NoSystemReserved,
    #[error("[memorymanager] failed to represent quantity as int64")]
    RequestNotInt,
    #[error(
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    )]
    NoDefaultAffinity,
    #[error("[memorymanager] failed to find the default preferred hint")]
    NoDefaultPreferredHint,
    #[error("[memorymanager] failed to find NUMA nodes to extend the current topology hint")]
    CannotExtendHint,
    #[error("[memorymanager] failed to find the extended preferred hint")]
    NoExtendedPreferredHint,
    #[error("[memorymanager] machine state can not be empty when it has memory assignments")]
    EmptyMachineState,
    #[error(
        "[memorymanager] (pod: {pod}, container: {container}) the memory assignment uses the NUMA that does not exist"
    )]
    AssignmentNumaMissing { pod: String, container: String },
    #[error(
        "[memorymanager] (pod: {pod}, container: {container}) the memory assignment uses memory resource that does not exist"
    )]
    AssignmentResourceMissing { pod: String, container: String },
    #[error("[memorymanager] the expected machine state is different from the real one")]
    MachineStateDiffers,
    /// The state file could not be restored (start-up refuses).
    #[error(
        "could not restore state from checkpoint: {source}, please drain this node and delete the memory manager checkpoint file {path:?} before restarting Kubelet"
    )]
    Restore {
        path: PathBuf,
        #[source]
        source: Box<MemoryManagerError>,
    },
    #[error(
        "[memorymanager] configured policy {configured:?} differs from state checkpoint policy {checkpoint:?}"
    )]
    PolicyMismatch {
        configured: String,
        checkpoint: String,
    },
    #[error("checkpoint is corrupted")]
    CorruptCheckpoint,
    #[error("machineState: NUMA node id {0:?} is not a number")]
    BadNodeId(String),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: crate::util::atomic_file::AtomicWriteError,
    },
    /// A blocking task of the manager was cancelled or panicked.
    #[error("memory manager task failed: {0}")]
    Join(String),
}
