//! One probe of one container, run periodically (Go's worker.go).
//!
//! - Start-up jitter: while the kubelet started less than one period ago, a
//!   worker first waits a random part of its period, so a restarted kubelet
//!   does not fire every probe at once.
//! - Then it probes at once and on every period tick (or when the manager
//!   asks for an immediate readiness run), until stopped, until the pod is
//!   terminal, or until its container has exited for good.
//! - Results change only after `failureThreshold` failures or
//!   `successThreshold` successes in a row. A new container ID resets the
//!   result to the probe type's initial value (liveness Success, readiness
//!   Failure, startup Unknown).
//! - Liveness and readiness wait until the startup probe has passed
//!   (`started`); the startup probe stops probing once it has.
//! - After a liveness or startup failure the worker holds off until the
//!   container is replaced, so it never execs into a container being killed.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, Probe};
use tokio::sync::Notify;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::manager::{ProbeKey, Shared};
use super::metrics::{RESULT_FAILED, RESULT_SUCCESSFUL, RESULT_UNKNOWN, WorkerLabels};
use super::probe::ProbeType;
use super::results::{ProbeResult, ResultsManager};
use crate::kubelet::container::ContainerId;
use crate::kubelet::container::refs::{pod_name, pod_namespace, pod_uid};
use crate::vlog;

/// API defaults of the probe fields, for a spec that left them unset (or,
/// out of validation's range, zero or negative).
const DEFAULT_PERIOD_SECONDS: i32 = 10;
const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
const DEFAULT_FAILURE_THRESHOLD: i32 = 3;

fn positive_or(v: Option<i32>, default: i32) -> i32 {
    v.filter(|v| *v > 0).unwrap_or(default)
}

/// The probing period of a probe spec.
pub fn period(spec: &Probe) -> Duration {
    let secs = positive_or(spec.period_seconds, DEFAULT_PERIOD_SECONDS);
    Duration::from_secs(u64::try_from(secs).unwrap_or(10))
}

/// The state of one probe worker; owned by its task.
pub(crate) struct Worker {
    pub(crate) key: ProbeKey,
    pub(crate) id: u64,
    pod: Arc<Pod>,
    container: Container,
    spec: Probe,
    initial_value: ProbeResult,
    results: Arc<ResultsManager>,
    shared: Arc<Shared>,
    stop: CancellationToken,
    trigger: Arc<Notify>,
    /// The container last probed.
    container_id: Option<ContainerId>,
    last_result: ProbeResult,
    /// How many probes in a row returned `last_result`.
    result_run: i32,
    /// Skip probing until the container ID changes.
    on_hold: bool,
    labels: WorkerLabels,
}

/// What a worker is made from (kept by the manager until it can spawn it).
pub(crate) struct WorkerSeed {
    pub(crate) key: ProbeKey,
    pub(crate) id: u64,
    pub(crate) pod: Arc<Pod>,
    pub(crate) container: Container,
    pub(crate) stop: CancellationToken,
    pub(crate) trigger: Arc<Notify>,
}

impl Worker {
    pub(crate) fn new(seed: WorkerSeed, shared: Arc<Shared>) -> Option<Self> {
        let probe_type = seed.key.probe_type;
        let spec = probe_type.spec(&seed.container)?.clone();
        let (results, initial_value) = match probe_type {
            ProbeType::Readiness => (shared.readiness.clone(), ProbeResult::Failure),
            ProbeType::Liveness => (shared.liveness.clone(), ProbeResult::Success),
            ProbeType::Startup => (shared.startup.clone(), ProbeResult::Unknown),
        };
        let labels = WorkerLabels::new(
            probe_type.as_str(),
            &seed.container.name,
            pod_name(&seed.pod),
            pod_namespace(&seed.pod),
            pod_uid(&seed.pod),
        );
        Some(Self {
            key: seed.key,
            id: seed.id,
            pod: seed.pod,
            container: seed.container,
            spec,
            initial_value,
            results,
            shared,
            stop: seed.stop,
            trigger: seed.trigger,
            container_id: None,
            // Go's zero value of a result.
            last_result: ProbeResult::Success,
            result_run: 0,
            on_hold: false,
            labels,
        })
    }

    fn pod_key(&self) -> String {
        format!("{}/{}", pod_namespace(&self.pod), pod_name(&self.pod))
    }

    /// The probe loop; returns when stopped, on shutdown, or when probing
    /// is over for this container.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let stop = self.stop.clone();
        let trigger = self.trigger.clone();
        let period = period(&self.spec);
        let (stop_ref, shutdown_ref) = (&stop, &shutdown);
        let stopped = move || async move {
            tokio::select! {
                _ = stop_ref.cancelled() => {}
                _ = shutdown_ref.cancelled() => {}
            }
        };

        // Spread the first probes of a freshly started kubelet over a period.
        let since_start = self
            .shared
            .clock
            .monotonic()
            .saturating_duration_since(self.shared.start);
        if period > since_start {
            let jitter = period.mul_f64(rand::random::<f64>());
            tokio::select! {
                biased;
                _ = stopped() => {
                    self.cleanup();
                    return;
                }
                _ = tokio::time::sleep(jitter) => {}
            }
        }

        let mut ticker = tokio::time::interval_at(self.shared.clock.monotonic() + period, period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            let keep_going = tokio::select! {
                biased;
                _ = stopped() => break,
                keep = self.do_probe() => keep,
            };
            if !keep_going {
                break;
            }
            tokio::select! {
                biased;
                _ = stopped() => break,
                _ = ticker.tick() => {
                    vlog!(3, probe_type = %self.key.probe_type, pod = %self.pod_key(), container = %self.container.name, "Triggered probe by periodSeconds");
                }
                _ = trigger.notified() => {
                    vlog!(3, probe_type = %self.key.probe_type, pod = %self.pod_key(), container = %self.container.name, "Triggered probe by manual run");
                }
            }
        }
        self.cleanup();
    }

    fn cleanup(&self) {
        if let Some(id) = &self.container_id {
            self.results.remove(id);
        }
        self.shared.remove_worker(&self.key, self.id);
        self.labels.delete();
    }

    /// Probes once and records the result; whether to keep probing.
    pub(crate) async fn do_probe(&mut self) -> bool {
        let started = self.shared.clock.monotonic();
        let uid = pod_uid(&self.pod).to_string();
        let Some(status) = self.shared.status.get_pod_status(&uid) else {
            vlog!(3, pod = %self.pod_key(), "No status for pod");
            return true;
        };
        if matches!(status.phase.as_deref(), Some("Failed" | "Succeeded")) {
            vlog!(3, pod = %self.pod_key(), phase = ?status.phase, "Pod is terminated, exiting probe worker");
            return false;
        }
        let name = &self.container.name;
        let with_id = |list: Option<&Vec<ContainerStatus>>| {
            list.and_then(|l| l.iter().find(|c| &c.name == name))
                .filter(|c| c.container_id.as_deref().is_some_and(|id| !id.is_empty()))
                .cloned()
        };
        let Some(c) = with_id(status.container_statuses.as_ref())
            .or_else(|| with_id(status.init_container_statuses.as_ref()))
        else {
            vlog!(3, pod = %self.pod_key(), container = %name, "Probe target container not found");
            return true;
        };
        let cid = c.container_id.clone().unwrap_or_default();

        if self
            .container_id
            .as_ref()
            .map(ContainerId::to_string)
            .as_deref()
            != Some(cid.as_str())
        {
            if let Some(old) = self.container_id.take() {
                self.results.remove(&old);
            }
            let Some(id) = ContainerId::parse(&cid) else {
                tracing::error!(pod = %self.pod_key(), container = %name, container_id = %cid, "Failed to parse the container ID");
                return true;
            };
            self.results.set(&id, self.initial_value, &uid);
            self.container_id = Some(id);
            // A new container: probing resumes.
            self.on_hold = false;
        }
        if self.on_hold {
            return true;
        }
        let Some(container_id) = self.container_id.clone() else {
            return true;
        };

        let state = c.state.as_ref();
        let Some(running) = state.and_then(|s| s.running.as_ref()) else {
            vlog!(3, pod = %self.pod_key(), container = %name, "Non-running container probed");
            self.results.set(&container_id, ProbeResult::Failure, &uid);
            // Done when the container exited and will not be restarted.
            let terminated = state.and_then(|s| s.terminated.as_ref()).is_some();
            let never = self
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.as_deref())
                == Some("Never");
            return !terminated || !never;
        };

        let probe_type = self.key.probe_type;
        if self.pod.metadata.deletion_timestamp.is_some()
            && matches!(probe_type, ProbeType::Liveness | ProbeType::Startup)
        {
            vlog!(3, probe_type = %probe_type, pod = %self.pod_key(), container = %name, "Pod deletion requested, setting probe result to success");
            if probe_type == ProbeType::Startup {
                tracing::info!(pod = %self.pod_key(), container = %name, "Pod deletion requested before container has fully started");
            }
            // A last success keeps the shutdown quiet.
            self.results.set(&container_id, ProbeResult::Success, &uid);
            return false;
        }

        // No probing during initialDelaySeconds.
        let started_at = running
            .started_at
            .as_ref()
            .map(|t| SystemTime::from(t.0))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let since = match self.shared.clock.now().duration_since(started_at) {
            Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
        };
        if since < i64::from(self.spec.initial_delay_seconds.unwrap_or(0)) {
            return true;
        }

        if c.started == Some(true) {
            // The startup probe is done once the container started; its
            // worker stays for the next container.
            if probe_type == ProbeType::Startup {
                return true;
            }
        } else if probe_type != ProbeType::Startup {
            // Nothing but the startup probe runs before the container started.
            return true;
        }

        let result = match self
            .shared
            .prober
            .probe(
                probe_type,
                &self.pod,
                &status,
                &self.container,
                &container_id,
            )
            .await
        {
            Ok(r) => r,
            // The probe could not be carried out: its result is dropped.
            Err(_) => return true,
        };
        let label = match result {
            ProbeResult::Success => RESULT_SUCCESSFUL,
            ProbeResult::Failure => RESULT_FAILED,
            ProbeResult::Unknown => RESULT_UNKNOWN,
        };
        let took = self
            .shared
            .clock
            .monotonic()
            .saturating_duration_since(started);
        self.labels.record(label, took.as_secs_f64());

        if self.last_result == result {
            self.result_run += 1;
        } else {
            self.last_result = result;
            self.result_run = 1;
        }
        let failure_threshold = positive_or(self.spec.failure_threshold, DEFAULT_FAILURE_THRESHOLD);
        let success_threshold = positive_or(self.spec.success_threshold, DEFAULT_SUCCESS_THRESHOLD);
        if (result == ProbeResult::Failure && self.result_run < failure_threshold)
            || (result == ProbeResult::Success && self.result_run < success_threshold)
        {
            // Below the threshold: the recorded result stands.
            return true;
        }
        self.results.set(&container_id, result, &uid);

        if matches!(probe_type, ProbeType::Liveness | ProbeType::Startup)
            && result == ProbeResult::Failure
        {
            // The container will be restarted; probe again only once a new
            // container shows up.
            self.on_hold = true;
            self.result_run = 0;
        }
        true
    }
}

#[cfg(test)]
#[path = "worker_tests.rs"]
pub(crate) mod tests;
