//! Stopping containers and pods (killContainer, killPodWithSyncResult): the
//! grace period from the pod (deletion grace, termination grace, or the
//! probe's own for probe kills), the preStop hook within it, at least two
//! seconds for the container itself, and StopContainer with what is left.
//! After a kubelet restart the pod may be unknown: what killing needs is
//! read back from the container's labels and annotations.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Container, Lifecycle, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::actions::KillReason;
use super::events::{EventType, reasons};
use super::labels::{get_container_info_from_annotations, get_container_info_from_labels};
use super::manager::{KubeGenericRuntimeManager, MINIMUM_GRACE_PERIOD_SECONDS};
use crate::cri::CriError;
use crate::kubelet::container::{
    ContainerId, PodSyncResult, RunningPod, SyncAction, SyncError, SyncResult, format_pod,
};

/// Reasons of kill failures.
pub const KILL_CONTAINER_ERROR: &str = "KillContainerError";
pub const KILL_POD_SANDBOX_ERROR: &str = "KillPodSandboxError";

/// Why a container could not be killed.
#[derive(Debug, thiserror::Error)]
pub enum KillError {
    #[error(
        "failed to get containerSpec {name:?} (id={id:?}) in pod {pod:?} when killing container for reason {message:?}"
    )]
    NoSpec {
        name: String,
        id: String,
        pod: String,
        message: String,
    },
    #[error("{}", .0.status_message())]
    Cri(#[from] CriError),
    #[error("container status of {0} is nil")]
    NoStatus(String),
}

/// The spec of the named container: regular, init or ephemeral.
pub fn get_container_spec(pod: &Pod, name: &str) -> Option<Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .cloned()
        .or_else(|| {
            spec.ephemeral_containers
                .iter()
                .flatten()
                .find(|c| c.name == name)
                .map(crate::kubelet::container::helpers::ephemeral_as_container)
        })
}

/// The grace period before any preStop time is taken off.
pub fn grace_period_for(pod: &Pod, container: &Container, reason: KillReason) -> i64 {
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        return g;
    }
    let Some(g) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    else {
        return MINIMUM_GRACE_PERIOD_SECONDS;
    };
    let probe = match reason {
        KillReason::StartupProbe => container.startup_probe.as_ref(),
        KillReason::LivenessProbe => container.liveness_probe.as_ref(),
        _ => None,
    };
    probe
        .and_then(|p| p.termination_grace_period_seconds)
        .unwrap_or(g)
}

impl KubeGenericRuntimeManager {
    /// What killing a container needs, from its labels and annotations.
    async fn restore_specs_from_container_labels(
        &self,
        id: &ContainerId,
    ) -> Result<(Pod, Container), KillError> {
        let resp = self.runtime.container_status(&id.id, false).await?;
        let s = resp
            .status
            .ok_or_else(|| KillError::NoStatus(id.id.clone()))?;
        let l = get_container_info_from_labels(&s.labels);
        let a = get_container_info_from_annotations(&s.annotations);
        let pod = Pod {
            metadata: ObjectMeta {
                uid: Some(l.pod_uid),
                name: Some(l.pod_name),
                namespace: Some(l.pod_namespace),
                deletion_grace_period_seconds: a.pod_deletion_grace_period,
                ..Default::default()
            },
            spec: Some(PodSpec {
                termination_grace_period_seconds: a.pod_termination_grace_period,
                ..Default::default()
            }),
            status: None,
        };
        let container = Container {
            name: l.container_name,
            ports: (!a.container_ports.is_empty()).then_some(a.container_ports),
            termination_message_path: Some(a.termination_message_path),
            lifecycle: a.pre_stop_handler.map(|h| Lifecycle {
                pre_stop: Some(h),
                ..Default::default()
            }),
            ..Default::default()
        };
        Ok((pod, container))
    }

    /// Runs the preStop hook, waiting at most `grace` seconds; returns the
    /// whole seconds it took.
    async fn execute_pre_stop_hook(
        &self,
        pod: &Pod,
        id: &ContainerId,
        container: &Container,
        grace: i64,
    ) -> i64 {
        crate::vlog!(3, pod = %format_pod(pod), container = %container.name, container_id = %id, "running preStop hook");
        let Some(handler) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
        else {
            return 0;
        };
        let started = self.clock.monotonic();
        let hook = self.run_handler(id, pod, container, handler);
        let limit = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        match tokio::time::timeout(limit, hook).await {
            Ok(Ok(())) => {
                crate::vlog!(3, pod = %format_pod(pod), container = %container.name, "preStop hook completed");
            }
            Ok(Err(msg)) => {
                tracing::error!(pod = %format_pod(pod), container = %container.name, container_id = %id, "PreStop hook failed");
                self.record_container_event(
                    pod,
                    container,
                    &id.id,
                    EventType::Warning,
                    reasons::FAILED_PRE_STOP_HOOK,
                    &msg.to_string(),
                );
            }
            Err(_) => {
                crate::vlog!(2, pod = %format_pod(pod), container = %container.name, grace_period = grace, "preStop hook not completed in grace period");
            }
        }
        self.clock
            .monotonic()
            .saturating_duration_since(started)
            .as_secs() as i64
    }

    /// Stops one container: event, preStop within the grace period, then
    /// StopContainer with the remaining time (at least the minimum, or the
    /// override).
    pub(super) async fn kill_container(
        &self,
        pod: Option<&Pod>,
        id: &ContainerId,
        name: &str,
        message: &str,
        reason: KillReason,
        grace_period_override: Option<i64>,
    ) -> Result<(), KillError> {
        let (pod, spec) = match pod {
            Some(p) => match get_container_spec(p, name) {
                Some(c) => (p.clone(), c),
                None => {
                    return Err(KillError::NoSpec {
                        name: name.to_string(),
                        id: id.to_string(),
                        pod: format_pod(p),
                        message: message.to_string(),
                    });
                }
            },
            None => self.restore_specs_from_container_labels(id).await?,
        };
        let mut grace = grace_period_for(&pod, &spec, reason);
        let message = if message.is_empty() {
            format!("Stopping container {}", spec.name)
        } else {
            message.to_string()
        };
        self.record_container_event(
            &pod,
            &spec,
            &id.id,
            EventType::Normal,
            reasons::KILLING_CONTAINER,
            &message,
        );
        if spec
            .lifecycle
            .as_ref()
            .is_some_and(|l| l.pre_stop.is_some())
            && grace > 0
        {
            grace -= self.execute_pre_stop_hook(&pod, id, &spec, grace).await;
        }
        if grace < MINIMUM_GRACE_PERIOD_SECONDS {
            grace = MINIMUM_GRACE_PERIOD_SECONDS;
        }
        if let Some(g) = grace_period_override {
            grace = g;
            crate::vlog!(3, pod = %format_pod(&pod), container = name, container_id = %id, grace_period = grace, "killing container with a grace period override");
        }
        crate::vlog!(2, pod = %format_pod(&pod), container = name, container_id = %id, grace_period = grace, "killing container with a grace period");
        match self.runtime.stop_container(&id.id, grace).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                tracing::error!(pod = %format_pod(&pod), container = name, container_id = %id, grace_period = grace, error = %e, "container termination failed with gracePeriod");
                return Err(e.into());
            }
        }
        crate::vlog!(3, pod = %format_pod(&pod), container = name, container_id = %id, "container exited normally");
        Ok(())
    }

    /// Kills every container of the running pod in parallel.
    async fn kill_containers_with_sync_result(
        &self,
        pod: Option<&Pod>,
        running: &RunningPod,
        grace_period_override: Option<i64>,
    ) -> Vec<SyncResult> {
        let kills = running.containers.iter().map(|c| async move {
            match self
                .kill_container(pod, &c.id, &c.name, "", KillReason::Unknown, grace_period_override)
                .await
            {
                Ok(()) => SyncResult::ok(SyncAction::KillContainer, c.name.clone()),
                Err(e) => {
                    tracing::error!(pod = %format!("{}/{}", running.namespace, running.name), pod_uid = %running.id, container = %c.name, container_id = %c.id, error = %e, "kill container failed");
                    SyncResult::fail(
                        SyncAction::KillContainer,
                        c.name.clone(),
                        SyncError::new(KILL_CONTAINER_ERROR, e.to_string()),
                    )
                }
            }
        });
        join_all(kills).await
    }

    /// Kills the pod's containers, then stops its sandboxes (removal is left
    /// to garbage collection).
    pub(super) async fn kill_pod_with_sync_result(
        &self,
        pod: Option<&Pod>,
        running: &RunningPod,
        grace_period_override: Option<i64>,
    ) -> PodSyncResult {
        let mut result = PodSyncResult::default();
        for r in self
            .kill_containers_with_sync_result(pod, running, grace_period_override)
            .await
        {
            result.add(r);
        }
        let mut sandbox_result = SyncResult::ok(SyncAction::KillPodSandbox, running.id.clone());
        for sandbox in &running.sandboxes {
            if let Err(e) = self.runtime.stop_pod_sandbox(&sandbox.id.id).await
                && !e.is_not_found()
            {
                tracing::error!(pod_sandbox_id = %sandbox.id, error = %e, "failed to stop sandbox");
                sandbox_result.error =
                    Some(SyncError::new(KILL_POD_SANDBOX_ERROR, e.status_message()));
            }
        }
        result.add(sandbox_result);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grace_period_table() {
        let pod = |meta: serde_json::Value, tgps: Option<i64>| -> Pod {
            let mut spec = json!({"containers": [{"name": "c"}]});
            if let Some(g) = tgps {
                spec["terminationGracePeriodSeconds"] = json!(g);
            }
            serde_json::from_value(json!({"metadata": meta, "spec": spec})).expect("pod")
        };
        let probed: Container = serde_json::from_value(json!({"name": "c",
            "livenessProbe": {"terminationGracePeriodSeconds": 5},
            "startupProbe": {"terminationGracePeriodSeconds": 7}}))
        .expect("container");
        let plain: Container = serde_json::from_value(json!({"name": "c"})).expect("container");
        let cases = [
            (
                "nothing set",
                pod(json!({}), None),
                &plain,
                KillReason::Unknown,
                2,
            ),
            (
                "termination grace",
                pod(json!({}), Some(30)),
                &plain,
                KillReason::Unknown,
                30,
            ),
            (
                "deletion grace wins",
                pod(json!({"deletionGracePeriodSeconds": 3}), Some(30)),
                &probed,
                KillReason::LivenessProbe,
                3,
            ),
            (
                "liveness probe grace",
                pod(json!({}), Some(30)),
                &probed,
                KillReason::LivenessProbe,
                5,
            ),
            (
                "startup probe grace",
                pod(json!({}), Some(30)),
                &probed,
                KillReason::StartupProbe,
                7,
            ),
            (
                "probe grace needs the pod's",
                pod(json!({}), None),
                &probed,
                KillReason::LivenessProbe,
                2,
            ),
            (
                "other reasons ignore probes",
                pod(json!({}), Some(30)),
                &probed,
                KillReason::FailedPostStartHook,
                30,
            ),
        ];
        for (name, p, c, reason, want) in cases {
            assert_eq!(grace_period_for(&p, c, reason), want, "{name}");
        }
    }

    #[test]
    fn container_spec_lookup_covers_all_kinds() {
        let pod: Pod = serde_json::from_value(json!({"spec": {
            "initContainers": [{"name": "i"}], "containers": [{"name": "c"}],
            "ephemeralContainers": [{"name": "e", "targetContainerName": "c"}]}}))
        .expect("pod");
        for name in ["i", "c", "e"] {
            assert_eq!(
                get_container_spec(&pod, name).map(|c| c.name),
                Some(name.to_string())
            );
        }
        assert!(get_container_spec(&pod, "missing").is_none());
    }
}
