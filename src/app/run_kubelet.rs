//! RunKubelet → createAndInitKubelet (NewMainKubelet, BirthCry,
//! StartGarbageCollection) → startKubelet (Kubelet.Run plus the main and
//! read-only servers), or RunOnce.

use std::net::IpAddr;
use std::sync::Arc;

use super::dependencies::Dependencies;
use super::server::KubeletServer;
use crate::cm::ContainerManager;
use crate::configz::Configz;
use crate::cri::RuntimeServices;
use crate::features;
use crate::healthz::{Healthz, named_check};
use crate::kubelet::build::api::ApiClients;
use crate::kubelet::build::{BuildError, KubeletDeps, new_main_kubelet};
use crate::kubelet::events::NodeEvents;
use crate::kubelet::run::{Running, StartError};
use crate::kubelet::runonce::{RunOnceError, RunPodResult};
use crate::kubelet::server::auth::KubeletAuth;
use crate::kubelet::server::handlers::{ServerHandlers, main_router, read_only_router};
use crate::kubelet::server::tls::TlsOptions;
use crate::kubelet::server::{ServerError, main_server, read_only_server};
use crate::util::lifecycle::TaskSet;
use crate::util::rlimit;

/// Why RunKubelet failed.
#[derive(Debug, thiserror::Error)]
pub enum RunKubeletError {
    #[error(
        "the SeccompDefault feature gate must be enabled in order to use the SeccompDefault configuration"
    )]
    SeccompDefaultGate,
    #[error("failed to create kubelet: {0}")]
    Create(#[from] BuildError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("runonce failed: {0}")]
    RunOnce(#[from] RunOnceError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Router(#[from] crate::kubelet::server::router::RouterError),
    #[error("failed to set up the server TLS: {0}")]
    Tls(String),
    #[error("failed to create listener for podResources endpoint: {0}")]
    PodResources(#[source] std::io::Error),
}

/// What run() hands RunKubelet.
pub struct RunKubeletParams<'a> {
    pub server: Arc<KubeletServer>,
    pub deps: &'a Dependencies,
    pub node_name: String,
    pub hostname: String,
    pub node_ips: Vec<IpAddr>,
    pub runtime_services: RuntimeServices,
    pub container_manager: Arc<dyn ContainerManager>,
    pub configz: Configz,
    pub tls: TlsOptions,
    pub auth: KubeletAuth,
    /// The API clients and recorder; `None` standalone.
    pub api: Option<ApiClients>,
    pub tasks: &'a TaskSet,
}

/// How RunKubelet ended.
pub enum RunOutcome {
    /// `--runonce`: the pods' results; the process exits.
    RanOnce(Vec<RunPodResult>),
    /// The kubelet runs until its task set is cancelled.
    Started(Running),
}

/// RunKubelet.
pub async fn run_kubelet(p: RunKubeletParams<'_>) -> Result<RunOutcome, RunKubeletError> {
    let server = p.server.clone();
    crate::vlog!(2, path = %server.flags.root_directory, "Using root directory");
    if server.config.seccomp_default && !server.feature_gate.enabled(features::SECCOMP_DEFAULT) {
        return Err(RunKubeletError::SeccompDefaultGate);
    }
    let (pod_logs_root, container_logs_dir) = p.deps.log_dirs();
    let birth_cry = p
        .api
        .as_ref()
        .map(|a| NodeEvents::new(a.recorder.clone(), &p.node_name));
    let kubelet = new_main_kubelet(KubeletDeps {
        server: server.clone(),
        node_name: p.node_name.clone(),
        hostname: p.hostname.clone(),
        node_ips: p.node_ips.clone(),
        runtime_services: p.runtime_services,
        container_manager: p.container_manager,
        clock: p.deps.clock.clone(),
        pod_logs_root,
        container_logs_dir: Some(container_logs_dir),
        node_hosts_file: p.deps.node_hosts_file.clone(),
        api: p.api,
        machine_info: p.deps.machine_info.clone(),
        mounter: Arc::new(crate::volume::util::mount::SystemMounter),
    })
    .await?;
    // BirthCry: the "Starting" event on the Node (only logged standalone).
    match &birth_cry {
        Some(events) => events.birth_cry(),
        None => tracing::info!(node = %p.node_name, reason = "Starting", "Starting kubelet."),
    }

    if !rlimit::apply_max_open_files(server.config.max_open_files) {
        tracing::error!("Failed to set rlimit on max file handles");
    }

    if server.config.run_once {
        let results = kubelet.run_once(p.tasks).await?;
        tracing::info!("Started kubelet as runonce");
        return Ok(RunOutcome::RanOnce(results));
    }

    // startKubelet: the kubelet, then its servers.
    let healthz = Healthz::new();
    let health = kubelet.sync_loop_health();
    healthz
        .register(named_check("syncloop", move || {
            health().map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        }))
        .map_err(ServerError::Healthz)?;
    crate::metrics::global().register(Arc::new(
        crate::kubelet::logs::metrics::LogMetricsCollector::new(kubelet.env.pod_logs_root.clone()),
    ));
    let handlers = ServerHandlers {
        healthz,
        configz: p.configz,
        metrics: Some(Arc::new(crate::metrics::render_text)),
        probe_metrics: Some(Arc::new(crate::metrics::render_probes_text)),
        kubelet: Some(kubelet.server_sources()),
        profiling: server.config.enable_profiling_handler,
    };
    let c = &server.config;
    let pod_resources = server
        .feature_gate
        .enabled(features::KUBELET_POD_RESOURCES)
        .then(|| {
            kubelet.pod_resources_providers(
                server
                    .feature_gate
                    .enabled(features::KUBELET_POD_RESOURCES_GET_ALLOCATABLE),
            )
        });
    let root_dir = kubelet.env.dirs.root_dir().to_path_buf();
    let serving = kubelet.serving_certificate.as_ref().map(|s| s.resolver());
    let running = kubelet.start(p.tasks).await?;

    if !(c.enable_server && c.enable_debugging_handlers && c.enable_profiling_handler)
        && let Err(e) = crate::kubelet::server::pprof::heap::deactivate().await
    {
        tracing::warn!(err = %e, "Heap profiling left on");
    }
    if c.enable_server {
        let router = main_router(&handlers, c.enable_debugging_handlers)?;
        let tls = match serving {
            Some(resolver) => p.tls.server_config_with_resolver(resolver),
            None => p.tls.server_config(),
        }
        .map_err(|e| RunKubeletError::Tls(e.to_string()))?;
        main_server(c.address.clone(), c.port as u16, router, tls, p.auth)
            .bind()
            .await?
            .start(p.tasks);
    }
    let ro_router = read_only_router(&handlers)?;
    if let Some(ro) = read_only_server(c.address.clone(), c.read_only_port as u16, ro_router) {
        ro.bind().await?.start(p.tasks);
    }
    if let Some(providers) = pod_resources {
        crate::kubelet::server::podresources::PodResourcesServer::bind(&root_dir, providers)
            .await
            .map_err(RunKubeletError::PodResources)?
            .start(p.tasks);
    }
    tracing::info!("Started kubelet");
    Ok(RunOutcome::Started(running))
}
