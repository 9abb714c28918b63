//! The prober manager (Go's prober_manager.go): one worker task per probe
//! per container, the three results caches, and the readiness/started view
//! of pod status.
//!
//! Build with [`ProberManager::new`] (no tasks), hand the [`ResultStreams`]
//! to the syncLoop and the results caches to the runtime manager and status
//! code, then [`ProberManager::start`] on the start phase's task set; pods
//! added before start get their workers then.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::events::EventRecorder;
use super::exec::CommandRunner;
use super::probe::{ProbeGates, ProbeType, Prober};
use super::results::{ProbeResult, ResultUpdate, ResultsManager};
use super::status::PodStatusProvider;
use super::worker::{Worker, WorkerSeed};
use crate::kubelet::container::ContainerId;
use crate::kubelet::container::refs::{pod_name, pod_namespace, pod_uid};
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::vlog;

/// Identifies one probe worker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProbeKey {
    pub(crate) pod_uid: String,
    pub(crate) container: String,
    pub(crate) probe_type: ProbeType,
}

/// Settings of the prober.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProberOptions {
    /// Feature gates the probers consult.
    pub gates: ProbeGates,
}

/// What the prober manager is built from.
pub struct ProberDeps {
    /// The status manager's view of pod status.
    pub status: Arc<dyn PodStatusProvider>,
    /// Runs exec probes in containers (the runtime manager).
    pub runner: Arc<dyn CommandRunner>,
    /// Where `Unhealthy` and `ProbeWarning` events go.
    pub recorder: Arc<dyn EventRecorder>,
    pub clock: Arc<dyn Clock>,
    pub options: ProberOptions,
}

/// The receiving ends of the three results caches' change streams, taken
/// once by the syncLoop.
#[derive(Debug)]
pub struct ResultStreams {
    pub liveness: mpsc::UnboundedReceiver<ResultUpdate>,
    pub readiness: mpsc::UnboundedReceiver<ResultUpdate>,
    pub startup: mpsc::UnboundedReceiver<ResultUpdate>,
}

struct WorkerHandle {
    id: u64,
    stop: CancellationToken,
    trigger: Arc<Notify>,
    /// Set until the worker's task is spawned (pods added before start).
    pending: Option<WorkerSeed>,
}

/// State the manager shares with its workers.
pub(crate) struct Shared {
    workers: Mutex<HashMap<ProbeKey, WorkerHandle>>,
    pub(crate) status: Arc<dyn PodStatusProvider>,
    pub(crate) liveness: Arc<ResultsManager>,
    pub(crate) readiness: Arc<ResultsManager>,
    pub(crate) startup: Arc<ResultsManager>,
    pub(crate) prober: Prober,
    pub(crate) clock: Arc<dyn Clock>,
    /// When the manager was built: workers add start-up jitter within one
    /// period of it.
    pub(crate) start: tokio::time::Instant,
    tasks: Mutex<Option<TaskSet>>,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Called by a worker as it exits; a newer worker under the same key
    /// stays.
    pub(crate) fn remove_worker(&self, key: &ProbeKey, id: u64) {
        let mut workers = lock(&self.workers);
        if workers.get(key).is_some_and(|w| w.id == id) {
            workers.remove(key);
        }
    }
}

/// Probes containers and keeps their results.
#[derive(Clone)]
pub struct ProberManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProberManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProberManager")
            .field("workers", &self.worker_count())
            .finish_non_exhaustive()
    }
}

impl ProberManager {
    /// Builds the manager and its three results caches; nothing runs yet.
    pub fn new(deps: ProberDeps) -> (Self, ResultStreams) {
        let (liveness, liveness_rx) = ResultsManager::new();
        let (readiness, readiness_rx) = ResultsManager::new();
        let (startup, startup_rx) = ResultsManager::new();
        let start = deps.clock.monotonic();
        let shared = Arc::new(Shared {
            workers: Mutex::new(HashMap::new()),
            status: deps.status,
            liveness: Arc::new(liveness),
            readiness: Arc::new(readiness),
            startup: Arc::new(startup),
            prober: Prober::new(deps.runner, deps.recorder, deps.options.gates),
            clock: deps.clock,
            start,
            tasks: Mutex::new(None),
            next_id: AtomicU64::new(1),
        });
        (
            Self { shared },
            ResultStreams {
                liveness: liveness_rx,
                readiness: readiness_rx,
                startup: startup_rx,
            },
        )
    }

    /// Liveness results: a `Failure` means the runtime manager restarts the
    /// container.
    pub fn liveness_results(&self) -> Arc<ResultsManager> {
        self.shared.liveness.clone()
    }

    /// Readiness results.
    pub fn readiness_results(&self) -> Arc<ResultsManager> {
        self.shared.readiness.clone()
    }

    /// Startup results: a `Failure` also means a restart.
    pub fn startup_results(&self) -> Arc<ResultsManager> {
        self.shared.startup.clone()
    }

    /// Start phase: workers run on `tasks` from now on (and those of pods
    /// added earlier start now).
    pub fn start(&self, tasks: &TaskSet) {
        let pending: Vec<WorkerSeed> = {
            // Workers lock first, then tasks, as in add_pod: a pod added
            // meanwhile is either pending here or sees the task set.
            let mut workers = lock(&self.shared.workers);
            *lock(&self.shared.tasks) = Some(tasks.clone());
            workers
                .values_mut()
                .filter_map(|h| h.pending.take())
                .collect()
        };
        for seed in pending {
            self.spawn(seed, tasks);
        }
    }

    fn spawn(&self, seed: WorkerSeed, tasks: &TaskSet) {
        let key = seed.key.clone();
        let id = seed.id;
        match Worker::new(seed, self.shared.clone()) {
            Some(worker) => tasks.spawn("prober-worker", worker.run(tasks.token())),
            None => self.shared.remove_worker(&key, id),
        }
    }

    /// Starts a worker for every probe of every container of the pod. A
    /// probe that already has a worker ends the call (as in Go: a pod is
    /// added once).
    pub fn add_pod(&self, pod: &Pod) {
        let pod = Arc::new(pod.clone());
        let uid = pod_uid(&pod).to_string();
        let mut to_spawn = Vec::new();
        let tasks = {
            let mut workers = lock(&self.shared.workers);
            let tasks = lock(&self.shared.tasks).clone();
            let containers = pod
                .spec
                .as_ref()
                .map(|s| s.containers.as_slice())
                .unwrap_or_default();
            'containers: for c in containers {
                for probe_type in [
                    ProbeType::Startup,
                    ProbeType::Readiness,
                    ProbeType::Liveness,
                ] {
                    if probe_type.spec(c).is_none() {
                        continue;
                    }
                    let key = ProbeKey {
                        pod_uid: uid.clone(),
                        container: c.name.clone(),
                        probe_type,
                    };
                    if workers.contains_key(&key) {
                        vlog!(4, pod = %format!("{}/{}", pod_namespace(&pod), pod_name(&pod)), container = %c.name, probe_type = %probe_type, "Probe already exists for container");
                        break 'containers;
                    }
                    let seed = WorkerSeed {
                        key: key.clone(),
                        id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
                        pod: pod.clone(),
                        container: c.clone(),
                        stop: CancellationToken::new(),
                        trigger: Arc::new(Notify::new()),
                    };
                    let mut handle = WorkerHandle {
                        id: seed.id,
                        stop: seed.stop.clone(),
                        trigger: seed.trigger.clone(),
                        pending: None,
                    };
                    if tasks.is_some() {
                        to_spawn.push(seed);
                    } else {
                        handle.pending = Some(seed);
                    }
                    workers.insert(key, handle);
                }
            }
            tasks
        };
        if let Some(tasks) = tasks {
            for seed in to_spawn {
                self.spawn(seed, &tasks);
            }
        }
    }

    fn stop_workers(&self, pod: &Pod, types: &[ProbeType]) {
        let uid = pod_uid(pod);
        let mut workers = lock(&self.shared.workers);
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default();
        for c in containers {
            for probe_type in types {
                let key = ProbeKey {
                    pod_uid: uid.to_string(),
                    container: c.name.clone(),
                    probe_type: *probe_type,
                };
                if let Some(handle) = workers.get(&key) {
                    handle.stop.cancel();
                    if handle.pending.is_some() {
                        // Never spawned: nothing will remove it but us.
                        workers.remove(&key);
                    }
                }
            }
        }
    }

    /// Stops the pod's liveness and startup workers: a terminating pod's
    /// containers are being stopped anyway.
    pub fn stop_liveness_and_startup(&self, pod: &Pod) {
        self.stop_workers(pod, &[ProbeType::Liveness, ProbeType::Startup]);
    }

    /// Stops every worker of the pod; each drops its results as it exits.
    pub fn remove_pod(&self, pod: &Pod) {
        self.stop_workers(
            pod,
            &[
                ProbeType::Readiness,
                ProbeType::Liveness,
                ProbeType::Startup,
            ],
        );
    }

    /// Stops the workers of every pod not in `desired` (pod UIDs).
    pub fn cleanup_pods(&self, desired: &HashSet<String>) {
        let mut workers = lock(&self.shared.workers);
        workers.retain(|key, handle| {
            if desired.contains(&key.pod_uid) {
                return true;
            }
            handle.stop.cancel();
            handle.pending.is_none()
        });
    }

    fn has_worker(
        &self,
        pod_uid: &str,
        container: &str,
        probe_type: ProbeType,
    ) -> Option<Arc<Notify>> {
        let key = ProbeKey {
            pod_uid: pod_uid.to_string(),
            container: container.to_string(),
            probe_type,
        };
        lock(&self.shared.workers)
            .get(&key)
            .map(|h| h.trigger.clone())
    }

    /// Sets `started` and `ready` of the pod's container statuses from the
    /// probe results:
    /// - started: running, and the startup probe succeeded (or there is none);
    /// - ready (only once started): running, and the readiness probe
    ///   succeeded (or there is none). A readiness probe that has not
    ///   answered yet is asked to run now.
    /// - init containers are ready when they exited with code 0.
    pub fn update_pod_status(&self, pod_uid: &str, status: &mut PodStatus) {
        for c in status.container_statuses.iter_mut().flatten() {
            let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
            let id = c.container_id.as_deref().and_then(ContainerId::parse);
            let started = if !running {
                false
            } else if let Some(r) = id.as_ref().and_then(|id| self.shared.startup.get(id)) {
                r == ProbeResult::Success
            } else {
                self.has_worker(pod_uid, &c.name, ProbeType::Startup)
                    .is_none()
            };
            c.started = Some(started);
            if !started {
                continue;
            }
            let ready = if !running {
                false
            } else if id.as_ref().and_then(|id| self.shared.readiness.get(id))
                == Some(ProbeResult::Success)
            {
                true
            } else {
                match self.has_worker(pod_uid, &c.name, ProbeType::Readiness) {
                    // No readiness probe: ready as soon as it runs.
                    None => true,
                    Some(trigger) => {
                        trigger.notify_one();
                        false
                    }
                }
            };
            c.ready = ready;
        }
        for c in status.init_container_statuses.iter_mut().flatten() {
            c.ready = c
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0);
        }
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// How many workers exist (spawned or waiting for start).
    pub fn worker_count(&self) -> usize {
        lock(&self.shared.workers).len()
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
