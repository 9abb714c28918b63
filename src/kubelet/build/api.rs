//! The API-server half of NewMainKubelet and Kubelet.Run, in two builders:
//!
//! - [`ApiObjects::build`], first (Go builds its node lister and object
//!   managers early): the Node channel ([`NodeWatch`]), the "api" pod
//!   source, the ConfigMap/Secret managers, the service account token
//!   cache and the service lister.
//! - [`ApiNode::build`], last (Go sets its node status functions last):
//!   node registration and status over the eviction manager's pressure and
//!   the volume manager's volumes in use, the node lease, the status sync
//!   and the mirror pods.
//!
//! Nothing is spawned before [`ApiKubelet::start`]. Subsystems see the Node
//! only through [`NodeWatch`], which node status's watch feeds once started.

use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::sync::watch;

use crate::apis::config::server::KubeletServer;
use crate::cadvisor::MachineInfoProvider;
use crate::cm::PodContainerManager;
use crate::kubelet::client::KubeClients;
use crate::kubelet::config::apiserver::ApiserverSource;
use crate::kubelet::configmap::ObjectManagers;
use crate::kubelet::events::EventRecorder;
use crate::kubelet::lifecycle::NodeGetter;
use crate::kubelet::node_status::{
    NodeStatusDeps, NodeStatusError, NodeStatusManager, NodeStatusParams,
};
use crate::kubelet::nodelease::LeaseController;
use crate::kubelet::nodestatus::StatusSources;
use crate::kubelet::nodestatus::sources::{CriRuntimeInfo, PressureSource, RuntimeInfo};
use crate::kubelet::pod::{
    BasicMirrorClient, PodManager, delete_orphaned_mirror_pods, sync_mirror_pod,
};
use crate::kubelet::pod_sync::MirrorPods;
use crate::kubelet::status::StatusManager;
use crate::kubelet::status::sync::{ReclaimChecks, StatusSyncer};
use crate::kubelet::volumemanager::VolumeManager;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::volume::token_manager::TokenManager;

use super::lifecycle::PodCore;
use super::services::ServiceLister;

/// What run() hands NewMainKubelet in API-server mode.
#[derive(Clone)]
pub struct ApiClients {
    pub clients: KubeClients,
    /// The API event recorder (already started).
    pub recorder: Arc<dyn EventRecorder>,
    /// The machine, for node status.
    pub machine_info: Arc<dyn MachineInfoProvider>,
}

/// The node's host IPs as its Node reports them (Go's getHostIPsAnyWay:
/// the first InternalIP, else ExternalIP, of each family).
pub fn node_host_ips(node: &Node) -> Vec<IpAddr> {
    let addrs = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let mut out: Vec<IpAddr> = Vec::new();
    for kind in ["InternalIP", "ExternalIP"] {
        for a in addrs.iter().filter(|a| a.type_ == kind) {
            if let Ok(ip) = a.address.parse::<IpAddr>()
                && !out.iter().any(|o| o.is_ipv6() == ip.is_ipv6())
            {
                out.push(ip);
            }
        }
    }
    out
}

/// Why the API-server parts could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ApiBuildError {
    #[error("invalid node status settings: {0}")]
    NodeStatus(#[from] NodeStatusError),
    #[error("failed to create the ConfigMap and Secret managers: {0}")]
    Objects(String),
}

/// The kubelet's Node as the API server last sent it (Go's node lister):
/// created first, read by the object managers, the mirror client,
/// admission and pod status; fed by node status's watch once started.
#[derive(Clone)]
pub struct NodeWatch {
    node_name: String,
    tx: watch::Sender<Option<Arc<Node>>>,
}

impl NodeWatch {
    pub fn new(node_name: &str) -> Self {
        NodeWatch {
            node_name: node_name.to_string(),
            tx: watch::channel(None).0,
        }
    }

    /// The Node as last seen (Go's GetNode).
    pub fn get(&self) -> Result<Arc<Node>, NodeStatusError> {
        self.tx
            .borrow()
            .clone()
            .ok_or_else(|| NodeStatusError::NotFound(self.node_name.clone()))
    }

    /// As the [`NodeGetter`] seam.
    pub fn getter(&self) -> Arc<dyn NodeGetter> {
        let me = self.clone();
        Arc::new(move || me.get().map(|n| (*n).clone()))
    }

    /// The node's host IPs for pod status and the environment.
    pub fn host_ips(&self) -> Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync> {
        let me = self.clone();
        Arc::new(move || me.get().map(|n| node_host_ips(&n)).unwrap_or_default())
    }

    /// Start phase: follows `source` (node status's watch) until `tasks`
    /// stops.
    fn follow(&self, tasks: &TaskSet, mut source: watch::Receiver<Option<Arc<Node>>>) {
        let tx = self.tx.clone();
        let stop = tasks.token();
        tasks.spawn("node-watch", async move {
            loop {
                let node = source.borrow_and_update().clone();
                tx.send_replace(node);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = source.changed() => if changed.is_err() { return },
                }
            }
        });
    }
}

/// The API-server parts built first: everything that needs only the
/// clients and the Node channel.
pub struct ApiObjects {
    pub clients: KubeClients,
    pub node: NodeWatch,
    pub objects: ObjectManagers,
    pub tokens: Arc<TokenManager>,
    pub services: ServiceLister,
    /// Mirror pods through the API server, for pod sync and housekeeping.
    pub mirror_pods: Arc<dyn MirrorPods>,
}

impl ApiObjects {
    pub fn build(
        api: &ApiClients,
        server: &KubeletServer,
        node_name: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ApiBuildError> {
        let c = &server.config;
        let clients = api.clients.clone();
        let node = NodeWatch::new(node_name);
        let objects = ObjectManagers::new(
            &c.config_map_and_secret_change_detection_strategy,
            c.sync_frequency.to_std(),
            clients.main.clone(),
            clock.clone(),
            node.getter(),
        )
        .map_err(|e| ApiBuildError::Objects(e.to_string()))?;
        let tokens = crate::kubelet::token::new_token_manager(clients.main.clone(), clock);
        let services = ServiceLister::new(clients.main.clone());
        let mirror_pods = Arc::new(ApiMirrorPods {
            client: BasicMirrorClient::new(clients.main.clone(), node_name, Some(node.getter())),
            node: node.getter(),
        });
        Ok(ApiObjects {
            clients,
            node,
            objects,
            tokens,
            services,
            mirror_pods,
        })
    }

    /// The "api" pod source: pods bound to this node, watched once the
    /// Node has been seen.
    pub fn pod_source(&self, node_name: &str) -> ApiserverSource {
        let node = self.node.clone();
        ApiserverSource::new(
            self.clients.main.clone(),
            node_name,
            Arc::new(move || node.get().is_ok()),
        )
    }
}

/// What node status and the status sync read from the rest of the kubelet.
pub struct NodeInputs {
    /// The pressure conditions (the eviction manager).
    pub pressure: Arc<dyn PressureSource>,
    /// The pod core: the runtime state (the Ready condition), the pod and
    /// status managers, the pod workers, the clock.
    pub core: PodCore,
    pub volume_manager: Arc<VolumeManager>,
    /// The pod cgroups (with cgroupsPerQOS).
    pub pod_container_manager: Option<Arc<dyn PodContainerManager>>,
    /// Whether the node is shutting down (the Ready condition).
    pub shutdown: Option<crate::kubelet::nodeshutdown::ShutdownStatus>,
}

/// The API-server parts built last: node status, the lease, the status
/// sync and the mirror pods.
pub struct ApiNode {
    node_status: Arc<NodeStatusManager>,
    lease: Arc<LeaseController>,
    syncer: StatusSyncer,
}

impl ApiNode {
    fn build(
        api: &ApiClients,
        objects: &ApiObjects,
        env: &super::Env,
        inputs: NodeInputs,
    ) -> Result<Self, ApiBuildError> {
        let (server, node_name) = (env.server.as_ref(), env.node_name.as_str());
        let runtime_services = &env.runtime_services;
        let core = inputs.core;
        let clock = core.clock.clone();
        let clients = &objects.clients;
        let runtime_info: Arc<dyn RuntimeInfo> = Arc::new(CriRuntimeInfo::new(
            runtime_services.runtime.clone(),
            runtime_services.image.clone(),
        ));
        let mut sources = StatusSources::new(
            env.container_manager.clone(),
            api.machine_info.clone(),
            runtime_info,
            core.runtime_state.clone(),
            inputs.pressure,
            Arc::new(super::adapters::VolumesReport(
                inputs.volume_manager.clone(),
            )),
            clock.clone(),
        );
        sources.shutdown = inputs.shutdown.clone();
        let params = NodeStatusParams::from_server(server, node_name, &env.hostname)?;
        let node_status = NodeStatusManager::new(
            params,
            NodeStatusDeps {
                client: clients.main.clone(),
                heartbeat_client: clients.heartbeat.clone(),
                sources,
                recorder: api.recorder.clone(),
                on_heartbeat_failure: Some(clients.heartbeat_failure_hook()),
                reset_extended_resources: false,
                clock: clock.clone(),
            },
        );
        let lease = LeaseController::new(
            clients.heartbeat.clone(),
            node_name,
            server.config.node_lease_duration_seconds,
            clock.clone(),
            Some(clients.heartbeat_failure_hook()),
        );
        let workers = core.pod_workers.clone();
        let vm = inputs.volume_manager;
        let checks = ReclaimChecks {
            could_have_running_containers: Arc::new(move |uid| {
                workers.could_have_running_containers(uid)
            }),
            pod_volumes_exist: Arc::new(move |uid| {
                let vm = vm.clone();
                Box::pin(async move { vm.pod_volumes_exist(&uid).await })
            }),
            pod_cgroups: inputs.pod_container_manager,
            keep_terminated_pod_volumes: server.flags.keep_terminated_pod_volumes,
        };
        let status_manager = core.status_manager.clone();
        let syncer = StatusSyncer::new(
            clients.main.clone(),
            core.pod_manager.clone(),
            Arc::new(checks),
            clock,
        )
        .with_limiter(clients.main_limiter.clone())
        .with_forget(Arc::new(move |uid| status_manager.delete_pod_status(uid)));
        Ok(ApiNode {
            node_status,
            lease,
            syncer,
        })
    }
}

/// The built API-server parts, for the start phase.
pub struct ApiKubelet {
    objects: ApiObjects,
    node: ApiNode,
    status_manager: Arc<StatusManager>,
}

impl ApiKubelet {
    /// The parts built last (node status, lease, status sync, mirror
    /// pods) over `objects`, built first.
    pub fn build(
        api: ApiClients,
        objects: ApiObjects,
        env: &super::Env,
        inputs: NodeInputs,
    ) -> Result<Self, ApiBuildError> {
        let status_manager = inputs.core.status_manager.clone();
        let node = ApiNode::build(&api, &objects, env, inputs)?;
        Ok(ApiKubelet {
            objects,
            node,
            status_manager,
        })
    }

    /// Start phase (Kubelet.Run's API-server part): the clients' watchers,
    /// node status (whose watch feeds the Node channel), the lease, the
    /// status sync over `status_manager`, the object managers, the token
    /// cache and the mirror pods.
    pub fn start(self, tasks: &TaskSet) {
        let ApiKubelet {
            objects,
            node,
            status_manager,
        } = self;
        objects.clients.start(tasks);
        node.node_status.start(tasks);
        objects
            .node
            .follow(tasks, node.node_status.node_lister().subscribe());
        node.lease.start(tasks);
        node.syncer.start_with(&status_manager, tasks);
        objects.objects.start(tasks);
        objects.services.start(tasks);
        objects.tokens.start(tasks);
    }
}

/// Mirror pods through the API server: created by pod sync (with the
/// registered Node as owner), orphans deleted by housekeeping.
struct ApiMirrorPods {
    client: BasicMirrorClient,
    node: Arc<dyn NodeGetter>,
}

#[async_trait::async_trait]
impl MirrorPods for ApiMirrorPods {
    async fn sync(&self, pod: &Pod, mirror: Option<&Pod>) {
        let node = self.node.get_node_any_way().ok();
        sync_mirror_pod(&self.client, pod, mirror, node.as_ref()).await;
    }

    async fn delete_orphaned(
        &self,
        pods: &PodManager,
        is_terminating: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync),
    ) {
        delete_orphaned_mirror_pods(&self.client, pods, is_terminating).await;
    }
}
