//! `--runonce` (runonce.go): take the first pod update from the sources,
//! admit and run each pod until its containers run (syncing it directly,
//! with retries backing off 1 s, 2 s, 4 s … at most ten times), report, and
//! return. No sync loop, no pod workers, no servers.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio_util::sync::CancellationToken;

use super::build::Kubelet;
use crate::kubelet::container::{ContainerState, PodStatus, RuntimeError, format_pod};
use crate::kubelet::pod_dirs::{DataDirOptions, setup_data_dirs};
use crate::kubelet::pod_workers::{PodSyncError, PodSyncHandler};
use crate::kubelet::status::ApiPodStatus;
use crate::kubelet::status::generate::FAILED;
use crate::kubelet::types::SyncPodType;
use crate::util::lifecycle::TaskSet;

/// How long to wait for the first pod update.
pub const RUN_ONCE_MANIFEST_DELAY: Duration = Duration::from_secs(1);
pub const RUN_ONCE_MAX_RETRIES: u32 = 10;
pub const RUN_ONCE_RETRY_DELAY: Duration = Duration::from_secs(1);
pub const RUN_ONCE_RETRY_DELAY_BACKOFF: u32 = 2;

/// Why a run-once pass failed.
#[derive(Debug, thiserror::Error)]
pub enum RunOnceError {
    #[error("no pod manifest update after {0:?}")]
    NoManifest(Duration),
    #[error("error running pods: {0:?}")]
    Pods(Vec<String>),
    #[error("{0}")]
    Setup(String),
}

/// Why one pod did not reach running.
#[derive(Debug, thiserror::Error)]
pub enum RunPodError {
    #[error("unable to get status for pod {pod:?}: {source}")]
    Status { pod: String, source: RuntimeError },
    #[error("error syncing pod {pod:?}: {source}")]
    Sync { pod: String, source: PodSyncError },
    #[error(
        "timeout error: pod {pod:?} containers not running after {RUN_ONCE_MAX_RETRIES} retries"
    )]
    Timeout { pod: String },
}

/// One pod's outcome.
#[derive(Debug, Clone)]
pub struct RunPodResult {
    pub pod: Arc<Pod>,
    pub error: Option<String>,
    /// The status the kubelet computed for it.
    pub status: Option<ApiPodStatus>,
}

fn all_running(pod: &Pod, status: &PodStatus) -> bool {
    pod.spec.iter().flat_map(|s| s.containers.iter()).all(|c| {
        let running = status
            .find_container_status_by_name(&c.name)
            .is_some_and(|s| s.state == ContainerState::Running);
        if !running {
            tracing::info!(pod = %format_pod(pod), container_name = %c.name, "Container not running");
        }
        running
    })
}

impl Kubelet {
    /// Runs the pods of the first update once (RunOnce).
    pub async fn run_once(mut self, tasks: &TaskSet) -> Result<Vec<RunPodResult>, RunOnceError> {
        let dirs = self.env.dirs.clone();
        let logs = self.env.container_logs_dir.clone();
        let mounter = self.env.mounter.clone();
        tokio::task::spawn_blocking(move || {
            setup_data_dirs(&dirs, DataDirOptions::default(), |p| {
                mounter.make_rshared(p)
            })
            .map_err(|e| e.to_string())?;
            if let Some(dir) = logs {
                crate::kubelet::pod_dirs::mkdir_all(&dir, 0o755).map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        })
        .await
        .map_err(|e| RunOnceError::Setup(e.to_string()))?
        .map_err(RunOnceError::Setup)?;

        let active = Arc::new(Vec::<Arc<Pod>>::new);
        self.env
            .container_manager
            .start(tasks, Arc::new(move || active()), None)
            .await
            .map_err(|e| RunOnceError::Setup(format!("Failed to start ContainerManager: {e}")))?;
        self.volume_manager.start(tasks);
        self.core.runtime_state.set_network_state(None);
        self.sources.config.start(tasks);

        let update = tokio::time::timeout(RUN_ONCE_MANIFEST_DELAY, self.sources.updates.recv())
            .await
            .ok()
            .flatten()
            .ok_or(RunOnceError::NoManifest(RUN_ONCE_MANIFEST_DELAY))?;
        tracing::info!(
            num_pods = update.pods.len(),
            "Processing manifest with pods"
        );
        let results = self.run_pods(update.pods).await;
        tracing::info!(num_pods = results.len(), "Finished processing pods");
        let failed: Vec<String> = results
            .iter()
            .filter(|r| r.error.is_some())
            .map(|r| format_pod(&r.pod))
            .collect();
        if !failed.is_empty() {
            return Err(RunOnceError::Pods(failed));
        }
        Ok(results)
    }

    async fn run_pods(&self, pods: Vec<Arc<Pod>>) -> Vec<RunPodResult> {
        let mut results = Vec::new();
        let mut admitted: Vec<Arc<Pod>> = Vec::new();
        for pod in &pods {
            self.core.pod_manager.add_pod(pod.clone());
        }
        let mut running = Vec::new();
        for pod in pods {
            let verdict = self
                .lifecycle
                .admission
                .can_admit_pod(&admitted, &pod)
                .await;
            if !verdict.admit {
                self.core.status_manager.set_pod_status(
                    &pod,
                    ApiPodStatus {
                        phase: Some(FAILED.into()),
                        reason: Some(verdict.reason.clone()),
                        message: Some(format!("Pod {}", verdict.message)),
                        ..Default::default()
                    },
                );
                results.push(self.result(pod, None));
                continue;
            }
            admitted.push(pod.clone());
            running.push(pod);
        }
        tracing::info!(num_pods = running.len(), "Waiting for pods");
        let outcomes = futures::future::join_all(running.iter().map(|p| self.run_pod(p))).await;
        for (pod, outcome) in running.into_iter().zip(outcomes) {
            match &outcome {
                Ok(()) => tracing::info!(pod = %format_pod(&pod), "Started pod"),
                Err(e) => {
                    let failed = self.failed_containers(&pod).await;
                    tracing::info!(pod = %format_pod(&pod), container_name = ?failed, err = %e, "Unable to start pod because container failed");
                }
            }
            results.push(self.result(pod, outcome.err().map(|e| e.to_string())));
        }
        results
    }

    fn result(&self, pod: Arc<Pod>, error: Option<String>) -> RunPodResult {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        RunPodResult {
            status: self.core.status_manager.get_pod_status(&uid),
            pod,
            error,
        }
    }

    async fn runtime_status(&self, pod: &Pod) -> Result<PodStatus, RunPodError> {
        let meta = &pod.metadata;
        self.runtime
            .runtime
            .get_pod_status(
                meta.uid.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
                meta.namespace.as_deref().unwrap_or_default(),
            )
            .await
            .map_err(|source| RunPodError::Status {
                pod: format_pod(pod),
                source,
            })
    }

    /// Syncs the pod until its containers run (runPod).
    async fn run_pod(&self, pod: &Arc<Pod>) -> Result<(), RunPodError> {
        let mut delay = RUN_ONCE_RETRY_DELAY;
        let cancel = CancellationToken::new();
        for retry in 0.. {
            let status = self.runtime_status(pod).await?;
            if all_running(pod, &status) {
                tracing::info!(pod = %format_pod(pod), "Pod's containers running");
                // Record the running status the pod reached.
                let api = self.lifecycle.syncer.generator.generate(pod, &status);
                self.core.status_manager.set_pod_status(pod, api);
                return Ok(());
            }
            tracing::info!(pod = %format_pod(pod), "Pod's containers not running: syncing");
            let terminal = self
                .lifecycle
                .syncer
                .sync_pod(&cancel, SyncPodType::Update, pod, None, status)
                .await
                .map_err(|source| RunPodError::Sync {
                    pod: format_pod(pod),
                    source,
                })?;
            if terminal {
                return Ok(());
            }
            if retry >= RUN_ONCE_MAX_RETRIES {
                return Err(RunPodError::Timeout {
                    pod: format_pod(pod),
                });
            }
            tracing::info!(pod = %format_pod(pod), duration = ?delay, "Pod's containers synced, waiting");
            tokio::time::sleep(delay).await;
            delay *= RUN_ONCE_RETRY_DELAY_BACKOFF;
        }
        Ok(())
    }

    /// Containers that exited with an error (getFailedContainers).
    async fn failed_containers(&self, pod: &Pod) -> Vec<String> {
        match self.runtime_status(pod).await {
            Ok(status) => status
                .container_statuses
                .iter()
                .filter(|c| c.state != ContainerState::Running && c.exit_code != 0)
                .map(|c| c.name.clone())
                .collect(),
            Err(e) => {
                tracing::info!(pod = %format_pod(pod), err = %e, "Unable to get failed containers' names");
                Vec::new()
            }
        }
    }
}
