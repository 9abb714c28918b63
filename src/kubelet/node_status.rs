//! Node registration and status (kubelet_node_status.go): register the Node
//! (create; reconcile one that exists), then every nodeStatusUpdateFrequency
//! (4% jitter) read the Node through the heartbeat client, apply the status
//! setters and PATCH the status subresource when something changed or
//! nodeStatusReportFrequency has passed since the last report. Five tries
//! per round; from the second failure on, every failure drops the clients'
//! connections. At start-up a fast loop (every 100 ms, for up to 2 min)
//! posts status the moment the node becomes Ready.
//!
//! Wiring (build, then start): [`crate::kubelet::client::build_clients`] →
//! [`crate::kubelet::events::ApiEventRecorder::new`] (start it with a
//! [`crate::kubelet::events::KubeEventSink`] over the event client) →
//! [`StatusSources`] (container manager, machine info, runtime, runtime
//! state, pressure, volumes) → [`NodeStatusManager::new`] with
//! [`NodeStatusParams::from_server`] → `start(&tasks)`; the lease is
//! [`crate::kubelet::nodelease::LeaseController`] over the heartbeat client.

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeAddress};
use kube::api::{Api, GetParams, Patch, PatchParams, PostParams};
use tokio::time::Instant;

use crate::apis::config::server::KubeletServer;
use crate::kubelet::client::HeartbeatFailureFn;
use crate::kubelet::events::{EventRecorder, EventType, node_ref, reasons};
use crate::kubelet::nodestatus::patch::{node_status_has_changed, node_status_patch};
use crate::kubelet::nodestatus::registration::{
    LABEL_ARCH_STABLE, LABEL_OS_STABLE, RegistrationConfig, initial_node, reconcile_existing_node,
};
use crate::kubelet::nodestatus::setters::StatusInputs;
use crate::kubelet::nodestatus::{
    AddressConfig, NodeLister, SetterConfig, StatusEvent, StatusSources, go_arch, go_os,
    parse_node_ips, set_node_status,
};
use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet};

/// Tries per status update round.
pub const NODE_STATUS_UPDATE_RETRY: usize = 5;
/// How long the fast start-up loop tries to post a Ready status.
pub const NODE_READY_GRACE_PERIOD: Duration = Duration::from_secs(120);
const FAST_STATUS_PERIOD: Duration = Duration::from_millis(100);
const REGISTER_BACKOFF_MAX: Duration = Duration::from_secs(7);

/// Errors of node registration and status updates.
#[derive(Debug, thiserror::Error)]
pub enum NodeStatusError {
    #[error("error getting node {node:?}: {source}")]
    Get { node: String, source: kube::Error },
    #[error("failed to patch status {patch} for node {node:?}: {source}")]
    Patch {
        node: String,
        patch: String,
        source: kube::Error,
    },
    #[error(transparent)]
    BuildPatch(#[from] crate::kubelet::nodestatus::patch::PatchError),
    #[error("update node status exceeds retry count")]
    RetriesExceeded,
    #[error("node {0:?} not found")]
    NotFound(String),
    #[error(transparent)]
    InvalidNodeIp(#[from] crate::kubelet::nodestatus::addresses::NodeIpFlagError),
}

impl From<NodeStatusError> for crate::kubelet::lifecycle::NodeGetError {
    fn from(e: NodeStatusError) -> Self {
        match e {
            NodeStatusError::NotFound(node) => Self::NotFound(node),
            other => Self::Other(Box::new(other)),
        }
    }
}

impl NodeStatusError {
    /// Whether the API server answered the request that failed (so the
    /// connections to it are alive); errors before any request count as
    /// answered, they say nothing about the connections.
    pub fn server_answered(&self) -> bool {
        match self {
            NodeStatusError::Get { source, .. } | NodeStatusError::Patch { source, .. } => {
                crate::kubelet::client::server_answered(source)
            }
            _ => true,
        }
    }
}

/// The static settings of node status.
#[derive(Debug, Clone)]
pub struct NodeStatusParams {
    pub registration: RegistrationConfig,
    /// `registerNode`.
    pub register_node: bool,
    pub setter: SetterConfig,
    pub address: AddressConfig,
    pub update_frequency: Duration,
    pub report_frequency: Duration,
}

impl NodeStatusParams {
    /// The settings of a kubelet started with `server`, registering as
    /// `node_name` with hostname `hostname`.
    pub fn from_server(
        server: &KubeletServer,
        node_name: &str,
        hostname: &str,
    ) -> Result<Self, NodeStatusError> {
        let (c, f) = (&server.config, &server.flags);
        let lsci = server
            .feature_gate
            .enabled(crate::features::LOCAL_STORAGE_CAPACITY_ISOLATION)
            && c.local_storage_capacity_isolation;
        Ok(NodeStatusParams {
            registration: RegistrationConfig {
                node_name: node_name.to_string(),
                hostname: hostname.to_string(),
                node_labels: f.node_labels.clone(),
                register_with_taints: c.register_with_taints.clone(),
                register_schedulable: f.register_schedulable,
                enable_controller_attach_detach: c.enable_controller_attach_detach,
                keep_terminated_pod_volumes: f.keep_terminated_pod_volumes,
                provider_id: c.provider_id.clone(),
            },
            register_node: c.register_node,
            setter: SetterConfig {
                node_name: node_name.to_string(),
                max_pods: i64::from(c.max_pods),
                pods_per_core: i64::from(c.pods_per_core),
                kubelet_port: c.port,
                node_status_max_images: c.node_status_max_images,
                local_storage_capacity_isolation: lsci,
                kubelet_version: crate::version::git_version(),
            },
            address: AddressConfig {
                node_ips: parse_node_ips(&f.node_ip).map_err(NodeStatusError::InvalidNodeIp)?,
                hostname: hostname.to_string(),
                ..Default::default()
            },
            update_frequency: c.node_status_update_frequency.to_std(),
            report_frequency: c.node_status_report_frequency.to_std(),
        })
    }
}

/// What node status works with.
#[derive(Clone)]
pub struct NodeStatusDeps {
    /// Registration (Go's kubeClient).
    pub client: kube::Client,
    /// Status reads and patches.
    pub heartbeat_client: kube::Client,
    pub sources: StatusSources,
    pub recorder: Arc<dyn EventRecorder>,
    pub on_heartbeat_failure: Option<HeartbeatFailureFn>,
    /// Whether extended resources of an existing Node are zeroed (the
    /// device manager has no checkpoint: the node was recreated).
    pub reset_extended_resources: bool,
    pub clock: Arc<dyn Clock>,
}

/// The Node of a kubelet without an API server (Go's GetNode in standalone
/// mode: the initial node with its status set); node events go to
/// `recorder`.
pub async fn standalone_node(
    params: &NodeStatusParams,
    sources: &StatusSources,
    recorder: &dyn EventRecorder,
) -> Node {
    let mut node = initial_node(&params.registration);
    let inputs = sources.gather(&params.setter, &params.address).await;
    for e in set_node_status(&mut node, &params.setter, &inputs) {
        recorder.event(
            &node_ref(&params.setter.node_name),
            e.event_type,
            &e.reason,
            &e.message_for(&params.setter.node_name),
        );
    }
    node
}

struct State {
    registration_completed: bool,
    last_status_report: Option<Instant>,
    last_unschedulable: bool,
    last_observed_addresses: Vec<NodeAddress>,
}

/// Registers the Node and keeps its status.
pub struct NodeStatusManager {
    params: NodeStatusParams,
    deps: NodeStatusDeps,
    lister: NodeLister,
    state: Mutex<State>,
    sync_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for NodeStatusManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStatusManager")
            .field("node", &self.params.setter.node_name)
            .finish_non_exhaustive()
    }
}

fn node_name_of(p: &NodeStatusParams) -> &str {
    &p.setter.node_name
}

impl NodeStatusManager {
    /// Build phase: no task, no request.
    pub fn new(params: NodeStatusParams, deps: NodeStatusDeps) -> Arc<Self> {
        let lister = NodeLister::new(deps.client.clone(), node_name_of(&params));
        Arc::new(NodeStatusManager {
            lister,
            params,
            deps,
            state: Mutex::new(State {
                registration_completed: false,
                last_status_report: None,
                last_unschedulable: false,
                last_observed_addresses: Vec::new(),
            }),
            sync_lock: tokio::sync::Mutex::new(()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn node_name(&self) -> &str {
        node_name_of(&self.params)
    }

    /// The Node watch this manager keeps (Go's node lister).
    pub fn node_lister(&self) -> &NodeLister {
        &self.lister
    }

    /// The Node as last seen by the watch (Go's GetNode).
    pub fn get_node(&self) -> Result<Arc<Node>, NodeStatusError> {
        self.lister
            .get()
            .ok_or_else(|| NodeStatusError::NotFound(self.node_name().to_string()))
    }

    /// The addresses the last successful status patch reported.
    pub fn last_observed_addresses(&self) -> Vec<NodeAddress> {
        self.state().last_observed_addresses.clone()
    }

    /// Whether the Node has been registered (or found and reconciled).
    pub fn registration_completed(&self) -> bool {
        self.state().registration_completed
    }

    /// Start phase: the node watch, the status loop and the fast start-up
    /// loop.
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        self.lister.start(tasks);
        let clock = self.deps.clock.clone();
        let me = self.clone();
        // Go's JitterUntil(syncNodeStatus, nodeStatusUpdateFrequency, 0.04).
        let period = Period::sliding(self.params.update_frequency).with_jitter(0.04);
        tasks.spawn_periodic("node-status", period, clock.clone(), move || {
            let me = me.clone();
            async move { me.sync_node_status().await }
        });
        // A shutdown is reported at once (Go's shutdown manager calls
        // syncNodeStatus when it begins).
        if let Some(mut shutdown) = self.deps.sources.shutdown.clone() {
            let (me, stop) = (self.clone(), tasks.token());
            tasks.spawn("node-status-on-shutdown", async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        alive = shutdown.changed() => if !alive { return },
                    }
                    if shutdown.shutting_down() {
                        me.sync_node_status().await;
                    }
                }
            });
        }
        // Until the node is ready (or the grace period ends), status is
        // reported every 100 ms.
        let me = self.clone();
        let start = clock.monotonic();
        let fast = Period::fixed(FAST_STATUS_PERIOD).waiting_first();
        tasks.spawn_periodic("node-status-fast", fast, clock.clone(), move || {
            let (me, clock) = (me.clone(), clock.clone());
            async move {
                let timed_out =
                    clock.monotonic().saturating_duration_since(start) >= NODE_READY_GRACE_PERIOD;
                match me.fast_node_status_update(timed_out).await {
                    true => ControlFlow::Break(()),
                    false => ControlFlow::Continue(()),
                }
            }
        });
    }

    /// One round: register if needed, then update status (Go's
    /// syncNodeStatus).
    pub async fn sync_node_status(&self) {
        let _guard = self.sync_lock.lock().await;
        if self.params.register_node {
            self.register_with_api_server().await;
        }
        if let Err(e) = self.update_node_status().await {
            tracing::error!(error = %e, "Unable to update node status");
        }
    }

    /// The Node this kubelet would register now, status included.
    pub async fn initial_node(&self) -> Node {
        let mut node = initial_node(&self.params.registration);
        let inputs = self.gather_inputs().await;
        self.apply_setters(&mut node, &inputs);
        node
    }

    async fn register_with_api_server(&self) {
        if self.state().registration_completed {
            return;
        }
        let mut step = Duration::from_millis(100);
        loop {
            tokio::time::sleep(step).await;
            step = (step * 2).min(REGISTER_BACKOFF_MAX);
            let node = self.initial_node().await;
            tracing::info!(node = %self.node_name(), "Attempting to register node");
            if self.try_register(&node).await {
                tracing::info!(node = %self.node_name(), "Successfully registered node");
                self.state().registration_completed = true;
                return;
            }
        }
    }

    async fn try_register(&self, node: &Node) -> bool {
        let api: Api<Node> = Api::all(self.deps.client.clone());
        let name = self.node_name();
        match api.create(&PostParams::default(), node).await {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {}
            Err(e) => {
                tracing::error!(error = %e, node = %name, "Unable to register node with API server");
                return false;
            }
        }
        let existing = match api.get(name).await {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, node = %name, "Unable to register node with API server, error getting existing node");
                return false;
            }
        };
        tracing::info!(node = %name, "Node was previously registered");
        let mut updated = existing.clone();
        if reconcile_existing_node(node, &mut updated, self.deps.reset_extended_resources)
            && let Err(e) = self
                .patch_status(&self.deps.client, &existing, &updated)
                .await
        {
            tracing::error!(error = %e, node = %name, "Unable to reconcile node with API server, error updating node");
            return false;
        }
        true
    }

    async fn patch_status(
        &self,
        client: &kube::Client,
        old: &Node,
        new: &Node,
    ) -> Result<Node, NodeStatusError> {
        let patch = node_status_patch(old, new)?;
        let api: Api<Node> = Api::all(client.clone());
        api.patch_status(
            self.node_name(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .map_err(|source| NodeStatusError::Patch {
            node: self.node_name().to_string(),
            patch: patch.to_string(),
            source,
        })
    }

    /// Up to five tries (Go's updateNodeStatus).
    pub async fn update_node_status(&self) -> Result<(), NodeStatusError> {
        crate::vlog!(5, "Updating node status");
        for i in 0..NODE_STATUS_UPDATE_RETRY {
            match self.try_update_node_status(i).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if i > 0
                        && !e.server_answered()
                        && let Some(f) = &self.deps.on_heartbeat_failure
                    {
                        f();
                    }
                    tracing::error!(error = %e, "Error updating node status, will retry");
                }
            }
        }
        Err(NodeStatusError::RetriesExceeded)
    }

    async fn try_update_node_status(&self, try_number: usize) -> Result<(), NodeStatusError> {
        let api: Api<Node> = Api::all(self.deps.heartbeat_client.clone());
        let gp = if try_number == 0 {
            GetParams::any()
        } else {
            GetParams::default()
        };
        let original = api
            .get_with(self.node_name(), &gp)
            .await
            .map_err(|source| NodeStatusError::Get {
                node: self.node_name().to_string(),
                source,
            })?;
        let (node, cidr_changed, labels_missing) = self.update_node(&original).await;
        let now = self.deps.clock.monotonic();
        let within_report = self
            .state()
            .last_status_report
            .is_some_and(|t| now < t + self.params.report_frequency);
        if within_report
            && !cidr_changed
            && !labels_missing
            && !node_status_has_changed(original.status.as_ref(), node.status.as_ref())
        {
            let in_use = node
                .status
                .as_ref()
                .and_then(|s| s.volumes_in_use.clone())
                .unwrap_or_default();
            self.deps.sources.volumes.mark_reported_in_use(&in_use);
            return Ok(());
        }
        let updated = self
            .patch_status(&self.deps.heartbeat_client, &original, &node)
            .await?;
        let mut st = self.state();
        st.last_status_report = Some(now);
        st.last_observed_addresses = updated
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default();
        drop(st);
        let in_use = updated
            .status
            .as_ref()
            .and_then(|s| s.volumes_in_use.clone())
            .unwrap_or_default();
        self.deps.sources.volumes.mark_reported_in_use(&in_use);
        Ok(())
    }

    /// The Node with status recomputed: (node, pod CIDR changed, OS/arch
    /// labels had to be set).
    async fn update_node(&self, original: &Node) -> (Node, bool, bool) {
        let mut node = original.clone();
        let mut cidr_changed = false;
        let cidrs = node
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidrs.clone())
            .unwrap_or_default();
        if !cidrs.is_empty() {
            let cidr = cidrs.join(",");
            match self.update_pod_cidr(&cidr).await {
                Ok(changed) => cidr_changed = changed,
                Err(e) => tracing::error!(error = %e, "Error updating pod CIDR"),
            }
        }
        let labels = node.metadata.labels.get_or_insert_with(Default::default);
        let mut labels_missing = false;
        for (k, v) in [(LABEL_OS_STABLE, go_os()), (LABEL_ARCH_STABLE, go_arch())] {
            if labels.get(k).map(String::as_str) != Some(v) {
                labels.insert(k.to_string(), v.to_string());
                labels_missing = true;
            }
        }
        let inputs = self.gather_inputs().await;
        self.apply_setters(&mut node, &inputs);
        (node, cidr_changed, labels_missing)
    }

    async fn update_pod_cidr(
        &self,
        cidr: &str,
    ) -> Result<bool, crate::kubelet::nodestatus::RuntimeInfoError> {
        if self.deps.sources.runtime_state.pod_cidr() == cidr {
            return Ok(false);
        }
        self.deps.sources.runtime.update_pod_cidr(cidr).await?;
        tracing::info!(cidr, "Updating Pod CIDR");
        self.deps.sources.runtime_state.set_pod_cidr(cidr);
        Ok(true)
    }

    fn apply_setters(&self, node: &mut Node, inputs: &StatusInputs) {
        let events = set_node_status(node, &self.params.setter, inputs);
        for e in events {
            self.record(&e);
        }
        let unschedulable = node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        let mut st = self.state();
        if st.last_unschedulable != unschedulable {
            st.last_unschedulable = unschedulable;
            drop(st);
            let reason = if unschedulable {
                reasons::NODE_NOT_SCHEDULABLE
            } else {
                reasons::NODE_SCHEDULABLE
            };
            self.record(&StatusEvent {
                event_type: EventType::Normal,
                reason: reason.into(),
                message: None,
            });
        }
    }

    fn record(&self, e: &StatusEvent) {
        crate::vlog!(2, event = %e.reason, node = %self.node_name(), "Recording event message for node");
        self.deps.recorder.event(
            &node_ref(self.node_name()),
            e.event_type,
            &e.reason,
            &e.message_for(self.node_name()),
        );
    }

    async fn gather_inputs(&self) -> StatusInputs {
        self.deps
            .sources
            .gather(&self.params.setter, &self.params.address)
            .await
    }

    /// One step of the start-up loop; `true` when it is done (the Node is
    /// Ready in the API, or was just made so, or time is up).
    async fn fast_node_status_update(&self, timed_out: bool) -> bool {
        let guard = self.sync_lock.lock().await;
        if timed_out {
            tracing::error!("Node not becoming ready in time after startup");
            return true;
        }
        let Some(original) = self.lister.get() else {
            return false;
        };
        let ready_of = |n: &Node| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone())
        };
        match ready_of(&original).as_deref() {
            None => return false,
            Some("True") => return true,
            Some(_) => {}
        }
        self.deps
            .sources
            .runtime_state
            .update_runtime_up(self.deps.sources.runtime.as_ref())
            .await;
        let (node, _, _) = self.update_node(&original).await;
        if !node_status_has_changed(original.status.as_ref(), node.status.as_ref()) {
            return false;
        }
        if ready_of(&node).as_deref() != Some("True") {
            return false;
        }
        tracing::info!("Fast updating node status as it just became ready");
        match self
            .patch_status(&self.deps.heartbeat_client, &original, &node)
            .await
        {
            Ok(updated) => {
                let mut st = self.state();
                st.last_status_report = Some(self.deps.clock.monotonic());
                st.last_observed_addresses = updated
                    .status
                    .as_ref()
                    .and_then(|s| s.addresses.clone())
                    .unwrap_or_default();
            }
            Err(e) => {
                tracing::error!(error = %e, "Error updating node status, will retry with syncNodeStatus");
                drop(guard);
                self.sync_node_status().await;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::config::flags::KubeletFlags;
    use crate::apis::config::types::KubeletConfiguration;
    use crate::features::FeatureGate;

    #[test]
    fn params_from_server() {
        let mut flags = KubeletFlags {
            node_ip: "10.0.0.5".into(),
            ..Default::default()
        };
        flags.node_labels.insert("role".into(), "edge".into());
        let mut config = KubeletConfiguration::v1beta1_defaults();
        config.max_pods = 50;
        let server = KubeletServer::new(flags.clone(), config.clone(), FeatureGate::new());
        let p = NodeStatusParams::from_server(&server, "n1", "host-1").unwrap();
        assert_eq!(
            p.registration.node_labels.get("role").map(String::as_str),
            Some("edge")
        );
        assert_eq!(p.registration.hostname, "host-1");
        assert!(p.registration.register_schedulable);
        assert!(p.registration.enable_controller_attach_detach);
        assert!(p.register_node);
        assert_eq!(
            (
                p.setter.max_pods,
                p.setter.kubelet_port,
                p.setter.node_status_max_images
            ),
            (50, 10250, 50)
        );
        assert!(p.setter.local_storage_capacity_isolation);
        assert_eq!(
            p.address.node_ips,
            vec!["10.0.0.5".parse::<std::net::IpAddr>().unwrap()]
        );
        assert_eq!(p.update_frequency, Duration::from_secs(10));
        assert_eq!(p.report_frequency, Duration::from_secs(300));

        flags.node_ip = "not-an-ip".into();
        let server = KubeletServer::new(flags, config, FeatureGate::new());
        let err = NodeStatusParams::from_server(&server, "n1", "h").unwrap_err();
        assert!(err.to_string().contains("--node-ip"), "{err}");
    }
}

#[cfg(test)]
#[path = "node_status_clock_tests.rs"]
mod clock_tests;
