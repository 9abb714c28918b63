//! One hollow node: the real kubelet composition (`new_main_kubelet`,
//! `Kubelet::start`) over hollow host seams: the in-memory CRI, a described
//! machine, a container manager and a mounter that touch nothing, a root
//! directory under the state directory, and clients with this node's own
//! rate limits: over the process's shared transport, or (per-node
//! credentials) over its own, with its own identity.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use super::HollowError;
use super::options::HollowOptions;
use crate::apis::config::server::KubeletServer;
use crate::cadvisor::{MachineInfoProvider, StaticMachine};
use crate::cm::noop::NoopContainerManager;
use crate::cri::memory::memory_runtime_services;
use crate::kubelet::build::api::ApiClients;
use crate::kubelet::build::{KubeletDeps, new_main_kubelet};
use crate::kubelet::client::{
    ClientParams, KubeClients, SharedTransport, build_clients_with_clock,
};
use crate::kubelet::events::{ApiEventRecorder, KubeEventSink, NodeEvents};
use crate::kubelet::run::Running;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::volume::util::mount::NoopMounter;

/// The placeholder in `--kubeconfig` / `--bootstrap-kubeconfig` that
/// stands for each node's name (per-node credentials).
pub const NODE_PLACEHOLDER: &str = "{node}";

/// Whose identity each node's clients carry.
pub enum Credentials {
    /// One kubeconfig, one identity, one connection pool for every node.
    Shared(Box<SharedTransport>),
    /// Each node its own kubeconfig (a token or client certificate per
    /// node, or its own TLS bootstrap), its own connections and, with
    /// `rotateCertificates`, its own certificate rotation.
    PerNode,
}

impl Credentials {
    /// Per node when either kubeconfig names `{node}` or a bootstrap
    /// kubeconfig is given (each node then bootstraps its own identity).
    pub fn per_node(base: &KubeletServer) -> bool {
        base.flags.kubeconfig.contains(NODE_PLACEHOLDER)
            || !base.flags.bootstrap_kubeconfig.is_empty()
    }
}

/// Makes hollow node `index`'s CRI services (its clock, its directory for
/// the image filesystem): the in-memory runtime unless replaced (tests put
/// a fault-injecting layer over it).
pub type RuntimeFactory = Arc<
    dyn Fn(u32, Arc<dyn Clock>, std::path::PathBuf) -> crate::cri::RuntimeServices + Send + Sync,
>;

/// Each node's in-memory runtime and image service.
pub fn memory_runtimes() -> RuntimeFactory {
    Arc::new(memory_runtime_services)
}

/// What every hollow node of the process shares.
pub struct Shared {
    /// The configuration the command line gave (before per-node changes).
    pub base: Arc<KubeletServer>,
    pub options: HollowOptions,
    pub credentials: Credentials,
    pub runtimes: RuntimeFactory,
    pub node_ips: Vec<IpAddr>,
    pub clock: Arc<dyn Clock>,
}

/// The kubelet configuration of hollow node `name`: its own name and
/// directories; its own kubeconfig with per-node credentials (`{node}`
/// replaced by its name, or `<root>/kubeconfig` written by its TLS
/// bootstrap); eviction off (no thresholds, no local storage isolation:
/// nothing to measure), no QoS cgroups, nothing enforced.
pub fn node_server(base: &KubeletServer, name: &str, state_dir: &Path) -> Arc<KubeletServer> {
    let mut flags = base.flags.clone();
    let mut config = base.config.clone();
    let root = state_dir.join(name);
    flags.hostname_override = name.to_string();
    flags.root_directory = root.to_string_lossy().into_owned();
    flags.cert_directory = root.join("pki").to_string_lossy().into_owned();
    if flags.kubeconfig.contains(NODE_PLACEHOLDER) {
        flags.kubeconfig = flags.kubeconfig.replace(NODE_PLACEHOLDER, name);
    } else if !flags.bootstrap_kubeconfig.is_empty() {
        flags.kubeconfig = root.join("kubeconfig").to_string_lossy().into_owned();
    }
    flags.bootstrap_kubeconfig = flags.bootstrap_kubeconfig.replace(NODE_PLACEHOLDER, name);
    config.eviction_hard.clear();
    config.eviction_soft.clear();
    config.local_storage_capacity_isolation = false;
    config.cgroups_per_qos = false;
    config.enforce_node_allocatable.clear();
    config.tls_cert_file.clear();
    config.tls_private_key_file.clear();
    KubeletServer::new(flags, config, base.feature_gate.clone())
}

/// Node `name`'s clients: over the shared transport, or its own with its
/// own credentials (bootstrapped first when it has none yet). A node that
/// loses its client certificate stops talking to the API server; it does
/// not end the process (a real kubelet would exit).
async fn node_clients(
    shared: &Shared,
    server: &KubeletServer,
    name: &str,
) -> Result<KubeClients, HollowError> {
    let params = ClientParams::from_server(server, name);
    let clock = shared.clock.clone();
    Ok(match &shared.credentials {
        Credentials::Shared(transport) => transport.clients(&params, clock)?,
        Credentials::PerNode => {
            let node = name.to_string();
            build_clients_with_clock(&params, clock)
                .await?
                .with_fatal_hook(Arc::new(move |reason| {
                    tracing::error!(node = %node, reason, "Hollow node has no valid client certificate");
                }))
        }
    })
}

/// Builds and starts hollow node number `n` on `tasks`.
pub async fn start_node(shared: &Shared, n: u32, tasks: &TaskSet) -> Result<Running, HollowError> {
    let name = shared.options.node_name(n);
    let index = shared.options.first_index.saturating_add(n);
    let server = node_server(&shared.base, &name, &shared.options.state_dir);
    let clock = shared.clock.clone();
    let machine = Arc::new(StaticMachine::new(&shared.options.machine, &name));
    let node_config = crate::app::dependencies::node_config(&server, &name)?;
    let root = Path::new(&server.flags.root_directory).to_path_buf();
    let container_manager = Arc::new(NoopContainerManager::new(
        node_config,
        machine.machine_info()?,
        &machine.fs_info(&root)?,
    ));

    let clients = node_clients(shared, &server, &name).await?;
    let recorder = ApiEventRecorder::new(&name, clock.clone());
    recorder.start(tasks, Arc::new(KubeEventSink::new(clients.events.clone())));
    let birth_cry = NodeEvents::new(recorder.clone(), &name);
    let api = ApiClients {
        clients,
        recorder,
        machine_info: machine.clone(),
    };

    let kubelet = new_main_kubelet(KubeletDeps {
        server: server.clone(),
        node_name: name.clone(),
        hostname: name.clone(),
        node_ips: shared.node_ips.clone(),
        runtime_services: (shared.runtimes)(index, clock.clone(), root.clone()),
        container_manager,
        clock,
        pod_logs_root: root.join("logs").join("pods"),
        container_logs_dir: None,
        node_hosts_file: root.join("etc-hosts"),
        api: Some(api),
        machine_info: machine,
        mounter: Arc::new(NoopMounter),
    })
    .await?;
    birth_cry.birth_cry();
    let running = kubelet.start(tasks).await?;
    tracing::info!(node = %name, "Started hollow node");
    Ok(running)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_server_table() {
        let mut config = crate::apis::config::types::KubeletConfiguration::v1beta1_defaults();
        config.max_pods = 20;
        let base = KubeletServer::new(Default::default(), config, Default::default());
        let s = node_server(&base, "hollow-3", Path::new("/state"));
        let cases: [(&str, String, String); 4] = [
            (
                "hostname",
                s.flags.hostname_override.clone(),
                "hollow-3".into(),
            ),
            (
                "root",
                s.flags.root_directory.clone(),
                "/state/hollow-3".into(),
            ),
            (
                "certs",
                s.flags.cert_directory.clone(),
                "/state/hollow-3/pki".into(),
            ),
            ("maxPods", s.config.max_pods.to_string(), "20".into()),
        ];
        for (what, got, want) in cases {
            assert_eq!(got, want, "{what}");
        }
        assert!(s.config.eviction_hard.is_empty() && !s.config.local_storage_capacity_isolation);
        assert!(!s.config.cgroups_per_qos && s.config.enforce_node_allocatable.is_empty());
        // The kubelet's usual serving certificate paths, under the node's directory.
        assert!(
            s.config.tls_cert_file.starts_with("/state/hollow-3/pki"),
            "{}",
            s.config.tls_cert_file
        );
    }

    #[test]
    fn node_credentials_table() {
        // (--kubeconfig, --bootstrap-kubeconfig, per node, node's kubeconfig, node's bootstrap)
        let cases = [
            ("/k", "", false, "/k", ""),
            ("/creds/{node}.conf", "", true, "/creds/hollow-3.conf", ""),
            ("/k", "/b", true, "/state/hollow-3/kubeconfig", "/b"),
            (
                "/creds/{node}.conf",
                "/tokens/{node}.conf",
                true,
                "/creds/hollow-3.conf",
                "/tokens/hollow-3.conf",
            ),
        ];
        for (kubeconfig, bootstrap, per_node, want_kc, want_b) in cases {
            let flags = crate::apis::config::flags::KubeletFlags {
                kubeconfig: kubeconfig.into(),
                bootstrap_kubeconfig: bootstrap.into(),
                ..Default::default()
            };
            let base = KubeletServer::new(
                flags,
                crate::apis::config::types::KubeletConfiguration::v1beta1_defaults(),
                Default::default(),
            );
            assert_eq!(
                Credentials::per_node(&base),
                per_node,
                "{kubeconfig} {bootstrap}"
            );
            let s = node_server(&base, "hollow-3", Path::new("/state"));
            assert_eq!(s.flags.kubeconfig, want_kc, "{kubeconfig} {bootstrap}");
            assert_eq!(
                s.flags.bootstrap_kubeconfig, want_b,
                "{kubeconfig} {bootstrap}"
            );
        }
    }
}
