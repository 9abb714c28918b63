//! The pod conditions the kubelet owns (status/generate.go): Initialized,
//! ContainersReady and Ready, computed from the spec and the container
//! statuses, with the reasons and messages the Go kubelet writes.

use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec};

pub const POD_INITIALIZED: &str = "Initialized";
pub const POD_READY: &str = "Ready";
pub const CONTAINERS_READY: &str = "ContainersReady";
pub const POD_SCHEDULED: &str = "PodScheduled";
/// The condition types the kubelet writes; all others belong to someone else.
pub const KUBELET_OWNED: [&str; 4] = [POD_INITIALIZED, POD_READY, CONTAINERS_READY, POD_SCHEDULED];

pub const UNKNOWN_CONTAINER_STATUSES: &str = "UnknownContainerStatuses";
pub const POD_COMPLETED: &str = "PodCompleted";
pub const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
pub const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

pub const TRUE: &str = "True";
pub const FALSE: &str = "False";

/// Whether the kubelet owns conditions of this type.
pub fn is_kubelet_owned(condition_type: &str) -> bool {
    KUBELET_OWNED.contains(&condition_type)
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: (!reason.is_empty()).then(|| reason.to_string()),
        message: (!message.is_empty()).then(|| message.to_string()),
        ..Default::default()
    }
}

/// Go prints a string slice as `[a b]`.
fn go_list(names: &[String]) -> String {
    format!("[{}]", names.join(" "))
}

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// Sorts container names into those with no status and those not ready.
fn unknown_and_unready(
    names: &[String],
    statuses: &[ContainerStatus],
) -> (Vec<String>, Vec<String>) {
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    for name in names {
        match find(statuses, name) {
            Some(s) if !s.ready => unready.push(name.clone()),
            Some(_) => {}
            None => unknown.push(name.clone()),
        }
    }
    (unknown, unready)
}

fn names(containers: &[k8s_openapi::api::core::v1::Container]) -> Vec<String> {
    containers.iter().map(|c| c.name.clone()).collect()
}

/// ContainersReady: every app container has a ready status.
pub fn containers_ready(
    spec: &PodSpec,
    statuses: Option<&[ContainerStatus]>,
    phase: &str,
) -> PodCondition {
    let Some(statuses) = statuses else {
        return condition(CONTAINERS_READY, FALSE, UNKNOWN_CONTAINER_STATUSES, "");
    };
    let (unknown, unready) = unknown_and_unready(&names(&spec.containers), statuses);
    if phase == "Succeeded" && unknown.is_empty() {
        return condition(CONTAINERS_READY, FALSE, POD_COMPLETED, "");
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if !messages.is_empty() {
        return condition(
            CONTAINERS_READY,
            FALSE,
            CONTAINERS_NOT_READY,
            &messages.join(", "),
        );
    }
    condition(CONTAINERS_READY, TRUE, "", "")
}

/// Ready: ContainersReady, and every readiness gate's condition True.
pub fn pod_ready(
    spec: &PodSpec,
    conditions: &[PodCondition],
    statuses: Option<&[ContainerStatus]>,
    phase: &str,
) -> PodCondition {
    let containers = containers_ready(spec, statuses, phase);
    if containers.status != TRUE {
        return PodCondition {
            type_: POD_READY.to_string(),
            ..containers
        };
    }
    let mut messages = Vec::new();
    for gate in spec.readiness_gates.iter().flatten() {
        let t = &gate.condition_type;
        match conditions.iter().find(|c| &c.type_ == t) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate {t:?} does not exist."
            )),
            Some(c) if c.status != TRUE => messages.push(format!(
                "the status of pod readiness gate {t:?} is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    if !messages.is_empty() {
        return condition(
            POD_READY,
            FALSE,
            READINESS_GATES_NOT_READY,
            &messages.join(", "),
        );
    }
    condition(POD_READY, TRUE, "", "")
}

/// Initialized: every init container completed (is ready).
pub fn pod_initialized(
    spec: &PodSpec,
    init_statuses: Option<&[ContainerStatus]>,
    phase: &str,
) -> PodCondition {
    let init = spec.init_containers.as_deref().unwrap_or_default();
    if init.is_empty() {
        return condition(POD_INITIALIZED, TRUE, "", "");
    }
    let Some(statuses) = init_statuses else {
        return condition(POD_INITIALIZED, FALSE, UNKNOWN_CONTAINER_STATUSES, "");
    };
    let (unknown, unready) = unknown_and_unready(&names(init), statuses);
    if phase == "Succeeded" && unknown.is_empty() {
        return condition(POD_INITIALIZED, TRUE, POD_COMPLETED, "");
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&unready)
        ));
    }
    if !messages.is_empty() {
        return condition(
            POD_INITIALIZED,
            FALSE,
            CONTAINERS_NOT_INITIALIZED,
            &messages.join(", "),
        );
    }
    condition(POD_INITIALIZED, TRUE, "", "")
}

/// PodScheduled: always True for a pod the kubelet runs.
pub fn pod_scheduled() -> PodCondition {
    condition(POD_SCHEDULED, TRUE, "", "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodReadinessGate};

    fn spec(init: &[&str], app: &[&str], gates: &[&str]) -> PodSpec {
        let c = |n: &&str| Container {
            name: n.to_string(),
            ..Default::default()
        };
        PodSpec {
            init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
            containers: app.iter().map(c).collect(),
            readiness_gates: (!gates.is_empty()).then(|| {
                gates
                    .iter()
                    .map(|g| PodReadinessGate {
                        condition_type: g.to_string(),
                    })
                    .collect()
            }),
            ..Default::default()
        }
    }

    fn status(name: &str, ready: bool) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            ready,
            ..Default::default()
        }
    }

    fn summary(c: &PodCondition) -> (String, String, String, String) {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    }

    type Case = (
        Option<Vec<ContainerStatus>>,
        &'static str,
        (&'static str, &'static str, &'static str),
    );

    #[test]
    fn containers_ready_table() {
        let s = spec(&[], &["a", "b"], &[]);
        let cases: Vec<Case> = vec![
            (None, "Running", (FALSE, UNKNOWN_CONTAINER_STATUSES, "")),
            (
                Some(vec![status("a", true), status("b", true)]),
                "Running",
                (TRUE, "", ""),
            ),
            (
                Some(vec![status("a", true)]),
                "Running",
                (
                    FALSE,
                    CONTAINERS_NOT_READY,
                    "containers with unknown status: [b]",
                ),
            ),
            (
                Some(vec![status("a", false), status("b", false)]),
                "Running",
                (
                    FALSE,
                    CONTAINERS_NOT_READY,
                    "containers with unready status: [a b]",
                ),
            ),
            (
                Some(vec![status("a", false)]),
                "Pending",
                (
                    FALSE,
                    CONTAINERS_NOT_READY,
                    "containers with unknown status: [b], containers with unready status: [a]",
                ),
            ),
            (
                Some(vec![status("a", false), status("b", false)]),
                "Succeeded",
                (FALSE, POD_COMPLETED, ""),
            ),
        ];
        for (i, (statuses, phase, want)) in cases.into_iter().enumerate() {
            let got = containers_ready(&s, statuses.as_deref(), phase);
            let want = (
                CONTAINERS_READY.to_string(),
                want.0.to_string(),
                want.1.to_string(),
                want.2.to_string(),
            );
            assert_eq!(summary(&got), want, "case {i}");
        }
    }

    #[test]
    fn ready_follows_containers_then_gates() {
        let s = spec(&[], &["a"], &["example.com/gate"]);
        let ready = [status("a", true)];
        let got = pod_ready(&s, &[], Some(&ready), "Running");
        assert_eq!(got.reason.as_deref(), Some(READINESS_GATES_NOT_READY));
        assert_eq!(
            got.message.as_deref(),
            Some(
                "corresponding condition of pod readiness gate \"example.com/gate\" does not exist."
            )
        );
        let gate_false = PodCondition {
            type_: "example.com/gate".into(),
            status: FALSE.into(),
            ..Default::default()
        };
        let got = pod_ready(&s, &[gate_false], Some(&ready), "Running");
        assert_eq!(
            got.message.as_deref(),
            Some(
                "the status of pod readiness gate \"example.com/gate\" is not \"True\", but False"
            )
        );
        let gate_true = PodCondition {
            type_: "example.com/gate".into(),
            status: TRUE.into(),
            ..Default::default()
        };
        let got = pod_ready(&s, &[gate_true], Some(&ready), "Running");
        assert_eq!(summary(&got).1, TRUE);
        let not_ready = [status("a", false)];
        let got = pod_ready(&s, &[], Some(&not_ready), "Running");
        assert_eq!(
            summary(&got),
            (
                POD_READY.into(),
                FALSE.into(),
                CONTAINERS_NOT_READY.into(),
                "containers with unready status: [a]".into()
            )
        );
    }

    #[test]
    fn initialized_table() {
        let none = spec(&[], &["a"], &[]);
        assert_eq!(summary(&pod_initialized(&none, None, "Pending")).1, TRUE);
        let s = spec(&["i1", "i2"], &["a"], &[]);
        let cases: Vec<Case> = vec![
            (None, "Pending", (FALSE, UNKNOWN_CONTAINER_STATUSES, "")),
            (
                Some(vec![status("i1", true), status("i2", false)]),
                "Pending",
                (
                    FALSE,
                    CONTAINERS_NOT_INITIALIZED,
                    "containers with incomplete status: [i2]",
                ),
            ),
            (
                Some(vec![status("i1", true)]),
                "Pending",
                (
                    FALSE,
                    CONTAINERS_NOT_INITIALIZED,
                    "containers with unknown status: [i2]",
                ),
            ),
            (
                Some(vec![status("i1", true), status("i2", true)]),
                "Running",
                (TRUE, "", ""),
            ),
            (
                Some(vec![status("i1", false), status("i2", false)]),
                "Succeeded",
                (TRUE, POD_COMPLETED, ""),
            ),
        ];
        for (i, (statuses, phase, want)) in cases.into_iter().enumerate() {
            let got = pod_initialized(&s, statuses.as_deref(), phase);
            assert_eq!(
                summary(&got),
                (
                    POD_INITIALIZED.to_string(),
                    want.0.to_string(),
                    want.1.to_string(),
                    want.2.to_string()
                ),
                "case {i}"
            );
        }
    }
}
