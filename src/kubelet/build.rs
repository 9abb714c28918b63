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
pub mod services;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::app::server::KubeletServer;
use crate::cm::{ContainerManager, PodContainerManager};
use crate::cri::RuntimeServices;
use crate::features;
use crate::kubelet::config::{FileSource, HttpSource, PodConfig, PodUpdates, SourcesReady};
use crate::kubelet::container::{GcPolicy, PodCache, Runtime};
use crate::kubelet::container_logs::KubeletContainerLogs;
use crate::kubelet::events::{EventRecorder, LoggingRecorder};
use crate::kubelet::eviction::{
    EvictionAdmitHandler, EvictionConfig, EvictionDeps, EvictionManager, MemoryCgroup,
    RuntimeContainerGc,
};
use crate::kubelet::housekeeping::Housekeeping;
use crate::kubelet::images::{
    CriImageFsStats, IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX, ImageGcManager, ImageGcPolicy,
    ImageManager, PullSettings, RuntimeImageService, TokenBucket,
};
use crate::kubelet::kuberuntime::manager::{CRASH_BACKOFF_INITIAL, CRASH_BACKOFF_MAX};
use crate::kubelet::kuberuntime::{
    KubeGenericRuntimeManager, RuntimeManagerConfig, RuntimeManagerDeps, RuntimeSettings,
};
use crate::kubelet::network::dns::DnsConfigurer;
use crate::kubelet::pleg::{EventStream, GenericPleg, event_stream};
use crate::kubelet::pod::PodManager;
use crate::kubelet::pod_dirs::PodDirs;
use crate::kubelet::pod_sync::{NoSecretManager, PodSyncer, PodVolumes, ProbeManager};
use crate::kubelet::pod_workers::{PodEventRecorder, PodWorkers, PodWorkersConfig, WorkQueue};
use crate::kubelet::prober::ProberManager;
use crate::kubelet::prober::exec::CriCommandRunner;
use crate::kubelet::prober::manager::{ProberDeps, ProberOptions, ResultStreams};
use crate::kubelet::prober::probe::ProbeGates;
use crate::kubelet::runtime_helper::{KubeletRuntimeHelper, RuntimeHelperConfig};
use crate::kubelet::stats::NodeStatsProvider;
use crate::kubelet::status::{ActiveDeadline, ReasonCache, StatusGenerator, StatusManager};
use crate::kubelet::streaming::KubeletStreaming;
use crate::kubelet::sync_loop::admission::{Admission, PreemptFn, SoftAdmission, SysctlAllowlist};
use crate::kubelet::sync_loop::container_deletor::{ContainerDeletor, ContainerDeletorTask};
use crate::kubelet::sync_loop::fit::AdmissionNode;
use crate::kubelet::sync_loop::runtime_state::RuntimeState;
use crate::kubelet::sync_loop::{SyncLoop, SyncLoopMonitor, active_pods};
use crate::kubelet::volumemanager::{VolumeManager, VolumeManagerDeps};
use crate::util::backoff::Backoff;
use crate::util::clock::Clock;
use crate::volume::util::mount::SystemMounter;
use crate::volume::{PluginManager, VolumeHost};
use adapters::{KubeletPods, NodeResources, Probes, RecorderEvents, Volumes, WorkersHandle};

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
    Api(String),
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
    pub node_name: String,
    pub clock: Arc<dyn Clock>,
    pub dirs: PodDirs,
    pub pod_logs_root: PathBuf,
    pub container_logs_dir: Option<PathBuf>,
    pub pod_config: PodConfig,
    pub updates: PodUpdates,
    pub sources_ready: SourcesReady,
    pub pod_manager: Arc<PodManager>,
    pub status_manager: Arc<StatusManager>,
    pub pod_workers: PodWorkers,
    pub pod_cache: Arc<PodCache>,
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
    pub crash_backoff: Arc<Backoff>,
    pub container_manager: Arc<dyn ContainerManager>,
    pub pod_container_manager: Arc<dyn PodContainerManager>,
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
    /// What /pods and /runningpods/ show.
    pub fn pods_provider(&self) -> Arc<KubeletPods> {
        Arc::new(KubeletPods {
            pod_manager: self.pod_manager.clone(),
            status_manager: self.status_manager.clone(),
            runtime: self.runtime.clone(),
        })
    }

    /// What /containerLogs/ serves.
    pub fn container_logs(&self) -> Arc<KubeletContainerLogs> {
        Arc::new(KubeletContainerLogs {
            pod_manager: self.pod_manager.clone(),
            status_manager: self.status_manager.clone(),
            runtime: self.runtime_service.clone(),
            clock: self.clock.clone(),
        })
    }

    /// What /metrics/resource reports.
    pub fn resource_usage(&self) -> Arc<eviction::KubeletResourceUsage> {
        Arc::new(eviction::KubeletResourceUsage {
            stats: self.stats.clone(),
            pod_manager: self.pod_manager.clone(),
            rates: Default::default(),
        })
    }

    /// What /exec/, /attach/, /portForward/ and /run/ reach.
    pub fn streaming(&self) -> Arc<KubeletStreaming> {
        Arc::new(KubeletStreaming {
            pod_manager: self.pod_manager.clone(),
            runtime: self.runtime.clone(),
            runtime_service: self.runtime_service.clone(),
        })
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

/// NewMainKubelet.
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
    let pressure = eviction::LatePressure::default();
    let mut api = match &api_clients {
        Some(a) => Some(
            api::build(
                a,
                &server,
                &node_name,
                &hostname,
                &runtime_services,
                api::NodeInputs {
                    container_manager: container_manager.clone(),
                    pressure: Arc::new(pressure.clone()),
                },
                clock.clone(),
            )
            .map_err(BuildError::Api)?,
        ),
        None => None,
    };

    let (pod_config, updates) = PodConfig::new(clock.clone());
    pod_sources(&server, &node_name, &pod_config)?;
    if let Some(a) = &api {
        tracing::info!("Adding apiserver pod source");
        pod_config.add_source(Box::new(a.pod_source()));
    }
    let sources_ready = pod_config.sources_ready();

    let pod_manager = Arc::new(match &api {
        Some(a) => PodManager::with_registrars(a.objects.registrars()),
        None => PodManager::new(),
    });
    let host_ips = api.as_ref().map(|a| a.host_ips());
    // Without an API server the kubelet's own idea of its Node stands in
    // (Go's initial node): its addresses give status.hostIP.
    let local_host_ips = match &api {
        Some(_) => Vec::new(),
        None => local_node_host_ips(&node_ips, &hostname, &node_name).await,
    };
    let status_manager = Arc::new(StatusManager::new(pod_manager.clone(), clock.clone()));
    let reasons = Arc::new(ReasonCache::new());
    let deadline_events = recorder.clone();
    let deadline = Arc::new(ActiveDeadline::new(
        status_manager.clone(),
        clock.clone(),
        Some(Arc::new(move |pod, reason, message| {
            deadline_events.pod_event(pod, crate::cm::EventType::Normal, reason, message)
        })),
    ));

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
    let generator = Arc::new(StatusGenerator {
        status_manager: status_manager.clone(),
        reasons: reasons.clone(),
        probes: probes.clone(),
        deadline: deadline.clone(),
        node_ips: node_ips.clone(),
        host_ips: host_ips.clone(),
    });
    let runtime_state = Arc::new(RuntimeState::new(clock.clone()));
    let pod_cache = Arc::new(PodCache::new());
    let work_queue = Arc::new(WorkQueue::new(clock.clone()));
    let workers_handle = WorkersHandle::default();

    let node_resources = Arc::new(NodeResources::default());
    let capacity = container_manager
        .get_capacity(c.local_storage_capacity_isolation)
        .await;
    node_resources.set(adapters::allocatable(
        &capacity,
        &container_manager.get_node_allocatable_reservation(),
        i64::from(c.max_pods),
    ));

    let mut volume_host = VolumeHost::new(
        dirs.clone(),
        Arc::new(SystemMounter),
        clock.clone(),
        node_resources.clone(),
    );
    if let Some(a) = &api {
        volume_host = volume_host
            .with_config_maps(a.objects.config_maps.clone())
            .with_secrets(a.objects.secrets.clone())
            .with_tokens(a.tokens.clone());
    }
    let volume_manager = Arc::new(VolumeManager::new(VolumeManagerDeps {
        plugins: Arc::new(PluginManager::new(Arc::new(volume_host))),
        pods: pod_manager.clone(),
        pod_state: Arc::new(workers_handle.clone()),
        sources_ready: Arc::new(sources_ready.clone()),
        clock: clock.clone(),
    }));
    let volumes: Arc<dyn PodVolumes> = Arc::new(Volumes(volume_manager.clone()));

    let pod_container_manager = container_manager.new_pod_container_manager();
    let dns = DnsConfigurer {
        cluster_dns: c
            .cluster_dns
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect(),
        cluster_domain: c.cluster_domain.clone(),
        resolver_config: c.resolver_config.clone(),
        node_ips: node_ips.clone(),
        expanded_dns_config: server
            .feature_gate
            .enabled(features::Feature("ExpandedDNSConfig")),
    };
    let helper = Arc::new(KubeletRuntimeHelper {
        config: RuntimeHelperConfig {
            root_dir: dirs.root_dir().to_path_buf(),
            cluster_domain: c.cluster_domain.clone(),
            node_ips: node_ips.clone(),
            host_ips: {
                let ips = host_ips.clone();
                Arc::new(move || {
                    ips.as_ref()
                        .map(|f| f().iter().map(ToString::to_string).collect())
                        .unwrap_or_else(|| local_host_ips.clone())
                })
            },
            node_allocatable: {
                let r = node_resources.clone();
                Arc::new(move || r.api())
            },
            master_service_namespace: server.flags.master_service_namespace.clone(),
            node_hosts_file,
        },
        dns: dns.clone(),
        volumes: volumes.clone(),
        pod_container_manager: pod_container_manager.clone(),
        recorder: recorder.clone(),
        config_maps: api.as_ref().map(|a| {
            a.objects.config_maps.clone() as Arc<dyn crate::kubelet::envvars::ConfigMapGetter>
        }),
        secrets: api
            .as_ref()
            .map(|a| a.objects.secrets.clone() as Arc<dyn crate::kubelet::envvars::SecretGetter>),
        services: api.as_ref().map(|a| {
            let lister = a.services.clone();
            Arc::new(move || lister.snapshot()) as crate::kubelet::runtime_helper::ServicesFn
        }),
    });

    let limiter = TokenBucket::new(
        f64::from(c.registry_pull_qps),
        c.registry_burst.max(0) as u32,
        clock.clone(),
    );
    let image_service = Arc::new(RuntimeImageService::new(
        runtime_services.image.clone(),
        limiter,
    ));
    let image_manager = Arc::new(ImageManager::new(
        image_service.clone(),
        events.clone(),
        Arc::new(Backoff::new(
            IMAGE_BACKOFF_INITIAL,
            IMAGE_BACKOFF_MAX,
            clock.clone(),
        )),
        PullSettings {
            serialize_image_pulls: c.serialize_image_pulls,
            max_parallel_image_pulls: None,
        },
    ));
    let crash_backoff = Arc::new(Backoff::new(
        CRASH_BACKOFF_INITIAL,
        CRASH_BACKOFF_MAX,
        clock.clone(),
    ));
    let runtime_manager = KubeGenericRuntimeManager::new(
        RuntimeManagerConfig {
            settings: runtime_settings(&server, container_manager.as_ref(), &dirs),
            cluster_domain: c.cluster_domain.clone(),
            runtime_class_handlers: None,
            pod_logs_root: pod_logs_root.clone(),
            legacy_log_symlinks_dir: container_logs_dir.clone(),
        },
        RuntimeManagerDeps {
            runtime_service: runtime_services.runtime.clone(),
            image_service: image_service.clone(),
            image_manager,
            helper,
            pod_state: Arc::new(workers_handle.clone()),
            liveness: prober.liveness_results(),
            startup: prober.startup_results(),
            recorder: events.clone(),
            crash_backoff: crash_backoff.clone(),
            clock: clock.clone(),
        },
    )
    .await
    .map_err(|e| BuildError::Runtime(e.to_string()))?;
    let runtime: Arc<dyn Runtime> = Arc::new(runtime_manager);

    let (pleg_tx, pleg_events) = event_stream();
    let pleg = Arc::new(GenericPleg::new(
        runtime.clone(),
        pod_cache.clone(),
        pleg_tx,
        clock.clone(),
    ));
    let pleg_health = pleg.clone();
    runtime_state.add_health_check(
        "PLEG",
        Arc::new(move || pleg_health.healthy().map_err(|e| e.to_string())),
    );

    let image_gc = Arc::new(
        ImageGcManager::new(
            runtime.clone(),
            image_service,
            Arc::new(CriImageFsStats::new(runtime_services.image.clone())),
            events.clone(),
            node_ref(&node_name),
            ImageGcPolicy {
                high_threshold_percent: c.image_gc_high_threshold_percent,
                low_threshold_percent: c.image_gc_low_threshold_percent,
                min_age: c.image_minimum_gc_age.to_std(),
            },
            server.flags.pod_infra_container_image.clone(),
            clock.clone(),
        )
        .map_err(|e| BuildError::ImageGc(e.to_string()))?,
    );
    let container_gc_policy = GcPolicy {
        min_age: server.flags.minimum_gc_age.to_std(),
        max_per_pod_container: server.flags.max_per_pod_container_count,
        max_containers: server.flags.max_container_count,
    };

    let soft_admission = Arc::new(SoftAdmission::from_host());
    let syncer = Arc::new(PodSyncer {
        runtime: runtime.clone(),
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
        soft_admission,
        dirs: dirs.clone(),
    });
    let pod_workers = PodWorkers::new(
        syncer.clone(),
        pod_cache.clone(),
        work_queue.clone(),
        recorder.clone(),
        clock.clone(),
        PodWorkersConfig {
            resync_interval: c.sync_frequency.to_std(),
            ..Default::default()
        },
    );
    workers_handle.set(pod_workers.clone());
    if let Some(a) = api.as_mut() {
        a.wire(api::KubeletParts {
            pod_manager: pod_manager.clone(),
            pod_workers: pod_workers.clone(),
            volume_manager: volume_manager.clone(),
            pod_container_manager: c.cgroups_per_qos.then(|| pod_container_manager.clone()),
            sources_ready: sources_ready.clone(),
            status_manager: status_manager.clone(),
        });
    }

    let preempt_workers = pod_workers.clone();
    let preempt: PreemptFn = Arc::new(move |pod| {
        let workers = preempt_workers.clone();
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
    });

    let stats = eviction::stats_provider(
        &node_name,
        Path::new(&server.flags.root_directory),
        &pod_logs_root,
        &container_manager.get_pod_cgroup_root(),
        c.cgroup_driver == "systemd",
        &runtime_services,
    )
    .await
    .map_err(|e| BuildError::Eviction(e.to_string()))?;
    let mut eviction_config =
        EvictionConfig::from_kubelet_config(c).map_err(|e| BuildError::Eviction(e.to_string()))?;
    if eviction_config.kernel_memcg_notification {
        let sc = stats.config();
        if !sc.unified {
            eviction_config.memory_cgroup = Some(MemoryCgroup {
                mount: sc.memory_cgroup_mount.clone(),
                pods_cgroup: sc.pods_cgroup.clone(),
            });
        }
    }
    let eviction_active = {
        let (pm, workers, status) = (
            pod_manager.clone(),
            pod_workers.clone(),
            status_manager.clone(),
        );
        Arc::new(move || active_pods(&pm, &workers, &status))
    };
    let cleaned_workers = pod_workers.clone();
    let eviction_gc_ready = sources_ready.clone();
    let eviction_manager = EvictionManager::new(
        eviction_config,
        EvictionDeps {
            stats: stats.clone(),
            killer: Arc::new(eviction::WorkersPodKiller(pod_workers.clone())),
            image_gc: image_gc.clone(),
            container_gc: Arc::new(RuntimeContainerGc::new(
                runtime.clone(),
                container_gc_policy,
                Arc::new(move || eviction_gc_ready.all_ready()),
            )),
            recorder: events.clone(),
            node_ref: node_ref(&node_name),
            clock: clock.clone(),
            active_pods: eviction_active,
            pod_cleaned_up: Arc::new(move |pod: &k8s_openapi::api::core::v1::Pod| {
                !cleaned_workers
                    .could_have_running_containers(pod.metadata.uid.as_deref().unwrap_or_default())
            }),
        },
    );
    pressure.set(eviction_manager.clone());

    let eviction_admit = EvictionAdmitHandler::new(eviction_manager.clone());
    let admission = Arc::new(Admission {
        eviction: Some(Arc::new(move |pod| eviction_admit.admit(pod))),
        node: Arc::new(admission_node(
            &server,
            &node_name,
            &hostname,
            node_resources.clone(),
            api.as_ref().map(|a| a.node()),
        )),
        sysctls: SysctlAllowlist::new(&c.allowed_unsafe_sysctls),
        preempt: Some(preempt),
    });

    let (container_deletor, container_deletor_task) =
        ContainerDeletor::new(runtime.clone(), container_gc_policy.max_per_pod_container);
    let gc_backoff = crash_backoff.clone();
    let housekeeping = Arc::new(Housekeeping {
        pod_manager: pod_manager.clone(),
        pod_workers: pod_workers.clone(),
        status_manager: status_manager.clone(),
        probes: probes.clone() as Arc<dyn ProbeManager>,
        runtime: runtime.clone(),
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
        pod_cache: pod_cache.clone(),
        monitor: monitor.clone(),
        clock: clock.clone(),
    };

    Ok(Kubelet {
        runtime_service: runtime_services.runtime.clone(),
        eviction_manager,
        stats,
        server,
        node_name,
        clock,
        dirs,
        pod_logs_root,
        container_logs_dir,
        pod_config,
        updates,
        sources_ready,
        pod_manager,
        status_manager,
        pod_workers,
        pod_cache,
        runtime,
        pleg,
        pleg_events,
        prober,
        probe_streams,
        volume_manager,
        image_gc,
        container_gc_policy,
        crash_backoff,
        container_manager,
        pod_container_manager,
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

/// The node's object reference (events about the node).
pub fn node_ref(node_name: &str) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("Node".into()),
        name: Some(node_name.to_string()),
        uid: Some(node_name.to_string()),
        ..Default::default()
    }
}

/// How long [`new_main_kubelet`] waits at most for the runtime's version.
pub const RUNTIME_VERSION_TIMEOUT: Duration = Duration::from_secs(60);
