//! The sync loop (kubelet.go syncLoop / syncLoopIteration, v1.25): one task
//! that reacts to pod config changes, PLEG events, the 1 s sync tick (pods
//! due in the work queue, pods past their active deadline), the 2 s
//! housekeeping tick and probe results, dispatching work to the pod
//! workers. While the runtime is unhealthy it waits, backing off 100 ms →
//! 5 s. Its liveness is the healthz check `syncloop`.

pub mod admission;
pub mod container_deletor;
pub mod fit;
mod handlers;
pub use crate::kubelet::runtime_state;

#[cfg(test)]
mod admission_tests;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::kubelet::config::{PodUpdates, SourcesReady};
use crate::kubelet::container::PodCache;
use crate::kubelet::housekeeping::Housekeeping;
use crate::kubelet::pleg::{EventStream, PodLifecycleEvent, PodLifecycleEventType};
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_workers::{PodEventRecorder, PodWorkers, WorkQueue};
use crate::kubelet::prober::results::{ProbeResult, ResultUpdate};
use crate::kubelet::status::{ActiveDeadline, StatusManager};
use crate::kubelet::types::{PodOperation, PodUpdate};
use crate::util::clock::Clock;
use admission::Admission;
use container_deletor::ContainerDeletor;
pub use handlers::{active_pods, filter_out_inactive_pods, is_admitted_pod_terminal};
use runtime_state::RuntimeState;

/// The sync tick: pods due in the work queue are synced.
pub const SYNC_PERIOD: Duration = Duration::from_secs(1);
/// The housekeeping tick (housekeepingPeriod).
pub const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(2);
/// Housekeeping slower than this is reported.
pub const HOUSEKEEPING_WARNING_DURATION: Duration = Duration::from_secs(15);
const BACKOFF_BASE: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The syncloop health check allows at least this long between iterations.
pub const MIN_SYNC_LOOP_HEALTH_DURATION: Duration = Duration::from_secs(300);

/// When the sync loop last entered an iteration (syncLoopMonitor), on the
/// monotonic clock: Go stores `clock.Now()` and checks `clock.Since` on its
/// monotonic reading, so a wall-clock step never fails the health check.
#[derive(Clone, Default)]
pub struct SyncLoopMonitor(Arc<Mutex<Option<Instant>>>);

impl SyncLoopMonitor {
    pub fn store(&self, t: Instant) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    }

    pub fn latest(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The healthz check: the loop entered an iteration within
    /// max(2 × syncFrequency, 5 min), or has not started yet.
    pub fn check(&self, now: Instant, resync_interval: Duration) -> Result<(), String> {
        let allowed = (resync_interval * 2).max(MIN_SYNC_LOOP_HEALTH_DURATION);
        match self.latest() {
            Some(t) if now.saturating_duration_since(t) > allowed => {
                Err("sync Loop took longer than expected".to_string())
            }
            _ => Ok(()),
        }
    }
}

/// The probe result streams.
pub struct ProbeUpdates {
    pub liveness: UnboundedReceiver<ResultUpdate>,
    pub readiness: UnboundedReceiver<ResultUpdate>,
    pub startup: UnboundedReceiver<ResultUpdate>,
}

/// Everything the sync loop reads from.
pub struct SyncLoopInputs {
    pub updates: PodUpdates,
    pub pleg: EventStream,
    pub probes: ProbeUpdates,
}

/// The sync loop's collaborators.
pub struct SyncLoop {
    pub pod_manager: Arc<PodManager>,
    pub pod_workers: PodWorkers,
    pub status_manager: Arc<StatusManager>,
    pub work_queue: Arc<WorkQueue>,
    pub deadline: Arc<ActiveDeadline>,
    pub sources_ready: SourcesReady,
    pub admission: Arc<Admission>,
    pub recorder: Arc<dyn PodEventRecorder>,
    pub runtime_state: Arc<RuntimeState>,
    pub housekeeping: Arc<Housekeeping>,
    pub container_deletor: ContainerDeletor,
    pub pod_cache: Arc<PodCache>,
    pub monitor: SyncLoopMonitor,
    pub clock: Arc<dyn Clock>,
}

/// Whether a PLEG event is worth a pod sync (isSyncPodWorthy).
fn is_sync_pod_worthy(e: &PodLifecycleEvent) -> bool {
    e.event_type != PodLifecycleEventType::ContainerRemoved
}

async fn recv_probe(rx: &mut UnboundedReceiver<ResultUpdate>) -> ResultUpdate {
    match rx.recv().await {
        Some(u) => u,
        // A closed stream never yields again.
        None => std::future::pending().await,
    }
}

enum Input {
    Config(Option<PodUpdate>),
    Pleg(Option<PodLifecycleEvent>),
    Sync,
    Housekeeping,
    Liveness(ResultUpdate),
    Readiness(ResultUpdate),
    Startup(ResultUpdate),
    Stop,
}

impl SyncLoop {
    /// Start phase: spawns the loop over `inputs`; `keep_alive` lives as
    /// long as the loop (the pod config, whose senders end the update
    /// stream when dropped).
    pub fn spawn<K: Send + 'static>(
        self,
        tasks: &crate::util::lifecycle::TaskSet,
        inputs: SyncLoopInputs,
        keep_alive: K,
    ) {
        let stop = tasks.token();
        tasks.spawn("sync-loop", async move {
            self.run(inputs, stop).await;
            drop(keep_alive);
        });
    }

    /// Runs until `stop` fires or the config stream ends.
    pub async fn run(self, mut inputs: SyncLoopInputs, stop: CancellationToken) {
        tracing::info!("Starting kubelet main sync loop");
        let mut sync_tick = tokio::time::interval(SYNC_PERIOD);
        sync_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut housekeeping_tick = tokio::time::interval(HOUSEKEEPING_PERIOD);
        housekeeping_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut backoff = BACKOFF_BASE;
        loop {
            if let Some(e) = runtime_state::aggregate(&self.runtime_state.runtime_errors()) {
                tracing::error!(err = %e, "Skipping pod synchronization");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            backoff = BACKOFF_BASE;
            self.monitor.store(self.clock.monotonic());
            let input = tokio::select! {
                _ = stop.cancelled() => Input::Stop,
                u = inputs.updates.recv() => Input::Config(u),
                e = inputs.pleg.recv() => Input::Pleg(e),
                _ = sync_tick.tick() => Input::Sync,
                u = recv_probe(&mut inputs.probes.liveness) => Input::Liveness(u),
                u = recv_probe(&mut inputs.probes.readiness) => Input::Readiness(u),
                u = recv_probe(&mut inputs.probes.startup) => Input::Startup(u),
                _ = housekeeping_tick.tick() => Input::Housekeeping,
            };
            if !self.iteration(input).await {
                return;
            }
            self.monitor.store(self.clock.monotonic());
        }
    }

    /// One syncLoopIteration; false ends the loop.
    async fn iteration(&self, input: Input) -> bool {
        match input {
            Input::Stop => return false,
            Input::Config(None) => {
                tracing::error!("Update channel is closed, exiting the sync loop");
                return false;
            }
            Input::Config(Some(u)) => self.handle_config(u).await,
            Input::Pleg(None) => {
                tracing::error!("PLEG event stream is closed, exiting the sync loop");
                return false;
            }
            Input::Pleg(Some(e)) => self.handle_pleg_event(e),
            Input::Sync => {
                let pods = self.get_pods_to_sync();
                if !pods.is_empty() {
                    crate::vlog!(4, total = pods.len(), "SyncLoop (SYNC) pods");
                    self.handle_pod_syncs(&pods);
                }
            }
            Input::Liveness(u) => {
                if u.result == ProbeResult::Failure {
                    self.handle_probe_sync(&u, "liveness", "unhealthy");
                }
            }
            Input::Readiness(u) => {
                let ready = u.result == ProbeResult::Success;
                self.status_manager
                    .set_container_readiness(&u.pod_uid, &u.container_id, ready);
                self.handle_probe_sync(&u, "readiness", if ready { "ready" } else { "" });
            }
            Input::Startup(u) => {
                let started = u.result == ProbeResult::Success;
                self.status_manager
                    .set_container_startup(&u.pod_uid, &u.container_id, started);
                self.handle_probe_sync(
                    &u,
                    "startup",
                    if started { "started" } else { "unhealthy" },
                );
            }
            Input::Housekeeping => self.run_housekeeping().await,
        }
        true
    }

    async fn handle_config(&self, u: PodUpdate) {
        let names = || {
            u.pods
                .iter()
                .map(|p| crate::kubelet::container::format_pod(p))
                .collect::<Vec<_>>()
        };
        match u.op {
            PodOperation::Add => {
                crate::vlog!(2, source = %u.source, pods = ?names(), "SyncLoop ADD");
                self.handle_pod_additions(u.pods.clone()).await;
            }
            PodOperation::Update => {
                crate::vlog!(2, source = %u.source, pods = ?names(), "SyncLoop UPDATE");
                self.handle_pod_updates(&u.pods);
            }
            PodOperation::Remove => {
                crate::vlog!(2, source = %u.source, pods = ?names(), "SyncLoop REMOVE");
                self.handle_pod_removes(&u.pods);
            }
            PodOperation::Reconcile => {
                crate::vlog!(4, source = %u.source, pods = ?names(), "SyncLoop RECONCILE");
                self.handle_pod_reconcile(&u.pods);
            }
            PodOperation::Delete => {
                crate::vlog!(2, source = %u.source, pods = ?names(), "SyncLoop DELETE");
                // Graceful deletion: the pod's deletion timestamp drives it.
                self.handle_pod_updates(&u.pods);
            }
            PodOperation::Set => tracing::error!("Kubelet does not support snapshot update"),
        }
        self.sources_ready.add_source(&u.source);
    }

    fn handle_pleg_event(&self, e: PodLifecycleEvent) {
        if is_sync_pod_worthy(&e) {
            match self.pod_manager.get_pod_by_uid(&e.id) {
                Some(pod) => {
                    crate::vlog!(2, pod = %crate::kubelet::container::format_pod(&pod), event = ?e, "SyncLoop (PLEG): event for pod");
                    self.handle_pod_syncs(&[pod]);
                }
                None => {
                    crate::vlog!(4, event = ?e, "SyncLoop (PLEG): pod does not exist, ignore irrelevant event")
                }
            }
        }
        if e.event_type == PodLifecycleEventType::ContainerDied {
            let status = self.pod_cache.get(&e.id);
            let remove_all = self.pod_workers.should_pod_content_be_removed(&e.id);
            self.container_deletor
                .delete_containers_in_pod(&e.data, &status.status, remove_all);
        }
    }

    async fn run_housekeeping(&self) {
        if !self.sources_ready.all_ready() {
            crate::vlog!(
                4,
                "SyncLoop (housekeeping, skipped): sources aren't ready yet"
            );
            return;
        }
        let start = self.clock.monotonic();
        crate::vlog!(4, "SyncLoop (housekeeping)");
        if let Err(e) = self.housekeeping.handle_pod_cleanups().await {
            tracing::error!(err = %e, "Failed cleaning pods");
        }
        let took = self.clock.monotonic().saturating_duration_since(start);
        if took > HOUSEKEEPING_WARNING_DURATION {
            tracing::error!(
                seconds = took.as_secs_f64(),
                "Housekeeping took longer than 15s"
            );
        }
        crate::vlog!(4, "SyncLoop (housekeeping) end");
    }
}
