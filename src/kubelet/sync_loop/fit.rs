//! The scheduler's node checks the kubelet repeats at admission (Go's
//! lifecycle GeneralPredicates over scheduler.AdmissionCheck): resources
//! fit, node name, node selector and required node affinity, host ports,
//! and NoExecute taints a pod does not tolerate.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod, Taint, Toleration};

use crate::cm::ResourceList;
use crate::cm::helpers::pod_requests_and_limits;
use crate::cm::resources::{
    HUGEPAGES_PREFIX, RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PODS,
};
use crate::kubelet::types::is_static_pod;

/// The node as admission sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// What pods may use, `pods` included.
    pub allocatable: ResourceList,
}

/// The node now (Go's getNodeAnyWay).
pub type NodeFn = Arc<dyn Fn() -> AdmissionNode + Send + Sync>;

/// One reason the pod does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitFailure {
    /// A predicate failed (`NodeAffinity`, `NodeName`, `NodePorts`, `TaintToleration`).
    Predicate {
        name: &'static str,
        reason: &'static str,
    },
    /// Not enough of a resource (in milli-units for cpu, units otherwise).
    Insufficient {
        resource: String,
        requested: i64,
        used: i64,
        capacity: i64,
    },
}

impl FitFailure {
    /// The admission reason: the predicate name, or `OutOf<resource>`.
    pub fn reason(&self) -> String {
        match self {
            FitFailure::Predicate { name, .. } => name.to_string(),
            FitFailure::Insufficient { resource, .. } => format!("OutOf{resource}"),
        }
    }

    /// The admission message, as Go's error texts.
    pub fn message(&self) -> String {
        match self {
            FitFailure::Predicate { name, .. } => format!("Predicate {name} failed"),
            FitFailure::Insufficient {
                resource,
                requested,
                used,
                capacity,
            } => format!(
                "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
        }
    }

    /// How much more than free the pod asks for (GetInsufficientAmount).
    pub fn insufficient_amount(&self) -> Option<(String, i64)> {
        match self {
            FitFailure::Insufficient {
                resource,
                requested,
                used,
                capacity,
            } => Some((resource.clone(), requested - (capacity - used))),
            FitFailure::Predicate { .. } => None,
        }
    }
}

/// A pod's requests as the scheduler counts them: cpu in millicores,
/// everything else in units.
pub fn pod_request(pod: &Pod) -> BTreeMap<String, i64> {
    let (requests, _) = pod_requests_and_limits(pod);
    requests
        .iter()
        .map(|(name, q)| {
            let v = if name == RESOURCE_CPU {
                q.milli_value()
            } else {
                q.value()
            };
            (name.clone(), v)
        })
        .collect()
}

fn allocatable_value(node: &AdmissionNode, name: &str) -> Option<i64> {
    node.allocatable.get(name).map(|q| {
        if name == RESOURCE_CPU {
            q.milli_value()
        } else {
            q.value()
        }
    })
}

/// Resources in the default namespace (no `/`, or `kubernetes.io/`) are native.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Resources checked when requested: cpu, memory, ephemeral storage, huge
/// pages and extended resources the node has.
fn resource_fit(pod: &Pod, node: &AdmissionNode, others: &[Arc<Pod>]) -> Vec<FitFailure> {
    let mut out = Vec::new();
    let allowed_pods = allocatable_value(node, RESOURCE_PODS).unwrap_or(0);
    if others.len() as i64 + 1 > allowed_pods {
        out.push(FitFailure::Insufficient {
            resource: RESOURCE_PODS.into(),
            requested: 1,
            used: others.len() as i64,
            capacity: allowed_pods,
        });
    }
    let mut request = pod_request(pod);
    // Extended resources the node does not know are cluster-level: ignored.
    request.retain(|name, _| is_native(name) || node.allocatable.contains_key(name));
    if request.values().all(|v| *v == 0) {
        return out;
    }
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for p in others {
        for (name, v) in pod_request(p) {
            *used.entry(name).or_default() += v;
        }
    }
    let mut names: Vec<&String> = request.keys().collect();
    let order = |n: &String| match n.as_str() {
        RESOURCE_CPU => 0,
        RESOURCE_MEMORY => 1,
        RESOURCE_EPHEMERAL_STORAGE => 2,
        _ => 3,
    };
    names.sort_by_key(|n| (order(n), (*n).clone()));
    for name in names {
        let requested = request[name];
        if requested == 0 {
            continue;
        }
        let scalar = name.starts_with(HUGEPAGES_PREFIX) || !is_native(name);
        let known = matches!(
            name.as_str(),
            RESOURCE_CPU | RESOURCE_MEMORY | RESOURCE_EPHEMERAL_STORAGE
        );
        if !known && !scalar {
            continue;
        }
        let capacity = allocatable_value(node, name).unwrap_or(0);
        let in_use = used.get(name).copied().unwrap_or(0);
        if requested > capacity - in_use {
            out.push(FitFailure::Insufficient {
                resource: name.clone(),
                requested,
                used: in_use,
                capacity,
            });
        }
    }
    out
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// nodeSelector and required node affinity (GetRequiredNodeAffinity.Match).
fn node_affinity_matches(pod: &Pod, node: &AdmissionNode) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    for (k, v) in spec.node_selector.iter().flatten() {
        if node.labels.get(k) != Some(v) {
            return false;
        }
    }
    let Some(required) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return true;
    };
    let name_label = node.name.clone();
    required.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            return false;
        }
        exprs
            .iter()
            .all(|r| requirement_matches(r, node.labels.get(&r.key)))
            && fields
                .iter()
                .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(&name_label)))
    })
}

fn host_ports(pod: &Pod) -> Vec<(String, String, i32)> {
    let mut out = Vec::new();
    let Some(spec) = pod.spec.as_ref() else {
        return out;
    };
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
    {
        for p in c.ports.iter().flatten() {
            let Some(port) = p.host_port.filter(|p| *p > 0) else {
                continue;
            };
            let ip = p.host_ip.clone().unwrap_or_default();
            let ip = if ip.is_empty() {
                "0.0.0.0".to_string()
            } else {
                ip
            };
            let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            out.push((ip, proto, port));
        }
    }
    out
}

/// Whether the pod's host ports are free (nodeports.Fits).
fn ports_fit(pod: &Pod, others: &[Arc<Pod>]) -> bool {
    let wanted = host_ports(pod);
    if wanted.is_empty() {
        return true;
    }
    let used: HashSet<(String, String, i32)> = others.iter().flat_map(|p| host_ports(p)).collect();
    wanted.iter().all(|(ip, proto, port)| {
        !used.iter().any(|(uip, uproto, uport)| {
            uport == port && uproto == proto && (uip == ip || uip == "0.0.0.0" || ip == "0.0.0.0")
        })
    })
}

fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// The scheduler's checks at admission; every failure, in Go's order.
pub fn general_predicates(pod: &Pod, node: &AdmissionNode, others: &[Arc<Pod>]) -> Vec<FitFailure> {
    let mut out = resource_fit(pod, node, others);
    if !node_affinity_matches(pod, node) {
        out.push(FitFailure::Predicate {
            name: "NodeAffinity",
            reason: "node(s) didn't match Pod's node affinity/selector",
        });
    }
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    if !node_name.is_empty() && node_name != node.name {
        out.push(FitFailure::Predicate {
            name: "NodeName",
            reason: "node(s) didn't match the requested node name",
        });
    }
    if !ports_fit(pod, others) {
        out.push(FitFailure::Predicate {
            name: "NodePorts",
            reason: "node(s) didn't have free ports for the requested pod ports",
        });
    }
    if !is_static_pod(pod) {
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        let untolerated = node
            .taints
            .iter()
            .filter(|t| t.effect == "NoExecute")
            .any(|taint| !tolerations.iter().any(|t| tolerates(t, taint)));
        if untolerated {
            out.push(FitFailure::Predicate {
                name: "TaintToleration",
                reason: "node(s) had untolerated taint",
            });
        }
    }
    out
}
