//! The pod-resources API on `<root-dir>/pod-resources/kubelet.sock`: which
//! devices, exclusive CPUs and memory each container of the kubelet's pods
//! holds (v1 List, v1alpha1 List), and what the node could allocate (v1
//! GetAllocatableResources, behind KubeletPodResourcesGetAllocatable).
//!
//! `api` is the generated protocol, `providers` where answers come from,
//! `server` the two services, `serve` the socket with both on it.

pub mod api;
pub mod providers;
pub mod serve;
pub mod server;

#[cfg(test)]
mod tests;

pub use providers::{
    ContainerManagerProvider, CpusProvider, DevicesProvider, MemoryProvider, NoMemory,
    PodManagerPods, PodsProvider,
};
pub use serve::{POD_RESOURCES_DIR, POD_RESOURCES_SOCKET, PodResourcesServer};
pub use server::{Providers, V1Server, V1alpha1Server};
