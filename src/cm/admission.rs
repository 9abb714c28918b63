//! What a resource allocation at admission fails with, and the reason and
//! message the pod is rejected with (Go's `cm/admission`: typed errors name
//! their reason, every other one is `UnexpectedAdmissionError`).

use super::cpumanager::CpuManagerError;
use super::devicemanager::DeviceManagerError;
use super::memorymanager::MemoryManagerError;

/// The reason of an allocation failure that names no reason of its own.
pub const REASON_UNEXPECTED: &str = "UnexpectedAdmissionError";
/// The reason of a pod the topology manager cannot align.
pub const REASON_TOPOLOGY_AFFINITY: &str = "TopologyAffinityError";

/// A resource manager refused to allocate for a container.
#[derive(Debug, thiserror::Error)]
pub enum AllocationError {
    #[error(transparent)]
    Cpu(#[from] CpuManagerError),
    #[error(transparent)]
    Memory(#[from] MemoryManagerError),
    #[error(transparent)]
    Device(#[from] DeviceManagerError),
    #[error("Resources cannot be allocated with Topology locality")]
    TopologyAffinity,
}

impl AllocationError {
    /// The reason the pod is rejected with.
    pub fn admission_reason(&self) -> &'static str {
        match self {
            AllocationError::Cpu(e) => e.admission_reason(),
            AllocationError::Memory(_) => REASON_UNEXPECTED,
            AllocationError::Device(e) => e.admission_reason(),
            AllocationError::TopologyAffinity => REASON_TOPOLOGY_AFFINITY,
        }
    }

    /// The message the pod is rejected with.
    pub fn admission_message(&self) -> String {
        match self {
            AllocationError::Cpu(e) => e.admission_message(),
            AllocationError::Memory(e) => {
                format!("Allocate failed due to {e}, which is unexpected")
            }
            AllocationError::Device(e) => e.admission_message(),
            AllocationError::TopologyAffinity => self.to_string(),
        }
    }
}
