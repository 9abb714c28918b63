//! Pod sync (kubelet.go syncPod, syncTerminatingPod, syncTerminatedPod,
//! v1.25): what a pod worker runs for each phase of a pod's life. The
//! [`PodSyncer`] holds the subsystems it drives; it never holds the kubelet.
//!
//! - sync: compute and record the API status; stop a pod that may not run
//!   (soft admission); wait for the network; make the pod cgroup, its data
//!   directories and volumes; start probing; let the runtime converge the
//!   pod. Back-off failures (CrashLoopBackOff, ImagePullBackOff) are reasons
//!   in status, not errors of the worker.
//! - terminating: record the status, stop liveness/startup probes, kill the
//!   pod within the grace period, check that nothing runs, record the final
//!   container states.
//! - terminated: record the final status, wait for volumes to be unmounted,
//!   remove the pod cgroup, mark the status final.

mod mirror;
mod seams;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use tokio_util::sync::CancellationToken;

use crate::cm::{ContainerManager, PodContainerManager};
use crate::kubelet::container::helpers::{convert_pod_status_to_running_pod, is_host_network_pod};
use crate::kubelet::container::{PodStatus, RunningPod, Runtime, RuntimeError, format_pod};
use crate::kubelet::pod_dirs::PodDirs;
use crate::kubelet::pod_workers::events::reasons;
use crate::kubelet::pod_workers::{
    EventType, NETWORK_NOT_READY_ERROR_MSG, PodEventRecorder, PodStatusFn, PodSyncError,
    PodSyncHandler,
};
use crate::kubelet::runtime_state::{self, RuntimeState};
use crate::kubelet::status::generate::is_terminal_phase;
use crate::kubelet::status::{ReasonCache, StatusGenerator, StatusManager};
use crate::kubelet::sync_loop::admission::SoftAdmission;
use crate::kubelet::types::{SyncPodType, is_static_pod};
pub use mirror::MirrorPods;
pub use seams::{NoSecretManager, PodVolumes, ProbeManager, PullSecrets, SecretManagerPullSecrets};

/// Reasons of start failures that are back-offs: shown in status, not
/// reported as sync errors.
const BACKOFF_REASONS: [&str; 2] = ["CrashLoopBackOff", "ImagePullBackOff"];

/// Everything pod sync drives.
pub struct PodSyncer {
    pub runtime: Arc<dyn Runtime>,
    pub status_manager: Arc<StatusManager>,
    pub generator: Arc<StatusGenerator>,
    pub reasons: Arc<ReasonCache>,
    pub runtime_state: Arc<RuntimeState>,
    pub container_manager: Arc<dyn ContainerManager>,
    pub pod_container_manager: Arc<dyn PodContainerManager>,
    /// `cgroupsPerQOS`: pods get their own cgroup.
    pub cgroups_per_qos: bool,
    pub volumes: Arc<dyn PodVolumes>,
    pub probes: Arc<dyn ProbeManager>,
    pub secrets: Arc<dyn PullSecrets>,
    /// Mirror pods of static pods (API server mode).
    pub mirror_pods: Option<Arc<dyn MirrorPods>>,
    pub recorder: Arc<dyn PodEventRecorder>,
    pub soft_admission: Arc<SoftAdmission>,
    /// The layout under `--root-dir`.
    pub dirs: PodDirs,
    /// Latencies relative to the pod's first-seen time.
    pub clock: Arc<dyn crate::util::clock::Clock>,
}

/// Creates the pod's data directories (makePodDataDirs).
async fn make_pod_data_dirs(dirs: &PodDirs, uid: &str) -> Result<(), PodSyncError> {
    let (dirs, uid) = (dirs.clone(), uid.to_string());
    Ok(tokio::task::spawn_blocking(move || dirs.make_pod_data_dirs(&uid)).await??)
}

impl PodSyncer {
    fn uid(pod: &Pod) -> &str {
        pod.metadata.uid.as_deref().unwrap_or_default()
    }

    fn event(&self, pod: &Pod, t: EventType, reason: &str, message: &str) {
        self.recorder.pod_event(pod, t, reason, message);
    }

    /// Kills what runs of the pod, then lets the QoS tiers shrink (killPod).
    async fn kill_pod(
        &self,
        pod: &Pod,
        running: &RunningPod,
        grace_period_override: Option<i64>,
    ) -> Result<(), RuntimeError> {
        self.runtime
            .kill_pod(Some(pod), running, grace_period_override)
            .await?;
        if let Err(e) = self.container_manager.update_qos_cgroups().await {
            crate::vlog!(2, err = %e, "Failed to update QoS cgroups while killing pod");
        }
        Ok(())
    }

    /// Makes sure the pod cgroup exists; a pod that runs containers outside
    /// its cgroup (kubelet restarted with cgroupsPerQOS) is killed first.
    async fn ensure_pod_cgroup(
        &self,
        pod: &Pod,
        status: &PodStatus,
        api_running: bool,
    ) -> Result<(), PodSyncError> {
        let pcm = &self.pod_container_manager;
        let first_sync = !api_running;
        let mut killed = false;
        if !pcm.exists(pod).await && !first_sync {
            let running = convert_pod_status_to_running_pod(self.runtime.runtime_type(), status);
            match self.kill_pod(pod, &running, None).await {
                Ok(()) => killed = true,
                Err(e) => {
                    tracing::error!(pod = %format_pod(pod), err = %e, "KillPod failed")
                }
            }
        }
        let restart_never =
            pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never");
        if killed && restart_never {
            return Ok(());
        }
        if !pcm.exists(pod).await {
            if let Err(e) = self.container_manager.update_qos_cgroups().await {
                crate::vlog!(2, pod = %format_pod(pod), err = %e, "Failed to update QoS cgroups while syncing pod");
            }
            if let Err(e) = pcm.ensure_exists(pod).await {
                self.event(
                    pod,
                    EventType::Warning,
                    reasons::FAILED_TO_CREATE_POD_CONTAINER,
                    &format!("unable to ensure pod container exists: {e}"),
                );
                return Err(PodSyncError::PodCgroup {
                    uid: Self::uid(pod).to_string(),
                    source: e,
                });
            }
        }
        Ok(())
    }
}

impl PodSyncer {
    /// Seconds since the kubelet first saw `pod` (its config.seen
    /// annotation); `None` without one.
    fn seconds_since_first_seen(&self, pod: &Pod) -> Option<f64> {
        let seen = pod
            .metadata
            .annotations
            .as_ref()?
            .get(crate::kubelet::types::CONFIG_FIRST_SEEN_ANNOTATION_KEY)?;
        let seen = crate::kubelet::types::parse_rfc3339(seen)?;
        Some(
            self.clock
                .now()
                .duration_since(seen)
                .unwrap_or_default()
                .as_secs_f64(),
        )
    }
}

#[async_trait]
impl PodSyncHandler for PodSyncer {
    async fn sync_pod(
        &self,
        cancel: &CancellationToken,
        update_type: SyncPodType,
        pod: &Arc<Pod>,
        mirror_pod: Option<&Arc<Pod>>,
        mut status: PodStatus,
    ) -> Result<bool, PodSyncError> {
        crate::vlog!(4, pod = %format_pod(pod), update_type = %update_type, "syncPod enter");
        let first_seen = self.seconds_since_first_seen(pod);
        if update_type == SyncPodType::Create {
            match first_seen {
                Some(secs) => {
                    crate::metrics::kubelet::pod_worker_start_duration().observe(&[], secs)
                }
                None => {
                    crate::vlog!(3, pod = %format_pod(pod), "First seen time not recorded for pod")
                }
            }
        }
        let mut api_status = self.generator.generate(pod, &status);
        status.ips = api_status
            .pod_ips
            .iter()
            .flatten()
            .map(|ip| ip.ip.clone())
            .collect();
        if status.ips.is_empty()
            && let Some(ip) = api_status.pod_ip.clone().filter(|ip| !ip.is_empty())
        {
            status.ips = vec![ip];
        }

        if is_terminal_phase(api_status.phase.as_deref()) {
            self.status_manager.set_pod_status(pod, api_status);
            crate::vlog!(4, pod = %format_pod(pod), "syncPod exit: pod is terminal");
            return Ok(true);
        }

        let runnable = self.soft_admission.can_run_pod(pod);
        if !runnable.admit {
            api_status.phase = Some("Pending".into());
            api_status.reason = Some(runnable.reason.clone());
            api_status.message = Some(runnable.message.clone());
            for list in [
                &mut api_status.init_container_statuses,
                &mut api_status.container_statuses,
            ] {
                for cs in list.iter_mut().flatten() {
                    if let Some(w) = cs.state.as_mut().and_then(|s| s.waiting.as_mut()) {
                        w.reason = Some("Blocked".into());
                    }
                }
            }
        }

        let was_pending = self
            .status_manager
            .get_pod_status(Self::uid(pod))
            .is_none_or(|s| s.phase.as_deref() == Some("Pending"));
        if was_pending
            && api_status.phase.as_deref() == Some("Running")
            && let Some(secs) = first_seen
        {
            crate::metrics::kubelet::pod_start_duration().observe(&[], secs);
        }
        let api_running = api_status
            .container_statuses
            .iter()
            .flatten()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
        self.status_manager.set_pod_status(pod, api_status);

        if !runnable.admit {
            crate::vlog!(2, pod = %format_pod(pod), message = %runnable.message, "Pod is not runnable and must have running containers stopped");
            let running = convert_pod_status_to_running_pod(self.runtime.runtime_type(), &status);
            return Err(match self.kill_pod(pod, &running, None).await {
                Err(e) => {
                    self.event(
                        pod,
                        EventType::Warning,
                        reasons::FAILED_TO_KILL_POD,
                        &format!("error killing pod: {e}"),
                    );
                    PodSyncError::KillRefused(e)
                }
                Ok(()) => PodSyncError::NotRunnable {
                    message: runnable.message.clone(),
                },
            });
        }

        if let Some(e) = runtime_state::aggregate(&self.runtime_state.network_errors())
            && !is_host_network_pod(pod)
        {
            self.event(
                pod,
                EventType::Warning,
                reasons::NETWORK_NOT_READY,
                &format!("{NETWORK_NOT_READY_ERROR_MSG}: {e}"),
            );
            return Err(PodSyncError::NetworkNotReady(e));
        }

        if self.cgroups_per_qos && !cancel.is_cancelled() {
            self.ensure_pod_cgroup(pod, &status, api_running).await?;
        }

        if let Some(mirrors) = &self.mirror_pods
            && is_static_pod(pod)
        {
            mirrors.sync(pod, mirror_pod.map(|m| m.as_ref())).await;
        }

        if let Err(e) = make_pod_data_dirs(&self.dirs, Self::uid(pod)).await {
            self.event(
                pod,
                EventType::Warning,
                reasons::FAILED_TO_MAKE_POD_DATA_DIRECTORIES,
                &format!("error making pod data directories: {e}"),
            );
            tracing::error!(pod = %format_pod(pod), err = %e, "Unable to make pod data directories for pod");
            return Err(e);
        }

        if !cancel.is_cancelled() {
            let mounted = tokio::select! {
                r = self.volumes.wait_for_attach_and_mount(pod) => r,
                _ = cancel.cancelled() => return Err(PodSyncError::Cancelled),
            };
            if let Err(e) = mounted {
                self.event(
                    pod,
                    EventType::Warning,
                    reasons::FAILED_MOUNT_VOLUME,
                    &format!("Unable to attach or mount volumes: {e}"),
                );
                tracing::error!(pod = %format_pod(pod), err = %e, "Unable to attach or mount volumes for pod; skipping pod");
                return Err(e.into());
            }
        }

        let pull_secrets = self.secrets.pull_secrets_for_pod(pod).await;
        self.probes.add_pod(pod);

        let result = self.runtime.sync_pod(pod, &status, &pull_secrets).await;
        self.reasons.update(Self::uid(pod), &result);
        if let Some(failure) = result.failure()
            && !failure.only_back_off(&BACKOFF_REASONS)
        {
            return Err(failure.into());
        }
        crate::vlog!(4, pod = %format_pod(pod), "syncPod exit");
        Ok(false)
    }

    async fn sync_terminating_pod(
        &self,
        _cancel: &CancellationToken,
        pod: &Arc<Pod>,
        status: PodStatus,
        running_pod: Option<&RunningPod>,
        grace_period: Option<i64>,
        status_fn: Option<PodStatusFn>,
    ) -> Result<(), PodSyncError> {
        crate::vlog!(4, pod = %format_pod(pod), "syncTerminatingPod enter");
        if let Some(running) = running_pod {
            crate::vlog!(4, pod = %format_pod(pod), grace_period = ?grace_period, "Pod terminating with grace period");
            if let Err(e) = self.kill_pod(pod, running, grace_period).await {
                self.event(
                    pod,
                    EventType::Warning,
                    reasons::FAILED_TO_KILL_POD,
                    &format!("error killing pod: {e}"),
                );
                return Err(PodSyncError::Kill(e));
            }
            crate::vlog!(4, pod = %format_pod(pod), "Pod termination stopped all running orphan containers");
            return Ok(());
        }

        let mut api_status = self.generator.generate(pod, &status);
        if let Some(f) = &status_fn {
            f(&mut api_status);
        }
        self.status_manager.set_pod_status(pod, api_status);
        crate::vlog!(4, pod = %format_pod(pod), grace_period = ?grace_period, "Pod terminating with grace period");

        self.probes.stop_liveness_and_startup(pod);
        let running = convert_pod_status_to_running_pod(self.runtime.runtime_type(), &status);
        if let Err(e) = self.kill_pod(pod, &running, grace_period).await {
            self.event(
                pod,
                EventType::Warning,
                reasons::FAILED_TO_KILL_POD,
                &format!("error killing pod: {e}"),
            );
            return Err(PodSyncError::Kill(e));
        }
        self.probes.remove_pod(pod);

        let uid = Self::uid(pod);
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let after = match self.runtime.get_pod_status(uid, name, namespace).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(pod = %format_pod(pod), err = %e, "Unable to read pod status prior to final pod termination");
                return Err(PodSyncError::Inspect(e));
            }
        };
        let still_running: Vec<String> = after
            .running_container_statuses()
            .map(|c| c.id.to_string())
            .collect();
        if crate::logs::v_enabled(4) {
            let mut states: Vec<String> = after
                .container_statuses
                .iter()
                .map(|c| format!("({} state={:?} exitCode={})", c.name, c.state, c.exit_code))
                .collect();
            states.sort();
            crate::vlog!(4, pod = %format_pod(pod), containers = %states.join(" "), "Post-termination container state");
        }
        if !still_running.is_empty() {
            return Err(PodSyncError::StillRunning {
                containers: still_running,
            });
        }
        let mut final_status = self.generator.generate(pod, &after);
        if let Some(f) = &status_fn {
            f(&mut final_status);
        }
        self.status_manager.set_pod_status(pod, final_status);
        crate::vlog!(4, pod = %format_pod(pod), "Pod termination stopped all running containers");
        Ok(())
    }

    async fn sync_terminated_pod(
        &self,
        _cancel: &CancellationToken,
        pod: &Arc<Pod>,
        status: PodStatus,
    ) -> Result<(), PodSyncError> {
        crate::vlog!(4, pod = %format_pod(pod), "syncTerminatedPod enter");
        let api_status = self.generator.generate(pod, &status);
        self.status_manager.set_pod_status(pod, api_status);

        self.volumes.wait_for_unmount(pod).await?;
        crate::vlog!(4, pod = %format_pod(pod), "Pod termination unmounted volumes");

        if self.cgroups_per_qos {
            let name = self
                .pod_container_manager
                .get_pod_container_name(pod)
                .map_err(PodSyncError::Cgroup)?
                .0;
            self.pod_container_manager
                .destroy(&name)
                .await
                .map_err(PodSyncError::Cgroup)?;
            crate::vlog!(4, pod = %format_pod(pod), "Pod termination removed cgroups");
        }

        self.status_manager.terminate_pod(pod);
        crate::vlog!(4, pod = %format_pod(pod), "Pod is terminated and will need no more status updates");
        Ok(())
    }
}
