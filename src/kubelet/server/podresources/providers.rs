//! Where the pod-resources answers come from: the pods the kubelet runs,
//! the device manager's assignments, the CPU manager's exclusive CPUs and
//! the memory manager's blocks.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::api::v1::{ContainerDevices, ContainerMemory, NumaNode, TopologyInfo};
use crate::cm::ContainerManager;
use crate::cm::devicemanager::ResourceDeviceInstances;

/// The pods to report.
pub trait PodsProvider: Send + Sync {
    fn get_pods(&self) -> Vec<Arc<Pod>>;
}

/// Device assignments and allocatable devices.
pub trait DevicesProvider: Send + Sync {
    /// Frees the devices of pods that are gone before a listing.
    fn update_allocated_devices(&self);
    fn get_devices(&self, pod_uid: &str, container: &str) -> Vec<ContainerDevices>;
    fn get_allocatable_devices(&self) -> Vec<ContainerDevices>;
}

/// Exclusive CPUs.
pub trait CpusProvider: Send + Sync {
    fn get_cpus(&self, pod_uid: &str, container: &str) -> Vec<i64>;
    fn get_allocatable_cpus(&self) -> Vec<i64>;
}

/// Memory blocks (the memory manager's).
pub trait MemoryProvider: Send + Sync {
    fn get_memory(&self, pod_uid: &str, container: &str) -> Vec<ContainerMemory>;
    fn get_allocatable_memory(&self) -> Vec<ContainerMemory>;
}

/// No memory manager: no memory blocks (tests).
#[derive(Debug, Default)]
pub struct NoMemory;

impl MemoryProvider for NoMemory {
    fn get_memory(&self, _: &str, _: &str) -> Vec<ContainerMemory> {
        Vec::new()
    }

    fn get_allocatable_memory(&self) -> Vec<ContainerMemory> {
        Vec::new()
    }
}

/// One entry per device and NUMA node (devices without topology once,
/// without topology).
pub fn container_devices(devs: &ResourceDeviceInstances) -> Vec<ContainerDevices> {
    let mut out = Vec::new();
    for (resource, devices) in devs {
        for (id, dev) in devices {
            match &dev.topology {
                None => out.push(ContainerDevices {
                    resource_name: resource.clone(),
                    device_ids: vec![id.clone()],
                    topology: None,
                }),
                Some(t) => {
                    for node in &t.nodes {
                        out.push(ContainerDevices {
                            resource_name: resource.clone(),
                            device_ids: vec![id.clone()],
                            topology: Some(TopologyInfo {
                                nodes: vec![NumaNode { id: node.id }],
                            }),
                        });
                    }
                }
            }
        }
    }
    out
}

/// The container manager's device and CPU managers as providers.
pub struct ContainerManagerProvider(pub Arc<dyn ContainerManager>);

impl DevicesProvider for ContainerManagerProvider {
    fn update_allocated_devices(&self) {
        if let Some(dm) = self.0.device_manager() {
            dm.update_allocated_devices();
        }
    }

    fn get_devices(&self, pod_uid: &str, container: &str) -> Vec<ContainerDevices> {
        self.0
            .device_manager()
            .map(|dm| container_devices(&dm.get_devices(pod_uid, container)))
            .unwrap_or_default()
    }

    fn get_allocatable_devices(&self) -> Vec<ContainerDevices> {
        self.0
            .device_manager()
            .map(|dm| container_devices(&dm.get_allocatable_devices()))
            .unwrap_or_default()
    }
}

impl CpusProvider for ContainerManagerProvider {
    fn get_cpus(&self, pod_uid: &str, container: &str) -> Vec<i64> {
        self.0
            .cpu_manager()
            .map(|c| {
                c.exclusive_cpus(pod_uid, container)
                    .iter()
                    .map(i64::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn get_allocatable_cpus(&self) -> Vec<i64> {
        self.0
            .cpu_manager()
            .map(|c| c.allocatable_cpus().iter().map(i64::from).collect())
            .unwrap_or_default()
    }
}

/// The kubelet's pod manager as the pods provider.
pub struct PodManagerPods(pub Arc<crate::kubelet::pod::PodManager>);

impl PodsProvider for PodManagerPods {
    fn get_pods(&self) -> Vec<Arc<Pod>> {
        self.0.get_pods()
    }
}

fn container_memory(blocks: Vec<crate::cm::memorymanager::Block>) -> Vec<ContainerMemory> {
    blocks
        .into_iter()
        .map(|b| ContainerMemory {
            memory_type: b.kind,
            size: b.size,
            topology: Some(TopologyInfo {
                nodes: b
                    .numa_affinity
                    .iter()
                    .map(|id| NumaNode { id: i64::from(*id) })
                    .collect(),
            }),
        })
        .collect()
}

impl MemoryProvider for ContainerManagerProvider {
    fn get_memory(&self, pod_uid: &str, container: &str) -> Vec<ContainerMemory> {
        self.0
            .memory_manager()
            .map(|m| container_memory(m.memory(pod_uid, container)))
            .unwrap_or_default()
    }

    fn get_allocatable_memory(&self) -> Vec<ContainerMemory> {
        self.0
            .memory_manager()
            .map(|m| container_memory(m.allocatable_memory()))
            .unwrap_or_default()
    }
}
