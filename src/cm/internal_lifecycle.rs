//! Hooks the runtime manager calls around a container's creation (Go's
//! InternalContainerLifecycle): the CPU manager's cpuset and the memory
//! manager's NUMA nodes go into the CRI config before CreateContainer, the
//! container is recorded before StartContainer and forgotten when removed.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::cpumanager::CpuManager;
use super::memorymanager::MemoryManager;
use super::topologymanager::TopologyManager;
use crate::cri::api::ContainerConfig;

/// The container manager's part in creating and stopping containers.
pub trait InternalContainerLifecycle: Send + Sync + 'static {
    /// Adjusts the CRI config before CreateContainer.
    fn pre_create_container(&self, pod: &Pod, container: &Container, config: &mut ContainerConfig);
    /// After CreateContainer, before StartContainer.
    fn pre_start_container(&self, pod: &Pod, container: &Container, container_id: &str);
    /// After the container stopped.
    fn post_stop_container(&self, _container_id: &str) {}
}

/// No resource managers: nothing to do.
#[derive(Debug, Default)]
pub struct NoopLifecycle;

impl InternalContainerLifecycle for NoopLifecycle {
    fn pre_create_container(&self, _: &Pod, _: &Container, _: &mut ContainerConfig) {}
    fn pre_start_container(&self, _: &Pod, _: &Container, _: &str) {}
}

/// The lifecycle over the resource managers: the CPU manager's cpuset
/// goes into the CRI config; a started container is recorded by the CPU
/// and topology managers, and forgotten when it stops.
#[derive(Debug)]
pub struct ResourceManagersLifecycle {
    pub cpu: Option<Arc<CpuManager>>,
    pub memory: Option<Arc<MemoryManager>>,
    pub topology: Arc<TopologyManager>,
}

impl InternalContainerLifecycle for ResourceManagersLifecycle {
    fn pre_create_container(&self, pod: &Pod, container: &Container, config: &mut ContainerConfig) {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let cpus = self
            .cpu
            .as_ref()
            .map(|cpu| cpu.cpu_affinity(uid, &container.name))
            .filter(|cpus| !cpus.is_empty());
        let mems = self
            .memory
            .as_ref()
            .map(|m| m.memory_numa_nodes(uid, &container.name))
            .filter(|nodes| !nodes.is_empty());
        if cpus.is_none() && mems.is_none() {
            return;
        }
        let resources = config
            .linux
            .get_or_insert_with(Default::default)
            .resources
            .get_or_insert_with(Default::default);
        if let Some(cpus) = cpus {
            resources.cpuset_cpus = cpus.to_string();
        }
        if let Some(nodes) = mems {
            let text: Vec<String> = nodes.iter().map(u32::to_string).collect();
            resources.cpuset_mems = text.join(",");
        }
    }

    fn pre_start_container(&self, pod: &Pod, container: &Container, container_id: &str) {
        if let Some(cpu) = &self.cpu {
            cpu.add_container(pod, container, container_id);
        }
        if let Some(memory) = &self.memory {
            memory.add_container(pod, container, container_id);
        }
        self.topology.add_container(pod, container, container_id);
    }

    fn post_stop_container(&self, container_id: &str) {
        self.topology.remove_container(container_id);
    }
}
