//! Kubelet.Run and StartGarbageCollection: the start phase of the built
//! kubelet. Data directories first, then the image manager, the volume
//! manager, the runtime status check (whose first success starts the
//! container manager), the prober, the PLEG, the pod workers, the pod
//! sources and the sync loop; container GC every minute and image GC every
//! five. Every task runs on the given TaskSet and stops with it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::build::Kubelet;
use crate::kubelet::pod_dirs::{DataDirOptions, setup_data_dirs};
use crate::kubelet::runtime_state::RUNTIME_UP_PERIOD;
use crate::kubelet::sync_loop::{ProbeUpdates, SyncLoopInputs, active_pods};
use crate::util::lifecycle::TaskSet;
use crate::volume::util::mount::{SystemMounter, make_rshared};

/// How often dead containers are collected (ContainerGCPeriod).
pub const CONTAINER_GC_PERIOD: Duration = Duration::from_secs(60);
/// How often unused images are collected (ImageGCPeriod).
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// Why the kubelet could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("failed to initialize internal modules: {0}")]
    Modules(String),
}

/// A running kubelet: fatal errors arrive here (the Go kubelet exits on
/// them; the caller shuts down and exits 1).
pub struct Running {
    pub fatal: mpsc::UnboundedReceiver<String>,
}

impl Kubelet {
    /// Spawns every task of the kubelet on `tasks` (Kubelet.Run and
    /// StartGarbageCollection).
    pub async fn start(mut self, tasks: &TaskSet) -> Result<Running, StartError> {
        let (fatal_tx, fatal) = mpsc::unbounded_channel();
        let me = tokio::task::spawn_blocking({
            let dirs = self.dirs.clone();
            let logs = self.container_logs_dir.clone();
            let server = self.server.clone();
            move || {
                let opts = DataDirOptions {
                    container_checkpoint: server
                        .feature_gate
                        .enabled(crate::features::Feature("ContainerCheckpoint")),
                };
                setup_data_dirs(&dirs, opts, |p| make_rshared(p, &SystemMounter))
                    .map_err(|e| e.to_string())?;
                if let Some(dir) = logs
                    && !dir.exists()
                {
                    crate::kubelet::pod_dirs::mkdir_all(&dir, 0o755).map_err(|e| {
                        format!("failed to create directory {:?}: {e}", dir.display())
                    })?;
                }
                Ok::<(), String>(())
            }
        })
        .await
        .map_err(|e| StartError::Modules(e.to_string()))?;
        me.map_err(StartError::Modules)?;
        match self.api.take() {
            Some(api) => api.start(tasks, &self.status_manager),
            None => {
                tracing::info!("No API server defined - no node status update will be sent")
            }
        }

        self.image_gc.start(tasks);
        self.volume_manager.start(tasks);
        self.spawn_volume_events(tasks);
        self.spawn_runtime_up(tasks, fatal_tx);
        self.prober.start(tasks);
        self.pleg.start(tasks);
        self.eviction_manager
            .start(tasks, crate::kubelet::eviction::MONITORING_INTERVAL);
        self.spawn_garbage_collection(tasks);
        let dns = self.dns.clone();
        if !dns.resolver_config.is_empty() {
            let searches = tokio::task::spawn_blocking(move || {
                let searches = dns
                    .host_dns_config()
                    .map(|c| c.searches)
                    .unwrap_or_default();
                dns.check_limits_for_resolv_conf(&searches)
            })
            .await;
            if let Ok(Some(event)) = searches {
                tracing::warn!(reason = event.reason, message = %event.message, "Event");
            }
        }
        self.pod_workers_start.start(tasks, self.syncer.clone());
        self.container_deletor.start(tasks);
        self.pod_config.start(tasks);

        let inputs = SyncLoopInputs {
            updates: self.updates,
            pleg: self.pleg_events,
            probes: ProbeUpdates {
                liveness: self.probe_streams.liveness,
                readiness: self.probe_streams.readiness,
                startup: self.probe_streams.startup,
            },
        };
        let stop = tasks.token();
        let sync_loop = self.sync_loop;
        // The pod config stays alive while the loop runs (its senders end
        // the update stream when dropped).
        let pod_config = self.pod_config;
        tasks.spawn("sync-loop", async move {
            sync_loop.run(inputs, stop).await;
            drop(pod_config);
        });
        Ok(Running { fatal })
    }

    /// Volume operation outcomes (FailedMount, …) become pod events.
    fn spawn_volume_events(&self, tasks: &TaskSet) {
        let Some(mut rx) = self.volume_manager.take_events() else {
            return;
        };
        let recorder = self.recorder.clone();
        let stop = tasks.token();
        tasks.spawn("volume-events", async move {
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => return,
                    e = rx.recv() => match e { Some(e) => e, None => return },
                };
                if !event.record {
                    continue;
                }
                let mut pod = k8s_openapi::api::core::v1::Pod::default();
                pod.metadata.name = Some(event.pod.name.clone());
                pod.metadata.namespace = Some(event.pod.namespace.clone());
                pod.metadata.uid = Some(event.pod.uid.clone());
                let t = match event.event_type {
                    crate::kubelet::volumemanager::EventType::Normal => {
                        crate::cm::EventType::Normal
                    }
                    crate::kubelet::volumemanager::EventType::Warning => {
                        crate::cm::EventType::Warning
                    }
                };
                recorder.pod_event(&pod, t, event.reason, &event.message);
            }
        });
    }

    /// updateRuntimeUp every 5 s; the first time the runtime is ready the
    /// runtime-dependent modules (the container manager) start.
    fn spawn_runtime_up(&self, tasks: &TaskSet, fatal: mpsc::UnboundedSender<String>) {
        let runtime = self.runtime.clone();
        let state = self.runtime_state.clone();
        let cm = self.container_manager.clone();
        let active = {
            let (pm, workers, status) = (
                self.pod_manager.clone(),
                self.pod_workers.clone(),
                self.status_manager.clone(),
            );
            Arc::new(move || active_pods(&pm, &workers, &status))
        };
        let resources = self.node_resources.clone();
        let isolation = self.server.config.local_storage_capacity_isolation;
        let max_pods = i64::from(self.server.config.max_pods);
        let cm_tasks = tasks.clone();
        let stop = tasks.token();
        tasks.spawn("runtime-up", async move {
            let mut initialized = false;
            loop {
                match runtime.status().await {
                    Err(e) => tracing::error!(err = %e, "Container runtime sanity check failed"),
                    Ok(status) => {
                        if state.apply_status(&status) {
                            if !initialized {
                                initialized = true;
                                if let Err(e) = cm.start(&cm_tasks, active.clone()).await {
                                    tracing::error!(err = %e, "Failed to start ContainerManager");
                                    let _ = fatal
                                        .send(format!("Failed to start ContainerManager: {e}"));
                                    return;
                                }
                                let capacity = cm.get_capacity(isolation).await;
                                resources.set(super::build::adapters::allocatable(
                                    &capacity,
                                    &cm.get_node_allocatable_reservation(),
                                    max_pods,
                                ));
                            }
                            state.set_runtime_sync();
                        }
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(RUNTIME_UP_PERIOD) => {}
                }
            }
        });
    }

    /// Container GC every minute, image GC every five (unless
    /// imageGCHighThresholdPercent is 100).
    fn spawn_garbage_collection(&self, tasks: &TaskSet) {
        let runtime = self.runtime.clone();
        let policy = self.container_gc_policy;
        let sources = self.sources_ready.clone();
        let stop = tasks.token();
        tasks.spawn("container-gc", async move {
            let mut failed_before = false;
            loop {
                match runtime
                    .garbage_collect(policy, sources.all_ready(), false)
                    .await
                {
                    Err(e) => {
                        tracing::error!(err = %e, "Container garbage collection failed");
                        failed_before = true;
                    }
                    Ok(()) => {
                        if failed_before {
                            crate::vlog!(1, "Container garbage collection succeeded");
                            failed_before = false;
                        } else {
                            crate::vlog!(4, "Container garbage collection succeeded");
                        }
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(CONTAINER_GC_PERIOD) => {}
                }
            }
        });
        if self.server.config.image_gc_high_threshold_percent == 100 {
            crate::vlog!(
                2,
                "ImageGCHighThresholdPercent is set 100, Disable image GC"
            );
            return;
        }
        let image_gc = self.image_gc.clone();
        let stop = tasks.token();
        tasks.spawn("image-gc", async move {
            let mut failed_before = false;
            loop {
                match image_gc.garbage_collect().await {
                    Err(e) => {
                        if failed_before {
                            tracing::error!(err = %e, "Image garbage collection failed multiple times in a row");
                        } else {
                            tracing::error!(err = %e, "Image garbage collection failed once. Stats initialization may not have completed yet");
                        }
                        failed_before = true;
                    }
                    Ok(()) => {
                        if failed_before {
                            crate::vlog!(1, "Image garbage collection succeeded");
                        } else {
                            crate::vlog!(4, "Image garbage collection succeeded");
                        }
                        failed_before = false;
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(IMAGE_GC_PERIOD) => {}
                }
            }
        });
    }
}
