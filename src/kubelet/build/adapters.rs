//! The seams between subsystems, implemented by the subsystems the kubelet
//! wires together (each side keeps its own narrow trait, so none of them
//! holds another's concrete type or the kubelet).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::cm::ResourceList;
use crate::kubelet::container::{Runtime, format_pod};
use crate::kubelet::events::EventRecorder;
use crate::kubelet::events::pod_ref;
use crate::kubelet::kuberuntime::VolumeMap;
use crate::kubelet::nodestatus::sources::VolumesInUse;
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_sync::{PodVolumes, ProbeManager};
use crate::kubelet::pod_workers::{
    EventType, PodEventRecorder, PodWorkers, running_pod_to_api_pod,
};
use crate::kubelet::prober::ProberManager;
use crate::kubelet::prober::status::PodStatusProvider;
use crate::kubelet::server::pods::PodsProvider;
use crate::kubelet::status::{ApiPodStatus, ContainerProbeStatus, StatusManager};
use crate::kubelet::types::is_static_pod;
use crate::kubelet::volumemanager::{OrphanCleanupError, VolumeManager, WaitError};
use crate::util::quantity::Quantity;

/// The pod workers answer what runs for the runtime manager.
impl crate::kubelet::kuberuntime::PodStateProvider for PodWorkers {
    fn is_pod_termination_requested(&self, uid: &str) -> bool {
        PodWorkers::is_pod_termination_requested(self, uid)
    }
    fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        PodWorkers::should_pod_content_be_removed(self, uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        PodWorkers::should_pod_runtime_be_removed(self, uid)
    }
}

/// The pod workers answer what runs for the volume manager.
impl crate::kubelet::volumemanager::PodStateProvider for PodWorkers {
    fn should_pod_containers_be_terminating(&self, uid: &str) -> bool {
        PodWorkers::should_pod_containers_be_terminating(self, uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        PodWorkers::should_pod_runtime_be_removed(self, uid)
    }
}

/// The volume manager as node status sees it (volumes in use).
pub struct VolumesReport(pub Arc<VolumeManager>);

impl VolumesInUse for VolumesReport {
    fn reconciler_synced(&self) -> bool {
        self.0.states_synced()
    }
    fn volumes_in_use(&self) -> Vec<String> {
        self.0.get_volumes_in_use()
    }
    fn mark_reported_in_use(&self, volumes: &[String]) {
        self.0.mark_volumes_as_reported_in_use(volumes);
    }
}

impl PodStatusProvider for StatusManager {
    fn get_pod_status(&self, pod_uid: &str) -> Option<ApiPodStatus> {
        StatusManager::get_pod_status(self, pod_uid)
    }
}

/// The prober manager as the lifecycle sees it.
pub struct Probes(pub ProberManager);

impl ContainerProbeStatus for Probes {
    fn update_pod_status(&self, pod_uid: &str, status: &mut ApiPodStatus) {
        self.0.update_pod_status(pod_uid, status);
    }
}

impl ProbeManager for Probes {
    fn add_pod(&self, pod: &Pod) {
        self.0.add_pod(pod);
    }
    fn remove_pod(&self, pod: &Pod) {
        self.0.remove_pod(pod);
    }
    fn stop_liveness_and_startup(&self, pod: &Pod) {
        self.0.stop_liveness_and_startup(pod);
    }
    fn cleanup_pods(&self, desired: &HashSet<String>) {
        self.0.cleanup_pods(desired);
    }
}

/// The volume manager as pod sync and housekeeping see it.
pub struct Volumes(pub Arc<VolumeManager>);

#[async_trait]
impl PodVolumes for Volumes {
    async fn wait_for_attach_and_mount(&self, pod: &Pod) -> Result<(), WaitError> {
        self.0.wait_for_attach_and_mount(pod).await
    }
    async fn wait_for_unmount(&self, pod: &Pod) -> Result<(), WaitError> {
        self.0.wait_for_unmount(pod).await
    }
    async fn pod_volumes_exist(&self, uid: &str) -> bool {
        self.0.pod_volumes_exist(uid).await
    }
    fn get_mounted_volumes_for_pod(&self, uid: &str) -> VolumeMap {
        self.0.get_mounted_volumes_for_pod(uid)
    }
    fn get_extra_supplemental_groups_for_pod(&self, pod: &Pod) -> Vec<i64> {
        self.0.get_extra_supplemental_groups_for_pod(pod)
    }
    async fn cleanup_orphaned_pod_dirs(
        &self,
        desired: &HashSet<String>,
        running: &HashSet<String>,
    ) -> Result<(), OrphanCleanupError> {
        let active: HashSet<String> = desired.union(running).cloned().collect();
        self.0.cleanup_orphaned_pod_dirs(active).await
    }
}

/// Pod events through the event recorder seam the runtime manager and the
/// prober share.
pub struct RecorderEvents(pub Arc<dyn EventRecorder>);

impl PodEventRecorder for RecorderEvents {
    fn pod_event(&self, pod: &Pod, event_type: EventType, reason: &str, message: &str) {
        self.0.event(&pod_ref(pod), event_type, reason, message);
    }
}

/// What the servers show under /pods and /runningpods/.
pub struct KubeletPods {
    pub pod_manager: Arc<PodManager>,
    pub status_manager: Arc<StatusManager>,
    pub runtime: Arc<dyn Runtime>,
}

#[async_trait]
impl PodsProvider for KubeletPods {
    fn get_pods(&self) -> Vec<Pod> {
        let mut pods: Vec<Pod> = self
            .pod_manager
            .get_pods()
            .iter()
            .map(|p| {
                let mut pod = (**p).clone();
                // Without an API server nobody else reports a static pod's
                // status: the kubelet's own goes in.
                if is_static_pod(&pod) {
                    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                    if let Some(status) = self.status_manager.get_pod_status(uid) {
                        crate::vlog!(2, pod = %format_pod(&pod), phase = ?status.phase, "Pod status updated");
                        pod.status = Some(status);
                    }
                }
                pod
            })
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    async fn get_running_pods(&self) -> Result<Vec<Pod>, String> {
        let pods = self
            .runtime
            .get_pods(false)
            .await
            .map_err(|e| e.to_string())?;
        Ok(pods.iter().map(running_pod_to_api_pod).collect())
    }
}

/// The node's allocatable resources, refreshed once the container manager
/// knows its capacity (cpu, memory, huge pages, ephemeral storage, pods).
#[derive(Debug, Default)]
pub struct NodeResources {
    allocatable: RwLock<ResourceList>,
}

impl NodeResources {
    pub fn set(&self, allocatable: ResourceList) {
        *self.allocatable.write().unwrap_or_else(|p| p.into_inner()) = allocatable;
    }

    pub fn get(&self) -> ResourceList {
        self.allocatable
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// As API quantities (canonical text).
    pub fn api(&self) -> BTreeMap<String, ApiQuantity> {
        self.get()
            .iter()
            .map(|(k, q)| (k.clone(), ApiQuantity(q.to_canonical_string())))
            .collect()
    }
}

impl crate::volume::NodeAllocatable for NodeResources {
    fn node_allocatable(&self) -> Result<BTreeMap<String, ApiQuantity>, String> {
        Ok(self.api())
    }
}

/// Capacity minus what is reserved, never below zero; `pods` as given.
pub fn allocatable(
    capacity: &ResourceList,
    reserved: &ResourceList,
    max_pods: i64,
) -> ResourceList {
    let mut out = ResourceList::new();
    for (name, q) in capacity {
        let mut value = *q;
        if let Some(r) = reserved.get(name) {
            value = value.sub(r);
            if value.cmp_value(&Quantity::from_decimal(0)).is_lt() {
                value = Quantity::from_decimal(0);
            }
        }
        out.insert(name.clone(), value);
    }
    out.insert("pods".into(), Quantity::from_decimal(max_pods));
    out
}
