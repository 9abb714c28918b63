//! The sync loop's handlers (Go's SyncHandler: HandlePodAdditions,
//! HandlePodUpdates, HandlePodRemoves, HandlePodReconcile, HandlePodSyncs)
//! and the helpers they share: dispatching work to the pod workers,
//! admission and rejection, and the set of active pods.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

use super::SyncLoop;
use crate::kubelet::container::format_pod;
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_workers::{EventType, PodWorkers, UpdatePodOptions};
use crate::kubelet::prober::results::ResultUpdate;
use crate::kubelet::status::generate::{FAILED, is_terminal_phase};
use crate::kubelet::status::{StatusManager, conditions};
use crate::kubelet::types::{SyncPodType, is_mirror_pod};

/// Whether the pod reached a terminal phase in its source or in the
/// kubelet's own status (rejected pods included) (isAdmittedPodTerminal).
pub fn is_admitted_pod_terminal(pod: &Pod, status_manager: &StatusManager) -> bool {
    if is_terminal_phase(pod.status.as_ref().and_then(|s| s.phase.as_deref())) {
        return true;
    }
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    status_manager
        .get_pod_status(uid)
        .is_some_and(|s| is_terminal_phase(s.phase.as_deref()))
}

/// The pods that use node resources: not terminated by their worker, and
/// not terminal unless still terminating (filterOutInactivePods).
pub fn filter_out_inactive_pods(
    pods: Vec<Arc<Pod>>,
    workers: &PodWorkers,
    status_manager: &StatusManager,
) -> Vec<Arc<Pod>> {
    pods.into_iter()
        .filter(|p| {
            let uid = p.metadata.uid.as_deref().unwrap_or_default();
            if workers.is_pod_known_terminated(uid) {
                return false;
            }
            !is_admitted_pod_terminal(p, status_manager)
                || workers.is_pod_termination_requested(uid)
        })
        .collect()
}

/// The active pods of the pod manager (GetActivePods).
pub fn active_pods(
    pod_manager: &PodManager,
    workers: &PodWorkers,
    status_manager: &StatusManager,
) -> Vec<Arc<Pod>> {
    filter_out_inactive_pods(pod_manager.get_pods(), workers, status_manager)
}

/// Whether a readiness-gated pod's Ready condition disagrees with what the
/// kubelet would compute (NeedToReconcilePodReadiness).
fn need_to_reconcile_pod_readiness(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    if spec.readiness_gates.as_ref().is_none_or(Vec::is_empty) {
        return false;
    }
    let status = pod.status.clone().unwrap_or_default();
    let conds = status.conditions.clone().unwrap_or_default();
    let want = conditions::pod_ready(
        spec,
        &conds,
        status.container_statuses.as_deref(),
        status.phase.as_deref().unwrap_or_default(),
    );
    conds
        .iter()
        .find(|c| c.type_ == conditions::POD_READY)
        .is_some_and(|c| c.status != want.status || c.message != want.message)
}

fn creation_key(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// A deletion seen before every source reported its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("skipping delete because sources aren't ready yet")]
pub struct SourcesNotReady;

impl SyncLoop {
    /// Hands the pod to its worker (dispatchWork).
    pub(super) fn dispatch_work(
        &self,
        pod: Arc<Pod>,
        sync_type: SyncPodType,
        mirror_pod: Option<Arc<Pod>>,
        start: Instant,
    ) {
        let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
        let mut options = UpdatePodOptions::new(sync_type, pod, mirror_pod);
        options.start_time = Some(start);
        self.pod_workers.update_pod(options);
        if sync_type == SyncPodType::Create {
            crate::metrics::kubelet::containers_per_pod().observe(&[], containers as f64);
        }
    }

    /// A mirror pod change is an update of its static pod.
    fn handle_mirror_pod(&self, mirror: &Pod, start: Instant) {
        if let Some(pod) = self.pod_manager.get_pod_by_mirror_pod(mirror) {
            self.dispatch_work(
                pod,
                SyncPodType::Update,
                Some(Arc::new(mirror.clone())),
                start,
            );
        }
    }

    /// Fails a pod admission refused (rejectPod).
    fn reject_pod(&self, pod: &Pod, reason: &str, message: &str) {
        self.recorder
            .pod_event(pod, EventType::Warning, reason, message);
        self.status_manager.set_pod_status(
            pod,
            crate::kubelet::lifecycle::rejected_pod_status(reason, message),
        );
    }

    /// New pods: recorded as desired, admitted against the active pods, and
    /// dispatched (HandlePodAdditions).
    pub(super) async fn handle_pod_additions(&self, mut pods: Vec<Arc<Pod>>) {
        let start = self.clock.monotonic();
        pods.sort_by_key(|p| creation_key(p));
        for pod in pods {
            let existing = self.pod_manager.get_pods();
            self.pod_manager.add_pod(pod.clone());
            if is_mirror_pod(&pod) {
                self.handle_mirror_pod(&pod, start);
                continue;
            }
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if !self.pod_workers.is_pod_termination_requested(&uid) {
                let active =
                    filter_out_inactive_pods(existing, &self.pod_workers, &self.status_manager);
                let result = self.admission.can_admit_pod(&active, &pod).await;
                if !result.admit {
                    tracing::warn!(pod = %format_pod(&pod), reason = %result.reason, message = %result.message, "Pod admission denied");
                    self.reject_pod(&pod, &result.reason, &result.message);
                    continue;
                }
            }
            let mirror = self.pod_manager.get_mirror_pod_by_pod(&pod);
            self.dispatch_work(pod, SyncPodType::Create, mirror, start);
        }
    }

    /// Changed pods (HandlePodUpdates; DELETE too).
    pub(super) fn handle_pod_updates(&self, pods: &[Arc<Pod>]) {
        let start = self.clock.monotonic();
        for pod in pods {
            self.pod_manager.update_pod(pod.clone());
            if is_mirror_pod(pod) {
                self.handle_mirror_pod(pod, start);
                continue;
            }
            let mirror = self.pod_manager.get_mirror_pod_by_pod(pod);
            self.dispatch_work(pod.clone(), SyncPodType::Update, mirror, start);
        }
    }

    /// Pods gone from their source: forgotten and killed (HandlePodRemoves).
    pub(super) fn handle_pod_removes(&self, pods: &[Arc<Pod>]) {
        let start = self.clock.monotonic();
        for pod in pods {
            self.pod_manager.delete_pod(pod);
            if is_mirror_pod(pod) {
                self.handle_mirror_pod(pod, start);
                continue;
            }
            if let Err(e) = self.delete_pod(pod) {
                crate::vlog!(2, pod = %format_pod(pod), err = %e, "Failed to delete pod");
            }
        }
    }

    fn delete_pod(&self, pod: &Arc<Pod>) -> Result<(), SourcesNotReady> {
        if !self.sources_ready.all_ready() {
            return Err(SourcesNotReady);
        }
        crate::vlog!(3, pod = %format_pod(pod), "Pod has been deleted and must be killed");
        self.pod_workers
            .update_pod(UpdatePodOptions::new(SyncPodType::Kill, pod.clone(), None));
        Ok(())
    }

    /// Pods whose status alone changed in their source (HandlePodReconcile).
    pub(super) fn handle_pod_reconcile(&self, pods: &[Arc<Pod>]) {
        let start = self.clock.monotonic();
        for pod in pods {
            self.pod_manager.update_pod(pod.clone());
            if need_to_reconcile_pod_readiness(pod) {
                let mirror = self.pod_manager.get_mirror_pod_by_pod(pod);
                self.dispatch_work(pod.clone(), SyncPodType::Sync, mirror, start);
            }
            let status = pod.status.as_ref();
            let evicted = status.and_then(|s| s.phase.as_deref()) == Some(FAILED)
                && status.and_then(|s| s.reason.as_deref()) == Some("Evicted");
            if evicted {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                let cached = self.pod_cache.get(uid);
                if cached.error.is_none() {
                    self.container_deletor
                        .delete_containers_in_pod("", &cached.status, true);
                }
            }
        }
    }

    /// Syncs the pods (HandlePodSyncs).
    pub(super) fn handle_pod_syncs(&self, pods: &[Arc<Pod>]) {
        let start = self.clock.monotonic();
        for pod in pods {
            let mirror = self.pod_manager.get_mirror_pod_by_pod(pod);
            self.dispatch_work(pod.clone(), SyncPodType::Sync, mirror, start);
        }
    }

    pub(super) fn handle_probe_sync(&self, update: &ResultUpdate, probe: &str, status: &str) {
        let Some(pod) = self.pod_manager.get_pod_by_uid(&update.pod_uid) else {
            crate::vlog!(4, probe, status, update = ?update, "SyncLoop (probe): ignore irrelevant update");
            return;
        };
        crate::vlog!(1, probe, status, pod = %format_pod(&pod), "SyncLoop (probe)");
        self.handle_pod_syncs(&[pod]);
    }

    /// Pods due in the work queue or past their active deadline.
    pub(super) fn get_pods_to_sync(&self) -> Vec<Arc<Pod>> {
        let due: HashSet<String> = self.work_queue.get_work().into_iter().collect();
        self.pod_manager
            .get_pods()
            .into_iter()
            .filter(|p| {
                let uid = p.metadata.uid.as_deref().unwrap_or_default();
                due.contains(uid) || self.deadline.should_sync(p)
            })
            .collect()
    }
}
