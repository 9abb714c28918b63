//! computePodActions: what one sync must do to move a pod from what the
//! runtime reports towards its spec. Pure: the pod, its runtime status and
//! the liveness/startup results in, a plan out.
//!
//! The plan: recreate the sandbox (killing everything first) when there is
//! none, more than one ready, the newest is not ready, its network namespace
//! mode changed, or it lost its IP; run init containers one at a time in
//! order; start missing app containers and restart exited ones as the
//! restart policy says; restart running containers whose spec hash changed
//! or that failed liveness or startup; kill the pod when nothing is left to
//! keep.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::security_context::namespaces_for_pod;
use crate::cri::api::PodSandboxState;
use crate::kubelet::container::helpers::{ephemeral_as_container, is_host_network_pod};
use crate::kubelet::container::{
    ContainerId, ContainerState, ContainerStatus, PodStatus, hash_container,
};
use crate::kubelet::prober::results::{ProbeResult, ResultsManager};

/// Why a container is being killed; picks the probe-level grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    StartupProbe,
    LivenessProbe,
    FailedPostStartHook,
    Unknown,
}

impl fmt::Display for KillReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KillReason::StartupProbe => "StartupProbe",
            KillReason::LivenessProbe => "LivenessProbe",
            KillReason::FailedPostStartHook => "FailedPostStartHook",
            KillReason::Unknown => "Unknown",
        })
    }
}

/// A container the sync must stop first.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerToKill {
    pub name: String,
    /// The container's spec in the pod.
    pub container: Container,
    /// Why (for the Killing event); empty for the default message.
    pub message: String,
    pub reason: KillReason,
}

/// The plan for one sync (Go's podActions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodActions {
    /// Stop every container and the sandbox.
    pub kill_pod: bool,
    /// Create a new sandbox (after killing the pod; init containers are
    /// purged).
    pub create_sandbox: bool,
    /// The sandbox to start containers in ("" when one is to be created).
    pub sandbox_id: String,
    /// The attempt number of the sandbox to create.
    pub attempt: u32,
    /// Index in `spec.initContainers` of the init container to start next.
    pub next_init_container_to_start: Option<usize>,
    /// Indexes in `spec.containers` to start, in order.
    pub containers_to_start: Vec<usize>,
    /// Running (or unknown) containers to stop, by ID.
    pub containers_to_kill: BTreeMap<ContainerId, ContainerToKill>,
    /// Indexes in `spec.ephemeralContainers` to start.
    pub ephemeral_containers_to_start: Vec<usize>,
}

fn spec_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
}

fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[])
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// Whether a failed container should be restarted (any policy but Never).
pub fn should_restart_on_failure(pod: &Pod) -> bool {
    restart_policy(pod) != "Never"
}

fn container_succeeded(c: &Container, status: &PodStatus) -> bool {
    match status.find_container_status_by_name(&c.name) {
        Some(s) if s.state != ContainerState::Running => s.exit_code == 0,
        _ => false,
    }
}

/// Whether a sandbox must be (re)created: (changed, attempt, existing sandbox
/// id). The attempt is the newest sandbox's plus one when it changes.
pub fn pod_sandbox_changed(pod: &Pod, status: &PodStatus) -> (bool, u32, String) {
    let pod_key = crate::kubelet::container::format_pod(pod);
    let Some(newest) = status.sandbox_statuses.first() else {
        crate::vlog!(2, pod = %pod_key, "no sandbox for pod can be found, need to start a new one");
        return (true, 0, String::new());
    };
    let ready = status
        .sandbox_statuses
        .iter()
        .filter(|s| s.state == PodSandboxState::SandboxReady as i32)
        .count();
    let attempt = newest.metadata.as_ref().map(|m| m.attempt).unwrap_or(0);
    if ready > 1 {
        crate::vlog!(2, pod = %pod_key, "multiple sandboxes are ready for pod, need to reconcile them");
        return (true, attempt + 1, newest.id.clone());
    }
    if newest.state != PodSandboxState::SandboxReady as i32 {
        crate::vlog!(2, pod = %pod_key, "no ready sandbox for pod can be found, need to start a new one");
        return (true, attempt + 1, newest.id.clone());
    }
    let network_mode = newest
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .map(|o| o.network)
        .unwrap_or(0);
    if network_mode != namespaces_for_pod(pod).network {
        crate::vlog!(2, pod = %pod_key, "sandbox for pod has changed, need to start a new one");
        return (true, attempt + 1, String::new());
    }
    let ip = newest.network.as_ref().map(|n| n.ip.as_str()).unwrap_or("");
    if !is_host_network_pod(pod) && ip.is_empty() {
        crate::vlog!(2, pod = %pod_key, "sandbox for pod has no IP address, need to start a new one");
        return (true, attempt + 1, newest.id.clone());
    }
    (false, attempt, newest.id.clone())
}

/// Whether an init container's last run counts as failed: OOM-killed,
/// exited non-zero, or in an unknown state.
pub fn is_init_container_failed(status: &ContainerStatus) -> bool {
    status.reason == "OOMKilled"
        || (status.state == ContainerState::Exited && status.exit_code != 0)
        || status.state == ContainerState::Unknown
}

/// Progress of the init containers: (status of the failed one, index of
/// the next to run, done). A status is only returned for a failed init
/// container, in which case `next` points at it.
pub fn find_next_init_container_to_run<'a>(
    pod: &Pod,
    status: &'a PodStatus,
) -> (Option<&'a ContainerStatus>, Option<usize>, bool) {
    let inits = init_containers(pod);
    if inits.is_empty() {
        return (None, None, true);
    }
    // A running app container means initialization completed once, even if
    // the init containers have since been removed.
    if spec_containers(pod).iter().any(|c| {
        status
            .find_container_status_by_name(&c.name)
            .is_some_and(|s| s.state == ContainerState::Running)
    }) {
        return (None, None, true);
    }
    for (i, c) in inits.iter().enumerate().rev() {
        if let Some(s) = status.find_container_status_by_name(&c.name)
            && is_init_container_failed(s)
        {
            return (Some(s), Some(i), false);
        }
    }
    for (i, c) in inits.iter().enumerate().rev() {
        let Some(s) = status.find_container_status_by_name(&c.name) else {
            continue;
        };
        if s.state == ContainerState::Running {
            return (None, None, false);
        }
        if s.state == ContainerState::Exited {
            if i == inits.len() - 1 {
                return (None, None, true);
            }
            return (None, Some(i + 1), false);
        }
    }
    (None, Some(0), false)
}

/// Whether a container that is not running should be started now.
pub fn should_container_be_restarted(container: &Container, pod: &Pod, status: &PodStatus) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(s) = status.find_container_status_by_name(&container.name) else {
        return true;
    };
    match s.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited => match restart_policy(pod) {
            "Never" => {
                crate::vlog!(4, container = %container.name, "already ran container, do nothing");
                false
            }
            "OnFailure" if s.exit_code == 0 => {
                crate::vlog!(4, container = %container.name, "already successfully ran container, do nothing");
                false
            }
            _ => true,
        },
    }
}

/// Computes the plan for one sync.
pub fn compute_pod_actions(
    pod: &Pod,
    status: &PodStatus,
    liveness: &ResultsManager,
    startup: &ResultsManager,
) -> PodActions {
    let (create_sandbox, attempt, sandbox_id) = pod_sandbox_changed(pod, status);
    let mut changes = PodActions {
        kill_pod: create_sandbox,
        create_sandbox,
        sandbox_id,
        attempt,
        ..Default::default()
    };
    let containers = spec_containers(pod);

    if create_sandbox {
        if !should_restart_on_failure(pod) && attempt != 0 && !status.container_statuses.is_empty()
        {
            // The pod ran and must not be restarted: no new sandbox.
            changes.create_sandbox = false;
            return changes;
        }
        let to_start: Vec<usize> = containers
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !(restart_policy(pod) == "OnFailure" && container_succeeded(c, status))
            })
            .map(|(i, _)| i)
            .collect();
        if to_start.is_empty() {
            let (_, _, done) = find_next_init_container_to_run(pod, status);
            if done {
                changes.create_sandbox = false;
                return changes;
            }
        }
        if !init_containers(pod).is_empty() {
            changes.next_init_container_to_start = Some(0);
            return changes;
        }
        changes.containers_to_start = to_start;
        return changes;
    }

    // Ephemeral containers start even while initialization is incomplete,
    // and are never restarted.
    for (i, ec) in pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        if status.find_container_status_by_name(&ec.name).is_none() {
            changes.ephemeral_containers_to_start.push(i);
        }
    }

    let (init_last, next, done) = find_next_init_container_to_run(pod, status);
    if !done {
        if let Some(next) = next {
            let init_failed = init_last.is_some_and(is_init_container_failed);
            if init_failed && !should_restart_on_failure(pod) {
                changes.kill_pod = true;
            } else {
                if let Some(last) = init_last.filter(|s| s.state == ContainerState::Unknown) {
                    let spec = init_containers(pod)[next].clone();
                    changes.containers_to_kill.insert(
                        last.id.clone(),
                        ContainerToKill {
                            name: spec.name.clone(),
                            container: spec,
                            message: "Init container is in \"unknown\" state, try killing it before restart".into(),
                            reason: KillReason::Unknown,
                        },
                    );
                }
                changes.next_init_container_to_start = Some(next);
            }
        }
        return changes;
    }

    let mut keep_count = 0;
    for (idx, container) in containers.iter().enumerate() {
        let cs = status.find_container_status_by_name(&container.name);
        let running = cs.is_some_and(|s| s.state == ContainerState::Running);
        if !running {
            if should_container_be_restarted(container, pod, status) {
                crate::vlog!(3, container = %container.name, "container of pod is not in the desired state and shall be started");
                changes.containers_to_start.push(idx);
                if let Some(s) = cs.filter(|s| s.state == ContainerState::Unknown) {
                    changes.containers_to_kill.insert(
                        s.id.clone(),
                        ContainerToKill {
                            name: s.name.clone(),
                            container: container.clone(),
                            message:
                                "Container is in \"unknown\" state, try killing it before restart"
                                    .into(),
                            reason: KillReason::Unknown,
                        },
                    );
                }
            }
            continue;
        }
        let Some(cs) = cs else { continue };
        let mut restart = should_restart_on_failure(pod);
        let (message, reason) = if hash_container(container) != cs.hash {
            // A changed spec restarts whatever the policy.
            restart = true;
            (
                format!("Container {} definition changed", container.name),
                KillReason::Unknown,
            )
        } else if liveness.get(&cs.id) == Some(ProbeResult::Failure) {
            (
                format!("Container {} failed liveness probe", container.name),
                KillReason::LivenessProbe,
            )
        } else if startup.get(&cs.id) == Some(ProbeResult::Failure) {
            (
                format!("Container {} failed startup probe", container.name),
                KillReason::StartupProbe,
            )
        } else {
            keep_count += 1;
            continue;
        };
        let message = if restart {
            changes.containers_to_start.push(idx);
            format!("{message}, will be restarted")
        } else {
            message
        };
        crate::vlog!(2, container = %container.name, container_id = %cs.id, message = %message, "message for container of pod");
        changes.containers_to_kill.insert(
            cs.id.clone(),
            ContainerToKill {
                name: cs.name.clone(),
                container: container.clone(),
                message,
                reason,
            },
        );
    }
    stop_older_running_instances(containers, status, &mut changes);
    if keep_count == 0 && changes.containers_to_start.is_empty() {
        changes.kill_pod = true;
    }
    changes
}

/// Stops a container that still runs while a newer instance of the same
/// spec container exists (a runtime that once reported it exited when it
/// was not, so the kubelet started another). Go keeps such a container
/// running, unseen, until the pod goes; a pod has one instance of each
/// container, so the older ones are stopped.
fn stop_older_running_instances(
    containers: &[Container],
    status: &PodStatus,
    changes: &mut PodActions,
) {
    for container in containers {
        let older_running = status
            .container_statuses
            .iter()
            .filter(|s| s.name == container.name)
            .skip(1)
            .filter(|s| s.state == ContainerState::Running);
        for s in older_running {
            crate::vlog!(2, container = %container.name, container_id = %s.id, "Stopping an older instance of a container that still runs");
            changes.containers_to_kill.insert(
                s.id.clone(),
                ContainerToKill {
                    name: s.name.clone(),
                    container: container.clone(),
                    message: format!(
                        "Container {} has a newer instance, the older one is stopped",
                        container.name
                    ),
                    reason: KillReason::Unknown,
                },
            );
        }
    }
}

/// The ephemeral container at `idx` as a container (for starting it).
pub fn ephemeral_container(pod: &Pod, idx: usize) -> Option<Container> {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .and_then(|l| l.get(idx))
        .map(ephemeral_as_container)
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;
