//! `kubelet hollow`: N kubelets in one process on one tokio runtime
//! (kubemark's hollow node, denser). Each node is the real composition
//! (`kubelet::build::new_main_kubelet`, `Kubelet::start`: API pod source,
//! pod workers, sync loop, status manager, node status and lease, PLEG,
//! probers; eviction off) over hollow seams: the in-memory CRI
//! (`cri::memory`), a described machine (`cadvisor::StaticMachine`), a
//! container manager and a mounter that touch nothing (`cm::noop`,
//! `volume::util::mount::NoopMounter`), each node's files under
//! `<state-dir>/<name>`. No servers (10250/10255/10248) are started.
//!
//! Shared: the runtime, the API transport (one connection pool, one
//! kubeconfig's credentials) unless credentials are per node (`{node}` in
//! `--kubeconfig`, or `--bootstrap-kubeconfig`: see [`node::Credentials`]),
//! the command line's configuration. Per node:
//! its clients' token buckets (kubeAPIQPS/burst, eventRecordQPS/burst as
//! configured), watches (its own pods, its own Node), caches, tasks.

pub mod node;
pub mod options;

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::apis::config::server::KubeletServer;
use crate::kubelet::client::SharedTransport;
use crate::util::clock::{Clock, RealClock};
use crate::util::lifecycle::TaskSet;
pub use node::{Credentials, RuntimeFactory, Shared, memory_runtimes, node_server, start_node};
pub use options::{HollowOptions, OptionsError};

/// Why the hollow nodes could not run.
#[derive(Debug, thiserror::Error)]
pub enum HollowError {
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error("hollow nodes need --kubeconfig (or --bootstrap-kubeconfig)")]
    NoKubeconfig,
    #[error(
        "--kubeconfig {0:?} would be every hollow node's: with --bootstrap-kubeconfig, name each node's file with {{node}} in it or leave --kubeconfig out (each node's is then <state-dir>/<name>/kubeconfig)"
    )]
    SharedBootstrapTarget(String),
    #[error(transparent)]
    Dependencies(#[from] super::dependencies::DependenciesError),
    #[error("failed to build the API clients: {0}")]
    Clients(#[from] crate::kubelet::client::ClientError),
    #[error("failed to describe the machine: {0}")]
    Machine(#[from] crate::cadvisor::MachineInfoError),
    #[error("failed to create the hollow kubelet: {0}")]
    Build(#[from] crate::kubelet::build::BuildError),
    #[error(transparent)]
    Start(#[from] crate::kubelet::run::StartError),
    #[error(transparent)]
    Signals(#[from] crate::util::signals::SignalError),
    #[error("failed to create the state directory {path:?}: {source}")]
    StateDir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("blocking set-up task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// The IP every hollow node reports when `--node-ip` is not given: this
/// host's default-route interface address (one look, not one per node).
async fn default_node_ips(server: &KubeletServer) -> Result<Vec<std::net::IpAddr>, HollowError> {
    let given = super::dependencies::parse_node_ips(&server.flags.node_ip)?;
    if !given.is_empty() {
        return Ok(given);
    }
    let chosen = tokio::task::spawn_blocking(|| {
        crate::kubelet::nodestatus::addresses::choose_host_interface(&Default::default(), false)
    })
    .await?;
    Ok(match chosen {
        Ok(ip) => vec![ip],
        Err(e) => {
            tracing::warn!(err = %e, "No host interface address for the hollow nodes; each resolves its own");
            Vec::new()
        }
    })
}

/// The process-wide parts: transport, node IPs, the state directory.
pub async fn shared(
    base: Arc<KubeletServer>,
    options: HollowOptions,
    clock: Arc<dyn Clock>,
) -> Result<Shared, HollowError> {
    let (kubeconfig, bootstrap) = (&base.flags.kubeconfig, &base.flags.bootstrap_kubeconfig);
    if kubeconfig.is_empty() && bootstrap.is_empty() {
        return Err(HollowError::NoKubeconfig);
    }
    if !bootstrap.is_empty()
        && !kubeconfig.is_empty()
        && !kubeconfig.contains(node::NODE_PLACEHOLDER)
    {
        return Err(HollowError::SharedBootstrapTarget(kubeconfig.clone()));
    }
    let credentials = if Credentials::per_node(&base) {
        Credentials::PerNode
    } else {
        Credentials::Shared(Box::new(
            SharedTransport::from_kubeconfig(Path::new(&base.flags.kubeconfig)).await?,
        ))
    };
    let node_ips = default_node_ips(&base).await?;
    let dir = options.state_dir.clone();
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|source| HollowError::StateDir { path: dir, source })?;
    Ok(Shared {
        base,
        options,
        credentials,
        runtimes: node::memory_runtimes(),
        node_ips,
        clock,
    })
}

/// How many nodes start at once (a TLS bootstrap without rotation waits
/// for its CSR's approval before its node can start).
const STARTING_AT_ONCE: usize = 16;

/// Starts every node of `shared` on `tasks`, a few at a time; a node that
/// fails to start is logged and skipped, as a kubemark pod that crashed
/// would be. Returns how many started.
pub async fn start_all(shared: &Shared, tasks: &TaskSet) -> u32 {
    use futures::StreamExt;
    let mut started = 0;
    let mut starting = futures::stream::iter(0..shared.options.nodes)
        .map(|n| async move { (n, start_node(shared, n, tasks).await) })
        .buffered(STARTING_AT_ONCE);
    while let Some((n, outcome)) = starting.next().await {
        match outcome {
            Ok(mut running) => {
                started += 1;
                let name = shared.options.node_name(n);
                let stop = tasks.token();
                tasks.spawn("hollow-node-fatal", async move {
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        Some(e) = running.fatal.recv() => {
                            tracing::error!(node = %name, err = %e, "Hollow node failed");
                        }
                    }
                });
            }
            Err(e) => {
                tracing::error!(node = %shared.options.node_name(n), err = %e, "Failed to start hollow node")
            }
        }
    }
    started
}

/// Runs the hollow nodes until `stop` is cancelled.
pub async fn run_with(
    base: Arc<KubeletServer>,
    options: HollowOptions,
    stop: CancellationToken,
) -> Result<(), HollowError> {
    let tasks = TaskSet::new();
    let result = async {
        let shared = shared(base, options, Arc::new(RealClock)).await?;
        let started = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            n = start_all(&shared, &tasks) => n,
        };
        tracing::info!(
            started,
            requested = shared.options.nodes,
            "Hollow nodes running"
        );
        stop.cancelled().await;
        Ok(())
    }
    .await;
    if let Err(e) = tasks
        .into_shutdown_handle()
        .shutdown(super::run::SHUTDOWN_TIMEOUT)
        .await
    {
        tracing::warn!(err = %e, "Some tasks did not stop in time");
    }
    result
}

/// `kubelet hollow ARGS`: the hollow flags, then the kubelet's.
pub fn execute(args: Vec<String>) -> u8 {
    let (options, rest) = match HollowOptions::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::error!(err = %e, "command failed");
            return 1;
        }
    };
    let server = match super::command::prepare(rest) {
        Ok(server) => server,
        Err(code) => return code,
    };
    let runtime = match crate::util::runtime::build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(err = %e, "failed to start the async runtime");
            return 1;
        }
    };
    let outcome = runtime.block_on(async move {
        let stop = CancellationToken::new();
        crate::util::signals::ShutdownSignals::register()?.spawn_handler(stop.clone());
        run_with(server, options, stop).await
    });
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(err = %e, "Hollow kubelet exited");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::config::flags::KubeletFlags;
    use crate::apis::config::types::KubeletConfiguration;

    #[tokio::test]
    async fn credentials_flags_that_cannot_work_are_refused() {
        // (--kubeconfig, --bootstrap-kubeconfig, the error)
        let cases = [
            ("", "", "need --kubeconfig"),
            ("/k", "/b", "would be every hollow node's"),
        ];
        for (kubeconfig, bootstrap, want) in cases {
            let flags = KubeletFlags {
                kubeconfig: kubeconfig.into(),
                bootstrap_kubeconfig: bootstrap.into(),
                ..Default::default()
            };
            let base = KubeletServer::new(
                flags,
                KubeletConfiguration::v1beta1_defaults(),
                Default::default(),
            );
            let err = match shared(base, HollowOptions::default(), Arc::new(RealClock)).await {
                Ok(_) => panic!("{kubeconfig:?} {bootstrap:?}: accepted"),
                Err(e) => e.to_string(),
            };
            assert!(err.contains(want), "{kubeconfig:?} {bootstrap:?}: {err}");
        }
    }
}
