//! The eviction manager: every monitoring interval it reads the stats,
//! decides which thresholds are met (hard ones at once, soft ones after
//! their grace period, minimum reclaim keeping them met), keeps the node
//! pressure conditions (held for the pressure transition period after a
//! threshold clears), evicts pods past their local storage limits, tries to
//! reclaim node-level resources, and otherwise evicts the first-ranked
//! non-critical pod, one per pass.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use tokio::time::Instant;

use super::config::EvictionConfig;
use super::error::EvictionError;
use super::evaluate::{
    NodeConditionType, format_conditions, merge_thresholds, node_conditions,
    node_conditions_last_observed_at, node_conditions_observed_since, sort_by_eviction_priority,
    thresholds_first_observed_at, thresholds_met, thresholds_met_grace_period,
    thresholds_updated_stats,
};
use super::message::{REASON, THRESHOLD_MET_REASON, eviction_message};
use super::notifiers::{NOTIFIER_REFRESH_INTERVAL, Notifiers};
use super::rank::rank_func_for;
use super::seams::{
    ActivePodsFn, ContainerGc, EvictionStatus, ImageGc, NodeReclaim, PodCleanedUpFn, PodKiller,
    node_reclaim_for,
};
use super::signals::{SignalObservations, make_signal_observations};
use super::threshold::Threshold;
use crate::kubelet::container::format_pod;
use crate::kubelet::events::{EventRecorder, EventType, pod_ref};
use crate::kubelet::nodestatus::PressureSource;
use crate::kubelet::stats::StatsProvider;
use crate::kubelet::types::is_critical_pod;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

/// How often the manager looks at the node (Go's monitoring interval).
pub const MONITORING_INTERVAL: Duration = Duration::from_secs(10);
/// How long the manager waits for an evicted pod's resources to go.
pub const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often it checks meanwhile.
pub const POD_CLEANUP_POLL: Duration = Duration::from_secs(1);

/// The manager's collaborators.
pub struct EvictionDeps {
    pub stats: Arc<dyn StatsProvider>,
    pub killer: Arc<dyn PodKiller>,
    pub image_gc: Arc<dyn ImageGc>,
    pub container_gc: Arc<dyn ContainerGc>,
    pub recorder: Arc<dyn EventRecorder>,
    /// The node events about thresholds point at.
    pub node_ref: ObjectReference,
    pub clock: Arc<dyn Clock>,
    pub active_pods: ActivePodsFn,
    pub pod_cleaned_up: PodCleanedUpFn,
}

#[derive(Default)]
struct State {
    node_conditions: Vec<NodeConditionType>,
    node_conditions_last_observed_at: BTreeMap<NodeConditionType, Instant>,
    thresholds_first_observed_at: Vec<(Threshold, Instant)>,
    thresholds_met: Vec<Threshold>,
    last_observations: SignalObservations,
    dedicated_image_fs: Option<bool>,
    notifiers_updated_at: Option<Instant>,
}

/// The eviction manager.
pub struct EvictionManager {
    config: EvictionConfig,
    deps: EvictionDeps,
    state: Mutex<State>,
    notifiers: Notifiers,
}

impl EvictionManager {
    /// Pure construction (build phase).
    pub fn new(config: EvictionConfig, deps: EvictionDeps) -> Arc<Self> {
        let notifiers = Notifiers::new(&config);
        Arc::new(EvictionManager {
            config,
            deps,
            state: Mutex::new(State::default()),
            notifiers,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pressure conditions the node has now.
    pub fn node_conditions(&self) -> Vec<NodeConditionType> {
        self.state().node_conditions.clone()
    }

    fn has_condition(&self, c: NodeConditionType) -> bool {
        self.state().node_conditions.contains(&c)
    }

    /// Spawns the monitoring loop: synchronize every `interval` (sooner when
    /// a memcg notifier fires); after an eviction, wait for the pod to be
    /// cleaned up and go again at once.
    pub fn start(self: &Arc<Self>, tasks: &TaskSet, interval: Duration) {
        let this = self.clone();
        let token = tasks.token();
        // The memcg notifiers' watchers run here, cancelled with the loop.
        let notifier_tasks = tasks.child();
        tasks.spawn("eviction_manager", async move {
            loop {
                let result = tokio::select! {
                    _ = token.cancelled() => return,
                    r = this.synchronize_pass(Some(&notifier_tasks)) => r,
                };
                match result {
                    Ok(Some(evicted)) => {
                        let names: Vec<String> = evicted.iter().map(|p| format_pod(p)).collect();
                        tracing::info!(pods = ?names, "Eviction manager: pods evicted, waiting for pod to be cleaned up");
                        tokio::select! {
                            _ = token.cancelled() => return,
                            _ = this.wait_for_pods_cleanup(&evicted) => {}
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => tracing::error!(error = %e, "Eviction manager: failed to synchronize"),
                }
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(interval) => {}
                    _ = this.notifiers.woken() => {}
                }
            }
        });
    }

    async fn wait_for_pods_cleanup(&self, pods: &[Arc<Pod>]) {
        let deadline = self.deps.clock.monotonic() + POD_CLEANUP_TIMEOUT;
        loop {
            if pods.iter().all(|p| (self.deps.pod_cleaned_up)(p)) {
                let names: Vec<String> = pods.iter().map(|p| format_pod(p)).collect();
                tracing::info!(pods = ?names, "Eviction manager: pods successfully cleaned up");
                return;
            }
            if self.deps.clock.monotonic() >= deadline {
                let names: Vec<String> = pods.iter().map(|p| format_pod(p)).collect();
                tracing::warn!(pods = ?names, "Eviction manager: timed out waiting for pods to be cleaned up");
                return;
            }
            tokio::time::sleep(POD_CLEANUP_POLL).await;
        }
    }

    /// How many memcg notifiers are armed (registered with the kernel).
    pub fn armed_memcg_notifiers(&self) -> usize {
        self.notifiers.armed()
    }

    /// One pass, without arming memcg notifiers (they are armed only by the
    /// monitoring loop, see [`EvictionManager::start`]). Returns the pods
    /// evicted, if any.
    pub async fn synchronize(&self) -> Result<Option<Vec<Arc<Pod>>>, EvictionError> {
        self.synchronize_pass(None).await
    }

    /// One pass; `notifier_tasks`: where re-armed memcg notifiers watch.
    async fn synchronize_pass(
        &self,
        notifier_tasks: Option<&TaskSet>,
    ) -> Result<Option<Vec<Arc<Pod>>>, EvictionError> {
        let configured = &self.config.thresholds;
        if configured.is_empty() && !self.config.local_storage_capacity_isolation {
            return Ok(None);
        }
        crate::vlog!(3, "Eviction manager: synchronize housekeeping");
        let known = self.state().dedicated_image_fs;
        let dedicated = match known {
            Some(d) => d,
            None => {
                let d = self
                    .deps
                    .stats
                    .has_dedicated_image_fs()
                    .await
                    .map_err(EvictionError::DedicatedImageFs)?;
                self.state().dedicated_image_fs = Some(d);
                d
            }
        };
        let active_pods = (self.deps.active_pods)();
        let summary = match self.deps.stats.summary(&active_pods).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "Eviction manager: failed to get summary stats");
                return Ok(None);
            }
        };
        let now = self.deps.clock.monotonic();
        if let Some(tasks) = notifier_tasks
            && !self.notifiers.is_empty()
        {
            let due = self
                .state()
                .notifiers_updated_at
                .is_none_or(|at| now.saturating_duration_since(at) > NOTIFIER_REFRESH_INTERVAL);
            if due {
                self.state().notifiers_updated_at = Some(now);
                self.notifiers.update(&summary, tasks).await;
            }
        }
        let (observations, stats) = make_signal_observations(&summary);
        log_observations("observations", &observations);

        let thresholds = {
            let mut state = self.state();
            let mut met = thresholds_met(configured, &observations, false);
            if !state.thresholds_met.is_empty() {
                let unresolved = thresholds_met(&state.thresholds_met, &observations, true);
                met = merge_thresholds(met, unresolved);
            }
            let first_observed =
                thresholds_first_observed_at(&met, &state.thresholds_first_observed_at, now);
            let observed_conditions = node_conditions(&met);
            if !observed_conditions.is_empty() {
                crate::vlog!(3, node_condition = %format_conditions(&observed_conditions), "Eviction manager: node conditions - observed");
            }
            let last_observed = node_conditions_last_observed_at(
                &observed_conditions,
                &state.node_conditions_last_observed_at,
                now,
            );
            let conditions = node_conditions_observed_since(
                &last_observed,
                self.config.pressure_transition_period,
                now,
            );
            if !conditions.is_empty() {
                crate::vlog!(3, node_condition = %format_conditions(&conditions), "Eviction manager: node conditions - transition period not met");
            }
            let past_grace = thresholds_met_grace_period(&first_observed, now);
            state.node_conditions = conditions;
            state.thresholds_first_observed_at = first_observed;
            state.node_conditions_last_observed_at = last_observed;
            state.thresholds_met = past_grace.clone();
            let updated =
                thresholds_updated_stats(&past_grace, &observations, &state.last_observations);
            state.last_observations = observations.clone();
            updated
        };

        if self.config.local_storage_capacity_isolation {
            let evicted =
                super::local_storage::local_storage_eviction(self, &active_pods, &stats, dedicated)
                    .await;
            if !evicted.is_empty() {
                return Ok(Some(evicted));
            }
        }

        if thresholds.is_empty() {
            crate::vlog!(3, "Eviction manager: no resources are starved");
            return Ok(None);
        }
        let mut thresholds = thresholds;
        sort_by_eviction_priority(&mut thresholds);
        let Some(to_reclaim) = thresholds.first().cloned() else {
            return Ok(None);
        };
        let resource = to_reclaim.signal.resource();
        tracing::info!(
            resource_name = resource,
            "Eviction manager: attempting to reclaim"
        );
        self.deps.recorder.event(
            &self.deps.node_ref,
            EventType::Warning,
            THRESHOLD_MET_REASON,
            &format!("Attempting to reclaim {resource}"),
        );

        if self
            .reclaim_node_level_resources(&to_reclaim, dedicated)
            .await
        {
            tracing::info!(
                resource_name = resource,
                "Eviction manager: able to reduce resource pressure without evicting pods."
            );
            return Ok(None);
        }

        if active_pods.is_empty() {
            tracing::error!(
                "Eviction manager: eviction thresholds have been met, but no pods are active to evict"
            );
            return Ok(None);
        }
        let mut ranked = active_pods.clone();
        rank_func_for(to_reclaim.signal, dedicated).rank(&mut ranked, &stats);
        let names: Vec<String> = ranked.iter().map(|p| format_pod(p)).collect();
        tracing::info!(pods = ?names, "Eviction manager: pods ranked for eviction");

        for pod in &ranked {
            let grace = if to_reclaim.is_hard() {
                0
            } else {
                self.config.max_pod_grace_period_seconds
            };
            let message = eviction_message(resource, pod, &stats);
            if self.evict_pod(pod, grace, message).await {
                let signal = to_reclaim.signal.as_str();
                crate::metrics::kubelet_admission::evictions().inc(&[signal]);
                if let Some(at) = observations.get(&to_reclaim.signal).and_then(|o| o.time) {
                    let age = self.deps.clock.now().duration_since(at).unwrap_or_default();
                    crate::metrics::kubelet_admission::eviction_stats_age()
                        .observe(&[signal], age.as_secs_f64());
                }
                return Ok(Some(vec![pod.clone()]));
            }
        }
        tracing::info!("Eviction manager: unable to evict any pods from the node");
        Ok(None)
    }

    async fn reclaim_node_level_resources(&self, threshold: &Threshold, dedicated: bool) -> bool {
        let steps = node_reclaim_for(threshold.signal, dedicated);
        if steps.is_empty() {
            return false;
        }
        for step in &steps {
            let result = match step {
                NodeReclaim::DeleteUnusedContainers => {
                    self.deps.container_gc.delete_all_unused_containers().await
                }
                NodeReclaim::DeleteUnusedImages => self.deps.image_gc.delete_unused_images().await,
            };
            if let Err(e) = result {
                tracing::info!(resource_name = threshold.signal.resource(), error = %e, "Eviction manager: unexpected error when attempting to reduce resource pressure");
            }
        }
        let active = (self.deps.active_pods)();
        let summary = match self.deps.stats.summary(&active).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "Eviction manager: failed to get summary stats after resource reclaim");
                return false;
            }
        };
        let (observations, _) = make_signal_observations(&summary);
        log_observations("observations after resource reclaim", &observations);
        thresholds_met(&self.config.thresholds, &observations, true).is_empty()
    }

    /// Evicts `pod` unless it is critical: records the event, then kills it
    /// with the eviction status. Returns whether an eviction was attempted.
    pub(super) async fn evict_pod(
        &self,
        pod: &Arc<Pod>,
        grace_period: i64,
        message: String,
    ) -> bool {
        if is_critical_pod(pod) {
            tracing::error!(pod = %format_pod(pod), "Eviction manager: cannot evict a critical pod");
            return false;
        }
        self.deps
            .recorder
            .event(&pod_ref(pod), EventType::Warning, REASON, &message);
        crate::vlog!(3, pod = %format_pod(pod), pod_uid = pod.metadata.uid.as_deref().unwrap_or(""), message = %message, "Evicting pod");
        let status = EvictionStatus {
            phase: "Failed".to_string(),
            reason: REASON.to_string(),
            message,
        };
        match self.deps.killer.kill_pod(pod, status, grace_period).await {
            Ok(()) => {
                tracing::info!(pod = %format_pod(pod), "Eviction manager: pod is evicted successfully")
            }
            Err(e) => {
                tracing::error!(pod = %format_pod(pod), error = %e, "Eviction manager: pod failed to evict")
            }
        }
        true
    }
}

fn log_observations(what: &str, observations: &SignalObservations) {
    if !crate::logs::v_enabled_in(3, file!()) {
        return;
    }
    for (signal, o) in observations {
        crate::vlog!(3, signal = %signal, resource = %signal.resource(), available = %o.available, capacity = %o.capacity, "Eviction manager: {}", what);
    }
}

impl PressureSource for EvictionManager {
    fn memory_pressure(&self) -> bool {
        self.has_condition(NodeConditionType::MemoryPressure)
    }
    fn disk_pressure(&self) -> bool {
        self.has_condition(NodeConditionType::DiskPressure)
    }
    fn pid_pressure(&self) -> bool {
        self.has_condition(NodeConditionType::PidPressure)
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
