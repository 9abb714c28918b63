//! ContainerManager: cgroups, node allocatable, QoS and pod cgroups (issue 4).
//!
//! Layers, bottom up: `subsystems` finds the mounted hierarchies; `cgroupfs`
//! writes interface files (v1 and v2); `cgroup_manager` is the
//! [`CgroupManager`] seam with the cgroupfs and systemd (`systemd`, D-Bus
//! behind [`SystemdDbus`]) drivers; `helpers`/`qos` turn pod specs into
//! limits and classes; `qos_container_manager`, `pod_container_manager` and
//! `node_allocatable` lay out `kubepods`; `container_manager` ties it
//! together for the kubelet; `cpumanager` pins containers to CPUs
//! (`cpuManagerPolicy`); `devicemanager` serves device plugins and
//! allocates their devices; `topologymanager` aligns both on NUMA nodes.

pub mod admission;
pub mod capacity;
pub mod cgroup_manager;
pub mod cgroup_name;
pub mod cgroupfs;
pub mod container_manager;
pub mod containermap;
pub mod cpumanager;
pub mod cpuset;
pub mod devicemanager;
pub mod error;
pub mod helpers;
pub mod host;
pub mod internal_lifecycle;
pub mod kernel;
pub mod memorymanager;
pub mod node_allocatable;
pub mod node_config;
pub mod noop;
pub mod pod_container_manager;
pub mod qos;
pub mod qos_container_manager;
pub mod resources;
pub mod start_deps;
pub mod subsystems;
pub mod system_containers;
pub mod systemd;
pub mod topologymanager;

#[cfg(test)]
mod capacity_tests;
#[cfg(test)]
mod cgroup_manager_tests;
#[cfg(test)]
mod helpers_tests;
#[cfg(test)]
mod manager_tests;
#[cfg(test)]
mod testing;

pub use cgroup_manager::{CgroupDriver, CgroupManager, CgroupManagerImpl};
pub use cgroup_name::CgroupName;
pub use container_manager::{
    ContainerManager, ContainerManagerImpl, EventType, LoggingRecorder, NodeEventRecorder, Status,
};
pub use error::CmError;
pub use host::HostPaths;
pub use internal_lifecycle::InternalContainerLifecycle;
pub use node_allocatable::NodeAllocatableConfig;
pub use node_config::{CmFeatureGates, NodeConfig};
pub use pod_container_manager::{PodContainerManager, PodContainerManagerImpl};
pub use qos::{QosClass, get_pod_qos};
pub use qos_container_manager::{ActivePodsFn, QosContainersInfo};
pub use resources::{CgroupConfig, ResourceConfig, ResourceList};
pub use start_deps::CmRuntimeDeps;
pub use subsystems::{CgroupMode, CgroupSubsystems};
pub use systemd::SystemdDbus;
