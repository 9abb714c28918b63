//! A container manager that touches nothing (hollow nodes): capacity comes
//! from the described machine, node allocatable from the kubelet's
//! reservations as on a real node, and every cgroup operation is a no-op
//! (pods share the root, as with cgroupsPerQOS off). No resource managers.

use std::sync::Arc;

use super::capacity::{capacity_from_machine_info, ephemeral_storage_capacity};
use super::cgroup_name::CgroupName;
use super::container_manager::{ContainerManager, Status};
use super::error::CmError;
use super::node_allocatable::{node_allocatable_absolute, node_allocatable_reservation};
use super::node_config::NodeConfig;
use super::pod_container_manager::{PodContainerManager, PodContainerManagerNoop};
use super::qos_container_manager::{ActivePodsFn, QosContainersInfo};
use super::resources::{RESOURCE_EPHEMERAL_STORAGE, ResourceList};
use super::start_deps::CmRuntimeDeps;
use crate::cadvisor::{FsInfo, MachineInfo};
use crate::util::lifecycle::TaskSet;

/// The container manager of a hollow node.
pub struct NoopContainerManager {
    config: NodeConfig,
    machine: MachineInfo,
    /// cpu, memory (and huge pages) of the machine, ephemeral-storage of its disk.
    capacity: ResourceList,
}

impl NoopContainerManager {
    pub fn new(config: NodeConfig, machine: MachineInfo, rootfs: &FsInfo) -> Self {
        let mut capacity = capacity_from_machine_info(&machine);
        capacity.insert(
            RESOURCE_EPHEMERAL_STORAGE.into(),
            ephemeral_storage_capacity(rootfs),
        );
        NoopContainerManager {
            config,
            machine,
            capacity,
        }
    }
}

#[async_trait::async_trait]
impl ContainerManager for NoopContainerManager {
    async fn start(
        &self,
        _tasks: &TaskSet,
        _active_pods: ActivePodsFn,
        _runtime: Option<CmRuntimeDeps>,
    ) -> Result<(), CmError> {
        Ok(())
    }

    async fn get_capacity(&self, local_storage_capacity_isolation: bool) -> ResourceList {
        let mut capacity = self.capacity.clone();
        if !local_storage_capacity_isolation {
            capacity.remove(RESOURCE_EPHEMERAL_STORAGE);
        }
        capacity
    }

    fn get_node_allocatable_reservation(&self) -> ResourceList {
        node_allocatable_reservation(&self.capacity, &self.config.node_allocatable)
    }

    fn get_node_allocatable_absolute(&self) -> ResourceList {
        node_allocatable_absolute(&self.capacity, &self.config.node_allocatable)
    }

    fn get_node_config(&self) -> &NodeConfig {
        &self.config
    }

    fn get_qos_containers_info(&self) -> QosContainersInfo {
        QosContainersInfo::default()
    }

    fn get_pod_cgroup_root(&self) -> String {
        String::new()
    }

    fn new_pod_container_manager(&self) -> Arc<dyn PodContainerManager> {
        Arc::new(PodContainerManagerNoop {
            cgroup_root: CgroupName::root(),
        })
    }

    async fn update_qos_cgroups(&self) -> Result<(), CmError> {
        Ok(())
    }

    fn status(&self) -> Status {
        Status::default()
    }

    fn kubelet_cgroups_name(&self) -> String {
        String::new()
    }

    fn system_cgroups_name(&self) -> String {
        String::new()
    }

    fn runtime_cgroups_name(&self) -> String {
        String::new()
    }

    fn machine_info(&self) -> &MachineInfo {
        &self.machine
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cadvisor::{MachineInfoProvider, MachineSpec, StaticMachine};
    use crate::util::quantity::Quantity;

    #[tokio::test]
    async fn capacity_and_allocatable_from_the_described_machine() {
        let spec = MachineSpec {
            cpus: 2,
            memory: 4 << 30,
            disk: 10 << 30,
        };
        let m = StaticMachine::new(&spec, "h-0");
        let mut config = NodeConfig::default();
        config
            .node_allocatable
            .kube_reserved
            .insert("cpu".into(), Quantity::from_milli(500));
        let cm = NoopContainerManager::new(
            config,
            m.machine_info().unwrap(),
            &m.fs_info(std::path::Path::new("/")).unwrap(),
        );
        // (isolation, resource, capacity)
        let cases = [
            (true, "cpu", Some(2000)),
            (true, "memory", Some((4i64 << 30) * 1000)),
            (true, "ephemeral-storage", Some((10i64 << 30) * 1000)),
            (false, "ephemeral-storage", None),
        ];
        for (isolation, name, want) in cases {
            let got = cm
                .get_capacity(isolation)
                .await
                .get(name)
                .map(Quantity::milli_value);
            assert_eq!(got, want, "{name} isolation={isolation}");
        }
        let reserved = cm.get_node_allocatable_reservation();
        assert_eq!(reserved["cpu"].milli_value(), 500);
        assert_eq!(
            cm.get_node_allocatable_absolute()["cpu"].milli_value(),
            1500
        );
        assert!(
            cm.new_pod_container_manager()
                .is_pod_cgroup("/kubepods/podx")
                .is_none()
        );
    }
}
