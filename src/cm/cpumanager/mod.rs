//! The CPU manager (`cpuManagerPolicy`): with the `static` policy,
//! containers of Guaranteed pods that request whole CPUs run on CPUs of
//! their own; every other container runs on the shared pool. The state is
//! kept in `<root-dir>/cpu_manager_state` in the Go kubelet's format.
//!
//! `topology` places the CPUs, `cpu_assignment` packs CPUs by topology (`cpu_distribute` spreads them
//! over NUMA nodes),
//! `policy_static`/`policy_options` decide, `state`/`checkpoint` remember,
//! `manager` ties them together and `reconcile` keeps containers on their
//! cpusets.

pub mod checkpoint;
pub mod cpu_assignment;
pub mod cpu_distribute;
pub mod error;
pub mod manager;
pub mod policy_options;
pub mod policy_static;
pub mod reconcile;
pub mod state;
pub mod topology;
pub mod topology_hints;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod topology_tests;

pub use error::CpuManagerError;
pub use manager::{
    CpuManager, CpuManagerConfig, CpuManagerSources, POLICY_NONE, PodStatusFn, SourcesReadyFn,
};
pub use policy_options::OptionGates;
pub use policy_static::POLICY_STATIC;
pub use reconcile::{CpusetUpdater, CriCpusetUpdater, ReconciledContainer};
pub use state::{CPU_MANAGER_STATE_FILE_NAME, ContainerMap};
pub use topology::CpuTopology;
