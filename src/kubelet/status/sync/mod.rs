//! The status manager's API half (status_manager.go v1.25: Start, syncPod,
//! syncBatch, needsUpdate, needsReconcile, canBeDeleted): it writes the pod
//! statuses the kubelet computes to the API server.
//!
//! - Every new status version is synced at once, and every 10 s a batch
//!   pass syncs whatever is behind ([`SYNC_PERIOD`]). Versions that queue
//!   up while a write waits are coalesced: before each pod's write the
//!   queue is read again, so only each pod's newest version is sent, once.
//! - A sync merges the status ([`merge::merge_pod_status`]) into the API
//!   server's copy of the pod and PATCHes the status subresource with a
//!   strategic merge patch carrying the UID precondition
//!   ([`patch::prepare_pod_status_patch`]) — only when it changes
//!   something. The copy is the one at hand ([`base`]: the watch's, or the
//!   last PATCH's answer); the pod is read (GET) only when there is none.
//! - Versions are kept per (mirror) pod UID: a version older than the one
//!   the API server has is never sent.
//! - A static pod's status goes to its mirror pod; while it has none, it is
//!   skipped.
//! - A pod being deleted whose resources are all reclaimed is deleted for
//!   good (grace period 0, UID precondition) after its final status.
//! - When the API server's status drifts from the kubelet's (someone else
//!   wrote it), the next batch forces a resync.
//!
//! The local half (the statuses, their versions) belongs to the status
//! manager; this half receives each change as a [`PodStatusUpdate`] and
//! keeps the latest per pod for its batches.

pub mod base;
pub mod go_json;
pub mod merge;
pub mod patch;
pub mod reclaim;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::kubelet::client::ratelimit::TokenBucket;
use crate::kubelet::pod::PodManager;
use crate::kubelet::types::{ResolvedPodUid, is_mirror_pod, is_static_pod};
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

pub use merge::{is_phase_terminal, merge_pod_status, pod_condition_by_kubelet};
pub use patch::{StatusPatch, prepare_pod_status_patch};
pub use reclaim::{AsyncPodUidCheck, PodDeletionSafetyProvider, PodUidCheck, ReclaimChecks};

/// How often every status is checked against the API server.
pub const SYNC_PERIOD: Duration = Duration::from_secs(10);

/// One version of a pod's status, as the local status manager made it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodStatusUpdate {
    pub pod_uid: String,
    /// Grows with every change of this pod's status.
    pub version: u64,
    pub pod_name: String,
    pub pod_namespace: String,
    pub status: PodStatus,
}

impl From<crate::kubelet::status::StatusUpdate> for PodStatusUpdate {
    fn from(u: crate::kubelet::status::StatusUpdate) -> Self {
        PodStatusUpdate {
            pod_uid: u.pod_uid,
            version: u.status.version,
            pod_name: u.status.pod_name,
            pod_namespace: u.status.pod_namespace,
            status: u.status.status,
        }
    }
}

/// Told when a pod's status is of no further use (the pod was deleted from
/// the API server, or recreated under another UID), as Go's deletePodStatus.
pub type ForgetPodStatus = Arc<dyn Fn(&str) + Send + Sync>;

/// Writes pod statuses to the API server.
pub struct StatusSyncer {
    client: kube::Client,
    pod_manager: Arc<PodManager>,
    safety: Arc<dyn PodDeletionSafetyProvider>,
    clock: Arc<dyn Clock>,
    forget: Option<ForgetPodStatus>,
    /// The latest status of each pod (by the kubelet's UID).
    statuses: HashMap<String, PodStatusUpdate>,
    /// The latest version the API server has, by the UID of the API pod
    /// (the mirror pod's for static pods).
    api_versions: HashMap<String, u64>,
    /// What the last PATCH of each pod answered.
    written: base::WrittenPods,
    /// The client's token bucket: a write waits for its token before it
    /// is built, so that it carries the newest status made meanwhile.
    limiter: Option<Arc<TokenBucket>>,
}

fn pod_ref(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl StatusSyncer {
    pub fn new(
        client: kube::Client,
        pod_manager: Arc<PodManager>,
        safety: Arc<dyn PodDeletionSafetyProvider>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        StatusSyncer {
            client,
            pod_manager,
            safety,
            clock,
            forget: None,
            statuses: HashMap::new(),
            api_versions: HashMap::new(),
            written: base::WrittenPods::default(),
            limiter: None,
        }
    }

    /// Waits on the client's `limiter` before building each write.
    pub fn with_limiter(mut self, limiter: Option<Arc<TokenBucket>>) -> Self {
        self.limiter = limiter;
        self
    }

    /// Until the client's limiter has a token for the next write.
    async fn wait_for_budget(&self) {
        let Some(bucket) = &self.limiter else { return };
        loop {
            let wait = bucket.ready_in(tokio::time::Instant::now());
            if wait.is_zero() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Calls `forget` when a pod's status is no longer needed.
    pub fn with_forget(mut self, forget: ForgetPodStatus) -> Self {
        self.forget = Some(forget);
        self
    }

    /// Start phase: syncs every update of `updates` at once and all
    /// statuses every [`SYNC_PERIOD`], until `tasks` shuts down.
    pub fn start<S>(self, updates: S, tasks: &TaskSet)
    where
        S: Stream<Item = PodStatusUpdate> + Send + Unpin + 'static,
    {
        let stop = tasks.token();
        tasks.spawn("status-sync", self.run(updates, stop));
    }

    /// Start phase over the kubelet's status manager: every status change
    /// it makes from now on is synced.
    pub fn start_with(self, manager: &crate::kubelet::status::StatusManager, tasks: &TaskSet) {
        let updates = tokio_stream::wrappers::UnboundedReceiverStream::new(manager.subscribe())
            .map(PodStatusUpdate::from);
        self.start(updates, tasks);
    }

    /// The sync loop (Go's Start): updates and the batch tick share one
    /// task so syncs never race each other.
    pub async fn run<S>(mut self, mut updates: S, stop: CancellationToken)
    where
        S: Stream<Item = PodStatusUpdate> + Unpin,
    {
        tracing::info!("Starting to sync pod status with apiserver");
        let mut tick = tokio::time::interval(SYNC_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                update = updates.next() => {
                    let Some(update) = update else { return };
                    let mut due = std::collections::VecDeque::new();
                    self.take_in(update, &mut due);
                    let mut ended = false;
                    // Pods in the order their first unsent version came.
                    // Before each write, everything queued meanwhile (made
                    // while the last write waited for the API budget) is
                    // taken in: each pod's newest version is written, the
                    // ones it replaced never.
                    loop {
                        ended = ended || self.drain(&mut updates, &mut due);
                        if due.is_empty() {
                            break;
                        }
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = self.wait_for_budget() => {}
                        }
                        ended = ended || self.drain(&mut updates, &mut due);
                        let Some(uid) = due.pop_front() else { break };
                        if let Some(latest) = self.statuses.get(&uid).cloned() {
                            self.sync_pod(&uid, &latest).await;
                        }
                    }
                    if ended {
                        return;
                    }
                }
                _ = tick.tick() => {
                    crate::vlog!(5, "Status Manager: syncing batch");
                    self.sync_batch().await;
                }
            }
        }
    }

    /// Records `update`; its pod is due unless already waiting.
    fn take_in(&mut self, update: PodStatusUpdate, due: &mut std::collections::VecDeque<String>) {
        crate::vlog!(5, pod_uid = %update.pod_uid, status_version = update.version,
            "Status Manager: syncing pod with status from podStatusChannel");
        let uid = update.pod_uid.clone();
        if self.record(update) && !due.contains(&uid) {
            due.push_back(uid);
        }
    }

    /// Takes in every update already queued; true when the stream ended.
    fn drain<S>(&mut self, updates: &mut S, due: &mut std::collections::VecDeque<String>) -> bool
    where
        S: Stream<Item = PodStatusUpdate> + Unpin,
    {
        loop {
            match updates.next().now_or_never() {
                Some(Some(update)) => self.take_in(update, due),
                Some(None) => return true,
                None => return false,
            }
        }
    }

    /// Keeps the latest version of each pod's status; false for a version
    /// older than one already seen.
    pub fn record(&mut self, update: PodStatusUpdate) -> bool {
        match self.statuses.get(&update.pod_uid) {
            Some(known) if known.version > update.version => false,
            _ => {
                self.statuses.insert(update.pod_uid.clone(), update);
                true
            }
        }
    }

    /// The version the API server has for `api_uid`, if synced.
    pub fn api_version(&self, api_uid: &str) -> Option<u64> {
        self.api_versions.get(api_uid).copied()
    }

    fn delete_pod_status(&mut self, uid: &str) {
        self.statuses.remove(uid);
        self.written.forget(uid);
        if let Some(forget) = &self.forget {
            forget(uid);
        }
    }

    async fn can_be_deleted(&self, pod: &Pod, status: &PodStatus) -> bool {
        if pod.metadata.deletion_timestamp.is_none() || is_mirror_pod(pod) {
            return false;
        }
        self.safety.pod_resources_are_reclaimed(pod, status).await
    }

    /// Whether the API server is behind for `uid` (a kubelet or mirror UID),
    /// or the pod is ready to be deleted.
    async fn needs_update(&self, uid: &str, status: &PodStatusUpdate) -> bool {
        match self.api_versions.get(uid) {
            Some(latest) if *latest >= status.version => {}
            _ => return true,
        }
        let Some(pod) = self.pod_manager.get_pod_by_uid(uid) else {
            return false;
        };
        self.can_be_deleted(&pod, &status.status).await
    }

    /// Whether the API server's copy (as the pod manager last saw it)
    /// differs from the kubelet's status in what the kubelet owns.
    fn needs_reconcile(&self, uid: &str, status: &PodStatus) -> bool {
        let Some(mut pod) = self.pod_manager.get_pod_by_uid(uid) else {
            crate::vlog!(
                4,
                pod_uid = uid,
                "Pod has been deleted, no need to reconcile"
            );
            return false;
        };
        if is_static_pod(&pod) {
            match self.pod_manager.get_mirror_pod_by_pod(&pod) {
                Some(mirror) => pod = mirror,
                None => {
                    crate::vlog!(
                        4,
                        pod_uid = uid,
                        "Static pod has no corresponding mirror pod, no need to reconcile"
                    );
                    return false;
                }
            }
        }
        let api = pod.status.clone().unwrap_or_default();
        if is_pod_status_by_kubelet_equal(&pod, &api, status) {
            return false;
        }
        crate::vlog!(3, pod = %pod_ref(
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")),
            "Pod status is inconsistent with cached status for pod, a reconciliation should be triggered");
        true
    }

    /// The batch pass (Go's syncBatch).
    pub async fn sync_batch(&mut self) {
        let (pod_to_mirror, mirror_to_pod) = self.pod_manager.get_uid_translations();
        // Statuses of pods the kubelet no longer has are of no use (the
        // local manager drops them in housekeeping likewise).
        let pod_manager = self.pod_manager.clone();
        self.statuses
            .retain(|uid, _| pod_manager.get_pod_by_uid(uid).is_some());
        let statuses = &self.statuses;
        self.written.retain(|uid| statuses.contains_key(uid));
        self.api_versions.retain(|uid, _| {
            statuses.contains_key(uid)
                || mirror_to_pod.contains_key(&crate::kubelet::types::MirrorPodUid(uid.clone()))
        });
        let mut due = Vec::new();
        let snapshot: Vec<PodStatusUpdate> = self.statuses.values().cloned().collect();
        for status in snapshot {
            let uid = status.pod_uid.clone();
            let mut synced_uid = uid.clone();
            if let Some(mirror) = pod_to_mirror.get(&ResolvedPodUid(uid.clone())) {
                if mirror.0.is_empty() {
                    crate::vlog!(5, pod_uid = %uid, pod = %pod_ref(&status.pod_namespace, &status.pod_name),
                        "Static pod does not have a corresponding mirror pod; skipping");
                    continue;
                }
                synced_uid = mirror.0.clone();
            }
            if self.needs_update(&synced_uid, &status).await {
                due.push(status);
            } else if self.needs_reconcile(&uid, &status.status) {
                self.api_versions.remove(&synced_uid);
                due.push(status);
            }
        }
        for status in due {
            crate::vlog!(5, pod_uid = %status.pod_uid, "Status Manager: syncPod in syncbatch");
            let uid = status.pod_uid.clone();
            self.sync_pod(&uid, &status).await;
        }
    }

    /// Syncs one pod's status with the API server (Go's syncPod).
    pub async fn sync_pod(&mut self, uid: &str, status: &PodStatusUpdate) {
        if !self.needs_update(uid, status).await {
            crate::vlog!(1, pod_uid = uid, "Status for pod is up-to-date; skipping");
            return;
        }
        let ns = status.pod_namespace.as_str();
        let name = status.pod_name.as_str();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let cached = self.written.api_copy(&self.pod_manager, uid);
        let mut pod = match cached {
            Some(pod) => pod,
            None => match api.get(name).await {
                Ok(pod) => {
                    self.written.store(uid, pod.clone());
                    pod
                }
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    crate::vlog!(3, pod_uid = uid, pod = %pod_ref(ns, name), "Pod does not exist on the server");
                    return;
                }
                Err(e) => {
                    tracing::info!(pod_uid = uid, pod = %pod_ref(ns, name), err = %e, "Failed to get status for pod");
                    return;
                }
            },
        };
        let api_uid = pod.metadata.uid.clone().unwrap_or_default();
        let translated = self.pod_manager.translate_pod_uid(&api_uid);
        if !translated.0.is_empty() && translated.0 != uid {
            crate::vlog!(2, pod = %pod_ref(ns, name), old_pod_uid = uid, pod_uid = %translated.0,
                "Pod was deleted and then recreated, skipping status update");
            self.delete_pod_status(uid);
            return;
        }
        let old = pod.status.clone().unwrap_or_default();
        let now = Time(
            jiff::Timestamp::try_from(self.clock.now()).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        );
        let merged = merge_pod_status(
            &old,
            &status.status,
            self.safety.pod_could_have_running_containers(&pod),
            &now,
        );
        let patch = match prepare_pod_status_patch(&api_uid, &old, &merged) {
            Ok(p) => p,
            Err(e) => {
                tracing::info!(pod = %pod_ref(ns, name), err = %e, "Failed to update status for pod");
                return;
            }
        };
        crate::vlog!(3, pod = %pod_ref(ns, name), pod_uid = uid, patch = %patch.to_json(), "Patch status for pod");
        if patch.unchanged {
            crate::vlog!(3, pod = %pod_ref(ns, name), status_version = status.version, "Status for pod is up-to-date");
        } else {
            match api
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch.patch),
                )
                .await
            {
                Ok(updated) => {
                    crate::vlog!(3, pod = %pod_ref(ns, name), status_version = status.version, "Status for pod updated successfully");
                    self.written.store(uid, updated.clone());
                    pod = updated;
                }
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    crate::vlog!(3, pod_uid = uid, pod = %pod_ref(ns, name), "Pod does not exist on the server");
                    self.written.forget(uid);
                    return;
                }
                Err(e) => {
                    // The copy may have been stale: read the pod next time.
                    self.written.mark_stale(uid);
                    tracing::info!(pod = %pod_ref(ns, name), err = %format!(
                        "failed to patch status {:?} for pod {:?}/{:?}: {e}", patch.to_json(), ns, name),
                        "Failed to update status for pod");
                    return;
                }
            }
        }
        self.api_versions.insert(api_uid.clone(), status.version);

        // Mirror pods are never deleted this way.
        if self.can_be_deleted(&pod, &status.status).await {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(api_uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            if let Err(e) = api.delete(name, &params).await {
                tracing::info!(pod = %pod_ref(ns, name), err = %e, "Failed to delete status for pod");
                return;
            }
            crate::vlog!(3, pod = %pod_ref(ns, name), "Pod fully terminated and removed from etcd");
            self.delete_pod_status(uid);
        }
    }
}

/// A status as compared for reconciliation: Go's JSON shape, container
/// statuses by name, init container statuses in spec order.
fn comparable(pod: &Pod, status: &PodStatus) -> Value {
    let mut s = status.clone();
    if let Some(list) = &mut s.container_statuses {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if let Some(list) = &mut s.init_container_statuses {
        let order: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|sp| sp.init_containers.iter().flatten())
            .map(|c| c.name.as_str())
            .collect();
        list.sort_by_key(|c| {
            order
                .iter()
                .position(|n| *n == c.name)
                .unwrap_or(usize::MAX)
        });
    }
    go_json::pod_status_to_go_value(&s)
}

/// Go's isPodStatusByKubeletEqual on normalized statuses: the kubelet's
/// conditions of `status` match `old`'s by status, reason and message, and
/// everything but the conditions is equal.
pub fn is_pod_status_by_kubelet_equal(pod: &Pod, old: &PodStatus, status: &PodStatus) -> bool {
    let old_conditions = old.conditions.as_deref().unwrap_or_default();
    for c in status.conditions.iter().flatten() {
        if pod_condition_by_kubelet(&c.type_) {
            match old_conditions.iter().find(|o| o.type_ == c.type_) {
                Some(o)
                    if o.status == c.status && o.message == c.message && o.reason == c.reason => {}
                _ => return false,
            }
        }
    }
    let mut old = old.clone();
    old.conditions = status.conditions.clone();
    comparable(pod, &old) == comparable(pod, status)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

#[cfg(test)]
#[path = "limiter_tests.rs"]
mod limiter_tests;
