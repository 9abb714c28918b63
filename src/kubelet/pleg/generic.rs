//! The generic PLEG: relist the runtime every second, compare each
//! container's state with the previous relist, refresh the pod status cache
//! for pods that changed (and pods whose inspection failed last time), then
//! tell the syncLoop through the lossless event stream.
//!
//! Unlike Go's, statuses of changed pods are fetched concurrently (bounded)
//! instead of one pod at a time; records, the cache and events are updated
//! per pod exactly as Go does, and every pod's cache entry is written before
//! the cache timestamp moves. Sandboxes are not reported as if they were
//! containers: any change of a pod's sandboxes is one `PodSync` event.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;

use super::events::{EventSender, PodLifecycleEvent, PodLifecycleEventType};
use crate::kubelet::container::{
    ContainerState, PodCache, PodStatus, PodUid, RunningPod, Runtime, RuntimeError,
};
use crate::metrics::kubelet as metrics;
use crate::util::backoff::go_duration_string;
use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet};

/// The relist period.
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// How long without a successful relist before the PLEG is unhealthy.
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(180);
/// Pod statuses fetched at once during a relist.
pub const DEFAULT_INSPECT_CONCURRENCY: usize = 8;

/// Why the PLEG is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlegError {
    #[error("pleg has yet to be successful")]
    NeverRelisted,
    #[error("pleg was last seen active {elapsed} ago; threshold is {threshold}")]
    Stale { elapsed: String, threshold: String },
}

/// A container's state as the PLEG tracks it; created counts as unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlegContainerState {
    Running,
    Exited,
    Unknown,
    NonExistent,
}

fn convert_state(s: ContainerState) -> PlegContainerState {
    match s {
        ContainerState::Running => PlegContainerState::Running,
        ContainerState::Exited => PlegContainerState::Exited,
        ContainerState::Created | ContainerState::Unknown => PlegContainerState::Unknown,
    }
}

/// The events for one container's transition.
pub fn generate_events(
    pod: &str,
    cid: &str,
    old: PlegContainerState,
    new: PlegContainerState,
) -> Vec<PodLifecycleEvent> {
    if old == new {
        return Vec::new();
    }
    crate::vlog!(4, pod_uid = pod, container_id = cid, old_state = ?old, new_state = ?new, "GenericPLEG");
    let ev = |t| PodLifecycleEvent {
        id: pod.to_string(),
        event_type: t,
        data: cid.to_string(),
    };
    use PodLifecycleEventType::*;
    match new {
        PlegContainerState::Running => vec![ev(ContainerStarted)],
        PlegContainerState::Exited => vec![ev(ContainerDied)],
        PlegContainerState::Unknown => vec![ev(ContainerChanged)],
        PlegContainerState::NonExistent if old == PlegContainerState::Exited => {
            vec![ev(ContainerRemoved)]
        }
        PlegContainerState::NonExistent => vec![ev(ContainerDied), ev(ContainerRemoved)],
    }
}

fn container_state(pod: Option<&RunningPod>, cid: &str) -> PlegContainerState {
    pod.and_then(|p| p.containers.iter().find(|c| c.id.id == cid))
        .map(|c| convert_state(c.state))
        .unwrap_or(PlegContainerState::NonExistent)
}

fn sandbox_state(pod: Option<&RunningPod>, sid: &str) -> PlegContainerState {
    pod.and_then(|p| p.sandboxes.iter().find(|s| s.id.id == sid))
        .map(|s| convert_state(s.state))
        .unwrap_or(PlegContainerState::NonExistent)
}

/// The events between two observations of one pod: container transitions
/// as Go reports them, and a single PodSync for any sandbox change.
pub fn compute_pod_events(
    uid: &str,
    old: Option<&RunningPod>,
    new: Option<&RunningPod>,
) -> Vec<PodLifecycleEvent> {
    let mut events = Vec::new();
    let mut seen = BTreeSet::new();
    for p in [old, new].into_iter().flatten() {
        for c in &p.containers {
            if seen.insert(c.id.id.clone()) {
                events.extend(generate_events(
                    uid,
                    &c.id.id,
                    container_state(old, &c.id.id),
                    container_state(new, &c.id.id),
                ));
            }
        }
    }
    let mut sandboxes = BTreeSet::new();
    for p in [old, new].into_iter().flatten() {
        for s in &p.sandboxes {
            sandboxes.insert(s.id.id.clone());
        }
    }
    for sid in sandboxes {
        if seen.contains(&sid) {
            continue;
        }
        if sandbox_state(old, &sid) != sandbox_state(new, &sid) {
            events.push(PodLifecycleEvent {
                id: uid.to_string(),
                event_type: PodLifecycleEventType::PodSync,
                data: sid,
            });
            break;
        }
    }
    events
}

#[derive(Debug, Default)]
struct PodRecord {
    old: Option<RunningPod>,
    current: Option<RunningPod>,
}

#[derive(Debug, Default)]
struct State {
    records: HashMap<PodUid, PodRecord>,
    /// Pods whose status could not be read last time: read again next relist.
    to_reinspect: BTreeMap<PodUid, RunningPod>,
}

/// The generic pod lifecycle event generator.
pub struct GenericPleg {
    runtime: Arc<dyn Runtime>,
    cache: Arc<PodCache>,
    events: EventSender,
    clock: Arc<dyn Clock>,
    relist_period: Duration,
    concurrency: usize,
    state: tokio::sync::Mutex<State>,
    last_relist: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for GenericPleg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericPleg")
            .field("relist_period", &self.relist_period)
            .finish_non_exhaustive()
    }
}

impl GenericPleg {
    pub fn new(
        runtime: Arc<dyn Runtime>,
        cache: Arc<PodCache>,
        events: EventSender,
        clock: Arc<dyn Clock>,
    ) -> Self {
        GenericPleg {
            runtime,
            cache,
            events,
            clock,
            relist_period: RELIST_PERIOD,
            concurrency: DEFAULT_INSPECT_CONCURRENCY,
            state: tokio::sync::Mutex::new(State::default()),
            last_relist: Mutex::new(None),
        }
    }

    /// Overrides the relist period (tests) and the inspection concurrency.
    pub fn with_tuning(mut self, relist_period: Duration, concurrency: usize) -> Self {
        self.relist_period = relist_period;
        self.concurrency = concurrency.max(1);
        self
    }

    /// Spawns the relist loop: every relist period, and at once when the
    /// cache says a pod worker wants a fresher status (Go waits for the next
    /// period).
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        let me = self.clone();
        let cache = self.cache.clone();
        tasks.spawn_periodic_or_woken(
            "pleg-relist",
            Period::sliding(self.relist_period),
            self.clock.clone(),
            move || {
                let cache = cache.clone();
                async move { cache.relist_wanted().await }
            },
            move || {
                let me = me.clone();
                async move { me.relist().await }
            },
        );
    }

    /// Healthy while a relist succeeded within the threshold.
    pub fn healthy(&self) -> Result<(), PlegError> {
        let last = *self.last_relist.lock().unwrap_or_else(|p| p.into_inner());
        let Some(last) = last else {
            return Err(PlegError::NeverRelisted);
        };
        let elapsed = self.clock.monotonic().saturating_duration_since(last);
        if elapsed > RELIST_THRESHOLD {
            return Err(PlegError::Stale {
                elapsed: go_duration_string(elapsed),
                threshold: go_duration_string(RELIST_THRESHOLD),
            });
        }
        Ok(())
    }

    /// Inspects a pod and writes the cache; `Err` when the status could not
    /// be read (the error is cached too).
    async fn update_cache(&self, uid: &str, pod: Option<&RunningPod>) -> Result<(), RuntimeError> {
        let Some(pod) = pod else {
            crate::vlog!(4, pod_uid = uid, "PLEG: delete status for pod");
            self.cache.delete(uid);
            return Ok(());
        };
        let observed = self.clock.monotonic();
        match self
            .runtime
            .get_pod_status(&pod.id, &pod.name, &pod.namespace)
            .await
        {
            Ok(mut status) => {
                crate::vlog!(4, pod = %format!("{}/{}", pod.namespace, pod.name), "PLEG: write status");
                status.ips = self.preserved_ips(uid, &status);
                self.cache.set(&pod.id, status, None, observed);
                Ok(())
            }
            Err(e) => {
                tracing::error!(pod = %format!("{}/{}", pod.namespace, pod.name), error = %e, "PLEG: write status");
                let mut empty = PodStatus::empty(pod.id.clone());
                empty.name = pod.name.clone();
                empty.namespace = pod.namespace.clone();
                self.cache
                    .set(&pod.id, empty, Some(Arc::new(e.clone())), observed);
                Err(e)
            }
        }
    }

    /// Keeps the previous IPs of a pod whose sandboxes are all gone or
    /// stopped: a finished pod still reports its IP.
    fn preserved_ips(&self, uid: &str, status: &PodStatus) -> Vec<String> {
        if !status.ips.is_empty() {
            return status.ips.clone();
        }
        let old = self.cache.get(uid);
        if old.error.is_some() || old.status.ips.is_empty() {
            return Vec::new();
        }
        let any_ready = status
            .sandbox_statuses
            .iter()
            .any(|s| s.state == crate::cri::api::PodSandboxState::SandboxReady as i32);
        if any_ready {
            status.ips.clone()
        } else {
            old.status.ips.clone()
        }
    }

    /// One relist.
    pub async fn relist(&self) {
        crate::vlog!(5, "GenericPLEG: relisting");
        let timestamp = self.clock.monotonic();
        if let Some(last) = *self.last_relist.lock().unwrap_or_else(|p| p.into_inner()) {
            metrics::pleg_relist_interval()
                .observe(&[], timestamp.saturating_duration_since(last).as_secs_f64());
        }
        let pods = match self.runtime.get_pods(true).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "GenericPLEG: unable to retrieve pods");
                self.observe_duration(timestamp);
                return;
            }
        };
        *self.last_relist.lock().unwrap_or_else(|p| p.into_inner()) = Some(timestamp);
        if let Ok(wall) = self.clock.now().duration_since(std::time::UNIX_EPOCH) {
            metrics::pleg_last_seen().set(&[], wall.as_secs() as f64);
        }
        update_running_metrics(&pods);

        let mut state = self.state.lock().await;
        for r in state.records.values_mut() {
            r.current = None;
        }
        for p in pods {
            let uid = p.id.clone();
            state.records.entry(uid).or_default().current = Some(p);
        }

        let mut events_by_pod: BTreeMap<PodUid, Vec<PodLifecycleEvent>> = BTreeMap::new();
        for (uid, r) in &state.records {
            let events = compute_pod_events(uid, r.old.as_ref(), r.current.as_ref());
            if !events.is_empty() {
                events_by_pod.insert(uid.clone(), events);
            }
        }

        // Inspect changed pods, and those that failed last time, concurrently.
        let mut to_inspect: BTreeMap<PodUid, Option<RunningPod>> = events_by_pod
            .keys()
            .map(|uid| {
                (
                    uid.clone(),
                    state.records.get(uid).and_then(|r| r.current.clone()),
                )
            })
            .collect();
        let reinspect = std::mem::take(&mut state.to_reinspect);
        for (uid, pod) in &reinspect {
            to_inspect
                .entry(uid.clone())
                .or_insert_with(|| Some(pod.clone()));
        }
        let results: HashMap<PodUid, bool> = futures::stream::iter(to_inspect)
            .map(|(uid, pod)| async move {
                let ok = self.update_cache(&uid, pod.as_ref()).await.is_ok();
                (uid, ok)
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;

        let mut needs_reinspection = BTreeMap::new();
        for (uid, events) in events_by_pod {
            let current = state.records.get(&uid).and_then(|r| r.current.clone());
            if results.get(&uid) == Some(&false) {
                // Keep the record as it was so the change is seen again.
                crate::vlog!(4, pod_uid = %uid, "PLEG: ignoring events for pod");
                if let Some(p) = current {
                    needs_reinspection.insert(uid, p);
                }
                continue;
            }
            match state.records.get_mut(&uid) {
                Some(r) if r.current.is_none() => {
                    state.records.remove(&uid);
                }
                Some(r) => r.old = r.current.take(),
                None => {}
            }
            let mut exit_codes: Option<HashMap<String, i32>> = None;
            for e in events {
                if e.event_type == PodLifecycleEventType::ContainerChanged {
                    continue;
                }
                if e.event_type == PodLifecycleEventType::ContainerDied {
                    let codes = exit_codes.get_or_insert_with(|| {
                        self.cache
                            .get(&uid)
                            .status
                            .container_statuses
                            .iter()
                            .map(|c| (c.id.id.clone(), c.exit_code))
                            .collect()
                    });
                    if let Some(code) = codes.get(&e.data) {
                        crate::vlog!(2, pod_id = %uid, container_id = %e.data, exit_code = code, "generic (PLEG): container finished");
                    }
                }
                self.events.send(e);
            }
        }
        for (uid, pod) in reinspect {
            if results.get(&uid) == Some(&false) {
                needs_reinspection.entry(uid).or_insert(pod);
            }
        }
        state.to_reinspect = needs_reinspection;
        drop(state);
        self.cache.update_time(timestamp);
        self.observe_duration(timestamp);
    }

    fn observe_duration(&self, started: Instant) {
        let took = self.clock.monotonic().saturating_duration_since(started);
        metrics::pleg_relist_duration().observe(&[], took.as_secs_f64());
    }
}

/// Containers per state and pods with a running sandbox, in a relist.
fn running_counts(pods: &[RunningPod]) -> (BTreeMap<&'static str, usize>, usize) {
    use crate::kubelet::container::ContainerState;
    let mut by_state: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut running_sandboxes = 0usize;
    for pod in pods {
        for c in &pod.containers {
            let state = match c.state {
                ContainerState::Created => "created",
                ContainerState::Running => "running",
                ContainerState::Exited => "exited",
                ContainerState::Unknown => "unknown",
            };
            *by_state.entry(state).or_default() += 1;
        }
        if pod
            .sandboxes
            .iter()
            .any(|s| s.state == ContainerState::Running)
        {
            running_sandboxes += 1;
        }
    }
    (by_state, running_sandboxes)
}

/// `kubelet_running_pods` and `kubelet_running_containers` per state seen
/// (states no container is in keep their last value, as in Go).
fn update_running_metrics(pods: &[RunningPod]) {
    let (by_state, running_sandboxes) = running_counts(pods);
    for (state, n) in by_state {
        metrics::running_containers().set(&[state], n as f64);
    }
    metrics::running_pods().set(&[], running_sandboxes as f64);
}

#[cfg(test)]
#[path = "generic_tests.rs"]
mod tests;
