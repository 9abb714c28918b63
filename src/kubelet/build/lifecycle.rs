//! The pod lifecycle's composition, one for the kubelet and its tests:
//!
//! 1. [`PodCore`]: the pod and status managers, the pod cache, the work
//!    queue, the pod workers' handle, the runtime state and
//!    activeDeadlineSeconds — what the outer subsystems (runtime manager,
//!    volume manager, eviction) are built over.
//! 2. [`compose`]: pod sync, housekeeping, admission and the sync loop over
//!    the outer seams ([`Seams`]): the runtime, cgroups, volumes, probes,
//!    pull secrets and the node admission sees. The kubelet hands the real
//!    ones, unit tests fakes, so the wiring between them is the same.
//!
//! Nothing here spawns; [`Lifecycle::start`] does.

use std::net::IpAddr;
use std::sync::Arc;

use crate::cm::{ContainerManager, PodContainerManager};
use crate::kubelet::config::SourcesReady;
use crate::kubelet::container::{PodCache, Runtime};
use crate::kubelet::housekeeping::{BackoffGcFn, Housekeeping};
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_sync::{MirrorPods, PodSyncer, PodVolumes, ProbeManager, PullSecrets};
use crate::kubelet::pod_workers::{
    PodEventRecorder, PodStatusFn, PodWorkers, PodWorkersConfig, PodWorkersStart, WorkQueue,
};
use crate::kubelet::runtime_state::RuntimeState;
use crate::kubelet::status::{ActiveDeadline, ReasonCache, StatusGenerator, StatusManager};
use crate::kubelet::sync_loop::admission::{
    Admission, AdmitFn, PreemptFn, SoftAdmission, SysctlAllowlist, resource_allocation_admit,
};
use crate::kubelet::sync_loop::container_deletor::{ContainerDeletor, ContainerDeletorTask};
use crate::kubelet::sync_loop::fit::NodeFn;
use crate::kubelet::sync_loop::{SyncLoop, SyncLoopMonitor};
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::util::pod_dirs::PodDirs;

/// The state every pod subsystem shares, built before them.
#[derive(Clone)]
pub struct PodCore {
    pub pod_manager: Arc<PodManager>,
    pub status_manager: Arc<StatusManager>,
    pub pod_cache: Arc<PodCache>,
    pub work_queue: Arc<WorkQueue>,
    pub pod_workers: PodWorkers,
    pub runtime_state: Arc<RuntimeState>,
    pub deadline: Arc<ActiveDeadline>,
    pub recorder: Arc<dyn PodEventRecorder>,
    pub clock: Arc<dyn Clock>,
}

impl PodCore {
    /// The admitted, not yet terminated pods, as the eviction, shutdown and
    /// container managers ask for them (Go's GetActivePods).
    pub fn active_pods_fn(
        &self,
    ) -> Arc<dyn Fn() -> Vec<Arc<k8s_openapi::api::core::v1::Pod>> + Send + Sync> {
        let (pm, workers, status) = (
            self.pod_manager.clone(),
            self.pod_workers.clone(),
            self.status_manager.clone(),
        );
        Arc::new(move || crate::kubelet::sync_loop::active_pods(&pm, &workers, &status))
    }

    pub fn new(
        pod_manager: Arc<PodManager>,
        recorder: Arc<dyn PodEventRecorder>,
        clock: Arc<dyn Clock>,
        workers: PodWorkersConfig,
    ) -> (Self, PodWorkersStart) {
        let status_manager = Arc::new(StatusManager::new(pod_manager.clone(), clock.clone()));
        let pod_cache = Arc::new(PodCache::new());
        let work_queue = Arc::new(WorkQueue::new(clock.clone()));
        let (pod_workers, workers_start) = PodWorkers::new(
            pod_cache.clone(),
            work_queue.clone(),
            recorder.clone(),
            clock.clone(),
            workers,
        );
        let events = recorder.clone();
        let deadline = Arc::new(ActiveDeadline::new(
            status_manager.clone(),
            clock.clone(),
            Some(Arc::new(move |pod, reason, message| {
                events.pod_event(
                    pod,
                    crate::util::event_type::EventType::Normal,
                    reason,
                    message,
                )
            })),
        ));
        let core = PodCore {
            runtime_state: Arc::new(RuntimeState::new(clock.clone())),
            pod_manager,
            status_manager,
            pod_cache,
            work_queue,
            pod_workers,
            deadline,
            recorder,
            clock,
        };
        (core, workers_start)
    }
}

/// The outer seams the lifecycle is composed over.
pub struct Seams {
    pub runtime: Arc<dyn Runtime>,
    pub container_manager: Arc<dyn ContainerManager>,
    pub pod_container_manager: Arc<dyn PodContainerManager>,
    pub volumes: Arc<dyn PodVolumes>,
    pub probes: Arc<dyn ProbeManager>,
    pub secrets: Arc<dyn PullSecrets>,
    /// Mirror pods of static pods (API server mode).
    pub mirror_pods: Option<Arc<dyn MirrorPods>>,
    pub soft_admission: Arc<SoftAdmission>,
    /// The node as admission sees it.
    pub admission_node: NodeFn,
    /// The eviction manager's admit handler.
    pub eviction_admit: Option<AdmitFn>,
    /// The node shutdown manager's admit handler.
    pub shutdown_admit: Option<AdmitFn>,
    /// Garbage collection of the crash back-off entries.
    pub backoff_gc: Option<BackoffGcFn>,
    pub sources_ready: SourcesReady,
}

/// The settings the lifecycle reads.
pub struct Settings {
    pub dirs: PodDirs,
    /// `cgroupsPerQOS`.
    pub cgroups_per_qos: bool,
    pub keep_terminated_pod_volumes: bool,
    pub allowed_unsafe_sysctls: Vec<String>,
    /// The container GC policy's maxPerPodContainer (the container deletor).
    pub max_per_pod_container: i32,
    /// The node's IPs, and the registered Node's host IPs when there is one.
    pub node_ips: Vec<IpAddr>,
    pub host_ips: Option<Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>>,
}

impl Settings {
    /// The kubelet's settings.
    pub fn new(
        env: &super::Env,
        gc: crate::kubelet::container::GcPolicy,
        host_ips: Option<Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>>,
    ) -> Self {
        let server = &env.server;
        Settings {
            dirs: env.dirs.clone(),
            cgroups_per_qos: server.config.cgroups_per_qos,
            keep_terminated_pod_volumes: server.flags.keep_terminated_pod_volumes,
            allowed_unsafe_sysctls: server.config.allowed_unsafe_sysctls.clone(),
            max_per_pod_container: gc.max_per_pod_container,
            node_ips: env.node_ips.clone(),
            host_ips,
        }
    }
}

/// The composed lifecycle, for the start phase.
pub struct Lifecycle {
    pub syncer: Arc<PodSyncer>,
    pub housekeeping: Arc<Housekeeping>,
    pub admission: Arc<Admission>,
    pub monitor: SyncLoopMonitor,
    pub sync_loop: SyncLoop,
    workers_start: PodWorkersStart,
    container_deletor: ContainerDeletorTask,
}

/// Pod sync, housekeeping, admission and the sync loop over `core`; the
/// pod workers start over this pod sync.
pub fn compose(
    core: &PodCore,
    workers_start: PodWorkersStart,
    seams: Seams,
    settings: Settings,
) -> Lifecycle {
    let PodCore {
        pod_manager,
        status_manager,
        pod_cache,
        work_queue,
        pod_workers,
        runtime_state,
        deadline,
        recorder,
        clock,
    } = core.clone();
    let reasons = Arc::new(ReasonCache::new());
    let generator = Arc::new(StatusGenerator {
        status_manager: status_manager.clone(),
        reasons: reasons.clone(),
        probes: seams.probes.clone(),
        deadline: deadline.clone(),
        node_ips: settings.node_ips,
        host_ips: settings.host_ips,
    });
    let syncer = Arc::new(PodSyncer {
        runtime: seams.runtime.clone(),
        status_manager: status_manager.clone(),
        generator,
        reasons,
        runtime_state: runtime_state.clone(),
        container_manager: seams.container_manager.clone(),
        pod_container_manager: seams.pod_container_manager.clone(),
        cgroups_per_qos: settings.cgroups_per_qos,
        volumes: seams.volumes.clone(),
        probes: seams.probes.clone(),
        secrets: seams.secrets,
        mirror_pods: seams.mirror_pods.clone(),
        recorder: recorder.clone(),
        soft_admission: seams.soft_admission,
        dirs: settings.dirs,
        clock: clock.clone(),
    });
    let housekeeping = Arc::new(Housekeeping {
        pod_manager: pod_manager.clone(),
        pod_workers: pod_workers.clone(),
        status_manager: status_manager.clone(),
        probes: seams.probes,
        runtime: seams.runtime.clone(),
        volumes: seams.volumes,
        pod_container_manager: seams.pod_container_manager,
        cgroups_per_qos: settings.cgroups_per_qos,
        keep_terminated_pod_volumes: settings.keep_terminated_pod_volumes,
        backoff_gc: seams.backoff_gc,
        mirror_pods: seams.mirror_pods,
    });
    let admission = Arc::new(Admission {
        eviction: seams.eviction_admit,
        shutdown: seams.shutdown_admit,
        node: seams.admission_node,
        sysctls: SysctlAllowlist::new(&settings.allowed_unsafe_sysctls),
        resources: Some(resource_allocation_admit(seams.container_manager)),
        preempt: Some(preempt_through(&pod_workers)),
    });
    let (deletor, container_deletor) =
        ContainerDeletor::new(seams.runtime, settings.max_per_pod_container);
    let monitor = SyncLoopMonitor::default();
    let sync_loop = SyncLoop {
        pod_manager,
        pod_workers,
        status_manager,
        work_queue,
        deadline,
        sources_ready: seams.sources_ready,
        admission: admission.clone(),
        recorder,
        runtime_state,
        housekeeping: housekeeping.clone(),
        container_deletor: deletor,
        pod_cache,
        monitor: monitor.clone(),
        clock,
    };
    Lifecycle {
        syncer,
        housekeeping,
        admission,
        monitor,
        sync_loop,
        workers_start,
        container_deletor,
    }
}

impl Lifecycle {
    /// Start phase: the pod workers over pod sync and the container
    /// deletor; returns the sync loop, spawned last.
    pub fn start_workers(self, tasks: &TaskSet) -> SyncLoop {
        self.workers_start.start(tasks, self.syncer.clone());
        self.container_deletor.start(tasks);
        self.sync_loop
    }
}

/// Critical pod preemption: the victim is killed through the pod workers.
fn preempt_through(pod_workers: &PodWorkers) -> PreemptFn {
    let workers = pod_workers.clone();
    Arc::new(move |pod| {
        let workers = workers.clone();
        Box::pin(async move {
            let status_fn: PodStatusFn = Arc::new(|s| {
                s.phase = Some("Failed".into());
                s.reason = Some("Preempting".into());
                s.message = Some("Preempted in order to admit critical pod".into());
            });
            workers
                .kill_pod_now(pod, true, None, Some(status_fn))
                .await
                .map_err(|e| e.to_string())
        })
    })
}
