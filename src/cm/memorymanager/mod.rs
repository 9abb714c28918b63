//! The memory manager (`memoryManagerPolicy`): with the `Static` policy,
//! containers of Guaranteed pods get their memory and huge pages from a set
//! of NUMA nodes, accounted per node, and run with cpuset.mems on them. The
//! state is kept in `<root-dir>/memory_manager_state` in the Go kubelet's
//! format.
//!
//! `reserved` checks `reservedMemory`, `policy_static` accounts and
//! allocates, `hints` answers the topology manager, `state`/`checkpoint`
//! remember, `manager` ties them together.

pub mod checkpoint;
pub mod error;
pub mod hints;
pub mod manager;
pub mod policy_static;
pub mod reserved;
pub mod state;

#[cfg(test)]
mod tests;

pub use error::MemoryManagerError;
pub use manager::{MemoryManager, MemoryManagerConfig, MemoryManagerSources, POLICY_NONE};
pub use policy_static::POLICY_STATIC;
pub use state::{Block, MEMORY_MANAGER_STATE_FILE_NAME};
