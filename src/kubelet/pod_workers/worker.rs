//! The per-pod task (managePodLoop) and the state transitions it reports
//! back when a sync method returns.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    BACKOFF_ON_TRANSIENT_ERROR_PERIOD, EventType, PodStatusFn, PodSyncError, PodSyncHandler,
    PodWork, Shared, WORKER_BACKOFF_PERIOD_JITTER_FACTOR, WORKER_RESYNC_INTERVAL_JITTER_FACTOR,
    WorkOptions, WorkType, cleanup_pod_updates, events, jitter, mailbox, uid_of,
};
use crate::kubelet::container::{PodStatus, format_pod};
use crate::kubelet::types::{SyncPodType, is_static_pod};
use crate::util::lifecycle::TaskSet;

/// Spawns the worker of one pod UID on `tasks`.
pub(super) fn spawn(
    shared: Arc<Shared>,
    syncer: Arc<dyn PodSyncHandler>,
    tasks: &TaskSet,
    uid: String,
    rx: mailbox::Receiver<PodWork>,
) {
    let stop = tasks.token();
    tasks.spawn("pod-worker", async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = manage_pod_loop(shared, syncer, rx) => {}
        }
        crate::vlog!(5, pod_uid = %uid, "Pod worker stopped");
    });
}

impl Shared {
    /// Whether the pod may start: non-static pods always; a static pod when
    /// no other pod of its full name runs. `(can_start, can_ever_start)`.
    fn allow_pod_start(&self, pod: &Pod) -> (bool, bool) {
        if !is_static_pod(pod) {
            return (true, true);
        }
        let uid = uid_of(pod);
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(status) = state.statuses.get(&uid) else {
            tracing::error!(pod = %format_pod(pod), "Pod sync status does not exist, the worker should not be running");
            return (false, false);
        };
        if status.is_termination_requested() {
            return (false, false);
        }
        let full_name = status.full_name.clone();
        if !state
            .static_order
            .allow_start(&full_name, &uid, &state.statuses)
        {
            self.work_queue.enqueue(
                &uid,
                jitter(
                    self.config.backoff_period,
                    WORKER_BACKOFF_PERIOD_JITTER_FACTOR,
                ),
            );
            if let Some(s) = state.statuses.get_mut(&uid) {
                s.working = false;
            }
            return (false, true);
        }
        (true, true)
    }

    /// The cancellation token of the pod's current sync (a fresh one once
    /// the previous was cancelled); `None` for a pod no longer known.
    fn context_for_worker(&self, uid: &str) -> Option<CancellationToken> {
        let mut state = self.lock();
        let status = state.statuses.get_mut(uid)?;
        match &status.cancel {
            Some(token) if !token.is_cancelled() => Some(token.clone()),
            _ => {
                let token = CancellationToken::new();
                status.cancel = Some(token.clone());
                Some(token)
            }
        }
    }

    /// The worker saw the termination: nothing starts any more. Returns the
    /// status override to apply.
    fn acknowledge_terminating(&self, pod: &Pod) -> Option<PodStatusFn> {
        let mut state = self.lock();
        let status = state.statuses.get_mut(&uid_of(pod))?;
        if status.terminating_at.is_some() && !status.started_terminating {
            crate::vlog!(4, pod = %format_pod(pod), "Pod worker has observed request to terminate");
            status.started_terminating = true;
        }
        status.status_post_terminating.last().cloned()
    }

    /// syncPod reported the pod terminal: terminate it next.
    fn complete_sync(&self, pod: &Arc<Pod>) {
        let uid = uid_of(pod);
        let mut state = self.lock();
        crate::vlog!(4, pod = %format_pod(pod), "Pod indicated lifecycle completed naturally and should now terminate");
        if let Some(status) = state.statuses.get_mut(&uid) {
            if status.terminating_at.is_none() {
                status.terminating_at = Some(self.clock.monotonic());
            }
            status.started_terminating = true;
        }
        state.last_undelivered.insert(
            uid,
            PodWork {
                work_type: WorkType::Terminating,
                options: plain_options(pod.clone()),
            },
        );
    }

    /// syncTerminatingPod succeeded: the pod is terminated; clean up next.
    fn complete_terminating(&self, pod: &Arc<Pod>) {
        let uid = uid_of(pod);
        let mut state = self.lock();
        crate::vlog!(4, pod = %format_pod(pod), "Pod terminated all containers successfully");
        if let Some(status) = state.statuses.get_mut(&uid) {
            status.terminated_at = Some(self.clock.monotonic());
            for done in status.notify_post_terminating.drain(..) {
                let _ = done.send(());
            }
            status.status_post_terminating.clear();
        }
        state.last_undelivered.insert(
            uid,
            PodWork {
                work_type: WorkType::Terminated,
                options: plain_options(pod.clone()),
            },
        );
    }

    /// An orphan's containers are stopped: the worker ends.
    fn complete_terminating_runtime_pod(&self, pod: &Pod) {
        let uid = uid_of(pod);
        let mut guard = self.lock();
        let state = &mut *guard;
        crate::vlog!(4, pod = %format_pod(pod), "Pod terminated all orphaned containers successfully and worker can now stop");
        if let Some(status) = state.statuses.get_mut(&uid) {
            status.terminated_at = Some(self.clock.monotonic());
            status.finished = true;
            status.working = false;
            for done in status.notify_post_terminating.drain(..) {
                let _ = done.send(());
            }
            let full_name = status.full_name.clone();
            state.static_order.release(&full_name, &uid);
        }
        cleanup_pod_updates(state, &uid);
    }

    /// syncTerminatedPod succeeded: the worker ends; the UID is forgotten by
    /// housekeeping once the pod leaves config.
    fn complete_terminated(&self, pod: &Pod) {
        let uid = uid_of(pod);
        let mut guard = self.lock();
        let state = &mut *guard;
        crate::vlog!(4, pod = %format_pod(pod), "Pod is complete and the worker can now stop");
        cleanup_pod_updates(state, &uid);
        if let Some(status) = state.statuses.get_mut(&uid) {
            status.finished = true;
            status.working = false;
            let full_name = status.full_name.clone();
            state.static_order.release(&full_name, &uid);
        }
    }

    /// The pod was terminated before it ever started.
    fn complete_unstarted_terminated(&self, pod: &Pod) {
        let uid = uid_of(pod);
        let mut guard = self.lock();
        let state = &mut *guard;
        crate::vlog!(4, pod = %format_pod(pod), "Pod never started and the worker can now stop");
        cleanup_pod_updates(state, &uid);
        if let Some(status) = state.statuses.get_mut(&uid) {
            status.finished = true;
            status.working = false;
            status.terminated_at = Some(self.clock.monotonic());
            for done in status.notify_post_terminating.drain(..) {
                let _ = done.send(());
            }
            let full_name = status.full_name.clone();
            state.static_order.release(&full_name, &uid);
        }
    }

    /// Requeues the pod (at once on a phase change, after the resync
    /// interval on success, after a back-off on error), then hands the
    /// worker its next pending update or marks it idle.
    fn complete_work(&self, pod: &Pod, phase_transition: bool, result: &Result<(), PodSyncError>) {
        let uid = uid_of(pod);
        let delay = if phase_transition {
            std::time::Duration::ZERO
        } else {
            match result {
                Ok(()) => jitter(
                    self.config.resync_interval,
                    WORKER_RESYNC_INTERVAL_JITTER_FACTOR,
                ),
                Err(PodSyncError::NetworkNotReady(_)) => jitter(
                    BACKOFF_ON_TRANSIENT_ERROR_PERIOD,
                    WORKER_BACKOFF_PERIOD_JITTER_FACTOR,
                ),
                Err(_) => jitter(
                    self.config.backoff_period,
                    WORKER_BACKOFF_PERIOD_JITTER_FACTOR,
                ),
            }
        };
        self.work_queue.enqueue(&uid, delay);
        let mut guard = self.lock();
        let state = &mut *guard;
        match state.last_undelivered.remove(&uid) {
            Some(next) => {
                if let Some(tx) = state.pod_updates.get(&uid) {
                    tx.send(next);
                }
            }
            None => {
                if let Some(status) = state.statuses.get_mut(&uid) {
                    status.working = false;
                }
            }
        }
    }
}

fn plain_options(pod: Arc<Pod>) -> WorkOptions {
    WorkOptions {
        update_type: SyncPodType::Sync,
        start_time: None,
        pod,
        mirror_pod: None,
        running_pod: None,
        grace_period: None,
    }
}

enum Outcome {
    Sync(bool),
    Done,
}

async fn run_one(
    shared: &Shared,
    syncer: &dyn PodSyncHandler,
    update: &PodWork,
    last_sync: &mut Option<Instant>,
) -> Result<Outcome, PodSyncError> {
    let pod = &update.options.pod;
    let uid = uid_of(pod);
    let status = if update.options.running_pod.is_some() {
        PodStatus::empty(uid.clone())
    } else {
        let min = last_sync.unwrap_or(shared.created);
        let cached = shared.cache.get_newer_than(&uid, min).await;
        if let Some(e) = &cached.error {
            shared.recorder.pod_event(
                pod,
                EventType::Warning,
                events::reasons::FAILED_SYNC,
                &format!("error determining status: {e}"),
            );
            return Err(PodSyncError::Status(e.clone()));
        }
        (*cached.status).clone()
    };
    let Some(cancel) = shared.context_for_worker(&uid) else {
        return Err(PodSyncError::Cancelled);
    };
    let result = match update.work_type {
        WorkType::Terminated => syncer
            .sync_terminated_pod(&cancel, pod, status)
            .await
            .map(|()| Outcome::Done),
        WorkType::Terminating => {
            let status_fn = shared.acknowledge_terminating(pod);
            syncer
                .sync_terminating_pod(
                    &cancel,
                    pod,
                    status,
                    update.options.running_pod.as_deref(),
                    update.options.grace_period,
                    status_fn,
                )
                .await
                .map(|()| Outcome::Done)
        }
        WorkType::Sync => syncer
            .sync_pod(
                &cancel,
                update.options.update_type,
                pod,
                update.options.mirror_pod.as_ref(),
                status,
            )
            .await
            .map(Outcome::Sync),
    };
    *last_sync = Some(shared.clock.monotonic());
    result
}

async fn manage_pod_loop(
    shared: Arc<Shared>,
    syncer: Arc<dyn PodSyncHandler>,
    mut rx: mailbox::Receiver<PodWork>,
) {
    let mut last_sync: Option<Instant> = None;
    let mut pod_started = false;
    while let Some(update) = rx.recv().await {
        let pod = update.options.pod.clone();
        if !pod_started {
            let (can_start, can_ever_start) = shared.allow_pod_start(&pod);
            if !can_ever_start {
                shared.complete_unstarted_terminated(&pod);
                crate::vlog!(4, pod = %format_pod(&pod), work_type = ?update.work_type, "Processing pod event done");
                return;
            }
            if !can_start {
                crate::vlog!(4, pod = %format_pod(&pod), "Pod cannot start yet");
                continue;
            }
            pod_started = true;
        }
        crate::vlog!(4, pod = %format_pod(&pod), work_type = ?update.work_type, "Processing pod event");
        let result = run_one(&shared, syncer.as_ref(), &update, &mut last_sync).await;
        if update.options.update_type == SyncPodType::Create && result.is_ok() {
            // The first sync started the pod in the runtime: see it running
            // now, not at the PLEG's next period.
            shared.cache.want_relist();
        }
        let mut phase_transition = false;
        let outcome = match result {
            Err(PodSyncError::Cancelled) => {
                crate::vlog!(2, pod = %format_pod(&pod), work_type = ?update.work_type, "Sync exited with context cancellation error");
                Err(PodSyncError::Cancelled)
            }
            Err(e) => {
                tracing::error!(pod = %format_pod(&pod), err = %e, "Error syncing pod, skipping");
                Err(e)
            }
            Ok(Outcome::Done) if update.work_type == WorkType::Terminated => {
                shared.complete_terminated(&pod);
                observe_worker_duration(&shared, &update, "terminated");
                crate::vlog!(4, pod = %format_pod(&pod), work_type = ?update.work_type, "Processing pod event done");
                return;
            }
            Ok(Outcome::Done) => {
                if update.options.running_pod.is_some() {
                    shared.complete_terminating_runtime_pod(&pod);
                    crate::vlog!(4, pod = %format_pod(&pod), work_type = ?update.work_type, "Processing pod event done");
                    return;
                }
                shared.complete_terminating(&pod);
                phase_transition = true;
                Ok(())
            }
            Ok(Outcome::Sync(true)) => {
                crate::vlog!(4, pod = %format_pod(&pod), "Pod is terminal");
                shared.complete_sync(&pod);
                phase_transition = true;
                Ok(())
            }
            Ok(Outcome::Sync(false)) => Ok(()),
        };
        shared.complete_work(&pod, phase_transition, &outcome);
        observe_worker_duration(&shared, &update, &update.options.update_type.to_string());
        crate::vlog!(4, pod = %format_pod(&pod), work_type = ?update.work_type, "Processing pod event done");
    }
}

/// `kubelet_pod_worker_duration_seconds` for an update that carried its
/// start time.
fn observe_worker_duration(shared: &Shared, update: &PodWork, operation: &str) {
    if let Some(start) = update.options.start_time {
        let took = shared.clock.monotonic().saturating_duration_since(start);
        crate::metrics::kubelet::pod_worker_duration().observe(&[operation], took.as_secs_f64());
    }
}
