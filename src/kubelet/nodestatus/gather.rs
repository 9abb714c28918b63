//! Gathering what the setters read, from the seams: the container manager
//! (machine, capacity, reservation, soft requirements), machine info
//! (kernel, OS image), the runtime (version, images), runtime state,
//! pressure and volumes.

use std::sync::Arc;

use super::addresses::{AddressConfig, node_addresses};
use super::runtime_state::RuntimeState;
use super::setters::{SetterConfig, StatusInputs, VersionInfoError, apparmor_enabled};
use super::sources::{PressureSource, RuntimeInfo, VolumesInUse};
use crate::cadvisor::MachineInfoProvider;
use crate::cm::ContainerManager;
use crate::kubelet::nodeshutdown::ShutdownStatus;
use crate::util::clock::Clock;

/// Where node status comes from.
#[derive(Clone)]
pub struct StatusSources {
    pub container_manager: Arc<dyn ContainerManager>,
    /// Kernel version and OS image.
    pub machine: Arc<dyn MachineInfoProvider>,
    pub runtime: Arc<dyn RuntimeInfo>,
    pub runtime_state: Arc<RuntimeState>,
    pub pressure: Arc<dyn PressureSource>,
    pub volumes: Arc<dyn VolumesInUse>,
    pub clock: Arc<dyn Clock>,
    /// Whether the node is shutting down (the Ready condition).
    pub shutdown: Option<ShutdownStatus>,
    /// AppArmor can be enforced here (see [`apparmor_enabled`]).
    pub apparmor: bool,
}

impl StatusSources {
    /// Sources with AppArmor support read from this host.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        container_manager: Arc<dyn ContainerManager>,
        machine: Arc<dyn MachineInfoProvider>,
        runtime: Arc<dyn RuntimeInfo>,
        runtime_state: Arc<RuntimeState>,
        pressure: Arc<dyn PressureSource>,
        volumes: Arc<dyn VolumesInUse>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        StatusSources {
            container_manager,
            machine,
            runtime,
            runtime_state,
            pressure,
            volumes,
            clock,
            shutdown: None,
            apparmor: apparmor_enabled(),
        }
    }

    /// Reads everything the setters need now.
    pub async fn gather(&self, setter: &SetterConfig, address: &AddressConfig) -> StatusInputs {
        let cm = &self.container_manager;
        let machine = self.machine.clone();
        let version_info = match tokio::task::spawn_blocking(move || machine.version_info()).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Arc::new(VersionInfoError::from(e))),
            Err(e) => Err(Arc::new(VersionInfoError::from(e))),
        };
        let mut images = self.runtime.list_images().await.map_err(Arc::new);
        if let Ok(list) = images.as_mut() {
            list.sort_by_key(|i| std::cmp::Reverse(i.size));
        }
        StatusInputs {
            now: self.clock.now(),
            addresses: node_addresses(address, &setter.node_name)
                .await
                .map_err(Arc::new),
            machine_info: Ok(cm.machine_info().clone()),
            capacity: cm
                .get_capacity(setter.local_storage_capacity_isolation)
                .await,
            allocatable_reservation: cm.get_node_allocatable_reservation(),
            device_plugins: cm.get_device_plugin_resource_capacity(),
            version_info,
            runtime_type: self.runtime.runtime_type(),
            runtime_version: self.runtime.version().await.map_err(Arc::new),
            images,
            memory_pressure: self.pressure.memory_pressure(),
            disk_pressure: self.pressure.disk_pressure(),
            pid_pressure: self.pressure.pid_pressure(),
            runtime_errors: self.runtime_state.runtime_errors(),
            network_errors: self.runtime_state.network_errors(),
            storage_errors: self.runtime_state.storage_errors(),
            shutdown_errors: self
                .shutdown
                .as_ref()
                .map(ShutdownStatus::errors)
                .unwrap_or_default(),
            apparmor_enabled: self.apparmor,
            soft_requirements: cm.status().soft_requirements,
            volumes_in_use: self
                .volumes
                .reconciler_synced()
                .then(|| self.volumes.volumes_in_use()),
        }
    }
}
