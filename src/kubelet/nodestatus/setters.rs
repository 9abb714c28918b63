//! The node status setters, applied in Go's order to a Node from inputs
//! gathered beforehand (so each setter is a pure function of the node and
//! the inputs): addresses, machine info (ids, capacity, allocatable),
//! versions, daemon endpoints, images, OS/arch, the pressure conditions,
//! Ready, volumes in use. Setters that change a condition return the node
//! events to record.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::addresses::AddressError;
use super::sources::RuntimeInfoError;
use crate::cadvisor::{MachineInfo, MachineInfoError, VersionInfo};
use crate::cm::capacity::{allocatable, capacity_from_machine_info, pods_capacity};
use crate::cm::resources::{
    RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PODS, ResourceList,
};
use crate::kubelet::container::Image;
use crate::kubelet::events::{EventType, reasons};
use crate::util::quantity::{Quantity, parse as parse_quantity};

/// At most this many names per image in node status.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

/// The static settings of the setters.
#[derive(Debug, Clone)]
pub struct SetterConfig {
    pub node_name: String,
    pub max_pods: i64,
    pub pods_per_core: i64,
    /// The kubelet's port (daemonEndpoints.kubeletEndpoint.Port).
    pub kubelet_port: i32,
    /// nodeStatusMaxImages; -1: no limit.
    pub node_status_max_images: i32,
    /// localStorageCapacityIsolation: ephemeral-storage is reported and required.
    pub local_storage_capacity_isolation: bool,
    /// The kubelet version written to nodeInfo.
    pub kubelet_version: String,
}

/// Reading the kernel version and OS image failed.
#[derive(Debug, thiserror::Error)]
pub enum VersionInfoError {
    #[error(transparent)]
    Machine(#[from] MachineInfoError),
    /// The blocking read panicked or was cancelled.
    #[error(transparent)]
    Blocking(#[from] tokio::task::JoinError),
}

/// A setter that could not fill in its part: the input it reads failed
/// (shared with the inputs, which are cloned).
#[derive(Debug, thiserror::Error)]
pub enum SetterError {
    #[error(transparent)]
    Addresses(Arc<AddressError>),
    #[error("error getting machine info: {0}")]
    MachineInfo(#[source] Arc<MachineInfoError>),
    #[error("error getting version info: {0}")]
    VersionInfo(#[source] Arc<VersionInfoError>),
    #[error("error getting image list: {0}")]
    Images(#[source] Arc<RuntimeInfoError>),
}

/// What the setters read, gathered for one status computation. A failed
/// read is shared (`Arc`) so the inputs stay cheap to clone.
#[derive(Debug, Clone)]
pub struct StatusInputs {
    pub now: SystemTime,
    pub addresses: Result<Vec<NodeAddress>, Arc<AddressError>>,
    pub machine_info: Result<MachineInfo, Arc<MachineInfoError>>,
    /// The container manager's capacity (for ephemeral-storage).
    pub capacity: ResourceList,
    /// What is withheld from pods (reservations and hard eviction).
    pub allocatable_reservation: ResourceList,
    /// Extended resources from the device plugins.
    pub device_plugins: crate::cm::devicemanager::DevicePluginCapacity,
    pub version_info: Result<VersionInfo, Arc<VersionInfoError>>,
    pub runtime_type: String,
    /// `<type>://<version>`.
    pub runtime_version: Result<String, Arc<RuntimeInfoError>>,
    /// Sorted largest first.
    pub images: Result<Vec<Image>, Arc<RuntimeInfoError>>,
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
    pub runtime_errors: Vec<String>,
    pub network_errors: Vec<String>,
    pub storage_errors: Vec<String>,
    pub shutdown_errors: Vec<String>,
    /// AppArmor can be enforced on this host.
    pub apparmor_enabled: bool,
    /// The container manager's unmet soft requirements.
    pub soft_requirements: Option<String>,
    /// `None` until the volume manager's reconciler has synced.
    pub volumes_in_use: Option<Vec<String>>,
}

/// A node event a setter asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEvent {
    pub event_type: EventType,
    pub reason: String,
    /// The message; `None` for a status event ("Node <n> status is now: <reason>").
    pub message: Option<String>,
}

impl StatusEvent {
    fn status(reason: &str) -> Self {
        StatusEvent {
            event_type: EventType::Normal,
            reason: reason.to_string(),
            message: None,
        }
    }

    /// The message to record for node `node_name`.
    pub fn message_for(&self, node_name: &str) -> String {
        self.message
            .clone()
            .unwrap_or_else(|| format!("Node {node_name} status is now: {}", self.reason))
    }
}

/// A wall-clock time as the API carries it (whole seconds).
pub fn api_time(t: SystemTime) -> Time {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

fn to_api(q: &Quantity) -> ApiQuantity {
    ApiQuantity(q.to_canonical_string())
}

fn from_api(map: &BTreeMap<String, ApiQuantity>) -> ResourceList {
    map.iter()
        .filter_map(|(k, v)| parse_quantity(&v.0).ok().map(|q| (k.clone(), q)))
        .collect()
}

/// Extended resources: outside the kubernetes.io namespace and not a quota
/// request name (`example.com/gpu`).
pub fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Applies every setter; returns the events to record, logging setters
/// that failed (the others still apply, as Go).
pub fn set_node_status(
    node: &mut Node,
    cfg: &SetterConfig,
    inputs: &StatusInputs,
) -> Vec<StatusEvent> {
    let mut events = Vec::new();
    let status = node.status.get_or_insert_with(NodeStatus::default);
    let results = [
        ("NodeAddress", set_addresses(status, inputs)),
        (
            "MachineInfo",
            set_machine_info(status, cfg, inputs, &mut events),
        ),
        ("VersionInfo", set_version_info(status, cfg, inputs)),
        ("DaemonEndpoints", {
            set_daemon_endpoints(status, cfg);
            Ok(())
        }),
        ("Images", set_images(status, cfg, inputs)),
        ("GoRuntime", {
            set_go_runtime(status);
            Ok(())
        }),
    ];
    for (name, r) in results {
        if let Err(e) = r {
            tracing::error!(setter = name, error = %e, node = %cfg.node_name, "Failed to set some node status fields");
        }
    }
    set_pressure_condition(
        status,
        inputs.now,
        PressureKind::Memory,
        inputs.memory_pressure,
        &mut events,
    );
    set_pressure_condition(
        status,
        inputs.now,
        PressureKind::Disk,
        inputs.disk_pressure,
        &mut events,
    );
    set_pressure_condition(
        status,
        inputs.now,
        PressureKind::Pid,
        inputs.pid_pressure,
        &mut events,
    );
    set_ready_condition(status, cfg, inputs, &mut events);
    if let Some(v) = &inputs.volumes_in_use {
        status.volumes_in_use = (!v.is_empty()).then(|| v.clone());
    }
    events
}

fn set_addresses(status: &mut NodeStatus, inputs: &StatusInputs) -> Result<(), SetterError> {
    status.addresses = Some(inputs.addresses.clone().map_err(SetterError::Addresses)?);
    Ok(())
}

fn set_machine_info(
    status: &mut NodeStatus,
    cfg: &SetterConfig,
    inputs: &StatusInputs,
    events: &mut Vec<StatusEvent>,
) -> Result<(), SetterError> {
    let capacity = status.capacity.get_or_insert_with(BTreeMap::new);
    let info = inputs.machine_info.as_ref();
    let result = match info {
        Err(e) => {
            capacity.insert(RESOURCE_CPU.into(), ApiQuantity("0".into()));
            capacity.insert(RESOURCE_MEMORY.into(), ApiQuantity("0".into()));
            capacity.insert(
                RESOURCE_PODS.into(),
                to_api(&Quantity::from_decimal(cfg.max_pods)),
            );
            Err(SetterError::MachineInfo(e.clone()))
        }
        Ok(info) => {
            let node_info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
            node_info.machine_id = info.machine_id.clone();
            node_info.system_uuid = info.system_uuid.clone();
            for (name, q) in capacity_from_machine_info(info) {
                capacity.insert(name, to_api(&q));
            }
            capacity.insert(
                RESOURCE_PODS.into(),
                to_api(&pods_capacity(
                    cfg.max_pods,
                    cfg.pods_per_core,
                    info.num_cores,
                )),
            );
            if !node_info.boot_id.is_empty() && node_info.boot_id != info.boot_id {
                events.push(StatusEvent {
                    event_type: EventType::Warning,
                    reason: reasons::NODE_REBOOTED.into(),
                    message: Some(format!(
                        "Node {} has been rebooted, boot id: {}",
                        cfg.node_name, info.boot_id
                    )),
                });
            }
            node_info.boot_id = info.boot_id.clone();
            if cfg.local_storage_capacity_isolation
                && let Some(q) = inputs.capacity.get(RESOURCE_EPHEMERAL_STORAGE)
            {
                capacity.insert(RESOURCE_EPHEMERAL_STORAGE.into(), to_api(q));
            }
            let dp = &inputs.device_plugins;
            for (k, q) in &dp.capacity {
                if capacity
                    .get(k)
                    .and_then(|o| parse_quantity(&o.0).ok())
                    .map(|o| o.value())
                    != Some(q.value())
                {
                    crate::vlog!(2, plugin = %k, capacity = q.value(), "Updated capacity for device plugin");
                }
                capacity.insert(k.clone(), to_api(q));
            }
            // A removed plugin's resource stays, at zero (the scheduler
            // then stops placing pods needing it here).
            for k in &dp.removed {
                crate::vlog!(2, device = %k, "Set capacity for removed resource to 0 on device removal");
                capacity.insert(k.clone(), ApiQuantity("0".into()));
            }
            Ok(())
        }
    };
    let capacity_list = from_api(capacity);
    let alloc = status.allocatable.get_or_insert_with(BTreeMap::new);
    alloc.retain(|k, _| capacity_list.contains_key(k) || !is_extended_resource(k));
    for (k, q) in allocatable(&capacity_list, &inputs.allocatable_reservation) {
        alloc.insert(k, to_api(&q));
    }
    for (k, q) in &inputs.device_plugins.allocatable {
        if alloc
            .get(k)
            .and_then(|o| parse_quantity(&o.0).ok())
            .map(|o| o.value())
            != Some(q.value())
        {
            crate::vlog!(2, device = %k, allocatable = q.value(), "Updated allocatable");
        }
        alloc.insert(k.clone(), to_api(q));
    }
    result
}

fn set_version_info(
    status: &mut NodeStatus,
    cfg: &SetterConfig,
    inputs: &StatusInputs,
) -> Result<(), SetterError> {
    let v = inputs
        .version_info
        .as_ref()
        .map_err(|e| SetterError::VersionInfo(e.clone()))?;
    let info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
    info.kernel_version = v.kernel_version.clone();
    info.os_image = v.os_image.clone();
    info.container_runtime_version = match &inputs.runtime_version {
        Ok(v) => v.clone(),
        Err(_) => format!("{}://Unknown", inputs.runtime_type),
    };
    info.kubelet_version = cfg.kubelet_version.clone();
    info.kube_proxy_version = cfg.kubelet_version.clone();
    Ok(())
}

fn set_daemon_endpoints(status: &mut NodeStatus, cfg: &SetterConfig) {
    status.daemon_endpoints = Some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint {
            port: cfg.kubelet_port,
        }),
    });
}

fn set_images(
    status: &mut NodeStatus,
    cfg: &SetterConfig,
    inputs: &StatusInputs,
) -> Result<(), SetterError> {
    let images = match &inputs.images {
        Ok(i) => i,
        Err(e) => {
            status.images = None;
            return Err(SetterError::Images(e.clone()));
        }
    };
    let limit = if cfg.node_status_max_images > -1 {
        (cfg.node_status_max_images as usize).min(images.len())
    } else {
        images.len()
    };
    let list: Vec<ContainerImage> = images[..limit]
        .iter()
        .map(|i| {
            let mut names: Vec<String> =
                i.repo_digests.iter().chain(&i.repo_tags).cloned().collect();
            names.truncate(MAX_NAMES_PER_IMAGE);
            ContainerImage {
                names: (!names.is_empty()).then_some(names),
                size_bytes: Some(i.size as i64),
            }
        })
        .collect();
    status.images = (!list.is_empty()).then_some(list);
    Ok(())
}

fn set_go_runtime(status: &mut NodeStatus) {
    let info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
    info.operating_system = super::go_os().to_string();
    info.architecture = super::go_arch().to_string();
}

#[derive(Clone, Copy)]
enum PressureKind {
    Memory,
    Disk,
    Pid,
}

impl PressureKind {
    /// (type, (reason, message, event) under pressure, (...) without).
    fn texts(self) -> (&'static str, [&'static str; 3], [&'static str; 3]) {
        match self {
            PressureKind::Memory => (
                "MemoryPressure",
                [
                    "KubeletHasInsufficientMemory",
                    "kubelet has insufficient memory available",
                    reasons::NODE_HAS_INSUFFICIENT_MEMORY,
                ],
                [
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    reasons::NODE_HAS_SUFFICIENT_MEMORY,
                ],
            ),
            PressureKind::Disk => (
                "DiskPressure",
                [
                    "KubeletHasDiskPressure",
                    "kubelet has disk pressure",
                    reasons::NODE_HAS_DISK_PRESSURE,
                ],
                [
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    reasons::NODE_HAS_NO_DISK_PRESSURE,
                ],
            ),
            PressureKind::Pid => (
                "PIDPressure",
                [
                    "KubeletHasInsufficientPID",
                    "kubelet has insufficient PID available",
                    reasons::NODE_HAS_INSUFFICIENT_PID,
                ],
                [
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    reasons::NODE_HAS_SUFFICIENT_PID,
                ],
            ),
        }
    }
}

fn set_pressure_condition(
    status: &mut NodeStatus,
    now: SystemTime,
    kind: PressureKind,
    pressure: bool,
    events: &mut Vec<StatusEvent>,
) {
    let (ctype, yes, no) = kind.texts();
    let t = api_time(now);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let idx = match conditions.iter().position(|c| c.type_ == ctype) {
        Some(i) => i,
        None => {
            conditions.push(NodeCondition {
                type_: ctype.into(),
                status: "Unknown".into(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let c = &mut conditions[idx];
    c.last_heartbeat_time = Some(t.clone());
    let (want, texts) = if pressure {
        ("True", yes)
    } else {
        ("False", no)
    };
    if c.status != want {
        c.status = want.into();
        c.reason = Some(texts[0].into());
        c.message = Some(texts[1].into());
        c.last_transition_time = Some(t);
        events.push(StatusEvent::status(texts[2]));
    }
}

fn set_ready_condition(
    status: &mut NodeStatus,
    cfg: &SetterConfig,
    inputs: &StatusInputs,
    events: &mut Vec<StatusEvent>,
) {
    let t = api_time(inputs.now);
    let mut errs: Vec<String> = Vec::new();
    errs.extend(inputs.runtime_errors.iter().cloned());
    errs.extend(inputs.network_errors.iter().cloned());
    errs.extend(inputs.storage_errors.iter().cloned());
    errs.extend(inputs.shutdown_errors.iter().cloned());
    let mut required = vec![RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_PODS];
    if cfg.local_storage_capacity_isolation {
        required.push(RESOURCE_EPHEMERAL_STORAGE);
    }
    let capacity = status.capacity.clone().unwrap_or_default();
    let missing: Vec<&str> = required
        .into_iter()
        .filter(|r| !capacity.contains_key(*r))
        .collect();
    if !missing.is_empty() {
        errs.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    let mut ready = match super::runtime_state::aggregate(&errs) {
        None => NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            last_heartbeat_time: Some(t.clone()),
            ..Default::default()
        },
        Some(msg) => NodeCondition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: Some("KubeletNotReady".into()),
            message: Some(msg),
            last_heartbeat_time: Some(t.clone()),
            ..Default::default()
        },
    };
    if ready.status == "True" && inputs.apparmor_enabled {
        ready.message = ready.message.map(|m| format!("{m}. AppArmor enabled"));
    }
    if let Some(soft) = &inputs.soft_requirements {
        ready.message = ready.message.map(|m| format!("{m}. WARNING: {soft}"));
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == "Ready") {
        Some(existing) => {
            let transition = existing.status != ready.status;
            ready.last_transition_time = if transition {
                Some(t)
            } else {
                existing.last_transition_time.clone()
            };
            *existing = ready.clone();
            if transition {
                if ready.status == "True" {
                    events.push(StatusEvent::status(reasons::NODE_READY));
                } else {
                    events.push(StatusEvent::status(reasons::NODE_NOT_READY));
                    tracing::info!(node = %cfg.node_name, message = ready.message.as_deref().unwrap_or(""), "Node became not ready");
                }
            }
        }
        None => {
            ready.last_transition_time = Some(t);
            conditions.push(ready);
        }
    }
}

/// Whether AppArmor is enabled on this host (as runc checks it).
pub fn apparmor_enabled() -> bool {
    std::path::Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|b| b.len() > 1 && b[0] == b'Y')
}

#[cfg(test)]
#[path = "setters_tests.rs"]
mod tests;
