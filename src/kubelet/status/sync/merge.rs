//! mergePodStatus (status_manager.go v1.25): what the kubelet sends is the
//! API server's conditions that others own plus the kubelet's own
//! conditions, and a terminal phase only once no container can be running;
//! a terminal status never claims to be ready.

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::features;

const POD_SCHEDULED: &str = "PodScheduled";
const POD_READY: &str = "Ready";
const POD_INITIALIZED: &str = "Initialized";
const CONTAINERS_READY: &str = "ContainersReady";
const POD_HAS_NETWORK: &str = "PodHasNetwork";

/// Whether the kubelet owns conditions of this type.
pub fn pod_condition_by_kubelet(condition_type: &str) -> bool {
    matches!(
        condition_type,
        POD_SCHEDULED | POD_READY | POD_INITIALIZED | CONTAINERS_READY
    ) || (condition_type == POD_HAS_NETWORK
        && features::enabled(features::POD_HAS_NETWORK_CONDITION))
}

/// Succeeded or Failed.
pub fn is_phase_terminal(phase: Option<&str>) -> bool {
    matches!(phase, Some("Succeeded") | Some("Failed"))
}

fn condition_true(status: &PodStatus, t: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == t && c.status == "True")
}

/// Go's podutil.UpdatePodCondition: replaces (or appends) the condition,
/// keeping the old transition time while the status holds.
fn update_pod_condition(status: &mut PodStatus, mut condition: PodCondition, now: &Time) {
    condition.last_transition_time = Some(now.clone());
    let list = status.conditions.get_or_insert_with(Vec::new);
    match list.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(old) => {
            if old.status == condition.status {
                condition.last_transition_time = old.last_transition_time.clone();
            }
            *old = condition;
        }
        None => list.push(condition),
    }
}

fn terminal_condition(t: &str, phase: Option<&str>) -> PodCondition {
    PodCondition {
        type_: t.to_string(),
        status: "False".to_string(),
        reason: match phase {
            Some("Failed") => Some("PodFailed".to_string()),
            Some("Succeeded") => Some("PodCompleted".to_string()),
            _ => None,
        },
        ..Default::default()
    }
}

/// The status to send: `new` with the conditions of `old` the kubelet does
/// not own, the old phase kept while containers could still run, and the
/// readiness conditions false once the phase is terminal. `now` stamps
/// conditions that change.
pub fn merge_pod_status(
    old: &PodStatus,
    new: &PodStatus,
    could_have_running_containers: bool,
    now: &Time,
) -> PodStatus {
    let mut merged = new.clone();
    let conditions: Vec<PodCondition> = old
        .conditions
        .iter()
        .flatten()
        .filter(|c| !pod_condition_by_kubelet(&c.type_))
        .chain(
            new.conditions
                .iter()
                .flatten()
                .filter(|c| pod_condition_by_kubelet(&c.type_)),
        )
        .cloned()
        .collect();
    merged.conditions = Some(conditions);

    if !is_phase_terminal(old.phase.as_deref())
        && is_phase_terminal(new.phase.as_deref())
        && could_have_running_containers
    {
        merged.phase = old.phase.clone();
        merged.reason = old.reason.clone();
        merged.message = old.message.clone();
    }

    if is_phase_terminal(merged.phase.as_deref())
        && (condition_true(&merged, POD_READY) || condition_true(&merged, CONTAINERS_READY))
    {
        let phase = merged.phase.clone();
        update_pod_condition(
            &mut merged,
            terminal_condition(CONTAINERS_READY, phase.as_deref()),
            now,
        );
        update_pod_condition(
            &mut merged,
            terminal_condition(POD_READY, phase.as_deref()),
            now,
        );
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn status(v: Value) -> PodStatus {
        serde_json::from_value(v).unwrap()
    }

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    fn conds(s: &PodStatus) -> Vec<(String, String, Option<String>)> {
        s.conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    #[test]
    fn conditions_by_owner() {
        let old = status(json!({"conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "example.com/gate", "status": "True"},
            {"type": "Ready", "status": "True"},
        ]}));
        let new = status(json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "example.com/gate", "status": "False"},
            {"type": "PodScheduled", "status": "True"},
        ]}));
        let m = merge_pod_status(&old, &new, true, &now());
        assert_eq!(
            conds(&m),
            [
                ("example.com/gate".into(), "True".into(), None),
                ("Ready".into(), "False".into(), None),
                ("PodScheduled".into(), "True".into(), None),
            ]
        );
    }

    #[test]
    fn terminal_phase_waits_for_containers_and_is_never_ready() {
        let old = status(json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2023-01-01T00:00:00Z"},
            {"type": "ContainersReady", "status": "True"}]}));
        let new = status(
            json!({"phase": "Succeeded", "reason": "Done", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2023-01-01T00:00:00Z"},
            {"type": "ContainersReady", "status": "True"}]}),
        );
        // Containers may still run: the phase stays Running (and ready).
        let held = merge_pod_status(&old, &new, true, &now());
        assert_eq!(held.phase.as_deref(), Some("Running"));
        assert_eq!(held.reason, None);
        assert!(condition_true(&held, POD_READY));
        // All stopped: Succeeded, and the readiness conditions turn false.
        let done = merge_pod_status(&old, &new, false, &now());
        assert_eq!(done.phase.as_deref(), Some("Succeeded"));
        assert_eq!(done.reason.as_deref(), Some("Done"));
        assert_eq!(
            conds(&done),
            [
                ("Ready".into(), "False".into(), Some("PodCompleted".into())),
                (
                    "ContainersReady".into(),
                    "False".into(),
                    Some("PodCompleted".into())
                ),
            ]
        );
        assert_eq!(
            done.conditions.as_ref().unwrap()[0].last_transition_time,
            Some(now())
        );
        // Failed pods say PodFailed; an already terminal old phase is no barrier.
        let failed =
            status(json!({"phase": "Failed", "conditions": [{"type": "Ready", "status": "True"}]}));
        let m = merge_pod_status(&failed, &failed, true, &now());
        assert_eq!(m.phase.as_deref(), Some("Failed"));
        assert_eq!(
            conds(&m),
            [
                ("Ready".into(), "False".into(), Some("PodFailed".into())),
                (
                    "ContainersReady".into(),
                    "False".into(),
                    Some("PodFailed".into())
                ),
            ]
        );
    }
}
