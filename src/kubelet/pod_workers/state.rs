//! What the pod workers know about each pod (Go's podSyncStatus) and the
//! rules over it: the effective grace period (it only ever shortens) and
//! the order in which static pods sharing a full name may start.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::PodStatusFn;

/// One pod's progress through sync → terminating → terminated.
#[derive(Default)]
pub(super) struct PodSyncStatus {
    /// Cancels the sync in progress when termination is requested or the
    /// grace period shortens.
    pub cancel: Option<CancellationToken>,
    /// A worker is inside a sync method (or has work delivered to it).
    pub working: bool,
    pub full_name: String,
    /// Termination was requested (may precede the worker seeing it).
    pub terminating_at: Option<Instant>,
    /// The worker has observed the termination: no container will start again.
    pub started_terminating: bool,
    /// Deleted in its source, or an orphan with no config at all.
    pub deleted: bool,
    /// The grace period once termination was requested (0: not yet set).
    pub grace_period: i64,
    pub evicted: bool,
    /// syncTerminatingPod succeeded: nothing of the pod runs.
    pub terminated_at: Option<Instant>,
    /// syncTerminatedPod succeeded: the worker is done with this UID.
    pub finished: bool,
    /// A create arrived for this UID while it was terminating.
    pub restart_requested: bool,
    /// Completion signals of kill requests, fired once terminated.
    pub notify_post_terminating: Vec<oneshot::Sender<()>>,
    /// Status overrides of kill requests; the last one applies.
    pub status_post_terminating: Vec<PodStatusFn>,
}

impl PodSyncStatus {
    pub fn is_termination_requested(&self) -> bool {
        self.terminating_at.is_some()
    }
    pub fn is_termination_started(&self) -> bool {
        self.started_terminating
    }
    pub fn is_terminated(&self) -> bool {
        self.terminated_at.is_some()
    }
}

/// The grace period for a terminating pod: the smallest of what was already
/// decided, the pod's deletion grace period and the kill request's override;
/// else the pod's terminationGracePeriodSeconds; never below 1. Returns the
/// value and whether it shortened one already decided.
pub(super) fn effective_grace_period(
    current: i64,
    pod: &Pod,
    override_seconds: Option<i64>,
) -> (i64, bool) {
    let mut grace = current;
    for candidate in [pod.metadata.deletion_grace_period_seconds, override_seconds]
        .into_iter()
        .flatten()
    {
        if grace == 0 || candidate < grace {
            grace = candidate;
        }
    }
    if grace == 0
        && let Some(spec_grace) = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
    {
        grace = spec_grace;
    }
    if grace < 1 {
        grace = 1;
    }
    (grace, current != 0 && current != grace)
}

/// Static pods that share a full name start one at a time, in the order
/// their UIDs were first seen.
#[derive(Default)]
pub(super) struct StaticPodOrder {
    pub started: HashMap<String, String>,
    pub waiting: HashMap<String, Vec<String>>,
}

impl StaticPodOrder {
    /// Whether `uid` may start now; when it may, it is recorded as the
    /// started pod of its name.
    pub fn allow_start(
        &mut self,
        full_name: &str,
        uid: &str,
        statuses: &HashMap<String, PodSyncStatus>,
    ) -> bool {
        if let Some(started) = self.started.get(full_name) {
            return started == uid;
        }
        let mut waiting = self.waiting.get(full_name).cloned().unwrap_or_default();
        let mut next = None;
        for (i, w) in waiting.iter().enumerate() {
            match statuses.get(w) {
                None => continue,
                Some(s) if s.is_termination_requested() || s.is_terminated() => continue,
                Some(_) => {}
            }
            if w != uid {
                self.waiting
                    .insert(full_name.to_string(), waiting[i..].to_vec());
                return false;
            }
            next = Some(i);
            break;
        }
        if let Some(i) = next {
            waiting.drain(..=i);
        }
        if waiting.is_empty() {
            self.waiting.remove(full_name);
        } else {
            self.waiting.insert(full_name.to_string(), waiting);
        }
        self.started.insert(full_name.to_string(), uid.to_string());
        true
    }

    /// Forgets `uid` as the started pod of its name.
    pub fn release(&mut self, full_name: &str, uid: &str) {
        if self.started.get(full_name).is_some_and(|u| u == uid) {
            self.started.remove(full_name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(deletion_grace: Option<i64>, spec_grace: Option<i64>) -> Pod {
        let mut p = Pod::default();
        p.metadata.deletion_grace_period_seconds = deletion_grace;
        p.spec = Some(PodSpec {
            termination_grace_period_seconds: spec_grace,
            ..Default::default()
        });
        p
    }

    #[test]
    fn grace_period_table() {
        // (current, deletion grace, override, spec grace) → (grace, shortened)
        let cases = [
            ((0, None, None, Some(30)), (30, false)),
            ((0, None, None, None), (1, false)),
            ((0, None, None, Some(0)), (1, false)),
            ((0, Some(10), None, Some(30)), (10, false)),
            ((0, Some(10), Some(5), Some(30)), (5, false)),
            ((30, None, Some(40), Some(30)), (30, false)),
            ((30, None, Some(2), Some(30)), (2, true)),
            // A zero deletion grace period falls back to the spec, as in Go.
            ((30, Some(0), None, Some(30)), (30, false)),
            ((5, None, None, Some(30)), (5, false)),
        ];
        for ((current, del, over, spec), want) in cases {
            let got = effective_grace_period(current, &pod(del, spec), over);
            assert_eq!(
                got, want,
                "current={current} del={del:?} over={over:?} spec={spec:?}"
            );
        }
    }

    #[test]
    fn static_pods_with_one_name_start_in_order() {
        let mut order = StaticPodOrder::default();
        let mut statuses = HashMap::new();
        for uid in ["a", "b"] {
            statuses.insert(uid.to_string(), PodSyncStatus::default());
        }
        order
            .waiting
            .insert("p_ns".into(), vec!["a".into(), "b".into()]);
        assert!(!order.allow_start("p_ns", "b", &statuses), "a is first");
        assert!(order.allow_start("p_ns", "a", &statuses));
        assert!(!order.allow_start("p_ns", "b", &statuses), "a is running");
        // a terminates and releases the name: b may go.
        statuses.get_mut("a").unwrap().terminating_at = Some(Instant::now());
        order.release("p_ns", "a");
        assert!(order.allow_start("p_ns", "b", &statuses));
        assert!(order.waiting.is_empty());
    }
}
