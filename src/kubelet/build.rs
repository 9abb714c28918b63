//! NewMainKubelet: every subsystem of the kubelet, constructed and wired,
//! with nothing started, in the order of Go's: the API server's object
//! managers, the pod sources and the pod manager, the pod core (status
//! manager, pod cache, pod workers, runtime state), the prober, the volume
//! manager, the CRI runtime manager with its image manager and the PLEG,
//! the eviction manager, the pod lifecycle (pod sync, housekeeping,
//! admission, sync loop: [`lifecycle::compose`], which the unit tests
//! build too) and last node status. [`Kubelet::start`](crate::kubelet::run)
//! spawns their tasks.
//!
//! Subsystems get the narrow traits they need (see [`adapters`]); cycles
//! are broken without set-once cells: the pod workers' handle exists before
//! the subsystems that ask it what runs (its start half gets the pod
//! syncer), and the Node is a channel created first and fed by node status.

pub mod adapters;
pub mod api;
pub mod cadvisor;
pub mod eviction;
pub mod lifecycle;
pub mod node;
pub mod runtime;
pub mod services;
pub mod serving;
pub mod shutdown;
pub mod sources;
pub mod volumes;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::apis::config::server::KubeletServer;
use crate::cm::ContainerManager;
use crate::cri::RuntimeServices;
use crate::kubelet::container_logs::KubeletContainerLogs;
use crate::kubelet::events::{EventRecorder, LoggingRecorder};
use crate::kubelet::eviction::{EvictionAdmitHandler, EvictionManager};
use crate::kubelet::logs::ContainerLogManager;
use crate::kubelet::network::dns::DnsConfigurer;
use crate::kubelet::nodeshutdown::ShutdownManager;
use crate::kubelet::pod_dirs::PodDirs;
use crate::kubelet::pod_sync::{NoSecretManager, PodVolumes, SecretManagerPullSecrets};
use crate::kubelet::pod_workers::PodWorkersConfig;
use crate::kubelet::prober::ProberManager;
use crate::kubelet::prober::exec::CriCommandRunner;
use crate::kubelet::prober::manager::{ProberDeps, ProberOptions, ResultStreams};
use crate::kubelet::prober::probe::ProbeGates;
use crate::kubelet::server::handlers::KubeletSources;
use crate::kubelet::stats::NodeStatsProvider;
use crate::kubelet::streaming::KubeletStreaming;
use crate::kubelet::sync_loop::admission::AdmitFn;
use crate::kubelet::sync_loop::admission::SoftAdmission;
use crate::kubelet::volumemanager::VolumeManager;
use crate::util::clock::Clock;
use crate::volume::util::mount::MountInterface;
use adapters::{KubeletPods, NodeResources, Probes, RecorderEvents, Volumes};
use lifecycle::{Lifecycle, PodCore};
use sources::PodSources;

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
    #[error("failed to read the cgroup layout for container metrics: {0}")]
    CadvisorLayout(#[from] crate::cm::CmError),
    #[error("container metrics set-up task failed: {0}")]
    CadvisorTask(#[from] tokio::task::JoinError),
    #[error("failed to initialize server certificate manager: {0}")]
    ServingCertificate(#[from] crate::kubelet::certificate::CertificateError),
    #[error("failed to initialize container log manager: {0}")]
    LogManager(#[from] crate::kubelet::logs::PolicyError),
    #[error("failed to register CRI auth plugins: {0}")]
    CredentialProviders(#[from] crate::kubelet::images::credentialprovider::RegisterError),
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
    /// The machine and its versions (container metrics).
    pub machine_info: Arc<dyn crate::cadvisor::MachineInfoProvider>,
    /// Mounts for volumes and the root directory's shared propagation
    /// (the host's; hollow nodes mount nothing).
    pub mounter: Arc<dyn MountInterface>,
}

/// The kubelet's settings, identity and outer handles, read by every
/// builder (nothing in it is built here).
pub struct Env {
    pub server: Arc<KubeletServer>,
    pub node_name: String,
    pub hostname: String,
    pub node_ips: Vec<IpAddr>,
    /// The layout under `--root-dir`.
    pub dirs: PodDirs,
    /// `/var/log/pods`.
    pub pod_logs_root: PathBuf,
    /// `/var/log/containers`; `None` makes no legacy symlinks.
    pub container_logs_dir: Option<PathBuf>,
    /// Where events go: the API server's recorder, or the log standalone.
    pub events: Arc<dyn EventRecorder>,
    pub runtime_services: RuntimeServices,
    pub container_manager: Arc<dyn ContainerManager>,
    /// The machine and its versions (container metrics).
    pub machine_info: Arc<dyn crate::cadvisor::MachineInfoProvider>,
    /// Mounts (the host's, or none for hollow nodes).
    pub mounter: Arc<dyn MountInterface>,
}

/// The built kubelet, ready for its start phase: each part starts on its
/// own (see [`crate::kubelet::run`]).
pub struct Kubelet {
    pub env: Env,
    pub sources: PodSources,
    pub core: PodCore,
    pub lifecycle: Lifecycle,
    pub runtime: runtime::RuntimeParts,
    pub prober: ProberManager,
    pub probe_streams: ResultStreams,
    pub volume_manager: Arc<VolumeManager>,
    pub eviction_manager: Arc<EvictionManager>,
    /// Rotates container logs (started once the runtime is up).
    pub log_manager: Arc<ContainerLogManager>,
    /// Graceful node shutdown (started once the runtime is up); `None`
    /// when it is off.
    pub shutdown_manager: Option<Arc<ShutdownManager>>,
    /// Node, pod and container statistics (eviction, resource metrics).
    pub stats: Arc<NodeStatsProvider>,
    /// The containers /metrics/cadvisor reports.
    pub cadvisor: Arc<crate::kubelet::stats::CadvisorContainers>,
    pub node_resources: Arc<NodeResources>,
    pub dns: DnsConfigurer,
    /// The API-server parts; `None` standalone.
    pub api: Option<api::ApiKubelet>,
    /// The main port's certificate under serverTLSBootstrap.
    pub serving_certificate: Option<serving::ServingCertificate>,
}

impl Kubelet {
    /// What the servers' routes read: /pods and /runningpods/, the stats
    /// summary and resource metrics, /containerLogs/, and /exec/,
    /// /attach/, /portForward/ and /run/.
    pub fn server_sources(&self) -> KubeletSources {
        let (core, runtime) = (&self.core, &self.runtime);
        let usage = Arc::new(eviction::KubeletResourceUsage {
            stats: self.stats.clone(),
            pod_manager: core.pod_manager.clone(),
            rates: Default::default(),
        });
        KubeletSources {
            pods: Arc::new(KubeletPods {
                pod_manager: core.pod_manager.clone(),
                status_manager: core.status_manager.clone(),
                runtime: runtime.runtime.clone(),
            }),
            summary: usage.clone(),
            resource_usage: usage,
            cadvisor: self.cadvisor.clone(),
            clock: core.clock.clone(),
            container_logs: Arc::new(KubeletContainerLogs {
                pod_manager: core.pod_manager.clone(),
                status_manager: core.status_manager.clone(),
                runtime: runtime.runtime_service.clone(),
                clock: core.clock.clone(),
            }),
            streaming: Arc::new(KubeletStreaming {
                pod_manager: core.pod_manager.clone(),
                runtime: runtime.runtime.clone(),
                runtime_service: runtime.runtime_service.clone(),
            }),
        }
    }

    /// What the pod-resources API reads: the pod manager's pods, the
    /// container manager's device and CPU managers (no memory manager yet).
    pub fn pod_resources_providers(
        &self,
        get_allocatable: bool,
    ) -> crate::kubelet::server::podresources::Providers {
        use crate::kubelet::server::podresources as pr;
        let cm = Arc::new(pr::ContainerManagerProvider(
            self.env.container_manager.clone(),
        ));
        pr::Providers {
            pods: Arc::new(pr::PodManagerPods(self.core.pod_manager.clone())),
            devices: cm.clone(),
            cpus: cm.clone(),
            memory: cm,
            get_allocatable,
        }
    }

    /// The `syncloop` health check (max(2 × syncFrequency, 5 min)).
    pub fn sync_loop_health(&self) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        let monitor = self.lifecycle.monitor.clone();
        let clock = self.core.clock.clone();
        let resync = self.env.server.config.sync_frequency.to_std();
        move || monitor.check(clock.monotonic(), resync)
    }
}

/// NewMainKubelet: the composition, in the order of Go's.
pub async fn new_main_kubelet(deps: KubeletDeps) -> Result<Kubelet, BuildError> {
    let server = deps.server;
    let c = &server.config;
    let events: Arc<dyn EventRecorder> = match &deps.api {
        Some(a) => a.recorder.clone(),
        None => Arc::new(LoggingRecorder),
    };
    let api_objects = (deps.api.as_ref())
        .map(|a| api::ApiObjects::build(a, &server, &deps.node_name, deps.clock.clone()))
        .transpose()?;
    let serving_certificate = serving::ServingCertificate::build(
        &server,
        &deps.node_name,
        api_objects.as_ref(),
        deps.clock.clone(),
    )
    .await?;
    let (sources, pod_manager) = sources::build(
        &server,
        &deps.node_name,
        api_objects.as_ref(),
        deps.clock.clone(),
    )?;
    let workers = PodWorkersConfig {
        resync_interval: c.sync_frequency.to_std(),
        ..Default::default()
    };
    let recorder = Arc::new(RecorderEvents(events.clone()));
    let (core, workers_start) = PodCore::new(pod_manager, recorder, deps.clock, workers);
    let (prober, probe_streams) = prober(&server, &core, &deps.runtime_services, &events);
    let env = Env {
        dirs: PodDirs::new(&server.flags.root_directory),
        server: server.clone(),
        node_name: deps.node_name,
        hostname: deps.hostname,
        node_ips: deps.node_ips,
        pod_logs_root: deps.pod_logs_root,
        container_logs_dir: deps.container_logs_dir,
        events,
        runtime_services: deps.runtime_services,
        container_manager: deps.container_manager,
        machine_info: deps.machine_info,
        mounter: deps.mounter,
    };
    let node_resources = node::resources(&server, env.container_manager.as_ref()).await;
    let volume_manager = volumes::volume_manager(
        &env.dirs,
        env.mounter.clone(),
        &node_resources,
        api_objects.as_ref(),
        &core,
        &sources,
    );
    let volumes: Arc<dyn PodVolumes> = Arc::new(Volumes(volume_manager.clone()));
    let pod_container_manager = env.container_manager.new_pod_container_manager();
    let dns = node::dns_configurer(&server, &env.node_ips);
    let host_ips = node::host_ips(api_objects.as_ref(), &env).await;
    let helper = runtime::runtime_helper(runtime::HelperInputs {
        env: &env,
        host_ips: &host_ips,
        node_resources: &node_resources,
        node_hosts_file: deps.node_hosts_file,
        dns: &dns,
        volumes: &volumes,
        pod_container_manager: &pod_container_manager,
        recorder: &core.recorder,
        api: api_objects.as_ref(),
    });
    let log_manager =
        ContainerLogManager::build(c, env.runtime_services.runtime.clone(), core.clock.clone())?;
    let rt = runtime::build(&env, &core, &prober, helper).await?;
    let (stats, eviction_manager) = eviction::build(&env, &rt, &core, &sources).await?;
    let cadvisor = cadvisor::build(&env, core.pod_manager.clone(), core.clock.clone()).await?;
    let (admit, gc_backoff) = (
        EvictionAdmitHandler::new(eviction_manager.clone()),
        rt.crash_backoff.clone(),
    );
    let shutdown_manager = shutdown::build(&env, &core, &prober);
    let shutdown_status = shutdown_manager.as_ref().map(|m| m.status());
    let seams = lifecycle::Seams {
        runtime: rt.runtime.clone(),
        container_manager: env.container_manager.clone(),
        pod_container_manager: pod_container_manager.clone(),
        volumes,
        probes: Arc::new(Probes(prober.clone())),
        secrets: match &api_objects {
            Some(a) => Arc::new(SecretManagerPullSecrets(a.objects.secrets.clone())),
            None => Arc::new(NoSecretManager),
        },
        mirror_pods: api_objects.as_ref().map(|a| a.mirror_pods.clone()),
        soft_admission: Arc::new(SoftAdmission::from_host()),
        admission_node: node::admission_node(&env, node_resources.clone(), api_objects.as_ref()),
        eviction_admit: Some(Arc::new(move |pod| admit.admit(pod))),
        shutdown_admit: shutdown_status
            .clone()
            .map(|s| -> AdmitFn { Arc::new(move |pod| s.admit(pod)) }),
        backoff_gc: Some(Arc::new(move || gc_backoff.gc())),
        sources_ready: sources.ready.clone(),
    };
    let settings = lifecycle::Settings::new(&env, rt.container_gc_policy, host_ips.api());
    let lifecycle = lifecycle::compose(&core, workers_start, seams, settings);
    let api = match (deps.api, api_objects) {
        (Some(clients), Some(objects)) => Some(api::ApiKubelet::build(
            clients,
            objects,
            &env,
            api::NodeInputs {
                pressure: eviction_manager.clone(),
                core: core.clone(),
                volume_manager: volume_manager.clone(),
                pod_container_manager: c.cgroups_per_qos.then_some(pod_container_manager),
                shutdown: shutdown_status,
            },
        )?),
        _ => None,
    };
    Ok(Kubelet {
        env,
        sources,
        core,
        lifecycle,
        runtime: rt,
        prober,
        probe_streams,
        volume_manager,
        eviction_manager,
        log_manager,
        shutdown_manager,
        stats,
        cadvisor,
        node_resources,
        dns,
        api,
        serving_certificate,
    })
}

/// The prober manager, running probes through the CRI.
fn prober(
    server: &KubeletServer,
    core: &PodCore,
    runtime_services: &RuntimeServices,
    events: &Arc<dyn EventRecorder>,
) -> (ProberManager, ResultStreams) {
    ProberManager::new(ProberDeps {
        status: core.status_manager.clone(),
        runner: Arc::new(CriCommandRunner::new(runtime_services.runtime.clone())),
        recorder: events.clone(),
        clock: core.clock.clone(),
        options: ProberOptions {
            gates: ProbeGates::from_gate(&server.feature_gate),
        },
    })
}

pub use crate::kubelet::events::node_ref;

/// How long [`new_main_kubelet`] waits at most for the runtime's version.
pub const RUNTIME_VERSION_TIMEOUT: Duration = Duration::from_secs(60);
