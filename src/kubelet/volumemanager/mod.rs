//! The volume manager (pkg/kubelet/volumemanager, v1.25, with nothing to
//! attach): the populator turns the pod manager's pods into the desired
//! state, the reconciler makes the actual state follow it by running
//! mount and unmount operations, and the kubelet asks it to wait for a
//! pod's mounts, for the mounted volumes it hands to the runtime, and
//! whether a pod's volumes are gone. Build with [`VolumeManager::new`]
//! (no tasks), start with [`VolumeManager::start`].

pub mod actual_state;
pub mod desired_state;
pub mod error;
pub mod events;
pub mod operations;
pub mod orphans;
pub mod populator;
pub mod reconciler;
pub mod reconstruct;
pub mod seams;
pub mod shared;
pub mod wait;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::kubelet::kuberuntime::run_options::{MountedVolume as RuntimeVolume, VolumeMap};
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::volume::plugin::PluginManager;

pub use actual_state::{ActualStateOfWorld, MountState, MountedVolume};
pub use desired_state::{DesiredStateOfWorld, VolumeToMount};
pub use events::{EventType, FAILED_MOUNT, PodRef, VolumeEvent};
pub use orphans::OrphanCleanupError;
pub use seams::{PodLister, PodStateProvider, SourcesReadyCheck};
pub use wait::{
    POD_ATTACH_AND_MOUNT_RETRY_INTERVAL, POD_ATTACH_AND_MOUNT_TIMEOUT, WaitCause, WaitError,
};

use events::EventSink;
use shared::Shared;

/// What the volume manager is built from.
pub struct VolumeManagerDeps {
    pub plugins: Arc<PluginManager>,
    pub pods: Arc<dyn PodLister>,
    pub pod_state: Arc<dyn PodStateProvider>,
    pub sources_ready: Arc<dyn SourcesReadyCheck>,
    pub clock: Arc<dyn Clock>,
}

/// The handle the kubelet holds.
pub struct VolumeManager {
    shared: Arc<Shared>,
    events: Mutex<Option<mpsc::Receiver<VolumeEvent>>>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn to_runtime(volumes: Vec<MountedVolume>) -> VolumeMap {
    volumes
        .into_iter()
        .map(|v| {
            (
                v.outer_volume_spec_name.clone(),
                RuntimeVolume {
                    host_path: v.path.to_string_lossy().into_owned(),
                    read_only: v.attributes.read_only,
                    selinux_relabel: v.attributes.managed && v.attributes.selinux_relabel,
                },
            )
        })
        .collect::<HashMap<_, _>>()
}

impl VolumeManager {
    /// Builds the manager; nothing runs until `start`.
    pub fn new(deps: VolumeManagerDeps) -> Self {
        let (sink, rx) = EventSink::new();
        let shared = Arc::new(Shared {
            dsw: DesiredStateOfWorld::new(deps.plugins.clone()),
            asw: ActualStateOfWorld::new(deps.plugins.clone()),
            plugins: deps.plugins,
            ops: Default::default(),
            events: sink,
            pods: deps.pods,
            pod_state: deps.pod_state,
            sources_ready: deps.sources_ready,
            clock: deps.clock,
            processed_pods: Mutex::new(HashMap::new()),
            has_added_pods: AtomicBool::new(false),
            states_synced: AtomicBool::new(false),
        });
        VolumeManager {
            shared,
            events: Mutex::new(Some(rx)),
        }
    }

    /// Spawns the populator and the reconciler (and their operations).
    pub fn start(&self, tasks: &TaskSet) {
        tracing::info!("Starting Kubelet Volume Manager");
        populator::start(&self.shared, tasks);
        reconciler::start(&self.shared, tasks);
    }

    /// The operation outcomes (FailedMount, ...); the first caller gets
    /// the receiver.
    pub fn take_events(&self) -> Option<mpsc::Receiver<VolumeEvent>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn plugins(&self) -> &Arc<PluginManager> {
        &self.shared.plugins
    }

    /// Asks for the pod's volumes to be processed (and remounted) again.
    pub fn reprocess_pod(&self, pod_uid: &str) {
        populator::reprocess_pod(&self.shared, pod_uid);
    }

    fn unmounted(&self, pod_uid: &str, expected: &[String]) -> Vec<String> {
        let mounted: HashSet<String> = self
            .shared
            .asw
            .get_mounted_volumes_for_pod(pod_uid)
            .into_iter()
            .map(|v| v.outer_volume_spec_name)
            .collect();
        let mut out: Vec<String> = expected
            .iter()
            .filter(|v| !mounted.contains(*v))
            .cloned()
            .collect();
        out.sort();
        out
    }

    /// Waits until every volume the pod's containers use is mounted
    /// (WaitForAttachAndMount): remountable volumes are set up again
    /// first, so their contents follow the API objects.
    pub async fn wait_for_attach_and_mount(&self, pod: &Pod) -> Result<(), WaitError> {
        let expected = wait::expected_volumes(pod);
        if expected.is_empty() {
            return Ok(());
        }
        let pod_uid = uid(pod);
        crate::vlog!(3, pod = %PodRef::from_pod(pod), "Waiting for volumes to attach and mount for pod");
        self.reprocess_pod(&pod_uid);
        let result = self
            .poll(|| {
                let errs = self.shared.dsw.pop_pod_errors(&pod_uid);
                if !errs.is_empty() {
                    return Some(Err(WaitCause::PodErrors(errs)));
                }
                self.unmounted(&pod_uid, &expected)
                    .is_empty()
                    .then_some(Ok(()))
            })
            .await;
        if let Err(cause) = result {
            let unmounted = self.unmounted(&pod_uid, &expected);
            if unmounted.is_empty() {
                return Ok(());
            }
            // As in Go, volumes are looked up by their pod-spec name among
            // attached (unique) names, so every expected volume is listed.
            let unattached = expected
                .iter()
                .filter(|v| !self.shared.asw.volume_exists(v))
                .cloned()
                .collect();
            return Err(WaitError::Mount {
                unmounted,
                unattached,
                cause,
            });
        }
        crate::vlog!(3, pod = %PodRef::from_pod(pod), "All volumes are attached and mounted for pod");
        Ok(())
    }

    /// Waits until none of the pod's volumes is mounted (WaitForUnmount).
    pub async fn wait_for_unmount(&self, pod: &Pod) -> Result<(), WaitError> {
        let pod_uid = uid(pod);
        crate::vlog!(3, pod = %PodRef::from_pod(pod), "Waiting for volumes to unmount for pod");
        self.reprocess_pod(&pod_uid);
        let result = self
            .poll(|| {
                let errs = self.shared.dsw.pop_pod_errors(&pod_uid);
                if !errs.is_empty() {
                    return Some(Err(WaitCause::PodErrors(errs)));
                }
                self.shared
                    .asw
                    .get_mounted_volumes_for_pod(&pod_uid)
                    .is_empty()
                    .then_some(Ok(()))
            })
            .await;
        if let Err(cause) = result {
            let mut mounted: Vec<String> = self
                .shared
                .asw
                .get_mounted_volumes_for_pod(&pod_uid)
                .into_iter()
                .map(|v| v.outer_volume_spec_name)
                .collect();
            mounted.sort();
            if mounted.is_empty() {
                return Ok(());
            }
            return Err(WaitError::Unmount { mounted, cause });
        }
        crate::vlog!(3, pod = %PodRef::from_pod(pod), "All volumes are unmounted for pod");
        Ok(())
    }

    /// Checks `cond` now and every 300 ms until it gives an answer or
    /// the timeout passes.
    async fn poll(
        &self,
        cond: impl Fn() -> Option<Result<(), WaitCause>>,
    ) -> Result<(), WaitCause> {
        let deadline = tokio::time::Instant::now() + POD_ATTACH_AND_MOUNT_TIMEOUT;
        loop {
            if let Some(r) = cond() {
                return r;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(WaitCause::TimedOut);
            }
            tokio::time::sleep(POD_ATTACH_AND_MOUNT_RETRY_INTERVAL.min(deadline - now)).await;
        }
    }

    /// The pod's mounted volumes by pod-spec name, as the runtime needs
    /// them (GetMountedVolumesForPod).
    pub fn get_mounted_volumes_for_pod(&self, pod_uid: &str) -> VolumeMap {
        to_runtime(self.shared.asw.get_mounted_volumes_for_pod(pod_uid))
    }

    /// Mounted or possibly mounted (a failed SetUp/TearDown) volumes.
    pub fn get_possibly_mounted_volumes_for_pod(&self, pod_uid: &str) -> VolumeMap {
        to_runtime(
            self.shared
                .asw
                .get_possibly_mounted_volumes_for_pod(pod_uid),
        )
    }

    /// Groups the pod's containers need for its volumes besides the ones
    /// it asks for (the GID annotations of persistent volumes).
    pub fn get_extra_supplemental_groups_for_pod(&self, pod: &Pod) -> Vec<i64> {
        let groups: BTreeSet<String> = self
            .shared
            .asw
            .get_mounted_volumes_for_pod(&uid(pod))
            .into_iter()
            .map(|v| v.volume_gid_value)
            .filter(|g| !g.is_empty())
            .collect();
        let existing: Vec<i64> = pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref())
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default();
        groups
            .iter()
            .filter_map(|g| g.parse::<i64>().ok())
            .filter(|g| !existing.contains(g))
            .collect()
    }

    /// Attachable volumes in use, sorted (for the node's volumesInUse).
    pub fn get_volumes_in_use(&self) -> Vec<String> {
        let mut set: BTreeSet<String> = self
            .shared
            .dsw
            .get_volumes_to_mount()
            .into_iter()
            .filter(|v| v.plugin_is_attachable)
            .map(|v| v.volume_name)
            .collect();
        set.extend(
            self.shared
                .asw
                .get_attached_volumes()
                .into_iter()
                .filter(|(_, _, attachable)| *attachable)
                .map(|(n, _, _)| n),
        );
        set.into_iter().collect()
    }

    /// Records which volumes the node status reported in use.
    pub fn mark_volumes_as_reported_in_use(&self, names: &[String]) {
        self.shared.dsw.mark_volumes_reported_in_use(names);
    }

    /// Whether any of the pod's volumes may still be mounted, per the
    /// actual state or the disk.
    pub async fn pod_volumes_exist(&self, pod_uid: &str) -> bool {
        let possibly = !self
            .shared
            .asw
            .get_possibly_mounted_volumes_for_pod(pod_uid)
            .is_empty();
        let host = self.shared.plugins.host().clone();
        let uid = pod_uid.to_string();
        tokio::task::spawn_blocking(move || {
            orphans::pod_volumes_exist(host.dirs(), host.mounter().as_ref(), &uid, possibly)
        })
        .await
        .unwrap_or(true)
    }

    /// Removes the directories of pods outside `active` that have no
    /// volume left mounted (housekeeping).
    pub async fn cleanup_orphaned_pod_dirs(
        &self,
        active: HashSet<String>,
    ) -> Result<(), OrphanCleanupError> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let host = shared.plugins.host().clone();
            let possibly = |uid: &str| {
                !shared
                    .asw
                    .get_possibly_mounted_volumes_for_pod(uid)
                    .is_empty()
            };
            orphans::cleanup_orphaned_pod_dirs(
                host.dirs(),
                host.mounter().as_ref(),
                &active,
                &possibly,
            )
        })
        .await
        .map_err(|e| OrphanCleanupError(vec![e.to_string()]))?
    }

    /// Whether reconstruction from disk has run (after every pod source
    /// was seen).
    pub fn states_synced(&self) -> bool {
        self.shared.states_synced()
    }
}
