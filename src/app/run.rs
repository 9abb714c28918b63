//! run() (cmd/kubelet/app/server.go, v1.25), in the documented order: lock
//! file, /configz, standalone detection, node name, API clients (none in
//! standalone mode), authentication and authorization, machine info and the
//! container manager (swap check first), the kubelet's OOM score, the CRI
//! services (version-checked), RunKubelet, healthz, sd_notify READY=1; then
//! wait for SIGTERM/SIGINT or lock contention and stop every task within a
//! bound.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::dependencies::{Dependencies, DependenciesError, node_config, parse_node_ips};
use super::run_kubelet::{RunKubeletError, RunKubeletParams, RunOutcome, run_kubelet};
use super::server::KubeletServer;
use crate::cm::{ContainerManager, ContainerManagerImpl};
use crate::configz::{Configz, KUBELET_CONFIG};
use crate::cri::connect_runtime_services;
use crate::healthz::Healthz;
use crate::kubelet::build::api::ApiClients;
use crate::kubelet::client::{ClientParams, build_clients};
use crate::kubelet::events::{
    ApiEventRecorder, EventRecorder, KubeEventSink, LoggingRecorder, NodeEvents,
};
use crate::kubelet::run::Running;
use crate::kubelet::server::auth::{CA_RELOAD_PERIOD, ClientCaBundle, build_auth};
use crate::kubelet::server::healthz_server::{HealthzServer, HealthzServerParams};
use crate::kubelet::server::tls::{TlsParams, initialize_tls};
use crate::util::lifecycle::TaskSet;
use crate::util::lockfile::{KubeletLock, LockFileParams, obtain};
use crate::util::node_name::{get_hostname, node_name};
use crate::util::signals::ShutdownSignals;
use crate::version;

/// How long shutdown waits for the kubelet's tasks.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// Why run() ended with an error (exit status 1).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Signals(#[from] crate::util::signals::SignalError),
    #[error(transparent)]
    Lock(#[from] crate::util::lockfile::LockFileError),
    #[error(transparent)]
    NodeName(#[from] crate::util::node_name::NodeNameError),
    #[error("failed to run Kubelet: {0}")]
    Clients(#[from] crate::kubelet::client::ClientError),
    #[error(transparent)]
    Auth(#[from] crate::kubelet::server::auth::AuthError),
    #[error(transparent)]
    Tls(#[from] crate::kubelet::server::tls::TlsError),
    #[error(transparent)]
    Dependencies(#[from] DependenciesError),
    #[error(transparent)]
    Swap(#[from] crate::util::swap::SwapError),
    #[error("failed to run Kubelet: {0}")]
    ContainerManager(crate::cm::CmError),
    #[error("failed to run Kubelet: failed to connect to the container runtime: {0}")]
    Cri(crate::cri::CriError),
    #[error(transparent)]
    RunKubelet(#[from] RunKubeletError),
    #[error(transparent)]
    Server(#[from] crate::kubelet::server::ServerError),
    #[error("{0}")]
    Fatal(String),
    #[error("blocking set-up task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Starts the kubelet described by `server` on this host and returns once
/// it was asked to stop.
pub async fn run(server: Arc<KubeletServer>) -> Result<(), RunError> {
    let stop = CancellationToken::new();
    // Watched from the start, so a stop request is never lost.
    ShutdownSignals::register()?.spawn_handler(stop.clone());
    let deps = Dependencies::unsecured(&server);
    run_with(server, deps, stop).await
}

fn non_empty(s: &str) -> Option<PathBuf> {
    (!s.is_empty()).then(|| PathBuf::from(s))
}

/// run() over the given host seams; returns when `stop` is cancelled (or
/// the lock is contended, or a runonce pass ends). A stop request during
/// start-up ends start-up at once.
pub async fn run_with(
    server: Arc<KubeletServer>,
    deps: Dependencies,
    stop: CancellationToken,
) -> Result<(), RunError> {
    tracing::info!(kubelet_version = %version::git_version(), "Kubelet version");
    let tasks = TaskSet::new();
    let started = tokio::select! {
        biased;
        _ = stop.cancelled() => {
            shutdown(tasks).await;
            return Ok(());
        }
        r = start_up(&server, &deps, &tasks) => r,
    };
    let (mut lock, mut running) = match started {
        Ok(Some(s)) => s,
        Ok(None) => {
            shutdown(tasks).await;
            return Ok(());
        }
        Err(e) => {
            shutdown(tasks).await;
            return Err(e);
        }
    };
    let contended = lock.contended();
    let result = tokio::select! {
        _ = stop.cancelled() => Ok(()),
        _ = contended => {
            tracing::info!("Lock file contention detected, exiting");
            Ok(())
        }
        fatal = running.fatal.recv() => match fatal {
            Some(e) => Err(RunError::Fatal(e)),
            None => Ok(()),
        },
    };
    shutdown(tasks).await;
    drop(lock);
    result
}

/// Everything up to the running kubelet; `None` after a runonce pass.
async fn start_up(
    server: &Arc<KubeletServer>,
    deps: &Dependencies,
    tasks: &TaskSet,
) -> Result<Option<(KubeletLock, Running)>, RunError> {
    let c = &server.config;
    let lock = obtain(&LockFileParams {
        path: non_empty(&server.flags.lock_file_path),
        exit_on_contention: server.flags.exit_on_lock_contention,
    })
    .await?;

    let configz = Configz::new();
    let registered = configz
        .register(KUBELET_CONFIG)
        .map_err(|e| e.to_string())
        .and_then(|section| {
            section
                .set(&server.configz()[KUBELET_CONFIG])
                .map_err(|e| e.to_string())
        });
    if let Err(e) = registered {
        tracing::error!(err = %e, "Failed to register kubelet configuration with configz");
    }

    let standalone = server.is_standalone();
    let hostname = get_hostname(&server.flags.hostname_override)?;
    let node = node_name(&server.flags.hostname_override)?;
    // The API clients (after a TLS bootstrap when needed) and the event
    // recorder over the event client.
    let api = if standalone {
        tracing::info!("Standalone mode, no API client");
        None
    } else {
        let clients = build_clients(&ClientParams::from_server(server, &node)).await?;
        let recorder = ApiEventRecorder::new(&node, deps.clock.clone());
        recorder.start(tasks, Arc::new(KubeEventSink::new(clients.events.clone())));
        Some(ApiClients {
            clients,
            recorder,
            machine_info: deps.machine_info.clone(),
        })
    };
    let node_events: Arc<dyn EventRecorder> = match &api {
        Some(a) => a.recorder.clone(),
        None => Arc::new(LoggingRecorder),
    };

    let auth = c.authentication.clone();
    let client_ca = match non_empty(&auth.x509.client_ca_file) {
        Some(path) => Some(tokio::task::spawn_blocking(move || ClientCaBundle::load(path)).await??),
        None => None,
    };
    let kubelet_auth = build_auth(
        &node,
        api.as_ref().map(|a| a.clients.main.clone()),
        c,
        client_ca.clone(),
    )?;

    let tls_params = tls_params(server, &hostname);
    let tls = tokio::task::spawn_blocking(move || initialize_tls(&tls_params)).await??;

    deps.swap.check(c.fail_swap_on).await?;
    let node_config = node_config(server, &node)?;
    let node_name = node.clone();
    let (machine, host) = (deps.machine_info.clone(), deps.host_paths.clone());
    let container_manager: Arc<dyn ContainerManager> = Arc::new(
        tokio::task::spawn_blocking(move || {
            ContainerManagerImpl::new(
                node_config,
                machine,
                host,
                Arc::new(NodeEvents::new(node_events, &node_name)),
            )
        })
        .await?
        .map_err(RunError::ContainerManager)?,
    );

    if !deps.oom.apply_to_self(c.oom_score_adj).await {
        tracing::info!(
            oom_score_adj = c.oom_score_adj,
            "Failed to ApplyOOMScoreAdj"
        );
    }

    let runtime_services = connect_runtime_services(
        &server.flags.remote_runtime_endpoint,
        &server.flags.remote_image_endpoint,
        c.runtime_request_timeout.to_std(),
    )
    .await
    .map_err(RunError::Cri)?;

    let node_ips = parse_node_ips(&server.flags.node_ip)?;
    if let Some(bundle) = &client_ca {
        bundle.start_reloader(tasks, CA_RELOAD_PERIOD);
    }
    let outcome = run_kubelet(RunKubeletParams {
        server: server.clone(),
        deps,
        node_name: node.clone(),
        hostname,
        node_ips,
        runtime_services,
        container_manager,
        configz,
        tls,
        auth: kubelet_auth,
        api,
        tasks,
    })
    .await?;
    let running = match outcome {
        RunOutcome::Started(running) => running,
        RunOutcome::RanOnce(results) => {
            for r in &results {
                tracing::info!(
                    pod = %crate::kubelet::container::format_pod(&r.pod),
                    phase = ?r.status.as_ref().and_then(|s| s.phase.clone()),
                    "Pod status"
                );
            }
            return Ok(None);
        }
    };

    if c.healthz_port > 0 {
        let healthz = HealthzServer::new(
            HealthzServerParams {
                bind_address: c.healthz_bind_address.clone(),
                port: c.healthz_port as u16,
            },
            &Healthz::new(),
        )?;
        if let Some(h) = healthz {
            h.start(tasks);
        }
    }

    crate::util::systemd::notify_started();
    Ok(Some((lock, running)))
}

/// The TLS inputs. The cert-dir pair KubeletServer fills in when nothing
/// was configured counts as unconfigured, so it is generated when absent.
fn tls_params(server: &KubeletServer, hostname: &str) -> TlsParams {
    let c = &server.config;
    let dir = PathBuf::from(&server.flags.cert_directory);
    let defaulted = !c.server_tls_bootstrap
        && std::path::Path::new(&c.tls_cert_file) == dir.join("kubelet.crt")
        && std::path::Path::new(&c.tls_private_key_file) == dir.join("kubelet.key");
    let (cert, key) = if defaulted {
        (None, None)
    } else {
        (
            non_empty(&c.tls_cert_file),
            non_empty(&c.tls_private_key_file),
        )
    };
    TlsParams {
        cert_file: cert,
        private_key_file: key,
        cert_dir: dir,
        hostname: hostname.to_string(),
        server_tls_bootstrap: c.server_tls_bootstrap,
        min_version: c.tls_min_version.clone(),
        cipher_suites: c.tls_cipher_suites.clone(),
        client_ca_file: non_empty(&c.authentication.x509.client_ca_file),
    }
}

async fn shutdown(tasks: TaskSet) {
    tracing::info!("Shutting down");
    if let Err(e) = tasks
        .into_shutdown_handle()
        .shutdown(SHUTDOWN_TIMEOUT)
        .await
    {
        tracing::warn!(err = %e, "Some tasks did not stop in time");
    }
}
