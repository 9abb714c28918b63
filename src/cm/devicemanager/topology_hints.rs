//! The device manager as a topology hint provider: which NUMA node sets
//! could hold a container's (or a pod's) devices, the narrowest preferred.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::manager::{DeviceManager, State, has_topology, limits};
use crate::cm::topologymanager::{BitMask, ProviderHints, TopologyHint};

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn available(st: &State, resource: &str) -> BTreeSet<String> {
    let empty = BTreeSet::new();
    let allocated = st.allocated.get(resource).unwrap_or(&empty);
    st.healthy
        .get(resource)
        .map(|h| h.difference(allocated).cloned().collect())
        .unwrap_or_default()
}

fn any_set(mask: BitMask, ids: &[i64]) -> bool {
    ids.iter()
        .any(|n| u32::try_from(*n).is_ok_and(|n| mask.is_set(n)))
}

impl DeviceManager {
    fn numa_of(st: &State, resource: &str, device: &str) -> Option<Vec<i64>> {
        let d = st.all_devices.get(resource)?.get(device)?;
        d.topology
            .as_ref()
            .map(|t| t.nodes.iter().map(|n| n.id).collect())
    }

    /// Every NUMA node set holding enough of the devices (all reusable
    /// devices with a topology inside it); the sets of the smallest size
    /// that could ever fit are preferred.
    pub(super) fn generate_device_topology_hints(
        &self,
        st: &State,
        resource: &str,
        available: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        request: usize,
    ) -> Vec<TopologyHint> {
        let mut min_size = self.numa_nodes.len() as u32;
        let mut hints = Vec::new();
        let all = st.all_devices.get(resource);
        BitMask::iterate(&self.numa_nodes, |mask| {
            let in_mask = all
                .into_iter()
                .flat_map(|m| m.keys())
                .filter(|d| any_set(mask, &Self::numa_of(st, resource, d).unwrap_or_default()))
                .count();
            if in_mask >= request && mask.count() < min_size {
                min_size = mask.count();
            }
            let mut matching = 0;
            for d in reusable {
                let Some(ids) = Self::numa_of(st, resource, d) else {
                    continue;
                };
                if !any_set(mask, &ids) {
                    return;
                }
                matching += 1;
            }
            matching += available
                .iter()
                .filter(|d| any_set(mask, &Self::numa_of(st, resource, d).unwrap_or_default()))
                .count();
            if matching >= request {
                hints.push(TopologyHint::new(mask, false));
            }
        });
        for h in &mut hints {
            if h.numa_node_affinity.is_some_and(|m| m.count() == min_size) {
                h.preferred = true;
            }
        }
        hints
    }

    /// Hints for one container's devices.
    pub fn get_topology_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.set_pod_pending_admission(pod);
        self.update_allocated_devices();
        let uid = pod_uid(pod);
        let mut out = ProviderHints::new();
        for (resource, requested) in limits(container) {
            if !self.is_device_plugin_resource(&resource) {
                continue;
            }
            let requested = usize::try_from(requested).unwrap_or(0);
            let st = self.lock();
            if !has_topology(&st, &resource) {
                tracing::info!(resource = %resource, "Resource does not have a topology preference");
                out.insert(resource, None);
                continue;
            }
            let allocated = st
                .pod_devices
                .container_devices(uid, &container.name, &resource)
                .unwrap_or_default();
            if !allocated.is_empty() {
                if allocated.len() != requested {
                    tracing::error!(resource = %resource, container_name = %container.name, request = requested, allocated = allocated.len(), "Resource already allocated to pod with different number than request");
                    out.insert(resource, Some(Vec::new()));
                    continue;
                }
                tracing::info!(resource = %resource, container_name = %container.name, "Regenerating TopologyHints for resource already allocated to pod");
                let hints = self.generate_device_topology_hints(
                    &st,
                    &resource,
                    &allocated,
                    &BTreeSet::new(),
                    requested,
                );
                out.insert(resource, Some(hints));
                continue;
            }
            let avail = available(&st, &resource);
            let reusable = st
                .devices_to_reuse
                .get(uid)
                .and_then(|r| r.get(&resource))
                .cloned()
                .unwrap_or_default();
            let total = avail.union(&reusable).count();
            if total < requested {
                tracing::error!(resource = %resource, request = requested, available = total, "Unable to generate topology hints: requested number of devices unavailable");
                out.insert(resource, Some(Vec::new()));
                continue;
            }
            let hints =
                self.generate_device_topology_hints(&st, &resource, &avail, &reusable, requested);
            out.insert(resource, Some(hints));
        }
        out
    }

    /// Hints for the devices of the whole pod (pod scope).
    pub fn get_pod_topology_hints(&self, pod: &Pod) -> ProviderHints {
        self.set_pod_pending_admission(pod);
        self.update_allocated_devices();
        let uid = pod_uid(pod);
        let mut out = ProviderHints::new();
        for (resource, requested) in self.pod_device_request(pod) {
            let st = self.lock();
            if !has_topology(&st, &resource) {
                tracing::info!(resource = %resource, "Resource does not have a topology preference");
                out.insert(resource, None);
                continue;
            }
            let allocated = st.pod_devices.pod_devices(uid, &resource);
            if !allocated.is_empty() {
                if allocated.len() != requested {
                    tracing::error!(resource = %resource, request = requested, allocated = allocated.len(), "Resource already allocated to pod with different number than request");
                    out.insert(resource, Some(Vec::new()));
                    continue;
                }
                tracing::info!(resource = %resource, "Regenerating TopologyHints for resource already allocated to pod");
                let hints = self.generate_device_topology_hints(
                    &st,
                    &resource,
                    &allocated,
                    &BTreeSet::new(),
                    requested,
                );
                out.insert(resource, Some(hints));
                continue;
            }
            let avail = available(&st, &resource);
            if avail.len() < requested {
                tracing::error!(resource = %resource, request = requested, available = avail.len(), "Unable to generate topology hints: requested number of devices unavailable");
                out.insert(resource, Some(Vec::new()));
                continue;
            }
            let hints = self.generate_device_topology_hints(
                &st,
                &resource,
                &avail,
                &BTreeSet::new(),
                requested,
            );
            out.insert(resource, Some(hints));
        }
        out
    }

    /// Devices the pod needs at once: its largest init container request
    /// or the sum of its app containers', whichever is more.
    pub(super) fn pod_device_request(&self, pod: &Pod) -> BTreeMap<String, usize> {
        let Some(spec) = &pod.spec else {
            return BTreeMap::new();
        };
        let mut init: BTreeMap<String, usize> = BTreeMap::new();
        for c in spec.init_containers.iter().flatten() {
            for (r, n) in limits(c) {
                if !self.is_device_plugin_resource(&r) {
                    continue;
                }
                let n = usize::try_from(n).unwrap_or(0);
                let e = init.entry(r).or_insert(n);
                *e = (*e).max(n);
            }
        }
        let mut app: BTreeMap<String, usize> = BTreeMap::new();
        for c in &spec.containers {
            for (r, n) in limits(c) {
                if !self.is_device_plugin_resource(&r) {
                    continue;
                }
                *app.entry(r).or_default() += usize::try_from(n).unwrap_or(0);
            }
        }
        let mut out = app.clone();
        for (r, n) in init {
            let e = out.entry(r).or_insert(n);
            *e = (*e).max(n);
        }
        out
    }
}
