//! The device manager: tracks the devices the registered plugins report,
//! allocates them to containers at admission (with the topology manager's
//! affinity and the plugin's preferred allocation), keeps the allocations
//! in the checkpoint, and tells the runtime what each container gets.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::api::{Device, DevicePluginOptions, HEALTHY};
use super::checkpoint::{CHECKPOINT_FILE, DeviceCheckpoint, DevicesPerNuma};
use super::endpoint::Endpoint;
use super::error::DeviceManagerError;
use super::pod_devices::{
    DeviceRunContainerOptions, NODE_WITHOUT_TOPOLOGY, PodDevices, ResourceDeviceInstances,
    ResourceDevices,
};
use crate::cm::cpumanager::SourcesReadyFn;
use crate::cm::helpers::container_resources;
use crate::cm::qos_container_manager::ActivePodsFn;
use crate::cm::resources::ResourceList;
use crate::cm::topologymanager::AffinityStore;
use crate::util::clock::Clock;
use crate::util::quantity::Quantity;

/// A registered plugin: its endpoint and the options it registered with.
#[derive(Clone)]
pub(super) struct EndpointInfo {
    pub endpoint: Arc<Endpoint>,
    pub options: Option<DevicePluginOptions>,
}

/// Capacity from the device plugins (Go's GetCapacity).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevicePluginCapacity {
    /// Every device, healthy or not, by resource.
    pub capacity: ResourceList,
    /// Healthy devices by resource.
    pub allocatable: ResourceList,
    /// Resources whose plugin has been gone longer than the grace period.
    pub removed: Vec<String>,
}

pub(super) struct State {
    pub endpoints: HashMap<String, EndpointInfo>,
    pub all_devices: ResourceDeviceInstances,
    pub healthy: ResourceDevices,
    pub unhealthy: ResourceDevices,
    pub allocated: ResourceDevices,
    pub pod_devices: PodDevices,
    /// Devices of the pod being admitted that its init containers held.
    pub devices_to_reuse: HashMap<String, ResourceDevices>,
    pub pending_admission_pod: Option<Pod>,
    pub active_pods: ActivePodsFn,
    pub sources_ready: SourcesReadyFn,
}

/// The device plugin manager.
pub struct DeviceManager {
    pub(super) socket_dir: PathBuf,
    pub(super) numa_nodes: Vec<u32>,
    pub(super) affinity: Arc<AffinityStore>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) state: Mutex<State>,
    writing: Mutex<()>,
}

impl std::fmt::Debug for DeviceManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceManager")
            .field("socket_dir", &self.socket_dir)
            .finish()
    }
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

/// The container's limits as whole numbers.
pub(super) fn limits(container: &Container) -> Vec<(String, i64)> {
    container_resources(container)
        .1
        .iter()
        .map(|(k, q)| (k.clone(), q.value()))
        .collect()
}

/// Runs an RPC future from the synchronous admission path (which runs on
/// the blocking pool, or on a worker of the multi-threaded runtime).
pub(super) fn block_on<F: Future>(f: F) -> Result<F::Output, DeviceManagerError> {
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|e| DeviceManagerError::Join(format!("no runtime to call the plugin: {e}")))?;
    Ok(tokio::task::block_in_place(|| handle.block_on(f)))
}

fn numa_ids(device: Option<&Device>) -> Vec<i64> {
    device
        .and_then(|d| d.topology.as_ref())
        .map(|t| t.nodes.iter().map(|n| n.id).collect())
        .unwrap_or_default()
}

impl DeviceManager {
    /// A manager for `<root-dir>/device-plugins/` (nothing is touched
    /// before start).
    pub fn new(
        socket_dir: PathBuf,
        numa_nodes: Vec<u32>,
        affinity: Arc<AffinityStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        crate::vlog!(2, path = %socket_dir.display(), "Creating Device Plugin manager");
        DeviceManager {
            socket_dir,
            numa_nodes,
            affinity,
            clock,
            state: Mutex::new(State {
                endpoints: HashMap::new(),
                all_devices: ResourceDeviceInstances::new(),
                healthy: ResourceDevices::new(),
                unhealthy: ResourceDevices::new(),
                allocated: ResourceDevices::new(),
                pod_devices: PodDevices::default(),
                devices_to_reuse: HashMap::new(),
                pending_admission_pod: None,
                active_pods: Arc::new(Vec::new),
                sources_ready: Arc::new(|| true),
            }),
            writing: Mutex::new(()),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.socket_dir.join(CHECKPOINT_FILE)
    }

    /// A plugin's device list (Go's genericDeviceUpdateCallback); the
    /// checkpoint is written after.
    pub fn update_devices(&self, resource: &str, devices: Vec<Device>) {
        self.apply_devices(resource, devices);
        if let Err(e) = self.write_checkpoint() {
            tracing::error!(err = %e, "Writing checkpoint encountered");
        }
    }

    /// The device sets of a plugin's list (no checkpoint write).
    pub fn apply_devices(&self, resource: &str, devices: Vec<Device>) {
        {
            let mut st = self.lock();
            let (mut healthy, mut unhealthy, mut all) =
                (BTreeSet::new(), BTreeSet::new(), BTreeMap::new());
            for d in devices {
                if d.health == HEALTHY {
                    healthy.insert(d.id.clone());
                } else {
                    unhealthy.insert(d.id.clone());
                }
                all.insert(d.id.clone(), d);
            }
            st.healthy.insert(resource.to_string(), healthy);
            st.unhealthy.insert(resource.to_string(), unhealthy);
            st.all_devices.insert(resource.to_string(), all);
        }
    }

    /// Every healthy device of the resource becomes unhealthy.
    pub(super) fn mark_resource_unhealthy(st: &mut State, resource: &str) {
        crate::vlog!(2, resource_name = %resource, "Mark all resources Unhealthy for resource");
        let healthy = st
            .healthy
            .insert(resource.to_string(), BTreeSet::new())
            .unwrap_or_default();
        st.unhealthy
            .entry(resource.to_string())
            .or_default()
            .extend(healthy);
    }

    /// Capacity and allocatable from the plugins; resources whose plugin
    /// has been gone past the grace period are dropped and named.
    pub fn get_capacity(&self) -> DevicePluginCapacity {
        let mut out = DevicePluginCapacity::default();
        let mut removed = BTreeSet::new();
        {
            let mut st = self.lock();
            let st = &mut *st;
            let expired = |endpoints: &HashMap<String, EndpointInfo>, r: &str| match endpoints
                .get(r)
            {
                Some(e) => e.endpoint.stop_grace_period_expired(),
                None => {
                    tracing::error!(resource_name = %r, "Unexpected: device sets and endpoints are out of sync");
                    true
                }
            };
            let names: Vec<String> = st.healthy.keys().cloned().collect();
            for r in names {
                if expired(&st.endpoints, &r) {
                    st.endpoints.remove(&r);
                    st.healthy.remove(&r);
                    removed.insert(r);
                    continue;
                }
                let n = st.healthy.get(&r).map_or(0, BTreeSet::len) as i64;
                out.capacity.insert(r.clone(), Quantity::from_decimal(n));
                out.allocatable.insert(r, Quantity::from_decimal(n));
            }
            let names: Vec<String> = st.unhealthy.keys().cloned().collect();
            for r in names {
                if expired(&st.endpoints, &r) {
                    st.endpoints.remove(&r);
                    st.unhealthy.remove(&r);
                    removed.insert(r);
                    continue;
                }
                let n = st.unhealthy.get(&r).map_or(0, BTreeSet::len) as i64;
                let total = out
                    .capacity
                    .get(&r)
                    .map_or(0, Quantity::value)
                    .saturating_add(n);
                out.capacity.insert(r, Quantity::from_decimal(total));
            }
        }
        if !removed.is_empty()
            && let Err(e) = self.write_checkpoint()
        {
            tracing::error!(err = %e, "Error on writing checkpoint");
        }
        out.removed = removed.into_iter().collect();
        out
    }

    /// What admission may count on: the plugins' healthy devices, and at
    /// least as many as are allocated (Go's sanitizeNodeAllocatable).
    pub fn admission_allocatable(&self) -> ResourceList {
        let st = self.lock();
        let mut out = ResourceList::new();
        for (r, devices) in &st.healthy {
            let gone = st
                .endpoints
                .get(r)
                .is_none_or(|e| e.endpoint.stop_grace_period_expired());
            if !gone {
                out.insert(r.clone(), Quantity::from_decimal(devices.len() as i64));
            }
        }
        for (r, devices) in &st.allocated {
            let n = devices.len() as i64;
            if out.get(r).is_none_or(|q| q.value() < n) {
                out.insert(r.clone(), Quantity::from_decimal(n));
            }
        }
        out
    }

    /// Writes the checkpoint (allocations and the resources registered).
    pub fn write_checkpoint(&self) -> Result<(), DeviceManagerError> {
        // One writer at a time, each with the state as it is then.
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut cp = {
            let st = self.lock();
            let registered = st
                .healthy
                .iter()
                .map(|(r, d)| (r.clone(), d.iter().cloned().collect()))
                .collect();
            DeviceCheckpoint::new(st.pod_devices.to_checkpoint_data(), registered)
        };
        let bytes = cp.marshal()?;
        crate::util::atomic_file::write_atomic(&self.checkpoint_path(), &bytes, 0o644).map_err(
            |e| {
                tracing::info!(err = %e, "Failed to write checkpoint file");
                DeviceManagerError::WriteCheckpoint(e)
            },
        )
    }

    /// Loads the checkpoint: allocations come back, and each registered
    /// resource gets a stopped endpoint (its plugin must register again).
    pub fn read_checkpoint(&self) -> Result<(), DeviceManagerError> {
        let path = self.checkpoint_path();
        let blob = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(
                    checkpoint = CHECKPOINT_FILE,
                    err = "checkpoint is not found",
                    "Failed to read data from checkpoint"
                );
                return Ok(());
            }
            Err(source) => return Err(DeviceManagerError::Read { path, source }),
        };
        let cp = match DeviceCheckpoint::unmarshal(&blob) {
            Ok(cp) => cp,
            Err(err) => match DeviceCheckpoint::unmarshal_v1(&blob) {
                Ok(cp) => {
                    tracing::info!(
                        checkpoint = CHECKPOINT_FILE,
                        "Read data from a V1 checkpoint"
                    );
                    cp
                }
                Err(v1) => {
                    tracing::info!(err = %v1, "Failed to read checkpoint V1 file");
                    return Err(err);
                }
            },
        };
        let (entries, registered) = cp.into_parts();
        let mut st = self.lock();
        st.pod_devices.from_checkpoint_data(entries);
        st.allocated = st.pod_devices.devices();
        for resource in registered.keys() {
            st.healthy.insert(resource.clone(), BTreeSet::new());
            st.unhealthy.insert(resource.clone(), BTreeSet::new());
            st.endpoints.insert(
                resource.clone(),
                EndpointInfo {
                    endpoint: Arc::new(Endpoint::stopped(resource, self.clock.clone())),
                    options: None,
                },
            );
        }
        Ok(())
    }

    /// The inputs start hands over.
    pub fn set_sources(&self, active_pods: ActivePodsFn, sources_ready: SourcesReadyFn) {
        let mut st = self.lock();
        st.active_pods = active_pods;
        st.sources_ready = sources_ready;
    }

    pub(super) fn set_pod_pending_admission(&self, pod: &Pod) {
        self.lock().pending_admission_pod = Some(pod.clone());
    }

    /// Frees the devices of pods that are no longer active (nor being
    /// admitted).
    pub fn update_allocated_devices(&self) {
        let (ready, active) = {
            let st = self.lock();
            (st.sources_ready.clone(), st.active_pods.clone())
        };
        if !ready() {
            return;
        }
        let pods = active();
        let mut st = self.lock();
        let mut to_remove = st.pod_devices.pods();
        for p in &pods {
            to_remove.remove(pod_uid(p));
        }
        if let Some(p) = &st.pending_admission_pod {
            to_remove.remove(pod_uid(p));
        }
        if to_remove.is_empty() {
            return;
        }
        crate::vlog!(3, pod_uids = ?to_remove, "Pods to be removed");
        st.pod_devices.delete(&to_remove);
        st.allocated = st.pod_devices.devices();
    }

    pub(super) fn is_device_plugin_resource(&self, resource: &str) -> bool {
        let st = self.lock();
        st.healthy.contains_key(resource) || st.allocated.contains_key(resource)
    }

    /// Admission: allocates devices for the container; an init container's
    /// devices can be reused by the containers after it.
    pub fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), DeviceManagerError> {
        self.set_pod_pending_admission(pod);
        let uid = pod_uid(pod).to_string();
        let reuse = {
            let mut st = self.lock();
            st.devices_to_reuse.retain(|k, _| *k == uid);
            st.devices_to_reuse.entry(uid.clone()).or_default().clone()
        };
        self.allocate_container_resources(pod, container, &reuse)?;
        let is_init = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .any(|c| c.name == container.name);
        let mut st = self.lock();
        let st = &mut *st;
        let entry = st.devices_to_reuse.entry(uid.clone()).or_default();
        if is_init {
            st.pod_devices
                .add_container_allocated_resources(&uid, &container.name, entry);
        } else {
            st.pod_devices
                .remove_container_allocated_resources(&uid, &container.name, entry);
        }
        Ok(())
    }

    fn allocate_container_resources(
        &self,
        pod: &Pod,
        container: &Container,
        reuse: &ResourceDevices,
    ) -> Result<(), DeviceManagerError> {
        let uid = pod_uid(pod);
        let mut updated = false;
        let mut checkpoint = false;
        for (resource, needed) in limits(container) {
            crate::vlog!(3, needed, resource_name = %resource, "Looking for needed resources");
            if !self.is_device_plugin_resource(&resource) {
                continue;
            }
            if !updated {
                self.update_allocated_devices();
                updated = true;
            }
            let empty = BTreeSet::new();
            let devices = self.devices_to_allocate(
                uid,
                &container.name,
                &resource,
                usize::try_from(needed).unwrap_or(0),
                reuse.get(&resource).unwrap_or(&empty),
            )?;
            let Some(devices) = devices.filter(|d| !d.is_empty()) else {
                continue;
            };
            checkpoint = true;
            let info = self.lock().endpoints.get(&resource).cloned();
            let Some(info) = info else {
                let mut st = self.lock();
                st.allocated = st.pod_devices.devices();
                return Err(DeviceManagerError::UnknownPlugin(resource));
            };
            let ids: Vec<String> = devices.iter().cloned().collect();
            crate::vlog!(3, devices = ?ids, resource_name = %resource, "Making allocation request for device plugin");
            let started = self.clock.monotonic();
            let result = block_on(info.endpoint.allocate(ids)).and_then(|r| r);
            crate::metrics::kubelet::device_plugin_alloc_duration().observe(
                &[&resource],
                self.clock.monotonic().duration_since(started).as_secs_f64(),
            );
            let resp = match result {
                Ok(r) => r,
                Err(e) => {
                    let mut st = self.lock();
                    st.allocated = st.pod_devices.devices();
                    return Err(e);
                }
            };
            let Some(first) = resp.container_responses.first().cloned() else {
                return Err(DeviceManagerError::EmptyAllocateResponse(format!(
                    "{resp:?}"
                )));
            };
            let mut st = self.lock();
            let per_numa = devices_per_numa(&st, &resource, &devices);
            st.pod_devices
                .insert(uid, &container.name, &resource, per_numa, first);
        }
        if checkpoint {
            return self.write_checkpoint();
        }
        Ok(())
    }

    /// Which devices of `resource` the container gets (`None`: it already
    /// has them, or needs none).
    pub(super) fn devices_to_allocate(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        required: usize,
        reusable: &BTreeSet<String>,
    ) -> Result<Option<BTreeSet<String>>, DeviceManagerError> {
        let mut st = self.lock();
        let mut needed = required;
        if let Some(devices) = st
            .pod_devices
            .container_devices(pod_uid, container, resource)
        {
            crate::vlog!(3, resource_name = %resource, container_name = %container, pod_uid = %pod_uid, devices = ?devices, "Found pre-allocated devices for resource on pod");
            if devices.len() != required {
                return Err(DeviceManagerError::ChangedRequest {
                    pod_uid: pod_uid.to_string(),
                    container: container.to_string(),
                    resource: resource.to_string(),
                    from: devices.len(),
                    to: required,
                });
            }
            needed = 0;
        }
        if needed == 0 {
            return Ok(None);
        }
        crate::vlog!(3, device_number = needed, resource_name = %resource, pod_uid = %pod_uid, container_name = %container, "Need devices to allocate for pod");
        if !st.healthy.contains_key(resource) {
            return Err(DeviceManagerError::Unregistered(resource.to_string()));
        }
        let mut allocated = BTreeSet::new();
        let take = |st: &mut State,
                    from: &BTreeSet<String>,
                    allocated: &mut BTreeSet<String>,
                    needed: &mut usize|
         -> bool {
            let candidates: Vec<String> = from.difference(allocated).cloned().collect();
            for d in candidates {
                st.allocated
                    .entry(resource.to_string())
                    .or_default()
                    .insert(d.clone());
                allocated.insert(d);
                *needed -= 1;
                if *needed == 0 {
                    return true;
                }
            }
            false
        };
        if take(&mut st, reusable, &mut allocated, &mut needed) {
            return Ok(Some(allocated));
        }
        let in_use = st
            .allocated
            .entry(resource.to_string())
            .or_default()
            .clone();
        let available: BTreeSet<String> = st
            .healthy
            .get(resource)
            .map(|h| h.difference(&in_use).cloned().collect())
            .unwrap_or_default();
        if available.len() < needed {
            return Err(DeviceManagerError::Unavailable {
                resource: resource.to_string(),
                requested: needed,
                available: available.len(),
            });
        }
        let (aligned, unaligned, no_affinity) =
            self.filter_by_affinity(&st, pod_uid, container, resource, &available);
        let short = |needed: usize| DeviceManagerError::ShortAllocation {
            requested: required,
            got: required - needed,
        };
        if needed < aligned.len() {
            let offer: BTreeSet<String> = aligned.union(&allocated).cloned().collect();
            let (guard, preferred) =
                self.preferred_allocation(st, resource, &offer, &allocated, required);
            st = guard;
            let preferred = preferred?;
            let first: BTreeSet<String> = preferred.intersection(&aligned).cloned().collect();
            if take(&mut st, &first, &mut allocated, &mut needed)
                || take(&mut st, &aligned, &mut allocated, &mut needed)
            {
                return Ok(Some(allocated));
            }
            return Err(short(needed));
        }
        if take(&mut st, &aligned, &mut allocated, &mut needed) {
            return Ok(Some(allocated));
        }
        let offer: BTreeSet<String> = available.union(&allocated).cloned().collect();
        let (guard, preferred) =
            self.preferred_allocation(st, resource, &offer, &allocated, required);
        st = guard;
        let preferred = preferred?;
        let first: BTreeSet<String> = preferred.intersection(&available).cloned().collect();
        if take(&mut st, &first, &mut allocated, &mut needed)
            || take(&mut st, &unaligned, &mut allocated, &mut needed)
            || take(&mut st, &no_affinity, &mut allocated, &mut needed)
        {
            return Ok(Some(allocated));
        }
        Err(short(needed))
    }

    /// The plugin's preferred devices when it offers GetPreferredAllocation
    /// (empty otherwise); the lock is released around the call.
    fn preferred_allocation<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        resource: &str,
        available: &BTreeSet<String>,
        must_include: &BTreeSet<String>,
        size: usize,
    ) -> (
        MutexGuard<'a, State>,
        Result<BTreeSet<String>, DeviceManagerError>,
    ) {
        let Some(info) = st.endpoints.get(resource).cloned() else {
            return (
                st,
                Err(DeviceManagerError::EndpointNotFound(resource.to_string())),
            );
        };
        let offered = info
            .options
            .as_ref()
            .is_some_and(|o| o.get_preferred_allocation_available);
        if !offered {
            crate::vlog!(4, resource_name = %resource, "Plugin options indicate to skip GetPreferredAllocation for resource");
            return (st, Ok(BTreeSet::new()));
        }
        drop(st);
        let result = block_on(info.endpoint.get_preferred_allocation(
            available.iter().cloned().collect(),
            must_include.iter().cloned().collect(),
            size,
        ))
        .and_then(|r| r)
        .map(|resp| {
            resp.container_responses
                .first()
                .map(|c| c.device_i_ds.iter().cloned().collect())
                .unwrap_or_default()
        });
        (self.lock(), result)
    }

    /// Splits available devices by the container's NUMA affinity: on an
    /// affine node, on another node, without topology.
    pub(super) fn filter_by_affinity(
        &self,
        st: &State,
        pod_uid: &str,
        container: &str,
        resource: &str,
        available: &BTreeSet<String>,
    ) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
        let hint = self.affinity.get_affinity(pod_uid, container);
        let Some(mask) = hint
            .numa_node_affinity
            .filter(|_| has_topology(st, resource))
        else {
            return (BTreeSet::new(), BTreeSet::new(), available.clone());
        };
        let devices = st.all_devices.get(resource);
        let mut per_node: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
        for d in available {
            let ids = numa_ids(devices.and_then(|m| m.get(d)));
            if ids.is_empty() {
                per_node
                    .entry(NODE_WITHOUT_TOPOLOGY)
                    .or_default()
                    .insert(d.clone());
            }
            for n in ids {
                per_node.entry(n).or_default().insert(d.clone());
            }
        }
        let in_mask = |n: i64| u32::try_from(n).is_ok_and(|n| mask.is_set(n));
        let mut nodes: Vec<i64> = per_node.keys().copied().collect();
        nodes.sort_by(|a, b| {
            let len = |n: &i64| per_node.get(n).map_or(0, BTreeSet::len);
            match (in_mask(*a), in_mask(*b)) {
                (true, true) => len(a).cmp(&len(b)),
                (true, false) => std::cmp::Ordering::Less,
                (false, true) => std::cmp::Ordering::Greater,
                (false, false) => {
                    if *a == NODE_WITHOUT_TOPOLOGY {
                        std::cmp::Ordering::Greater
                    } else if *b == NODE_WITHOUT_TOPOLOGY {
                        std::cmp::Ordering::Less
                    } else {
                        len(a).cmp(&len(b))
                    }
                }
            }
        });
        let (mut from, mut not_from, mut without) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for d in available {
            for n in &nodes {
                if per_node.get(n).is_some_and(|s| s.contains(d)) {
                    if *n == NODE_WITHOUT_TOPOLOGY {
                        without.insert(d.clone());
                    } else if in_mask(*n) {
                        from.insert(d.clone());
                    } else {
                        not_from.insert(d.clone());
                    }
                    break;
                }
            }
        }
        (from, not_from, without)
    }

    /// What the container's runtime config gets; PreStartContainer is
    /// called first for plugins that ask for it, and a container whose
    /// devices are not known (yet) is allocated again.
    pub async fn get_device_run_container_options(
        self: &Arc<Self>,
        pod: &Pod,
        container: &Container,
    ) -> Result<Option<DeviceRunContainerOptions>, DeviceManagerError> {
        let uid = pod_uid(pod).to_string();
        let mut reallocate = false;
        for (resource, value) in limits(container) {
            if !self.is_device_plugin_resource(&resource) || value == 0 {
                continue;
            }
            self.call_pre_start_container_if_needed(&uid, &container.name, &resource)
                .await?;
            if self
                .lock()
                .pod_devices
                .container_devices(&uid, &container.name, &resource)
                .is_none()
            {
                reallocate = true;
            }
        }
        if reallocate {
            crate::vlog!(2, pod = %format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or("")), container_name = %container.name, "Needs to re-allocate device plugin resources for pod");
            let (me, p, c) = (self.clone(), pod.clone(), container.clone());
            tokio::task::spawn_blocking(move || me.allocate(&p, &c))
                .await
                .map_err(|e| DeviceManagerError::Join(e.to_string()))??;
        }
        Ok(self
            .lock()
            .pod_devices
            .device_run_container_options(&uid, &container.name))
    }

    async fn call_pre_start_container_if_needed(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
    ) -> Result<(), DeviceManagerError> {
        let (endpoint, devices) = {
            let st = self.lock();
            let Some(info) = st.endpoints.get(resource) else {
                return Err(DeviceManagerError::EndpointNotFound(resource.to_string()));
            };
            if !info.options.as_ref().is_some_and(|o| o.pre_start_required) {
                crate::vlog!(4, resource_name = %resource, "Plugin options indicate to skip PreStartContainer for resource");
                return Ok(());
            }
            let Some(devices) = st
                .pod_devices
                .container_devices(pod_uid, container, resource)
            else {
                return Err(DeviceManagerError::NoDevicesInCache {
                    pod_uid: pod_uid.to_string(),
                    container: container.to_string(),
                    resource: resource.to_string(),
                });
            };
            (info.endpoint.clone(), devices)
        };
        crate::vlog!(4, container_name = %container, pod_uid = %pod_uid, "Issuing a PreStartContainer call for container");
        endpoint
            .pre_start_container(devices.into_iter().collect())
            .await
            .map(|_| ())
    }

    /// The healthy devices (for the pod-resources API).
    pub fn get_allocatable_devices(&self) -> ResourceDeviceInstances {
        let st = self.lock();
        let mut out = ResourceDeviceInstances::new();
        for (resource, ids) in &st.healthy {
            let Some(all) = st.all_devices.get(resource) else {
                continue;
            };
            out.insert(
                resource.clone(),
                all.iter()
                    .filter(|(id, _)| ids.contains(*id))
                    .map(|(id, d)| (id.clone(), d.clone()))
                    .collect(),
            );
        }
        out
    }

    /// The container's devices (for the pod-resources API).
    pub fn get_devices(&self, pod_uid: &str, container: &str) -> ResourceDeviceInstances {
        self.lock()
            .pod_devices
            .get_container_devices(pod_uid, container)
            .unwrap_or_default()
    }

    /// The container's devices of the resource.
    pub fn container_devices(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<BTreeSet<String>> {
        self.lock()
            .pod_devices
            .container_devices(pod_uid, container, resource)
    }

    /// Registers a dialled endpoint for the resource (replacing any other).
    pub(super) fn register_endpoint(
        &self,
        resource: &str,
        options: Option<DevicePluginOptions>,
        endpoint: Arc<Endpoint>,
    ) {
        self.lock().endpoints.insert(
            resource.to_string(),
            EndpointInfo {
                endpoint: endpoint.clone(),
                options,
            },
        );
        crate::vlog!(2, endpoint = %endpoint, "Registered endpoint");
    }

    /// After an endpoint's ListAndWatch ended: stop it, and if it is still
    /// the resource's endpoint, its devices become unhealthy.
    pub(super) fn endpoint_ended(&self, resource: &str, endpoint: &Arc<Endpoint>) {
        endpoint.stop();
        let mut st = self.lock();
        if st
            .endpoints
            .get(resource)
            .is_some_and(|i| Arc::ptr_eq(&i.endpoint, endpoint))
        {
            Self::mark_resource_unhealthy(&mut st, resource);
        }
        crate::vlog!(2, resource_name = %resource, endpoint = %endpoint, "Endpoint became unhealthy");
    }

    /// Stops every endpoint (shutdown).
    pub fn stop_endpoints(&self) {
        for info in self.lock().endpoints.values() {
            info.endpoint.stop();
        }
    }

    /// The allocated devices by resource.
    pub fn allocated_devices(&self) -> ResourceDevices {
        self.lock().allocated.clone()
    }

    /// Healthy device ids by resource.
    pub fn healthy_devices(&self) -> ResourceDevices {
        self.lock().healthy.clone()
    }
}

/// Whether any device of the resource reports a topology.
pub(super) fn has_topology(st: &State, resource: &str) -> bool {
    st.all_devices
        .get(resource)
        .is_some_and(|m| m.values().any(|d| d.topology.is_some()))
}

fn devices_per_numa(st: &State, resource: &str, devices: &BTreeSet<String>) -> DevicesPerNuma {
    let all = st.all_devices.get(resource);
    let mut out = DevicesPerNuma::new();
    for d in devices {
        let ids = numa_ids(all.and_then(|m| m.get(d)));
        if ids.is_empty() {
            out.entry(NODE_WITHOUT_TOPOLOGY)
                .or_default()
                .push(d.clone());
        }
        for n in ids {
            out.entry(n).or_default().push(d.clone());
        }
    }
    out
}
