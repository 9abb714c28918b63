//! The API-server half of NewMainKubelet and Kubelet.Run: node registration
//! and status, the node lease, the "api" pod source, the status sync, mirror
//! pods, the ConfigMap/Secret managers and the service account token cache.
//!
//! [`ApiKubelet::build`] constructs everything (no task, no request);
//! [`ApiKubelet::start`] spawns the tasks. Subsystems see the Node only
//! through [`NodeGetter`] closures over the node status manager's watch.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use crate::app::server::KubeletServer;
use crate::cadvisor::MachineInfoProvider;
use crate::cm::{ContainerManager, PodContainerManager};
use crate::cri::RuntimeServices;
use crate::kubelet::client::KubeClients;
use crate::kubelet::config::SourcesReady;
use crate::kubelet::config::apiserver::ApiserverSource;
use crate::kubelet::configmap::ObjectManagers;
use crate::kubelet::events::EventRecorder;
use crate::kubelet::lifecycle::NodeGetter;
use crate::kubelet::node_status::{NodeStatusDeps, NodeStatusManager, NodeStatusParams};
use crate::kubelet::nodelease::LeaseController;
use crate::kubelet::nodestatus::sources::{PressureSource, RuntimeInfo, VolumesInUse};
use crate::kubelet::nodestatus::{RuntimeState as NodeRuntimeState, StatusSources};
use crate::kubelet::pod::{BasicMirrorClient, PodManager, delete_orphaned_mirror_pods};
use crate::kubelet::pod_workers::PodWorkers;
use crate::kubelet::status::StatusManager;
use crate::kubelet::status::sync::{ReclaimChecks, StatusSyncer};
use crate::kubelet::types::is_static_pod;
use crate::kubelet::volumemanager::VolumeManager;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;
use crate::volume::token_manager::TokenManager;

use super::services::ServiceLister;

/// How often static pods are checked for their mirror pods (Go does it in
/// every pod sync and in housekeeping, every 2 s).
pub const MIRROR_POD_PERIOD: Duration = Duration::from_secs(1);

/// What run() hands NewMainKubelet in API-server mode.
#[derive(Clone)]
pub struct ApiClients {
    pub clients: KubeClients,
    /// The API event recorder (already started).
    pub recorder: Arc<dyn EventRecorder>,
    /// The machine, for node status.
    pub machine_info: Arc<dyn MachineInfoProvider>,
}

/// The volume manager as node status sees it, set once it exists.
#[derive(Clone, Default)]
pub struct LateVolumes(Arc<OnceLock<Arc<VolumeManager>>>);

impl LateVolumes {
    pub fn set(&self, vm: Arc<VolumeManager>) {
        let _ = self.0.set(vm);
    }
}

impl VolumesInUse for LateVolumes {
    fn reconciler_synced(&self) -> bool {
        self.0.get().is_some_and(|v| v.states_synced())
    }
    fn volumes_in_use(&self) -> Vec<String> {
        self.0
            .get()
            .map(|v| v.get_volumes_in_use())
            .unwrap_or_default()
    }
    fn mark_reported_in_use(&self, volumes: &[String]) {
        if let Some(v) = self.0.get() {
            v.mark_volumes_as_reported_in_use(volumes);
        }
    }
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

/// The built API-server parts.
pub struct ApiKubelet {
    pub clients: KubeClients,
    pub node_status: Arc<NodeStatusManager>,
    pub node_runtime_state: Arc<NodeRuntimeState>,
    pub runtime_info: Arc<dyn RuntimeInfo>,
    pub lease: Arc<LeaseController>,
    pub objects: ObjectManagers,
    pub tokens: Arc<TokenManager>,
    pub volumes: LateVolumes,
    pub services: ServiceLister,
    node_name: String,
    clock: Arc<dyn Clock>,
    keep_terminated_pod_volumes: bool,
    syncer: Option<StatusSyncer>,
    mirror: Option<MirrorPods>,
}

/// The first part of the build: everything that does not need the pod
/// workers or the volume manager.
/// What node status reads from the rest of the kubelet.
pub struct NodeInputs {
    /// Capacity, allocatable and the container manager's status.
    pub container_manager: Arc<dyn ContainerManager>,
    /// The pressure conditions (the eviction manager).
    pub pressure: Arc<dyn PressureSource>,
}

pub fn build(
    api: &ApiClients,
    server: &KubeletServer,
    node_name: &str,
    hostname: &str,
    runtime_services: &RuntimeServices,
    node: NodeInputs,
    clock: Arc<dyn Clock>,
) -> Result<ApiKubelet, String> {
    let NodeInputs {
        container_manager,
        pressure,
    } = node;
    let c = &server.config;
    let clients = api.clients.clone();
    let runtime_info: Arc<dyn RuntimeInfo> =
        Arc::new(crate::kubelet::nodestatus::sources::CriRuntimeInfo::new(
            runtime_services.runtime.clone(),
            runtime_services.image.clone(),
        ));
    let node_runtime_state = Arc::new(NodeRuntimeState::default());
    let volumes = LateVolumes::default();
    let sources = StatusSources::new(
        container_manager,
        api.machine_info.clone(),
        runtime_info.clone(),
        node_runtime_state.clone(),
        pressure,
        Arc::new(volumes.clone()),
        clock.clone(),
    );
    let params =
        NodeStatusParams::from_server(server, node_name, hostname).map_err(|e| e.to_string())?;
    let node_status = NodeStatusManager::new(
        params,
        NodeStatusDeps {
            client: clients.main.clone(),
            heartbeat_client: clients.heartbeat.clone(),
            sources,
            recorder: api.recorder.clone(),
            on_heartbeat_failure: Some(clients.heartbeat_failure_hook()),
            reset_extended_resources: false,
        },
    );
    let lease = LeaseController::new(
        clients.heartbeat.clone(),
        node_name,
        c.node_lease_duration_seconds,
        clock.clone(),
        Some(clients.heartbeat_failure_hook()),
    );
    let objects = ObjectManagers::new(
        &c.config_map_and_secret_change_detection_strategy,
        c.sync_frequency.to_std(),
        clients.main.clone(),
        clock.clone(),
        node_getter(&node_status),
    )
    .map_err(|e| e.to_string())?;
    let tokens = crate::kubelet::token::new_token_manager(clients.main.clone(), clock.clone());
    let services = ServiceLister::new(clients.main.clone());
    Ok(ApiKubelet {
        clients,
        node_status,
        node_runtime_state,
        runtime_info,
        lease,
        objects,
        tokens,
        volumes,
        services,
        node_name: node_name.to_string(),
        clock,
        keep_terminated_pod_volumes: server.flags.keep_terminated_pod_volumes,
        syncer: None,
        mirror: None,
    })
}

/// The kubelet's Node, as the watch last saw it.
pub fn node_getter(node_status: &Arc<NodeStatusManager>) -> Arc<dyn NodeGetter> {
    let ns = node_status.clone();
    Arc::new(move || {
        ns.get_node()
            .map(|n| (*n).clone())
            .map_err(|e| e.to_string())
    })
}

/// What the second part of the build wires the API parts to.
pub struct KubeletParts {
    pub pod_manager: Arc<PodManager>,
    pub pod_workers: PodWorkers,
    pub volume_manager: Arc<VolumeManager>,
    pub pod_container_manager: Option<Arc<dyn PodContainerManager>>,
    pub sources_ready: SourcesReady,
    pub status_manager: Arc<StatusManager>,
}

impl ApiKubelet {
    /// This kubelet's Node (Go's GetNode), when the watch has it.
    pub fn node(&self) -> Arc<dyn NodeGetter> {
        node_getter(&self.node_status)
    }

    /// The node's host IPs for pod status and the environment.
    pub fn host_ips(&self) -> Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync> {
        let ns = self.node_status.clone();
        Arc::new(move || ns.get_node().map(|n| node_host_ips(&n)).unwrap_or_default())
    }

    /// The "api" pod source: pods bound to this node, watched once the
    /// Node has been seen.
    pub fn pod_source(&self) -> ApiserverSource {
        let ns = self.node_status.clone();
        ApiserverSource::new(
            self.clients.main.clone(),
            &self.node_name,
            Arc::new(move || ns.get_node().is_ok()),
        )
    }

    /// The second part of the build: the status sync (with the deletion
    /// checks of the pod workers, the volume manager and the pod cgroups)
    /// and the mirror pods.
    pub fn wire(&mut self, parts: KubeletParts) {
        self.volumes.set(parts.volume_manager.clone());
        let workers = parts.pod_workers.clone();
        let vm = parts.volume_manager.clone();
        let checks = ReclaimChecks {
            could_have_running_containers: Arc::new(move |uid| {
                workers.could_have_running_containers(uid)
            }),
            pod_volumes_exist: Arc::new(move |uid| {
                let vm = vm.clone();
                Box::pin(async move { vm.pod_volumes_exist(&uid).await })
            }),
            pod_cgroups: parts.pod_container_manager,
            keep_terminated_pod_volumes: self.keep_terminated_pod_volumes,
        };
        let status_manager = parts.status_manager.clone();
        self.syncer = Some(
            StatusSyncer::new(
                self.clients.main.clone(),
                parts.pod_manager.clone(),
                Arc::new(checks),
                self.clock.clone(),
            )
            .with_forget(Arc::new(move |uid| status_manager.delete_pod_status(uid))),
        );
        self.mirror = Some(MirrorPods {
            client: Arc::new(BasicMirrorClient::new(
                self.clients.main.clone(),
                &self.node_name,
                Some(self.node()),
            )),
            node: self.node(),
            pod_manager: parts.pod_manager,
            pod_workers: parts.pod_workers,
            sources_ready: parts.sources_ready,
        });
    }

    /// Start phase (Kubelet.Run's API-server part): the clients' watchers,
    /// node status, the lease, the runtime status node status reports, the
    /// status sync over `status_manager`, the object managers, the token
    /// cache and the mirror pods.
    pub fn start(
        mut self,
        tasks: &TaskSet,
        status_manager: &StatusManager,
        pleg_healthy: crate::kubelet::nodestatus::runtime_state::HealthCheckFn,
    ) {
        self.clients.start(tasks);
        self.node_runtime_state
            .add_health_check("PLEG", pleg_healthy);
        self.node_runtime_state
            .start_updater(tasks, self.runtime_info.clone(), None);
        self.node_status.start(tasks);
        self.lease.start(tasks);
        if let Some(syncer) = self.syncer.take() {
            syncer.start_with(status_manager, tasks);
        }
        self.objects.start(tasks);
        self.services.start(tasks);
        self.tokens.start(tasks);
        if let Some(mirror) = self.mirror.take() {
            let stop = tasks.token();
            tasks.spawn("mirror-pods", async move {
                loop {
                    mirror.sync().await;
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(MIRROR_POD_PERIOD) => {}
                    }
                }
            });
        }
    }
}

/// Mirror pods for the static pods the kubelet runs.
struct MirrorPods {
    client: Arc<BasicMirrorClient>,
    node: Arc<dyn NodeGetter>,
    pod_manager: Arc<PodManager>,
    pod_workers: PodWorkers,
    sources_ready: SourcesReady,
}

impl MirrorPods {
    /// Creates (or replaces outdated) mirror pods of running static pods,
    /// then deletes the mirror pods whose static pod is gone.
    async fn sync(&self) {
        let node = self.node.get_node_any_way().ok();
        for pod in self.pod_manager.get_pods() {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            if !is_static_pod(&pod) || self.pod_workers.is_pod_termination_requested(uid) {
                continue;
            }
            let mirror = self.pod_manager.get_mirror_pod_by_pod(&pod);
            crate::kubelet::pod::sync_mirror_pod(
                self.client.as_ref(),
                &pod,
                mirror.as_deref(),
                node.as_ref(),
            )
            .await;
        }
        if self.sources_ready.all_ready() {
            let workers = &self.pod_workers;
            delete_orphaned_mirror_pods(self.client.as_ref(), &self.pod_manager, |full| {
                workers.is_pod_for_mirror_pod_terminating_by_full_name(full)
            })
            .await;
        }
    }
}
