//! Pod workers (pod_workers.go v1.25): one task per pod UID drives the pod
//! through sync → terminating → terminated by calling a [`PodSyncHandler`].
//!
//! - Updates are coalesced: while a worker is busy only the latest pending
//!   update is kept, and it runs next.
//! - Once termination is requested every later update is a kill, and the
//!   grace period can only shorten; a create for a terminating UID is
//!   remembered and honoured after the pod finished (housekeeping restarts it).
//! - Before each sync the worker waits until the pod status cache holds an
//!   observation newer than its previous sync, so it never acts twice on the
//!   same runtime state.
//!
//! The workers are the kubelet's single record of what may be running: the
//! pod manager says what should exist, and housekeeping reconciles the two
//! through [`PodWorkers::sync_known_pods`] and the `should_pod_*` queries
//! other subsystems use.

pub mod events;
mod mailbox;
mod state;
mod work_queue;
mod worker;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cm::CmError;
use crate::kubelet::container::{
    PodCache, PodStatus, RunningPod, RuntimeError, SyncFailure, format_pod,
};
use crate::kubelet::status::ApiPodStatus;
use crate::kubelet::types::{SyncPodType, get_pod_full_name, is_static_pod};
use crate::kubelet::volumemanager::WaitError;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::util::pod_dirs::PodDirsError;
pub use events::{EventType, LoggingPodEvents, PodEventRecorder};
use state::{PodSyncStatus, StaticPodOrder, effective_grace_period};
pub use work_queue::{WorkQueue, jitter};

/// Jitter factor of the resync interval.
pub const WORKER_RESYNC_INTERVAL_JITTER_FACTOR: f64 = 0.5;
/// Jitter factor of the back-off periods.
pub const WORKER_BACKOFF_PERIOD_JITTER_FACTOR: f64 = 0.5;
/// Retry period after a transient error (network not ready).
pub const BACKOFF_ON_TRANSIENT_ERROR_PERIOD: Duration = Duration::from_secs(1);
/// Retry period after a failed sync.
pub const BACKOFF_PERIOD: Duration = Duration::from_secs(10);
/// The message prefix of a sync that waits for the network plugin.
pub const NETWORK_NOT_READY_ERROR_MSG: &str = "network is not ready";

/// Overrides a terminating pod's status (e.g. an eviction's reason).
pub type PodStatusFn = Arc<dyn Fn(&mut ApiPodStatus) + Send + Sync>;

/// Why a sync method failed: the step, with its cause. Messages read as
/// Go's; the runtime's failed steps keep their kubelet reasons.
#[derive(Debug, thiserror::Error)]
pub enum PodSyncError {
    /// The sync was cancelled because the pod started terminating or its
    /// grace period shortened; the next update is already queued.
    #[error("context canceled")]
    Cancelled,
    /// The network plugin is not ready; retried after a short back-off.
    #[error("{NETWORK_NOT_READY_ERROR_MSG}: {0}")]
    NetworkNotReady(String),
    /// The PLEG could not read the pod's status from the runtime.
    #[error("error determining status: {0}")]
    Status(#[source] Arc<RuntimeError>),
    /// The pod cgroup could not be made or updated.
    #[error(
        "failed to ensure that the pod: {uid} cgroups exist and are correctly applied: {source}"
    )]
    PodCgroup {
        uid: String,
        #[source]
        source: CmError,
    },
    /// Admission now refuses the pod, and what ran of it could not be killed.
    #[error("error killing pod: {0}")]
    KillRefused(#[source] RuntimeError),
    /// Admission now refuses the pod (its containers were killed).
    #[error("pod cannot be run: {message}")]
    NotRunnable { message: String },
    #[error(transparent)]
    DataDirs(#[from] PodDirsError),
    #[error(transparent)]
    Volumes(#[from] WaitError),
    /// Steps of the runtime's SyncPod failed (not only waiting out back-off).
    #[error(transparent)]
    Runtime(#[from] SyncFailure),
    /// Killing the terminating pod's containers failed.
    #[error(transparent)]
    Kill(RuntimeError),
    /// The killed pod's status could not be read back from the runtime.
    #[error(transparent)]
    Inspect(RuntimeError),
    /// Containers still ran after the runtime said it had killed them all.
    #[error("detected running containers after a successful KillPod, CRI violation: [{}]", .containers.join(" "))]
    StillRunning { containers: Vec<String> },
    /// The terminated pod's cgroup could not be named or removed.
    #[error(transparent)]
    Cgroup(CmError),
    /// The runtime did not kill the pod within its grace period.
    #[error("timeout waiting to kill pod")]
    KillTimeout,
    /// A blocking step's task was lost.
    #[error("pod sync step aborted: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The three phases of a pod's life, as the workers call them.
#[async_trait]
pub trait PodSyncHandler: Send + Sync + 'static {
    /// Drives the pod towards running. `Ok(true)`: the pod reached a
    /// terminal phase and must now terminate.
    async fn sync_pod(
        &self,
        cancel: &CancellationToken,
        update_type: SyncPodType,
        pod: &Arc<Pod>,
        mirror_pod: Option<&Arc<Pod>>,
        status: PodStatus,
    ) -> Result<bool, PodSyncError>;

    /// Stops every container of the pod within `grace_period` seconds. For an
    /// orphan (`running_pod` set) only its runtime objects are known.
    async fn sync_terminating_pod(
        &self,
        cancel: &CancellationToken,
        pod: &Arc<Pod>,
        status: PodStatus,
        running_pod: Option<&RunningPod>,
        grace_period: Option<i64>,
        status_fn: Option<PodStatusFn>,
    ) -> Result<(), PodSyncError>;

    /// Cleans up after a pod whose containers are all stopped.
    async fn sync_terminated_pod(
        &self,
        cancel: &CancellationToken,
        pod: &Arc<Pod>,
        status: PodStatus,
    ) -> Result<(), PodSyncError>;
}

/// A kill request's options.
#[derive(Default)]
pub struct KillPodOptions {
    /// Fired once the pod's containers are stopped (or at once if the pod
    /// is already terminated or cannot be killed).
    pub completed: Option<oneshot::Sender<()>>,
    /// The kubelet evicts the pod: its content may go at once.
    pub evict: bool,
    /// Overrides the status written while terminating.
    pub pod_status_fn: Option<PodStatusFn>,
    /// A shorter grace period than the pod's own.
    pub grace_period_override: Option<i64>,
}

/// One update for a pod worker.
pub struct UpdatePodOptions {
    pub update_type: SyncPodType,
    /// When the change that caused the update was seen.
    pub start_time: Option<Instant>,
    /// The pod; `None` for an orphan known only by its `running_pod`.
    pub pod: Option<Arc<Pod>>,
    pub mirror_pod: Option<Arc<Pod>>,
    /// The runtime's view of an orphan (only with `pod` unset; kills only).
    pub running_pod: Option<RunningPod>,
    pub kill: Option<KillPodOptions>,
}

impl UpdatePodOptions {
    /// A sync/create/update of a pod from config.
    pub fn new(update_type: SyncPodType, pod: Arc<Pod>, mirror_pod: Option<Arc<Pod>>) -> Self {
        UpdatePodOptions {
            update_type,
            start_time: None,
            pod: Some(pod),
            mirror_pod,
            running_pod: None,
            kill: None,
        }
    }
}

/// What a worker knows of a pod, for housekeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodWorkerState {
    /// Expected to be running.
    Sync,
    /// Containers are being stopped.
    Terminating,
    /// Nothing runs; cleanup may be in progress.
    Terminated,
    /// Terminated, and a pod with the same UID was created meanwhile.
    TerminatedAndRecreated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkType {
    Sync,
    Terminating,
    Terminated,
}

#[derive(Clone)]
pub(crate) struct WorkOptions {
    pub update_type: SyncPodType,
    pub start_time: Option<Instant>,
    pub pod: Arc<Pod>,
    pub mirror_pod: Option<Arc<Pod>>,
    pub running_pod: Option<Arc<RunningPod>>,
    pub grace_period: Option<i64>,
}

#[derive(Clone)]
pub(crate) struct PodWork {
    pub work_type: WorkType,
    pub options: WorkOptions,
}

#[derive(Default)]
pub(crate) struct State {
    pods_synced: bool,
    pod_updates: HashMap<String, mailbox::Sender<PodWork>>,
    last_undelivered: HashMap<String, PodWork>,
    statuses: HashMap<String, PodSyncStatus>,
    static_order: StaticPodOrder,
}

/// Tunables of the pod workers.
#[derive(Debug, Clone, Copy)]
pub struct PodWorkersConfig {
    /// syncFrequency: a synced pod is synced again after this (jittered).
    pub resync_interval: Duration,
    /// The back-off after a failed sync (jittered).
    pub backoff_period: Duration,
}

impl Default for PodWorkersConfig {
    fn default() -> Self {
        PodWorkersConfig {
            resync_interval: Duration::from_secs(60),
            backoff_period: BACKOFF_PERIOD,
        }
    }
}

/// A new pod's worker: its UID and the receiving end of its updates.
type NewWorker = (String, mailbox::Receiver<PodWork>);

pub(crate) struct Shared {
    state: Mutex<State>,
    /// New workers go to the spawner task (started by [`PodWorkersStart`]);
    /// updates sent before the start phase wait in their channels.
    new_workers: mpsc::UnboundedSender<NewWorker>,
    cache: Arc<PodCache>,
    work_queue: Arc<WorkQueue>,
    recorder: Arc<dyn PodEventRecorder>,
    config: PodWorkersConfig,
    /// Observations older than this are from before the workers existed.
    created: Instant,
    clock: Arc<dyn Clock>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pod workers. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct PodWorkers {
    shared: Arc<Shared>,
}

/// The start half of the pod workers: spawns each pod's worker, over
/// `syncer`, on the task set (workers asked for before the start phase
/// are spawned then, with the updates they were sent).
pub struct PodWorkersStart {
    shared: Arc<Shared>,
    new_workers: mpsc::UnboundedReceiver<NewWorker>,
}

impl PodWorkersStart {
    /// Start phase: the spawner task.
    pub fn start(self, tasks: &TaskSet, syncer: Arc<dyn PodSyncHandler>) {
        let PodWorkersStart {
            shared,
            mut new_workers,
        } = self;
        let worker_tasks = tasks.clone();
        let stop = tasks.token();
        tasks.spawn("pod-workers", async move {
            loop {
                let (uid, rx) = tokio::select! {
                    _ = stop.cancelled() => return,
                    w = new_workers.recv() => match w { Some(w) => w, None => return },
                };
                // A worker forgotten before it ran has nothing to do.
                if rx.is_closed() {
                    continue;
                }
                worker::spawn(shared.clone(), syncer.clone(), &worker_tasks, uid, rx);
            }
        });
    }
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn phase_of(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(phase_of(pod), Some("Succeeded") | Some("Failed"))
}

/// The pod a runtime-only (orphaned) pod stands for (ToAPIPod).
pub fn running_pod_to_api_pod(running: &RunningPod) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.uid = Some(running.id.clone());
    pod.metadata.name = Some(running.name.clone());
    pod.metadata.namespace = Some(running.namespace.clone());
    pod.spec = Some(PodSpec {
        containers: running
            .containers
            .iter()
            .map(|c| Container {
                name: c.name.clone(),
                image: Some(c.image.clone()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    pod
}

/// True when the cached runtime status shows nothing running.
fn is_pod_status_cache_terminal(status: &PodStatus) -> bool {
    let running = status.running_container_statuses().count();
    let sandboxes = status
        .sandbox_statuses
        .iter()
        .filter(|s| s.state == crate::cri::api::PodSandboxState::SandboxReady as i32)
        .count();
    running == 0 && sandboxes == 0
}

impl PodWorkers {
    /// Build phase: the handle (queries and updates, usable at once) and
    /// its start half, which runs the per-pod workers over the syncer.
    pub fn new(
        cache: Arc<PodCache>,
        work_queue: Arc<WorkQueue>,
        recorder: Arc<dyn PodEventRecorder>,
        clock: Arc<dyn Clock>,
        config: PodWorkersConfig,
    ) -> (Self, PodWorkersStart) {
        let (new_workers, new_workers_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            new_workers,
            cache,
            work_queue,
            recorder,
            config,
            created: clock.monotonic(),
            clock,
        });
        let start = PodWorkersStart {
            shared: shared.clone(),
            new_workers: new_workers_rx,
        };
        (PodWorkers { shared }, start)
    }

    /// The clock the workers read time from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Delivers a change or a kill to the pod's worker (UpdatePod).
    pub fn update_pod(&self, mut options: UpdatePodOptions) {
        let mut is_runtime_pod = false;
        let pod: Arc<Pod> = match (options.pod.clone(), options.running_pod.as_ref()) {
            (Some(pod), running) => {
                if running.is_some() {
                    tracing::info!(pod = %format_pod(&pod), "Pod update included RunningPod which is only valid when Pod is not specified");
                    options.running_pod = None;
                }
                pod
            }
            (None, Some(running)) => {
                let pod = Arc::new(running_pod_to_api_pod(running));
                if options.update_type != SyncPodType::Kill {
                    tracing::info!(pod = %format_pod(&pod), "Pod update is ignored, runtime pods can only be killed");
                    return;
                }
                is_runtime_pod = true;
                pod
            }
            (None, None) => {
                tracing::error!("Pod update has neither a pod nor a running pod; ignored");
                return;
            }
        };
        let uid = uid_of(&pod);
        let now = self.shared.clock.monotonic();
        let mut guard = self.shared.lock();
        let state = &mut *guard;

        if !state.statuses.contains_key(&uid) {
            crate::vlog!(4, pod = %format_pod(&pod), "Pod is being synced for the first time");
            let mut status = PodSyncStatus {
                full_name: get_pod_full_name(&pod),
                ..Default::default()
            };
            if !is_runtime_pod && is_terminal(&pod) {
                let cached = self.shared.cache.get(&uid);
                if cached.error.is_none() && is_pod_status_cache_terminal(&cached.status) {
                    status.terminated_at = Some(now);
                    status.terminating_at = Some(now);
                    status.started_terminating = true;
                    status.finished = true;
                }
            }
            state.statuses.insert(uid.clone(), status);
        }
        let Some(status) = state.statuses.get_mut(&uid) else {
            return;
        };

        if status.is_termination_requested() && options.update_type == SyncPodType::Create {
            status.restart_requested = true;
            crate::vlog!(4, pod = %format_pod(&pod), "Pod is terminating but has been requested to restart with same UID, will be reconciled later");
            return;
        }
        if status.finished {
            crate::vlog!(4, pod = %format_pod(&pod), "Pod is finished processing, no further updates");
            return;
        }

        let mut became_terminating = false;
        if !status.is_termination_requested() {
            if is_runtime_pod {
                crate::vlog!(4, pod = %format_pod(&pod), "Pod is orphaned and must be torn down");
                status.deleted = true;
                became_terminating = true;
            } else if pod.metadata.deletion_timestamp.is_some() {
                crate::vlog!(4, pod = %format_pod(&pod), "Pod is marked for graceful deletion, begin teardown");
                status.deleted = true;
                became_terminating = true;
            } else if is_terminal(&pod) {
                crate::vlog!(4, pod = %format_pod(&pod), "Pod is in a terminal phase (success/failed), begin teardown");
                became_terminating = true;
            } else if options.update_type == SyncPodType::Kill {
                if options.kill.as_ref().is_some_and(|k| k.evict) {
                    crate::vlog!(4, pod = %format_pod(&pod), "Pod is being evicted by the kubelet, begin teardown");
                    status.evicted = true;
                } else {
                    crate::vlog!(4, pod = %format_pod(&pod), "Pod is being removed by the kubelet, begin teardown");
                }
                became_terminating = true;
            }
            if became_terminating {
                status.terminating_at = Some(now);
            }
        }

        let mut grace_shortened = false;
        let mut grace_period = None;
        let work_type = if status.is_terminated() {
            if is_runtime_pod {
                crate::vlog!(3, pod = %format_pod(&pod), "Pod is waiting for termination, ignoring runtime-only kill until after pod worker is fully terminated");
                return;
            }
            if let Some(done) = options.kill.take().and_then(|k| k.completed) {
                let _ = done.send(());
            }
            WorkType::Terminated
        } else if status.is_termination_requested() {
            let kill = options.kill.take().unwrap_or_default();
            if let Some(done) = kill.completed {
                status.notify_post_terminating.push(done);
            }
            if let Some(f) = kill.pod_status_fn {
                status.status_post_terminating.push(f);
            }
            let (grace, shortened) =
                effective_grace_period(status.grace_period, &pod, kill.grace_period_override);
            grace_shortened = shortened;
            status.grace_period = grace;
            grace_period = Some(grace);
            WorkType::Terminating
        } else {
            if let Some(done) = options.kill.take().and_then(|k| k.completed) {
                let _ = done.send(());
            }
            WorkType::Sync
        };

        let mut work = PodWork {
            work_type,
            options: WorkOptions {
                update_type: options.update_type,
                start_time: options.start_time,
                pod: pod.clone(),
                mirror_pod: options.mirror_pod,
                running_pod: options.running_pod.map(Arc::new),
                grace_period,
            },
        };

        if !state.pod_updates.contains_key(&uid) {
            let (tx, rx) = mailbox::mailbox();
            state.pod_updates.insert(uid.clone(), tx);
            if is_static_pod(&pod) {
                let full_name = status.full_name.clone();
                state
                    .static_order
                    .waiting
                    .entry(full_name)
                    .or_default()
                    .push(uid.clone());
            }
            let _ = self.shared.new_workers.send((uid.clone(), rx));
        }
        let Some(status) = state.statuses.get_mut(&uid) else {
            return;
        };
        if !status.working {
            status.working = true;
            if let Some(tx) = state.pod_updates.get(&uid) {
                tx.send(work);
            }
            return;
        }
        if let Some(undelivered) = state.last_undelivered.get(&uid)
            && let (Some(old), Some(new)) =
                (undelivered.options.start_time, work.options.start_time)
            && old < new
        {
            work.options.start_time = Some(old);
        }
        state.last_undelivered.insert(uid.clone(), work);
        if (became_terminating || grace_shortened)
            && let Some(cancel) = &status.cancel
        {
            crate::vlog!(3, pod = %format_pod(&pod), ?work_type, "Cancelling current pod sync");
            cancel.cancel();
        }
    }

    /// Forgets finished pods that are no longer desired (or were recreated)
    /// and reports the state of every other worker (SyncKnownPods). From the
    /// first call on, pods the workers never saw count as not running.
    pub fn sync_known_pods(&self, desired: &[Arc<Pod>]) -> HashMap<String, PodWorkerState> {
        let known: HashSet<String> = desired.iter().map(|p| uid_of(p)).collect();
        let mut state = self.shared.lock();
        state.pods_synced = true;
        let mut workers = HashMap::new();
        let uids: Vec<String> = state.statuses.keys().cloned().collect();
        for uid in uids {
            let Some(status) = state.statuses.get(&uid) else {
                continue;
            };
            let restart_requested = status.restart_requested;
            let report = if status.is_terminated() {
                if restart_requested {
                    PodWorkerState::TerminatedAndRecreated
                } else {
                    PodWorkerState::Terminated
                }
            } else if status.is_termination_requested() {
                PodWorkerState::Terminating
            } else {
                PodWorkerState::Sync
            };
            workers.insert(uid.clone(), report);
            if !known.contains(&uid) || restart_requested {
                remove_terminated_worker(&mut state, &uid);
            }
        }
        workers
    }

    fn with_status<T>(
        &self,
        uid: &str,
        known: impl FnOnce(&PodSyncStatus) -> T,
        unknown: impl FnOnce(bool) -> T,
    ) -> T {
        let state = self.shared.lock();
        match state.statuses.get(uid) {
            Some(s) => known(s),
            None => unknown(state.pods_synced),
        }
    }

    /// The worker finished terminating this pod (filters admission).
    pub fn is_pod_known_terminated(&self, uid: &str) -> bool {
        self.with_status(uid, PodSyncStatus::is_terminated, |_| false)
    }

    /// Containers may be running: before the first housekeeping, or until
    /// the worker terminated the pod.
    pub fn could_have_running_containers(&self, uid: &str) -> bool {
        self.with_status(uid, |s| !s.is_terminated(), |synced| !synced)
    }

    /// Termination was requested and has not completed with removal.
    pub fn is_pod_termination_requested(&self, uid: &str) -> bool {
        self.with_status(uid, PodSyncStatus::is_termination_requested, |_| false)
    }

    /// No new container will start: the worker saw the termination, or the
    /// pod is unknown after the first housekeeping.
    pub fn should_pod_containers_be_terminating(&self, uid: &str) -> bool {
        self.with_status(uid, PodSyncStatus::is_termination_started, |synced| synced)
    }

    /// Runtime objects other than containers may be torn down.
    pub fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.with_status(uid, PodSyncStatus::is_terminated, |synced| synced)
    }

    /// Everything of the pod may go (evicted, or deleted and terminated).
    pub fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        self.with_status(
            uid,
            |s| s.evicted || (s.deleted && s.is_terminated()),
            |synced| synced,
        )
    }

    /// A static pod of this full name is terminating and not yet done.
    pub fn is_pod_for_mirror_pod_terminating_by_full_name(&self, full_name: &str) -> bool {
        let state = self.shared.lock();
        let Some(uid) = state.static_order.started.get(full_name) else {
            return false;
        };
        state
            .statuses
            .get(uid)
            .is_some_and(|s| s.is_termination_requested() && !s.is_terminated())
    }

    /// UIDs the workers know, with their state (without forgetting any).
    pub fn known_pods(&self) -> HashMap<String, PodWorkerState> {
        let state = self.shared.lock();
        state
            .statuses
            .iter()
            .map(|(uid, s)| {
                let st = if s.is_terminated() {
                    if s.restart_requested {
                        PodWorkerState::TerminatedAndRecreated
                    } else {
                        PodWorkerState::Terminated
                    }
                } else if s.is_termination_requested() {
                    PodWorkerState::Terminating
                } else {
                    PodWorkerState::Sync
                };
                (uid.clone(), st)
            })
            .collect()
    }

    /// Kills the pod and waits until its containers are stopped, at most
    /// 1.5 × the grace period (10 s at least) (Go's killPodNow).
    pub async fn kill_pod_now(
        &self,
        pod: Arc<Pod>,
        evict: bool,
        grace_period_override: Option<i64>,
        status_fn: Option<PodStatusFn>,
    ) -> Result<(), PodSyncError> {
        let grace = grace_period_override
            .or_else(|| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(0);
        let timeout = (grace + grace / 2).max(10);
        let (tx, rx) = oneshot::channel();
        self.update_pod(UpdatePodOptions {
            update_type: SyncPodType::Kill,
            start_time: None,
            pod: Some(pod.clone()),
            mirror_pod: None,
            running_pod: None,
            kill: Some(KillPodOptions {
                completed: Some(tx),
                evict,
                pod_status_fn: status_fn,
                grace_period_override,
            }),
        });
        match tokio::time::timeout(Duration::from_secs(timeout as u64), rx).await {
            Ok(_) => Ok(()),
            Err(_) => {
                self.shared.recorder.pod_event(
                    &pod,
                    EventType::Warning,
                    events::reasons::EXCEEDED_GRACE_PERIOD,
                    "Container runtime did not kill the pod within specified grace period.",
                );
                Err(PodSyncError::KillTimeout)
            }
        }
    }
}

/// Forgets a finished worker's UID (removeTerminatedWorker).
fn remove_terminated_worker(state: &mut State, uid: &str) {
    let Some(status) = state.statuses.get(uid) else {
        crate::vlog!(
            4,
            pod_uid = uid,
            "Pod worker has been requested for removal but is not a known pod"
        );
        return;
    };
    if !status.finished {
        crate::vlog!(
            4,
            pod_uid = uid,
            "Pod worker has been requested for removal but is still not fully terminated"
        );
        return;
    }
    if status.restart_requested {
        crate::vlog!(
            4,
            pod_uid = uid,
            "Pod has been terminated but another pod with the same UID was created, remove history to allow restart"
        );
    } else {
        crate::vlog!(
            4,
            pod_uid = uid,
            "Pod has been terminated and is no longer known to the kubelet, remove all history"
        );
    }
    let full_name = status.full_name.clone();
    state.statuses.remove(uid);
    cleanup_pod_updates(state, uid);
    state.static_order.release(&full_name, uid);
}

/// Closes the worker's channel so its task ends, and drops pending work.
fn cleanup_pod_updates(state: &mut State, uid: &str) {
    state.pod_updates.remove(uid);
    state.last_undelivered.remove(uid);
}
