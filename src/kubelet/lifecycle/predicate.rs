//! The predicate admit handler: the scheduler's general predicates re-checked
//! by the kubelet against its own view of the node (Go's
//! lifecycle/predicate.go with scheduler.AdmissionCheck).

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};

use super::affinity::RequiredNodeAffinity;
use super::interfaces::{PodAdmitAttributes, PodAdmitHandler, PodAdmitResult};
use super::node_info::{NodeInfo, compute_pod_resource_request};
use super::resource_names::is_extended_resource_name;
use super::taints::find_matching_untolerated_taint;
use crate::kubelet::types::is_static_pod;

const NODE_AFFINITY: &str = "NodeAffinity";
const NODE_AFFINITY_REASON: &str = "node(s) didn't match Pod's node affinity/selector";
const NODE_NAME: &str = "NodeName";
const NODE_NAME_REASON: &str = "node(s) didn't match the requested node name";
const NODE_PORTS: &str = "NodePorts";
const NODE_PORTS_REASON: &str = "node(s) didn't have free ports for the requested pod ports";
const TAINT_TOLERATION: &str = "TaintToleration";
const TAINT_TOLERATION_REASON: &str = "node(s) had taints that the pod didn't tolerate";

const OS_LABEL: &str = "kubernetes.io/os";
/// The OS this kubelet runs pods for.
const NODE_OS: &str = "linux";

/// Why a predicate failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PredicateFailureReason {
    /// Not enough of a resource left on the node.
    InsufficientResource {
        resource_name: String,
        requested: i64,
        used: i64,
        capacity: i64,
    },
    /// A named predicate failed, for a scheduler-worded reason.
    Predicate { name: String, desc: String },
}

impl PredicateFailureReason {
    fn predicate(name: &str, desc: &str) -> Self {
        PredicateFailureReason::Predicate {
            name: name.to_string(),
            desc: desc.to_string(),
        }
    }

    /// The short reason (Go's GetReason).
    pub fn reason(&self) -> String {
        match self {
            Self::InsufficientResource { resource_name, .. } => {
                format!("Insufficient {resource_name}")
            }
            Self::Predicate { desc, .. } => desc.clone(),
        }
    }

    /// Whether the failure is a lack of resources (which preemption may fix).
    pub fn is_insufficient_resource(&self) -> bool {
        matches!(self, Self::InsufficientResource { .. })
    }
}

impl fmt::Display for PredicateFailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InsufficientResource {
                resource_name,
                requested,
                used,
                capacity,
            } => write!(
                f,
                "Node didn't have enough resource: {resource_name}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
            Self::Predicate { name, .. } => write!(f, "Predicate {name} failed"),
        }
    }
}

/// Reads the Node the kubelet believes it runs on: the API's copy when there
/// is one, else the kubelet's locally built initial Node.
pub trait NodeGetter: Send + Sync {
    fn get_node_any_way(&self) -> Result<Node, String>;
}

impl<F> NodeGetter for F
where
    F: Fn() -> Result<Node, String> + Send + Sync,
{
    fn get_node_any_way(&self) -> Result<Node, String> {
        self()
    }
}

/// Gets a chance to make room for a pod that failed the predicates (Go's
/// critical pod admission handler preempts lower-priority pods for critical
/// ones). Returns the failures that remain.
pub trait AdmissionFailureHandler: Send + Sync {
    fn handle_admission_failure(
        &self,
        pod: &Pod,
        failures: Vec<PredicateFailureReason>,
    ) -> Result<Vec<PredicateFailureReason>, String>;
}

/// Leaves every failure as it is (no preemption).
#[derive(Debug, Clone, Copy, Default)]
pub struct AdmissionFailureHandlerStub;

impl AdmissionFailureHandler for AdmissionFailureHandlerStub {
    fn handle_admission_failure(
        &self,
        _pod: &Pod,
        failures: Vec<PredicateFailureReason>,
    ) -> Result<Vec<PredicateFailureReason>, String> {
        Ok(failures)
    }
}

/// Adjusts the node's allocatable plugin (device) resources before the fit
/// check (Go's cm.UpdatePluginResources).
pub type PluginResourceUpdateFn =
    Arc<dyn Fn(&mut NodeInfo, &PodAdmitAttributes<'_>) -> Result<(), String> + Send + Sync>;

/// Admits pods that pass the general predicates on this node.
pub struct PredicateAdmitHandler {
    node: Arc<dyn NodeGetter>,
    failure_handler: Arc<dyn AdmissionFailureHandler>,
    plugin_resource_update: Option<PluginResourceUpdateFn>,
}

impl PredicateAdmitHandler {
    pub fn new(
        node: Arc<dyn NodeGetter>,
        failure_handler: Arc<dyn AdmissionFailureHandler>,
        plugin_resource_update: Option<PluginResourceUpdateFn>,
    ) -> Self {
        PredicateAdmitHandler {
            node,
            failure_handler,
            plugin_resource_update,
        }
    }
}

/// The pod without requests of extended resources the node does not know
/// (cluster-level resources are not the node's to check).
fn remove_missing_extended_resources(pod: &Pod, info: &NodeInfo) -> Pod {
    let mut copy = pod.clone();
    if let Some(spec) = copy.spec.as_mut() {
        for c in &mut spec.containers {
            if let Some(requests) = c.resources.as_mut().and_then(|r| r.requests.as_mut()) {
                requests.retain(|name, _| {
                    !is_extended_resource_name(name)
                        || info.allocatable.scalar_resources.contains_key(name)
                });
            }
        }
    }
    copy
}

fn fits_resources(pod: &Pod, info: &NodeInfo) -> Vec<PredicateFailureReason> {
    let mut out = Vec::new();
    let insufficient = |name: &str, requested: i64, used: i64, capacity: i64| {
        PredicateFailureReason::InsufficientResource {
            resource_name: name.to_string(),
            requested,
            used,
            capacity,
        }
    };
    let allowed = info.allocatable.allowed_pod_number;
    let used_pods = info.pod_count as i64;
    if used_pods + 1 > allowed {
        out.push(insufficient("pods", 1, used_pods, allowed));
    }
    let req = compute_pod_resource_request(pod);
    if req.milli_cpu == 0
        && req.memory == 0
        && req.ephemeral_storage == 0
        && req.scalar_resources.is_empty()
    {
        return out;
    }
    let (alloc, used) = (&info.allocatable, &info.requested);
    if req.milli_cpu > alloc.milli_cpu - used.milli_cpu {
        out.push(insufficient(
            "cpu",
            req.milli_cpu,
            used.milli_cpu,
            alloc.milli_cpu,
        ));
    }
    if req.memory > alloc.memory - used.memory {
        out.push(insufficient(
            "memory",
            req.memory,
            used.memory,
            alloc.memory,
        ));
    }
    if req.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage {
        out.push(insufficient(
            "ephemeral-storage",
            req.ephemeral_storage,
            used.ephemeral_storage,
            alloc.ephemeral_storage,
        ));
    }
    for (name, q) in &req.scalar_resources {
        let a = alloc.scalar_resources.get(name).copied().unwrap_or(0);
        let u = used.scalar_resources.get(name).copied().unwrap_or(0);
        if *q > a - u {
            out.push(insufficient(name, *q, u, a));
        }
    }
    out
}

fn fits_ports(pod: &Pod, info: &NodeInfo) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .all(|p| {
            !info.used_ports.check_conflict(
                p.host_ip.as_deref().unwrap_or(""),
                p.protocol.as_deref().unwrap_or(""),
                p.host_port.unwrap_or(0),
            )
        })
}

/// The predicates the kubelet cares about, every failure in order:
/// resources, node affinity/selector, node name, host ports, and for pods
/// not from a static source, NoExecute taints.
pub fn general_filter(pod: &Pod, info: &NodeInfo) -> Vec<PredicateFailureReason> {
    let mut reasons = fits_resources(pod, info);
    if !RequiredNodeAffinity::from_pod(pod).matches(&info.node) {
        reasons.push(PredicateFailureReason::predicate(
            NODE_AFFINITY,
            NODE_AFFINITY_REASON,
        ));
    }
    let wanted = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("");
    if !wanted.is_empty() && wanted != info.node_name() {
        reasons.push(PredicateFailureReason::predicate(
            NODE_NAME,
            NODE_NAME_REASON,
        ));
    }
    if !fits_ports(pod, info) {
        reasons.push(PredicateFailureReason::predicate(
            NODE_PORTS,
            NODE_PORTS_REASON,
        ));
    }
    if !is_static_pod(pod) {
        let taints = info
            .node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        let no_execute = |t: &Taint| t.effect == "NoExecute";
        if find_matching_untolerated_taint(taints, tolerations, no_execute).is_some() {
            reasons.push(PredicateFailureReason::predicate(
                TAINT_TOLERATION,
                TAINT_TOLERATION_REASON,
            ));
        }
    }
    reasons
}

/// A pod labelled for another OS than the node's (the node's OS label is
/// taken as this kubelet's OS whatever the Node says).
fn rejected_for_os_label(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OS_LABEL))
        .is_some_and(|os| os != NODE_OS)
}

/// A pod whose `spec.os.name` is another OS.
fn rejected_for_os_field(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.os.as_ref())
        .is_some_and(|os| os.name != NODE_OS)
}

impl PodAdmitHandler for PredicateAdmitHandler {
    fn admit(&self, attrs: &PodAdmitAttributes<'_>) -> PodAdmitResult {
        let pod = attrs.pod;
        let node = match self.node.get_node_any_way() {
            Ok(node) => node,
            Err(e) => {
                tracing::error!(err = %e, "Cannot get Node info");
                return PodAdmitResult::rejected(
                    "InvalidNodeInfo",
                    "Kubelet cannot get node info.",
                );
            }
        };
        let mut info = NodeInfo::new(node, attrs.other_pods);
        if let Some(update) = &self.plugin_resource_update
            && let Err(e) = update(&mut info, attrs)
        {
            let message =
                format!("Update plugin resources failed due to {e}, which is unexpected.");
            tracing::info!(pod = %pod_ref(pod), message, "Failed to admit pod");
            return PodAdmitResult::rejected("UnexpectedAdmissionError", message);
        }
        let trimmed = remove_missing_extended_resources(pod, &info);
        let mut reasons = general_filter(&trimmed, &info);
        if !reasons.is_empty() {
            match self.failure_handler.handle_admission_failure(pod, reasons) {
                Ok(left) => reasons = left,
                Err(e) => {
                    tracing::info!(pod = %pod_ref(pod), err = %e,
                        "Failed to admit pod, unexpected error while attempting to recover from admission failure");
                    return PodAdmitResult::rejected(
                        "UnexpectedAdmissionError",
                        format!(
                            "Unexpected error while attempting to recover from admission failure: {e}"
                        ),
                    );
                }
            }
        }
        if let Some(first) = reasons.first() {
            let message = first.to_string();
            let reason = match first {
                PredicateFailureReason::Predicate { name, .. } => name.clone(),
                PredicateFailureReason::InsufficientResource { resource_name, .. } => {
                    format!("OutOf{resource_name}")
                }
            };
            crate::vlog!(2, pod = %pod_ref(pod), err = %message, "Predicate failed on Pod");
            return PodAdmitResult::rejected(reason, message);
        }
        if rejected_for_os_label(pod) {
            return PodAdmitResult::rejected(
                "PodOSSelectorNodeLabelDoesNotMatch",
                "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
            );
        }
        if rejected_for_os_field(pod) {
            return PodAdmitResult::rejected(
                "PodOSNotSupported",
                "Failed to admit pod as the OS field doesn't match node OS",
            );
        }
        PodAdmitResult::admitted()
    }
}

fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
#[path = "predicate_tests.rs"]
mod tests;
