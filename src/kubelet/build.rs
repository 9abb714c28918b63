//! NewMainKubelet: every subsystem of the kubelet, constructed and wired,
//! with nothing started. Pod sources and the pod manager, the status
//! manager, the prober, the CRI runtime manager with its image manager and
//! the PLEG, the pod workers over pod sync, the volume manager, admission,
//! housekeeping and the sync loop. [`Kubelet::start`](crate::kubelet::run)
//! spawns their tasks.
//!
//! Subsystems get the narrow traits they need (see [`adapters`]); the
//! [`Kubelet`] value only carries them to the start phase.

pub mod adapters;
pub mod api;
pub mod eviction;
pub mod runtime;
pub mod services;
pub mod volumes;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::app::server::KubeletServer;
use crate::cm::ContainerManager;
use crate::cri::RuntimeServices;
use crate::features;
use crate::kubelet::config::{FileSource, HttpSource, PodConfig, PodUpdates, SourcesReady};
use crate::kubelet::container::{GcPolicy, PodCache, Runtime};
use crate::kubelet::container_logs::KubeletContainerLogs;
use crate::kubelet::events::{EventRecorder, LoggingRecorder};
use crate::kubelet::eviction::{EvictionAdmitHandler, EvictionManager};
use crate::kubelet::housekeeping::Housekeeping;
use crate::kubelet::images::ImageGcManager;
use crate::kubelet::kuberuntime::RuntimeSettings;
use crate::kubelet::network::dns::DnsConfigurer;
use crate::kubelet::pleg::{EventStream, GenericPleg};
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_dirs::PodDirs;
use crate::kubelet::pod_sync::{NoSecretManager, PodSyncer, PodVolumes, ProbeManager};
use crate::kubelet::pod_workers::{
    PodEventRecorder, PodWorkers, PodWorkersConfig, PodWorkersStart, WorkQueue,
};
use crate::kubelet::prober::ProberManager;
use crate::kubelet::prober::exec::CriCommandRunner;
use crate::kubelet::prober::manager::{ProberDeps, ProberOptions, ResultStreams};
use crate::kubelet::prober::probe::ProbeGates;
use crate::kubelet::runtime_state::RuntimeState;
use crate::kubelet::server::handlers::KubeletSources;
use crate::kubelet::stats::NodeStatsProvider;
use crate::kubelet::status::{ActiveDeadline, ReasonCache, StatusGenerator, StatusManager};
use crate::kubelet::streaming::KubeletStreaming;
use crate::kubelet::sync_loop::admission::{Admission, PreemptFn, SoftAdmission, SysctlAllowlist};
use crate::kubelet::sync_loop::container_deletor::{ContainerDeletor, ContainerDeletorTask};
use crate::kubelet::sync_loop::fit::AdmissionNode;
use crate::kubelet::sync_loop::{SyncLoop, SyncLoopMonitor};
use crate::kubelet::volumemanager::VolumeManager;
use crate::util::clock::Clock;
use adapters::{KubeletPods, NodeResources, Probes, RecorderEvents, Volumes};

/// Why the kubelet could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("failed to create the pod source for {what}: {reason}")]
    Source { what: &'static str, reason: String },
    #[error("failed to initialize the container runtime: {0}")]
    Runtime(String),
    #[error("invalid image garbage collection policy: {0}")]
    ImageGc(String),
    #[error("failed to set up the API server parts: {0}")]
    Api(#[from] api::ApiBuildError),
    #[error("failed to set up the eviction manager: {0}")]
    Eviction(String),
}

/// What NewMainKubelet is given (the parts of Dependencies and run()).
pub struct KubeletDeps {
    pub server: Arc<KubeletServer>,
    pub node_name: String,
    pub hostname: String,
    pub node_ips: Vec<IpAddr>,
    pub runtime_services: RuntimeServices,
    pub container_manager: Arc<dyn ContainerManager>,
    pub clock: Arc<dyn Clock>,
    /// `/var/log/pods` (overridable for tests).
    pub pod_logs_root: PathBuf,
    /// `/var/log/containers`; `None` makes no legacy symlinks.
    pub container_logs_dir: Option<PathBuf>,
    /// The node's hosts file.
    pub node_hosts_file: PathBuf,
    /// The API clients and event recorder; `None` standalone.
    pub api: Option<api::ApiClients>,
}

/// The built kubelet, ready for its start phase.
pub struct Kubelet {
    pub server: Arc<KubeletServer>,
    pub clock: Arc<dyn Clock>,
    pub dirs: PodDirs,
    pub container_logs_dir: Option<PathBuf>,
    pub pod_config: PodConfig,
    pub updates: PodUpdates,
    pub sources_ready: SourcesReady,
    pub pod_manager: Arc<PodManager>,
    pub status_manager: Arc<StatusManager>,
    pub pod_workers: PodWorkers,
    /// The pod workers' start half (runs them over `syncer`).
    pub pod_workers_start: PodWorkersStart,
    pub runtime: Arc<dyn Runtime>,
    /// The CRI runtime service itself (container logs).
    pub runtime_service: Arc<dyn crate::cri::RuntimeService>,
    pub eviction_manager: Arc<EvictionManager>,
    /// Node, pod and container statistics (eviction, resource metrics).
    pub stats: Arc<NodeStatsProvider>,
    pub pleg: Arc<GenericPleg>,
    pub pleg_events: EventStream,
    pub prober: ProberManager,
    pub probe_streams: ResultStreams,
    pub volume_manager: Arc<VolumeManager>,
    pub image_gc: Arc<ImageGcManager>,
    pub container_gc_policy: GcPolicy,
    pub container_manager: Arc<dyn ContainerManager>,
    pub node_resources: Arc<NodeResources>,
    pub runtime_state: Arc<RuntimeState>,
    pub syncer: Arc<PodSyncer>,
    pub admission: Arc<Admission>,
    pub sync_loop: SyncLoop,
    pub container_deletor: ContainerDeletorTask,
    pub monitor: SyncLoopMonitor,
    pub dns: DnsConfigurer,
    pub recorder: Arc<dyn PodEventRecorder>,
    /// The API-server parts; `None` standalone.
    pub api: Option<api::ApiKubelet>,
}

impl Kubelet {
    /// What the servers' routes read: /pods and /runningpods/, the stats
    /// summary and resource metrics, /containerLogs/, and /exec/,
    /// /attach/, /portForward/ and /run/.
    pub fn server_sources(&self) -> KubeletSources {
        let usage = Arc::new(eviction::KubeletResourceUsage {
            stats: self.stats.clone(),
            pod_manager: self.pod_manager.clone(),
            rates: Default::default(),
        });
        KubeletSources {
            pods: Arc::new(KubeletPods {
                pod_manager: self.pod_manager.clone(),
                status_manager: self.status_manager.clone(),
                runtime: self.runtime.clone(),
            }),
            summary: usage.clone(),
            resource_usage: usage,
            container_logs: Arc::new(KubeletContainerLogs {
                pod_manager: self.pod_manager.clone(),
                status_manager: self.status_manager.clone(),
                runtime: self.runtime_service.clone(),
                clock: self.clock.clone(),
            }),
            streaming: Arc::new(KubeletStreaming {
                pod_manager: self.pod_manager.clone(),
                runtime: self.runtime.clone(),
                runtime_service: self.runtime_service.clone(),
            }),
        }
    }

    /// The `syncloop` health check (max(2 × syncFrequency, 5 min)).
    pub fn sync_loop_health(&self) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        let monitor = self.monitor.clone();
        let clock = self.clock.clone();
        let resync = self.server.config.sync_frequency.to_std();
        move || monitor.check(clock.now(), resync)
    }
}

fn pod_sources(
    server: &KubeletServer,
    node_name: &str,
    config: &PodConfig,
) -> Result<(), BuildError> {
    let c = &server.config;
    if !c.static_pod_path.is_empty() {
        tracing::info!(path = %c.static_pod_path, "Adding static pod path");
        config.add_source(Box::new(FileSource::new(
            &c.static_pod_path,
            node_name,
            c.file_check_frequency.to_std(),
        )));
    }
    if !c.static_pod_url.is_empty() {
        tracing::info!(url = %c.static_pod_url, "Adding pod URL with HTTP header");
        let source = HttpSource::new(
            &c.static_pod_url,
            &c.static_pod_url_header,
            node_name,
            c.http_check_frequency.to_std(),
        )
        .map_err(|e| BuildError::Source {
            what: "staticPodURL",
            reason: e.to_string(),
        })?;
        config.add_source(Box::new(source));
    }
    Ok(())
}

/// The node as admission sees it in standalone mode (Go's initialNode):
/// its name, hostname/OS/arch labels with `--node-labels`, the taints to
/// register with, and its allocatable resources.
fn admission_node(
    server: &KubeletServer,
    node_name: &str,
    hostname: &str,
    resources: Arc<NodeResources>,
    api_node: Option<Arc<dyn crate::kubelet::lifecycle::NodeGetter>>,
) -> impl Fn() -> AdmissionNode + Send + Sync + 'static {
    let mut labels = server.flags.node_labels.clone();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let os = std::env::consts::OS;
    for (k, v) in [
        ("kubernetes.io/hostname", hostname),
        ("kubernetes.io/os", os),
        ("kubernetes.io/arch", arch),
        ("beta.kubernetes.io/os", os),
        ("beta.kubernetes.io/arch", arch),
    ] {
        labels.insert(k.to_string(), v.to_string());
    }
    let taints = server.config.register_with_taints.clone();
    let name = node_name.to_string();
    move || {
        // The registered Node's labels and taints once it is known (Go's
        // getNodeAnyWay), the initial node's before.
        let known = api_node.as_ref().and_then(|g| g.get_node_any_way().ok());
        match known {
            Some(node) => AdmissionNode {
                name: name.clone(),
                labels: node.metadata.labels.clone().unwrap_or_default(),
                taints: node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default(),
                allocatable: resources.get(),
            },
            None => AdmissionNode {
                name: name.clone(),
                labels: labels.clone(),
                taints: taints.clone(),
                allocatable: resources.get(),
            },
        }
    }
}

fn runtime_settings(
    server: &KubeletServer,
    cm: &dyn ContainerManager,
    dirs: &PodDirs,
) -> RuntimeSettings {
    let c = &server.config;
    let gate = &server.feature_gate;
    let period_us = if gate.enabled(features::Feature("CustomCPUCFSQuotaPeriod")) {
        c.cpu_cfs_quota_period.to_std().as_micros() as i64
    } else {
        crate::kubelet::kuberuntime::settings::DEFAULT_CPU_CFS_QUOTA_PERIOD_US
    };
    let machine = cm.machine_info();
    RuntimeSettings {
        cpu_cfs_quota: c.cpu_cfs_quota,
        cpu_cfs_quota_period_us: period_us,
        seccomp_profile_root: dirs.root_dir().join("seccomp"),
        seccomp_default: server.seccomp_default()
            && gate.enabled(features::Feature("SeccompDefault")),
        memory_capacity: machine.memory_capacity as i64,
        hugepage_sizes: crate::cm::resources::host_hugepage_sizes(std::path::Path::new(
            "/sys/kernel/mm/hugepages",
        )),
        selinux_enabled: std::path::Path::new("/sys/fs/selinux/enforce").exists(),
    }
}

/// The host IPs of the Node the kubelet would register (standalone mode).
async fn local_node_host_ips(node_ips: &[IpAddr], hostname: &str, node_name: &str) -> Vec<String> {
    use k8s_openapi::api::core::v1::{Node, NodeStatus};
    let cfg = crate::kubelet::nodestatus::AddressConfig {
        node_ips: node_ips.to_vec(),
        hostname: hostname.to_string(),
        ..Default::default()
    };
    match crate::kubelet::nodestatus::node_addresses(&cfg, node_name).await {
        Ok(addresses) => {
            let node = Node {
                status: Some(NodeStatus {
                    addresses: Some(addresses),
                    ..Default::default()
                }),
                ..Default::default()
            };
            api::node_host_ips(&node)
                .iter()
                .map(ToString::to_string)
                .collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, "Could not determine the node's addresses for status.hostIP");
            Vec::new()
        }
    }
}

/// NewMainKubelet: the composition, in the order of Go's. Cycles are
/// broken without set-once cells: the pod workers' handle exists before
/// the subsystems that ask it what runs (its start half gets the pod
/// syncer), the Node is a channel created first and fed by node status,
/// and node status is built last, over the eviction and volume managers.
pub async fn new_main_kubelet(deps: KubeletDeps) -> Result<Kubelet, BuildError> {
    let KubeletDeps {
        server,
        node_name,
        hostname,
        node_ips,
        runtime_services,
        container_manager,
        clock,
        pod_logs_root,
        container_logs_dir,
        node_hosts_file,
        api: api_clients,
    } = deps;
    let c = &server.config;
    let dirs = PodDirs::new(&server.flags.root_directory);
    let events: Arc<dyn EventRecorder> = match &api_clients {
        Some(a) => a.recorder.clone(),
        None => Arc::new(LoggingRecorder),
    };
    let recorder: Arc<dyn PodEventRecorder> = Arc::new(RecorderEvents(events.clone()));
    let api_objects = match &api_clients {
        Some(a) => Some(api::ApiObjects::build(
            a,
            &server,
            &node_name,
            clock.clone(),
        )?),
        None => None,
    };
    let (pod_config, updates) = PodConfig::new(clock.clone());
    pod_sources(&server, &node_name, &pod_config)?;
    if let Some(a) = &api_objects {
        tracing::info!("Adding apiserver pod source");
        pod_config.add_source(Box::new(a.pod_source(&node_name)));
    }
    let sources_ready = pod_config.sources_ready();
    let pod_manager = Arc::new(match &api_objects {
        Some(a) => PodManager::with_registrars(a.objects.registrars()),
        None => PodManager::new(),
    });
    let status_manager = Arc::new(StatusManager::new(pod_manager.clone(), clock.clone()));
    let (prober, probe_streams) = ProberManager::new(ProberDeps {
        status: status_manager.clone(),
        runner: Arc::new(CriCommandRunner::new(runtime_services.runtime.clone())),
        recorder: events.clone(),
        clock: clock.clone(),
        options: ProberOptions {
            gates: ProbeGates::from_gate(&server.feature_gate),
        },
    });
    let probes: Arc<Probes> = Arc::new(Probes(prober.clone()));
    let runtime_state = Arc::new(RuntimeState::new(clock.clone()));
    let pod_cache = Arc::new(PodCache::new());
    let work_queue = Arc::new(WorkQueue::new(clock.clone()));
    let workers_config = PodWorkersConfig {
        resync_interval: c.sync_frequency.to_std(),
        ..Default::default()
    };
    let (pod_workers, pod_workers_start) = PodWorkers::new(
        pod_cache.clone(),
        work_queue.clone(),
        recorder.clone(),
        clock.clone(),
        workers_config,
    );
    let node_resources = Arc::new(NodeResources::default());
    let capacity = container_manager
        .get_capacity(c.local_storage_capacity_isolation)
        .await;
    node_resources.set(adapters::allocatable(
        &capacity,
        &container_manager.get_node_allocatable_reservation(),
        i64::from(c.max_pods),
    ));
    let volume_manager = volumes::volume_manager(
        &dirs,
        &node_resources,
        api_objects.as_ref(),
        &pod_manager,
        &pod_workers,
        &sources_ready,
        &clock,
    );
    let volumes: Arc<dyn PodVolumes> = Arc::new(Volumes(volume_manager.clone()));
    let pod_container_manager = container_manager.new_pod_container_manager();
    let dns = dns_configurer(&server, &node_ips);
    let node_ip_source = match &api_objects {
        Some(a) => NodeIps::Api(a.node.host_ips()),
        None => NodeIps::Local(local_node_host_ips(&node_ips, &hostname, &node_name).await),
    };
    let helper = runtime::runtime_helper(runtime::HelperInputs {
        server: &server,
        dirs: &dirs,
        node_ips: &node_ips,
        host_ips: &node_ip_source,
        node_resources: &node_resources,
        node_hosts_file,
        dns: &dns,
        volumes: &volumes,
        pod_container_manager: &pod_container_manager,
        recorder: &recorder,
        node_events: &events,
        node_name: &node_name,
        api: api_objects.as_ref(),
    });
    let rt = runtime::build(runtime::RuntimeInputs {
        server: &server,
        dirs: &dirs,
        container_manager: container_manager.as_ref(),
        runtime_services: &runtime_services,
        helper,
        pod_state: pod_workers.clone(),
        prober: &prober,
        events: &events,
        pod_cache: &pod_cache,
        pod_logs_root: &pod_logs_root,
        container_logs_dir: &container_logs_dir,
        node_name: &node_name,
        clock: &clock,
    })
    .await?;
    let pleg_health = rt.pleg.clone();
    runtime_state.add_health_check(
        "PLEG",
        Arc::new(move || pleg_health.healthy().map_err(|e| e.to_string())),
    );
    let reasons = Arc::new(ReasonCache::new());
    let deadline = active_deadline(&status_manager, &recorder, &clock);
    let generator = Arc::new(StatusGenerator {
        status_manager: status_manager.clone(),
        reasons: reasons.clone(),
        probes: probes.clone(),
        deadline: deadline.clone(),
        node_ips: node_ips.clone(),
        host_ips: node_ip_source.api(),
    });
    let syncer = Arc::new(PodSyncer {
        runtime: rt.runtime.clone(),
        status_manager: status_manager.clone(),
        generator,
        reasons,
        runtime_state: runtime_state.clone(),
        container_manager: container_manager.clone(),
        pod_container_manager: pod_container_manager.clone(),
        cgroups_per_qos: c.cgroups_per_qos,
        volumes: volumes.clone(),
        probes: probes.clone(),
        secrets: Arc::new(NoSecretManager),
        recorder: recorder.clone(),
        soft_admission: Arc::new(SoftAdmission::from_host()),
        dirs: dirs.clone(),
    });
    let (stats, eviction_manager) = eviction::build(eviction::EvictionInputs {
        server: &server,
        node_name: &node_name,
        pod_logs_root: &pod_logs_root,
        container_manager: container_manager.as_ref(),
        runtime_services: &runtime_services,
        runtime: &rt.runtime,
        image_gc: &rt.image_gc,
        gc_policy: rt.container_gc_policy,
        pod_manager: &pod_manager,
        pod_workers: &pod_workers,
        status_manager: &status_manager,
        sources_ready: &sources_ready,
        events: &events,
        clock: &clock,
    })
    .await?;
    let node_getter = api_objects.as_ref().map(|a| a.node.getter());
    let admission = Arc::new(Admission {
        eviction: Some(admit_through(&eviction_manager)),
        node: Arc::new(admission_node(
            &server,
            &node_name,
            &hostname,
            node_resources.clone(),
            node_getter,
        )),
        sysctls: SysctlAllowlist::new(&c.allowed_unsafe_sysctls),
        preempt: Some(preempt_through(&pod_workers)),
    });
    let (container_deletor, container_deletor_task) = ContainerDeletor::new(
        rt.runtime.clone(),
        rt.container_gc_policy.max_per_pod_container,
    );
    let gc_backoff = rt.crash_backoff.clone();
    let housekeeping = Arc::new(Housekeeping {
        pod_manager: pod_manager.clone(),
        pod_workers: pod_workers.clone(),
        status_manager: status_manager.clone(),
        probes: probes.clone() as Arc<dyn ProbeManager>,
        runtime: rt.runtime.clone(),
        volumes,
        pod_container_manager: pod_container_manager.clone(),
        cgroups_per_qos: c.cgroups_per_qos,
        keep_terminated_pod_volumes: server.flags.keep_terminated_pod_volumes,
        backoff_gc: Some(Arc::new(move || gc_backoff.gc())),
    });
    let monitor = SyncLoopMonitor::default();
    let sync_loop = SyncLoop {
        pod_manager: pod_manager.clone(),
        pod_workers: pod_workers.clone(),
        status_manager: status_manager.clone(),
        work_queue,
        deadline,
        sources_ready: sources_ready.clone(),
        admission: admission.clone(),
        recorder: recorder.clone(),
        runtime_state: runtime_state.clone(),
        housekeeping,
        container_deletor,
        pod_cache,
        monitor: monitor.clone(),
        clock: clock.clone(),
    };
    let api = match (api_clients, api_objects) {
        (Some(clients), Some(objects)) => {
            let inputs = api::NodeInputs {
                container_manager: container_manager.clone(),
                pressure: eviction_manager.clone(),
                runtime_state: runtime_state.clone(),
                pod_manager: pod_manager.clone(),
                pod_workers: pod_workers.clone(),
                volume_manager: volume_manager.clone(),
                pod_container_manager: c.cgroups_per_qos.then(|| pod_container_manager.clone()),
                sources_ready: sources_ready.clone(),
                status_manager: status_manager.clone(),
            };
            let node = api::ApiNode::build(
                &clients,
                &objects,
                &server,
                &node_name,
                &hostname,
                &runtime_services,
                inputs,
                clock.clone(),
            )?;
            Some(api::ApiKubelet { objects, node })
        }
        _ => None,
    };
    Ok(Kubelet {
        runtime_service: runtime_services.runtime.clone(),
        eviction_manager,
        stats,
        server,
        clock,
        dirs,
        container_logs_dir,
        pod_config,
        updates,
        sources_ready,
        pod_manager,
        status_manager,
        pod_workers,
        pod_workers_start,
        runtime: rt.runtime,
        pleg: rt.pleg,
        pleg_events: rt.pleg_events,
        prober,
        probe_streams,
        volume_manager,
        image_gc: rt.image_gc,
        container_gc_policy: rt.container_gc_policy,
        container_manager,
        node_resources,
        runtime_state,
        syncer,
        admission,
        sync_loop,
        container_deletor: container_deletor_task,
        monitor,
        dns,
        recorder,
        api,
    })
}

/// Where pods' host IPs come from: the registered Node, or (standalone) the
/// Node the kubelet would register (Go's initial node).
enum NodeIps {
    Api(Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>),
    Local(Vec<String>),
}

impl NodeIps {
    fn api(&self) -> Option<Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>> {
        match self {
            NodeIps::Api(f) => Some(f.clone()),
            NodeIps::Local(_) => None,
        }
    }

    fn strings(&self) -> Arc<dyn Fn() -> Vec<String> + Send + Sync> {
        match self {
            NodeIps::Api(f) => {
                let f = f.clone();
                Arc::new(move || f().iter().map(ToString::to_string).collect())
            }
            NodeIps::Local(ips) => {
                let ips = ips.clone();
                Arc::new(move || ips.clone())
            }
        }
    }
}

fn dns_configurer(server: &KubeletServer, node_ips: &[IpAddr]) -> DnsConfigurer {
    let c = &server.config;
    DnsConfigurer {
        cluster_dns: c
            .cluster_dns
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect(),
        cluster_domain: c.cluster_domain.clone(),
        resolver_config: c.resolver_config.clone(),
        node_ips: node_ips.to_vec(),
        expanded_dns_config: server
            .feature_gate
            .enabled(features::Feature("ExpandedDNSConfig")),
    }
}

/// activeDeadlineSeconds, with its events.
fn active_deadline(
    status_manager: &Arc<StatusManager>,
    recorder: &Arc<dyn PodEventRecorder>,
    clock: &Arc<dyn Clock>,
) -> Arc<ActiveDeadline> {
    let events = recorder.clone();
    Arc::new(ActiveDeadline::new(
        status_manager.clone(),
        clock.clone(),
        Some(Arc::new(move |pod, reason, message| {
            events.pod_event(pod, crate::cm::EventType::Normal, reason, message)
        })),
    ))
}

/// The eviction admit handler.
fn admit_through(
    eviction_manager: &Arc<EvictionManager>,
) -> crate::kubelet::sync_loop::admission::AdmitFn {
    let handler = EvictionAdmitHandler::new(eviction_manager.clone());
    Arc::new(move |pod| handler.admit(pod))
}

/// Critical pod preemption: the victim is killed through the pod workers.
fn preempt_through(pod_workers: &PodWorkers) -> PreemptFn {
    let workers = pod_workers.clone();
    Arc::new(move |pod| {
        let workers = workers.clone();
        Box::pin(async move {
            let status_fn: crate::kubelet::pod_workers::PodStatusFn = Arc::new(|s| {
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

pub use crate::kubelet::events::node_ref;

/// How long [`new_main_kubelet`] waits at most for the runtime's version.
pub const RUNTIME_VERSION_TIMEOUT: Duration = Duration::from_secs(60);
