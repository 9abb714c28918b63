//! Which devices each container of each pod holds, with the plugin's
//! answer to Allocate (what the container's CRI config gets).

use std::collections::{BTreeMap, BTreeSet};

use prost::Message as _;

use super::api::{ContainerAllocateResponse, Device, DeviceSpec, Mount, NumaNode, TopologyInfo};
use super::checkpoint::{DevicesPerNuma, PodDevicesEntry};

/// NUMA node of the devices that report no topology.
pub const NODE_WITHOUT_TOPOLOGY: i64 = -1;

/// Device ids by resource name.
pub type ResourceDevices = BTreeMap<String, BTreeSet<String>>;
/// Devices by id, by resource name.
pub type ResourceDeviceInstances = BTreeMap<String, BTreeMap<String, Device>>;

/// One container's devices of one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceAllocateInfo {
    pub device_ids: DevicesPerNuma,
    pub alloc_resp: ContainerAllocateResponse,
}

/// What the device plugins want in a container's runtime config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRunContainerOptions {
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub devices: Vec<DeviceSpec>,
    pub annotations: Vec<(String, String)>,
}

/// Allocations by pod UID, container name and resource name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodDevices {
    devs: BTreeMap<String, BTreeMap<String, BTreeMap<String, DeviceAllocateInfo>>>,
}

/// The ids of a per-NUMA map.
pub fn device_set(ids: &DevicesPerNuma) -> BTreeSet<String> {
    ids.values().flatten().cloned().collect()
}

impl PodDevices {
    pub fn pods(&self) -> BTreeSet<String> {
        self.devs.keys().cloned().collect()
    }

    pub fn has_pod(&self, pod_uid: &str) -> bool {
        self.devs.contains_key(pod_uid)
    }

    pub fn insert(
        &mut self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        device_ids: DevicesPerNuma,
        alloc_resp: ContainerAllocateResponse,
    ) {
        self.devs
            .entry(pod_uid.to_string())
            .or_default()
            .entry(container.to_string())
            .or_default()
            .insert(
                resource.to_string(),
                DeviceAllocateInfo {
                    device_ids,
                    alloc_resp,
                },
            );
    }

    pub fn delete(&mut self, pods: &BTreeSet<String>) {
        for uid in pods {
            self.devs.remove(uid);
        }
    }

    /// The pod's devices of `resource`, all containers together.
    pub fn pod_devices(&self, pod_uid: &str, resource: &str) -> BTreeSet<String> {
        self.devs
            .get(pod_uid)
            .into_iter()
            .flat_map(|c| c.values())
            .filter_map(|r| r.get(resource))
            .flat_map(|i| device_set(&i.device_ids))
            .collect()
    }

    /// The container's devices of `resource`; `None` when it has no entry.
    pub fn container_devices(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<BTreeSet<String>> {
        let info = self.devs.get(pod_uid)?.get(container)?.get(resource)?;
        Some(device_set(&info.device_ids))
    }

    /// Adds the container's devices to `into` (an init container's devices
    /// can be reused by the containers after it).
    pub fn add_container_allocated_resources(
        &self,
        pod_uid: &str,
        container: &str,
        into: &mut ResourceDevices,
    ) {
        let Some(resources) = self.devs.get(pod_uid).and_then(|c| c.get(container)) else {
            return;
        };
        for (resource, info) in resources {
            into.entry(resource.clone())
                .or_default()
                .extend(device_set(&info.device_ids));
        }
    }

    /// Removes the container's devices from `from` (an app container keeps
    /// what it took).
    pub fn remove_container_allocated_resources(
        &self,
        pod_uid: &str,
        container: &str,
        from: &mut ResourceDevices,
    ) {
        let Some(resources) = self.devs.get(pod_uid).and_then(|c| c.get(container)) else {
            return;
        };
        for (resource, info) in resources {
            let set = from.entry(resource.clone()).or_default();
            for id in device_set(&info.device_ids) {
                set.remove(&id);
            }
        }
    }

    /// Every allocated device, by resource.
    pub fn devices(&self) -> ResourceDevices {
        let mut out = ResourceDevices::new();
        for resources in self.devs.values().flat_map(|c| c.values()) {
            for (resource, info) in resources {
                out.entry(resource.clone())
                    .or_default()
                    .extend(device_set(&info.device_ids));
            }
        }
        out
    }

    /// The checkpoint entries.
    pub fn to_checkpoint_data(&self) -> Vec<PodDevicesEntry> {
        let mut out = Vec::new();
        for (pod_uid, containers) in &self.devs {
            for (container, resources) in containers {
                for (resource, info) in resources {
                    out.push(PodDevicesEntry {
                        pod_uid: pod_uid.clone(),
                        container_name: container.clone(),
                        resource_name: resource.clone(),
                        device_ids: Some(info.device_ids.clone()),
                        alloc_resp: Some(info.alloc_resp.encode_to_vec()),
                    });
                }
            }
        }
        out
    }

    /// Restores checkpoint entries (an entry whose response does not decode
    /// is skipped, as Go does).
    pub fn from_checkpoint_data(&mut self, entries: Vec<PodDevicesEntry>) {
        for e in entries {
            crate::vlog!(2, pod_uid = %e.pod_uid, container_name = %e.container_name, resource_name = %e.resource_name, device_ids = ?e.device_ids, "Get checkpoint entry");
            let bytes = e.alloc_resp.unwrap_or_default();
            let resp = match ContainerAllocateResponse::decode(bytes.as_slice()) {
                Ok(r) => r,
                Err(err) => {
                    tracing::error!(err = %err, pod_uid = %e.pod_uid, container_name = %e.container_name, resource_name = %e.resource_name, "Can't unmarshal allocResp");
                    continue;
                }
            };
            self.insert(
                &e.pod_uid,
                &e.container_name,
                &e.resource_name,
                e.device_ids.unwrap_or_default(),
                resp,
            );
        }
    }

    /// The container's envs, mounts, devices and annotations from every
    /// resource's Allocate answer; the first of duplicates wins.
    pub fn device_run_container_options(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Option<DeviceRunContainerOptions> {
        let resources = self.devs.get(pod_uid)?.get(container)?;
        let mut opts = DeviceRunContainerOptions::default();
        let mut envs: BTreeMap<&str, &str> = BTreeMap::new();
        let mut devs: BTreeMap<&str, &str> = BTreeMap::new();
        let mut mounts: BTreeMap<&str, &str> = BTreeMap::new();
        let mut annotations: BTreeMap<&str, &str> = BTreeMap::new();
        for info in resources.values() {
            let resp = &info.alloc_resp;
            for (k, v) in &resp.envs {
                if let Some(e) = envs.get(k.as_str()) {
                    if e != v {
                        tracing::error!(env_key = %k, expected = %v, got = %e, "Environment variable has conflicting setting");
                    }
                    continue;
                }
                envs.insert(k, v);
                opts.envs.push((k.clone(), v.clone()));
            }
            for d in &resp.devices {
                if let Some(h) = devs.get(d.container_path.as_str()) {
                    if *h != d.host_path {
                        tracing::error!(container_path = %d.container_path, got = %h, expected = %d.host_path, "Container device has conflicting mapping host devices");
                    }
                    continue;
                }
                devs.insert(&d.container_path, &d.host_path);
                opts.devices.push(d.clone());
            }
            for m in &resp.mounts {
                if let Some(h) = mounts.get(m.container_path.as_str()) {
                    if *h != m.host_path {
                        tracing::error!(container_path = %m.container_path, conflicting_path = %h, host_path = %m.host_path, "Container mount has conflicting mapping host mounts");
                    }
                    continue;
                }
                mounts.insert(&m.container_path, &m.host_path);
                opts.mounts.push(m.clone());
            }
            for (k, v) in &resp.annotations {
                if let Some(e) = annotations.get(k.as_str()) {
                    if e != v {
                        tracing::error!(annotation_key = %k, expected = %e, got = %v, "Annotation has conflicting setting");
                    }
                    continue;
                }
                annotations.insert(k, v);
                opts.annotations.push((k.clone(), v.clone()));
            }
        }
        Some(opts)
    }

    /// The container's devices with the NUMA node each was allocated from.
    pub fn get_container_devices(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Option<ResourceDeviceInstances> {
        let resources = self.devs.get(pod_uid)?.get(container)?;
        let mut out = ResourceDeviceInstances::new();
        for (resource, info) in resources {
            if info.device_ids.is_empty() {
                continue;
            }
            let mut by_id: BTreeMap<String, Device> = BTreeMap::new();
            for (numa, ids) in &info.device_ids {
                for id in ids {
                    let topology = (*numa != NODE_WITHOUT_TOPOLOGY).then(|| {
                        let mut nodes = vec![NumaNode { id: *numa }];
                        if let Some(t) = by_id.get(id).and_then(|d| d.topology.as_ref()) {
                            nodes.extend(t.nodes.iter().cloned());
                        }
                        TopologyInfo { nodes }
                    });
                    by_id.insert(
                        id.clone(),
                        Device {
                            topology,
                            ..Default::default()
                        },
                    );
                }
            }
            out.insert(resource.clone(), by_id);
        }
        Some(out)
    }
}
