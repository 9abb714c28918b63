//! Kubelet.Run and StartGarbageCollection: the start phase of the built
//! kubelet. Data directories first, then the API-server parts, the image
//! manager, the volume manager, the runtime status check (whose first
//! success starts the container manager), the prober, the PLEG, eviction,
//! the pod workers, the pod sources and the sync loop; container GC every
//! minute and image GC every five. Every task runs on the given TaskSet
//! and stops with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use super::build::Kubelet;
use super::build::adapters::{NodeResources, allocatable};
use super::build::lifecycle::PodCore;
use super::build::runtime::RuntimeParts;
use super::build::sources::PodSources;
use crate::apis::config::server::KubeletServer;
use crate::features::CONTAINER_CHECKPOINT;
use crate::kubelet::config::SourcesReady;
use crate::kubelet::pod_dirs::{DataDirOptions, setup_data_dirs};
use crate::kubelet::runtime_state::RUNTIME_UP_PERIOD;
use crate::kubelet::sync_loop::{ProbeUpdates, SyncLoopInputs};
use crate::util::lifecycle::{Period, TaskSet};

/// How often dead containers are collected (ContainerGCPeriod).
pub const CONTAINER_GC_PERIOD: Duration = Duration::from_secs(60);
/// How often unused images are collected (ImageGCPeriod).
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// Why the kubelet could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("failed to initialize internal modules: {0}")]
    DataDirs(#[from] crate::kubelet::pod_dirs::PodDirsError),
    #[error("failed to initialize internal modules: failed to create directory {dir:?}: {source}")]
    LogsDir {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to initialize internal modules: {0}")]
    Aborted(#[from] tokio::task::JoinError),
}

/// A running kubelet: fatal errors arrive here (the Go kubelet exits on
/// them; the caller shuts down and exits 1).
pub struct Running {
    pub fatal: mpsc::UnboundedReceiver<String>,
}

impl Kubelet {
    /// Spawns every task of the kubelet on `tasks` (Kubelet.Run and
    /// StartGarbageCollection).
    pub async fn start(self, tasks: &TaskSet) -> Result<Running, StartError> {
        self.setup_data_dirs().await?;
        crate::metrics::kubelet::record_identity(&self.env.node_name);
        if (self.env.server.feature_gate)
            .enabled(crate::features::GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY)
        {
            // Go registers these with the gate, whether or not shutdown is set up.
            crate::metrics::kubelet::graceful_shutdown_start_time().add(&[], 0.0);
            crate::metrics::kubelet::graceful_shutdown_end_time().add(&[], 0.0);
        }
        let Kubelet {
            env,
            sources,
            core,
            lifecycle,
            runtime,
            prober,
            probe_streams,
            volume_manager,
            eviction_manager,
            log_manager,
            shutdown_manager,
            node_resources,
            dns,
            api,
            serving_certificate,
            ..
        } = self;
        if let Some(serving) = serving_certificate {
            serving.start(tasks);
        }
        match api {
            Some(api) => api.start(tasks),
            None => {
                tracing::info!("No API server defined - no node status update will be sent")
            }
        }
        runtime.image_gc.start(tasks);
        volume_manager.start(tasks);
        spawn_volume_events(&volume_manager, &core, tasks);
        let fatal = RuntimeUp {
            runtime: runtime.runtime.clone(),
            runtime_service: env.runtime_services.runtime.clone(),
            sources_ready: sources.ready.clone(),
            core: core.clone(),
            container_manager: env.container_manager.clone(),
            node_resources,
            log_manager,
            shutdown_manager,
            isolation: env.server.config.local_storage_capacity_isolation,
            max_pods: i64::from(env.server.config.max_pods),
        }
        .spawn(tasks);
        prober.start(tasks);
        runtime.pleg.start(tasks);
        eviction_manager.start(tasks, crate::kubelet::eviction::MONITORING_INTERVAL);
        spawn_garbage_collection(&env.server, &runtime, &sources, &core, tasks);
        check_resolv_conf(&dns).await;
        let sync_loop = lifecycle.start_workers(tasks);
        sources.config.start(tasks);
        let inputs = SyncLoopInputs {
            updates: sources.updates,
            pleg: runtime.pleg_events,
            probes: ProbeUpdates {
                liveness: probe_streams.liveness,
                readiness: probe_streams.readiness,
                startup: probe_streams.startup,
            },
        };
        sync_loop.spawn(tasks, inputs, sources.config);
        Ok(Running { fatal })
    }

    /// The kubelet's directories under the root dir (shared mount
    /// propagation for pods) and /var/log/containers.
    async fn setup_data_dirs(&self) -> Result<(), StartError> {
        let dirs = self.env.dirs.clone();
        let logs = self.env.container_logs_dir.clone();
        let mounter = self.env.mounter.clone();
        let opts = DataDirOptions {
            container_checkpoint: self.env.server.feature_gate.enabled(CONTAINER_CHECKPOINT),
        };
        tokio::task::spawn_blocking(move || {
            setup_data_dirs(&dirs, opts, |p| mounter.make_rshared(p))?;
            if let Some(dir) = logs
                && !dir.exists()
            {
                crate::kubelet::pod_dirs::mkdir_all(&dir, 0o755)
                    .map_err(|source| StartError::LogsDir { dir, source })?;
            }
            Ok(())
        })
        .await?
    }
}

/// Volume operation outcomes (FailedMount, …) become pod events.
fn spawn_volume_events(
    volume_manager: &crate::kubelet::volumemanager::VolumeManager,
    core: &PodCore,
    tasks: &TaskSet,
) {
    let Some(mut rx) = volume_manager.take_events() else {
        return;
    };
    let recorder = core.recorder.clone();
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
            recorder.pod_event(&pod, event.event_type, event.reason, &event.message);
        }
    });
}

/// The resolv.conf limits check, once at start (its event is logged).
async fn check_resolv_conf(dns: &crate::kubelet::network::dns::DnsConfigurer) {
    if dns.resolver_config.is_empty() {
        return;
    }
    let dns = dns.clone();
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

/// updateRuntimeUp every 5 s; the first time the runtime is ready the
/// runtime-dependent modules (the container manager, the container log
/// manager, the node shutdown manager) start.
struct RuntimeUp {
    runtime: Arc<dyn crate::kubelet::container::Runtime>,
    /// The CRI runtime service (the CPU manager's reconcile loop updates
    /// container cpusets through it).
    runtime_service: Arc<dyn crate::cri::RuntimeService>,
    sources_ready: SourcesReady,
    core: PodCore,
    container_manager: Arc<dyn crate::cm::ContainerManager>,
    node_resources: Arc<NodeResources>,
    log_manager: Arc<crate::kubelet::logs::ContainerLogManager>,
    shutdown_manager: Option<Arc<crate::kubelet::nodeshutdown::ShutdownManager>>,
    isolation: bool,
    max_pods: i64,
}

impl RuntimeUp {
    fn spawn(self, tasks: &TaskSet) -> mpsc::UnboundedReceiver<String> {
        let (fatal_tx, fatal) = mpsc::unbounded_channel();
        let me = Arc::new(self);
        let initialized = Arc::new(AtomicBool::new(false));
        let cm_tasks = tasks.clone();
        let clock = me.core.clock.clone();
        tasks.spawn_periodic(
            "runtime-up",
            Period::sliding(RUNTIME_UP_PERIOD),
            clock,
            move || {
                let (me, initialized, cm_tasks, fatal_tx) = (
                    me.clone(),
                    initialized.clone(),
                    cm_tasks.clone(),
                    fatal_tx.clone(),
                );
                async move { me.update(&initialized, &cm_tasks, &fatal_tx).await }
            },
        );
        fatal
    }

    async fn update(
        &self,
        initialized: &AtomicBool,
        tasks: &TaskSet,
        fatal: &mpsc::UnboundedSender<String>,
    ) {
        let status = match self.runtime.status().await {
            Ok(status) => status,
            Err(e) => {
                tracing::error!(err = %e, "Container runtime sanity check failed");
                return;
            }
        };
        let state = &self.core.runtime_state;
        if !state.apply_status(&status) {
            return;
        }
        if !initialized.swap(true, Ordering::SeqCst) {
            let statuses = self.core.status_manager.clone();
            let active = self.core.active_pods_fn();
            let ready = self.sources_ready.clone();
            let deps = crate::cm::CmRuntimeDeps {
                sources_ready: Arc::new(move || ready.all_ready()),
                pod_status: Arc::new(move |uid: &str| statuses.get_pod_status(uid)),
                runtime: self.runtime_service.clone(),
                clock: self.core.clock.clone(),
            };
            let cm = &self.container_manager;
            if let Err(e) = cm.start(tasks, active, Some(deps)).await {
                tracing::error!(err = %e, "Failed to start ContainerManager");
                let _ = fatal.send(format!("Failed to start ContainerManager: {e}"));
                return;
            }
            let capacity = cm.get_capacity(self.isolation).await;
            self.node_resources.set(allocatable(
                &capacity,
                &cm.get_node_allocatable_reservation(),
                self.max_pods,
            ));
            self.log_manager.start(tasks);
            // Not critical: the kubelet runs on without it, as Go's does.
            if let Some(shutdown) = &self.shutdown_manager
                && let Err(e) = shutdown.start(tasks).await
            {
                tracing::error!(err = %e, "Failed to start node shutdown manager");
            }
        }
        state.set_runtime_sync();
    }
}

/// Container GC every minute, image GC every five (unless
/// imageGCHighThresholdPercent is 100).
fn spawn_garbage_collection(
    server: &KubeletServer,
    runtime: &RuntimeParts,
    sources: &PodSources,
    core: &PodCore,
    tasks: &TaskSet,
) {
    let (rt, policy) = (runtime.runtime.clone(), runtime.container_gc_policy);
    let ready = sources.ready.clone();
    let failed_before = Arc::new(AtomicBool::new(false));
    tasks.spawn_periodic(
        "container-gc",
        Period::sliding(CONTAINER_GC_PERIOD),
        core.clock.clone(),
        move || {
            let (rt, ready, failed_before) = (rt.clone(), ready.clone(), failed_before.clone());
            async move {
                match rt.garbage_collect(policy, ready.all_ready(), false).await {
                    Err(e) => {
                        tracing::error!(err = %e, "Container garbage collection failed");
                        failed_before.store(true, Ordering::SeqCst);
                    }
                    Ok(()) if failed_before.swap(false, Ordering::SeqCst) => {
                        crate::vlog!(1, "Container garbage collection succeeded")
                    }
                    Ok(()) => crate::vlog!(4, "Container garbage collection succeeded"),
                }
            }
        },
    );
    if server.config.image_gc_high_threshold_percent == 100 {
        crate::vlog!(
            2,
            "ImageGCHighThresholdPercent is set 100, Disable image GC"
        );
        return;
    }
    let image_gc = runtime.image_gc.clone();
    let failed_before = Arc::new(AtomicBool::new(false));
    tasks.spawn_periodic(
        "image-gc",
        Period::sliding(IMAGE_GC_PERIOD),
        core.clock.clone(),
        move || {
            let (image_gc, failed_before) = (image_gc.clone(), failed_before.clone());
            async move {
                match image_gc.garbage_collect().await {
                    Err(e) if failed_before.swap(true, Ordering::SeqCst) => {
                        tracing::error!(err = %e, "Image garbage collection failed multiple times in a row")
                    }
                    Err(e) => {
                        tracing::error!(err = %e, "Image garbage collection failed once. Stats initialization may not have completed yet")
                    }
                    Ok(()) if failed_before.swap(false, Ordering::SeqCst) => {
                        crate::vlog!(1, "Image garbage collection succeeded")
                    }
                    Ok(()) => crate::vlog!(4, "Image garbage collection succeeded"),
                }
            }
        },
    );
}
