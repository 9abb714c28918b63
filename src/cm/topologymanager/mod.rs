//! The topology manager (`topologyManagerPolicy`, `topologyManagerScope`):
//! aligns the resources a pod gets from the device, CPU and memory managers
//! on NUMA nodes, or refuses the pod with `TopologyAffinityError`.
//!
//! `bitmask` is the NUMA node set, `hint` the hints, the provider trait and
//! the affinity store, `policy` the merge, `manager` the admission.

pub mod bitmask;
pub mod error;
pub mod hint;
pub mod manager;
pub mod policy;

#[cfg(test)]
mod tests;

pub use bitmask::BitMask;
pub use error::TopologyManagerError;
pub use hint::{AffinityStore, HintProvider, ProviderHints, TopologyHint};
pub use manager::{TopologyManager, TopologyManagerConfig};
pub use policy::PolicyKind;
