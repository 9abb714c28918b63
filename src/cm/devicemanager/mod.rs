//! The device plugin manager (device plugin API v1beta1): plugins register
//! on `<root-dir>/device-plugins/kubelet.sock`, their devices become
//! extended resources in the node's capacity, and admission allocates
//! them to containers (a topology hint provider, first before the CPU
//! manager as in Go); the allocation survives restarts in
//! `kubelet_internal_checkpoint`.
//!
//! `api` is the generated protocol, `endpoint` one plugin's client,
//! `registration` the kubelet's server and start, `manager` the device
//! sets and allocation, `pod_devices` the allocations, `topology_hints`
//! the hints, `checkpoint` the file.

pub mod api;
pub mod checkpoint;
pub mod endpoint;
pub mod error;
pub mod manager;
pub mod pod_devices;
pub mod registration;
pub mod topology_hints;

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{Container, Pod};

pub use error::DeviceManagerError;
pub use manager::{DeviceManager, DevicePluginCapacity};
pub use pod_devices::{DeviceRunContainerOptions, ResourceDeviceInstances};
pub use registration::{is_extended_resource_name, validate_registration};

use crate::cm::admission::AllocationError;
use crate::cm::topologymanager::{HintProvider, ProviderHints};

impl HintProvider for DeviceManager {
    fn topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.get_topology_hints(pod, container)
    }

    fn pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.get_pod_topology_hints(pod)
    }

    fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), AllocationError> {
        DeviceManager::allocate(self, pod, container).map_err(AllocationError::Device)
    }
}
