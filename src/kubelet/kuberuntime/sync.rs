//! SyncPod: compute the plan, kill what must go, create the sandbox, start
//! ephemeral containers, the next init container and the app containers,
//! each through the restart back-off (CrashLoopBackOff).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};

use super::actions::{compute_pod_actions, ephemeral_container};
use super::events::{EventType, container_ref, pod_ref, reasons};
use super::manager::KubeGenericRuntimeManager;
use super::pod_sandbox::determine_pod_sandbox_ips;
use super::start::{CRASH_LOOP_BACK_OFF, StartSpec};
use crate::kubelet::container::helpers::{convert_pod_status_to_running_pod, is_host_network_pod};
use crate::kubelet::container::{
    ContainerState, PodStatus, PodSyncResult, SyncAction, SyncError, SyncResult, format_pod,
    hash_container,
};
use crate::util::backoff::go_duration_string;

/// Reasons of sandbox failures.
pub const CREATE_POD_SANDBOX_ERROR: &str = "CreatePodSandboxError";
pub const CONFIG_POD_SANDBOX_ERROR: &str = "ConfigPodSandboxError";
pub const KILL_CONTAINER_ERROR: &str = "KillContainerError";

/// The back-off key of a container: its pod, name and spec hash, so a
/// changed spec starts a fresh back-off.
pub fn get_stable_key(pod: &Pod, container: &Container) -> String {
    format!(
        "{}_{}_{}_{}_{:x}",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or(""),
        container.name,
        hash_container(container)
    )
}

fn init_container_names(pod: &Pod) -> BTreeSet<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .map(|c| c.name.clone())
        .collect()
}

impl KubeGenericRuntimeManager {
    /// Whether the container is still backing off after its last exit; the
    /// error carries `CrashLoopBackOff` and Go's message. Records a failure
    /// otherwise, so the next exit waits longer.
    pub(super) fn do_back_off(
        &self,
        pod: &Pod,
        container: &Container,
        status: &PodStatus,
    ) -> Option<SyncError> {
        let last = status
            .container_statuses
            .iter()
            .find(|c| c.name == container.name && c.state == ContainerState::Exited)?;
        crate::vlog!(3, container = %container.name, pod = %format_pod(pod), "checking backoff for container in pod");
        let ts = last
            .finished_at
            .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        let key = get_stable_key(pod, container);
        if self.crash_backoff.is_in_backoff_since(&key, ts) {
            self.recorder.event(
                &container_ref(pod, &container.name),
                EventType::Warning,
                reasons::BACK_OFF_START_CONTAINER,
                "Back-off restarting failed container",
            );
            let message = format!(
                "back-off {} restarting failed container={} pod={}",
                go_duration_string(self.crash_backoff.get(&key)),
                container.name,
                format_pod(pod)
            );
            crate::vlog!(3, error = %message, "back-off restarting failed container");
            return Some(SyncError::new(CRASH_LOOP_BACK_OFF, message));
        }
        self.crash_backoff.next(&key, ts);
        None
    }

    /// Keeps only the newest exited instance of each init container.
    async fn prune_init_containers_before_start(&self, pod: &Pod, status: &PodStatus) {
        for name in init_container_names(pod) {
            let mut count = 0;
            for s in status.container_statuses.iter().filter(|s| s.name == name) {
                if s.state != ContainerState::Exited && s.state != ContainerState::Unknown {
                    continue;
                }
                count += 1;
                if count == 1 {
                    continue;
                }
                crate::vlog!(4, container = %s.name, container_id = %s.id.id, count, "removing init container");
                if let Err(e) = self.remove_container(&s.id.id).await {
                    tracing::error!(container = %s.name, pod = %format_pod(pod), error = %e, "failed to remove pod init container");
                }
            }
        }
    }

    /// Removes every instance of the init containers (after the pod was
    /// killed for a new sandbox).
    async fn purge_init_containers(&self, pod: &Pod, status: &PodStatus) {
        for name in init_container_names(pod) {
            for (count, s) in status
                .container_statuses
                .iter()
                .filter(|s| s.name == name)
                .enumerate()
            {
                crate::vlog!(4, container = %s.name, container_id = %s.id.id, count = count + 1, "removing init container");
                if let Err(e) = self.remove_container(&s.id.id).await {
                    tracing::error!(container = %s.name, pod = %format_pod(pod), error = %e, "failed to remove pod init container");
                }
            }
        }
    }

    pub(super) async fn sync_pod_impl(
        &self,
        pod: &Pod,
        status: &PodStatus,
        pull_secrets: &[Secret],
    ) -> PodSyncResult {
        let mut result = PodSyncResult::default();
        let key = format_pod(pod);
        let changes = compute_pod_actions(pod, status, &self.liveness, &self.startup);
        crate::vlog!(3, pod = %key, actions = ?changes, "computePodActions got for pod");
        if changes.create_sandbox {
            if !changes.sandbox_id.is_empty() {
                self.recorder.event(
                    &pod_ref(pod),
                    EventType::Normal,
                    reasons::SANDBOX_CHANGED,
                    "Pod sandbox changed, it will be killed and re-created.",
                );
            } else {
                crate::vlog!(4, pod = %key, "SyncPod received new pod, will create a sandbox for it");
            }
        }

        if changes.kill_pod {
            if changes.create_sandbox {
                crate::vlog!(4, pod = %key, "stopping PodSandbox for pod, will start new one");
            } else {
                crate::vlog!(4, pod = %key, "stopping PodSandbox for pod, because all other containers are dead");
            }
            let running = convert_pod_status_to_running_pod(&self.runtime_name, status);
            let kill = self
                .kill_pod_with_sync_result(Some(pod), &running, None)
                .await;
            let failed = kill.error().cloned();
            result.merge(kill);
            if let Some(e) = failed {
                tracing::error!(pod = %key, error = %e, "killPodWithSyncResult failed");
                return result;
            }
            if changes.create_sandbox {
                self.purge_init_containers(pod, status).await;
            }
        } else {
            for (id, info) in &changes.containers_to_kill {
                crate::vlog!(3, container = %info.name, container_id = %id, pod = %key, "killing unwanted container for pod");
                match self
                    .kill_container(Some(pod), id, &info.name, &info.message, info.reason, None)
                    .await
                {
                    Ok(()) => {
                        result.add(SyncResult::ok(SyncAction::KillContainer, info.name.clone()))
                    }
                    Err(e) => {
                        tracing::error!(container = %info.name, container_id = %id, pod = %key, error = %e, "killContainer for pod failed");
                        result.add(SyncResult::fail(
                            SyncAction::KillContainer,
                            info.name.clone(),
                            SyncError::new(KILL_CONTAINER_ERROR, e.to_string()),
                        ));
                        return result;
                    }
                }
            }
        }

        self.prune_init_containers_before_start(pod, status).await;

        let mut pod_ips = status.ips.clone();
        let mut sandbox_id = changes.sandbox_id.clone();
        if changes.create_sandbox {
            crate::vlog!(4, pod = %key, "creating PodSandbox for pod");
            crate::metrics::kubelet::started_pods().inc(&[]);
            match self.create_pod_sandbox(pod, changes.attempt).await {
                Ok(id) => {
                    result.add(SyncResult::ok(SyncAction::CreatePodSandbox, key.clone()));
                    sandbox_id = id;
                }
                Err(e) => {
                    let uid = pod.metadata.uid.as_deref().unwrap_or("");
                    if self.pod_state.is_pod_termination_requested(uid) {
                        crate::vlog!(4, pod = %key, "pod was deleted and sandbox failed to be created");
                        return result;
                    }
                    crate::metrics::kubelet::started_pods_errors().inc(&[]);
                    tracing::error!(pod = %key, error = %e, "CreatePodSandbox for pod failed");
                    self.recorder.event(
                        &pod_ref(pod),
                        EventType::Warning,
                        reasons::FAILED_CREATE_POD_SANDBOX,
                        &format!("Failed to create pod sandbox: {}", e.message),
                    );
                    result.add(SyncResult::fail(
                        SyncAction::CreatePodSandbox,
                        key.clone(),
                        SyncError::new(CREATE_POD_SANDBOX_ERROR, e.message),
                    ));
                    return result;
                }
            }
            crate::vlog!(4, pod = %key, pod_sandbox_id = %sandbox_id, "created PodSandbox for pod");
            let sandbox_status = match self.runtime.pod_sandbox_status(&sandbox_id, false).await {
                Ok(r) => r.status,
                Err(e) => {
                    self.recorder.event(
                        &pod_ref(pod),
                        EventType::Warning,
                        reasons::FAILED_STATUS_POD_SANDBOX,
                        &format!("Unable to get pod sandbox status: {}", e.status_message()),
                    );
                    tracing::error!(pod = %key, error = %e, "failed to get pod sandbox status; skipping pod");
                    result.fail(SyncError::new("PodSandboxStatusError", e.status_message()));
                    return result;
                }
            };
            if !is_host_network_pod(pod)
                && let Some(s) = &sandbox_status
            {
                pod_ips = determine_pod_sandbox_ips(
                    pod.metadata.namespace.as_deref().unwrap_or(""),
                    pod.metadata.name.as_deref().unwrap_or(""),
                    s,
                );
                crate::vlog!(4, pod = %key, ips = ?pod_ips, "determined the ip for pod after sandbox changed");
            }
        }
        let pod_ip = pod_ips.first().cloned().unwrap_or_default();

        let sandbox_config = match self.generate_pod_sandbox_config(pod, changes.attempt).await {
            Ok(c) => {
                result.add(SyncResult::ok(
                    SyncAction::ConfigPodSandbox,
                    sandbox_id.clone(),
                ));
                c
            }
            Err(e) => {
                let message = format!("GeneratePodSandboxConfig for pod {key:?} failed: {e}");
                tracing::error!(pod = %key, error = %e, "GeneratePodSandboxConfig for pod failed");
                result.add(SyncResult::fail(
                    SyncAction::ConfigPodSandbox,
                    sandbox_id.clone(),
                    SyncError::new(CONFIG_POD_SANDBOX_ERROR, message),
                ));
                return result;
            }
        };

        // One start: back-off check, then the container itself.
        let start = |type_name: &'static str, spec: StartSpec| {
            let sandbox_id = sandbox_id.clone();
            let sandbox_config = &sandbox_config;
            let pod_ip = pod_ip.clone();
            let pod_ips = &pod_ips;
            let key = key.clone();
            async move {
                let name = spec.container.name.clone();
                if let Some(e) = self.do_back_off(pod, &spec.container, status) {
                    crate::vlog!(4, container_type = type_name, container = %name, pod = %key, "backing off restarting container in pod");
                    return SyncResult::fail(SyncAction::StartContainer, name, e);
                }
                let metric_label = match type_name {
                    "ephemeral container" => "ephemeral_container",
                    "init container" => "init_container",
                    _ => "container",
                };
                crate::metrics::kubelet::started_containers().inc(&[metric_label]);
                crate::vlog!(4, container_type = type_name, container = %name, pod = %key, "creating container in pod");
                match self
                    .start_container(
                        &sandbox_id,
                        sandbox_config,
                        &spec,
                        pod,
                        status,
                        pull_secrets,
                        &pod_ip,
                        pod_ips,
                    )
                    .await
                {
                    Ok(()) => SyncResult::ok(SyncAction::StartContainer, name),
                    Err(e) => {
                        crate::metrics::kubelet::started_containers_errors()
                            .inc(&[&e.reason, metric_label]);
                        if e.reason == "ImagePullBackOff" {
                            crate::vlog!(3, container_type = type_name, container = %name, pod = %key, message = %e.message, "container start failed in pod");
                        } else {
                            tracing::error!(container_type = type_name, container = %name, pod = %key, reason = %e.reason, message = %e.message, "container start failed in pod");
                        }
                        SyncResult::fail(SyncAction::StartContainer, name, e)
                    }
                }
            }
        };

        for idx in &changes.ephemeral_containers_to_start {
            let Some(c) = ephemeral_container(pod, *idx) else {
                continue;
            };
            let target = pod
                .spec
                .as_ref()
                .and_then(|s| s.ephemeral_containers.as_ref())
                .and_then(|l| l.get(*idx))
                .and_then(|e| e.target_container_name.clone());
            let r = start(
                "ephemeral container",
                StartSpec {
                    container: c,
                    target_container_name: target,
                },
            )
            .await;
            result.add(r);
        }

        if let Some(idx) = changes.next_init_container_to_start {
            let init = pod
                .spec
                .as_ref()
                .and_then(|s| s.init_containers.as_ref())
                .and_then(|l| l.get(idx))
                .cloned();
            if let Some(c) = init {
                let r = start("init container", StartSpec::container(&c)).await;
                let failed = r.error.is_some();
                result.add(r);
                if failed {
                    return result;
                }
                crate::vlog!(4, container = %c.name, pod = %key, "completed init container for pod");
            }
        }

        // In spec order, one after the other: a postStart hook holds back
        // the containers after it, which pods rely on.
        for idx in &changes.containers_to_start {
            let Some(c) = pod.spec.as_ref().and_then(|s| s.containers.get(*idx)) else {
                continue;
            };
            let r = start("container", StartSpec::container(c)).await;
            result.add(r);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_key_follows_the_spec() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }))
        .expect("pod");
        let c = pod.spec.as_ref().expect("spec").containers[0].clone();
        let key = get_stable_key(&pod, &c);
        assert!(key.starts_with("p_ns_u_c_"), "{key}");
        assert_eq!(key, format!("p_ns_u_c_{:x}", hash_container(&c)));
        let mut changed = c.clone();
        changed.image = Some("busybox:2".into());
        assert_ne!(get_stable_key(&pod, &changed), key);
    }
}
