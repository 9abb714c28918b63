//! The Node the kubelet registers (initialNode of kubelet_node_status.go)
//! and the reconciliation of a Node that already exists: the default
//! labels, the controller-managed attach/detach annotation, huge page and
//! extended resources.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::setters::is_extended_resource;
use crate::cm::resources::is_hugepage_resource;
use crate::util::quantity::parse as parse_quantity;

pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS_STABLE: &str = "kubernetes.io/os";
pub const LABEL_ARCH_STABLE: &str = "kubernetes.io/arch";
pub const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
pub const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LABEL_FAILURE_DOMAIN_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
pub const LABEL_INSTANCE_TYPE_STABLE: &str = "node.kubernetes.io/instance-type";
pub const LABEL_INSTANCE_TYPE: &str = "beta.kubernetes.io/instance-type";
pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// Volumes of this node are attached and detached by the controller.
pub const CONTROLLER_MANAGED_ATTACH_ANNOTATION: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
pub const KEEP_TERMINATED_POD_VOLUMES_ANNOTATION: &str =
    "volumes.kubernetes.io/keep-terminated-pod-volumes";
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The labels the kubelet keeps in line on an existing Node.
const DEFAULT_LABELS: &[&str] = &[
    LABEL_HOSTNAME,
    LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_REGION,
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_INSTANCE_TYPE_STABLE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS_STABLE,
    LABEL_ARCH_STABLE,
    LABEL_WINDOWS_BUILD,
    LABEL_OS_BETA,
    LABEL_ARCH_BETA,
];

/// How the kubelet registers its Node.
#[derive(Debug, Clone, Default)]
pub struct RegistrationConfig {
    pub node_name: String,
    pub hostname: String,
    /// `--node-labels`.
    pub node_labels: BTreeMap<String, String>,
    /// `registerWithTaints`.
    pub register_with_taints: Vec<Taint>,
    /// `--register-schedulable` (deprecated; false marks the node unschedulable).
    pub register_schedulable: bool,
    /// `enableControllerAttachDetach`.
    pub enable_controller_attach_detach: bool,
    /// `--keep-terminated-pod-volumes`.
    pub keep_terminated_pod_volumes: bool,
    /// `providerID`.
    pub provider_id: String,
}

/// The Node to create, before its status is set.
pub fn initial_node(cfg: &RegistrationConfig) -> Node {
    let (os, arch) = (super::go_os(), super::go_arch());
    let mut labels = BTreeMap::from([
        (LABEL_HOSTNAME.to_string(), cfg.hostname.clone()),
        (LABEL_OS_STABLE.to_string(), os.to_string()),
        (LABEL_ARCH_STABLE.to_string(), arch.to_string()),
        (LABEL_OS_BETA.to_string(), os.to_string()),
        (LABEL_ARCH_BETA.to_string(), arch.to_string()),
    ]);
    let unschedulable = !cfg.register_schedulable;
    let mut taints = cfg.register_with_taints.clone();
    if unschedulable
        && !taints
            .iter()
            .any(|t| t.key == TAINT_NODE_UNSCHEDULABLE && t.effect == "NoSchedule")
    {
        taints.push(Taint {
            key: TAINT_NODE_UNSCHEDULABLE.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    }
    let mut annotations = BTreeMap::new();
    if cfg.enable_controller_attach_detach {
        crate::vlog!(
            2,
            "Setting node annotation to enable volume controller attach/detach"
        );
        annotations.insert(
            CONTROLLER_MANAGED_ATTACH_ANNOTATION.to_string(),
            "true".to_string(),
        );
    } else {
        crate::vlog!(
            2,
            "Controller attach/detach is disabled for this node; Kubelet will attach and detach volumes"
        );
    }
    if cfg.keep_terminated_pod_volumes {
        crate::vlog!(
            2,
            "Setting node annotation to keep pod volumes of terminated pods attached to the node"
        );
        annotations.insert(
            KEEP_TERMINATED_POD_VOLUMES_ANNOTATION.to_string(),
            "true".to_string(),
        );
    }
    for (k, v) in &cfg.node_labels {
        if let Some(cur) = labels.get(k) {
            tracing::info!(label_key = %k, label_value = %v, default = %cur, "The node label will overwrite default setting");
        }
        labels.insert(k.clone(), v.clone());
    }
    Node {
        metadata: ObjectMeta {
            name: Some(cfg.node_name.clone()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            unschedulable: unschedulable.then_some(true),
            taints: (!taints.is_empty()).then_some(taints),
            provider_id: (!cfg.provider_id.is_empty()).then(|| cfg.provider_id.clone()),
            ..Default::default()
        }),
        status: Some(NodeStatus::default()),
    }
}

/// Brings the attach/detach annotation of `existing` in line with `initial`.
pub fn reconcile_cmad_annotation(initial: &Node, existing: &mut Node) -> bool {
    let want = initial
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONTROLLER_MANAGED_ATTACH_ANNOTATION))
        .cloned();
    let have = existing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONTROLLER_MANAGED_ATTACH_ANNOTATION))
        .cloned();
    if want.as_deref().unwrap_or("") == have.as_deref().unwrap_or("") {
        return false;
    }
    match want {
        None => {
            tracing::info!(
                "Controller attach-detach setting changed to false; updating existing Node"
            );
            if let Some(a) = existing.metadata.annotations.as_mut() {
                a.remove(CONTROLLER_MANAGED_ATTACH_ANNOTATION);
            }
        }
        Some(v) => {
            tracing::info!(
                "Controller attach-detach setting changed to true; updating existing Node"
            );
            existing
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(CONTROLLER_MANAGED_ATTACH_ANNOTATION.to_string(), v);
        }
    }
    true
}

/// Sets the default labels the initial node has (and drops empty ones).
pub fn update_default_labels(initial: &Node, existing: &mut Node) -> bool {
    let empty = BTreeMap::new();
    let init = initial.metadata.labels.as_ref().unwrap_or(&empty);
    let labels = existing.metadata.labels.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for l in DEFAULT_LABELS {
        let Some(v) = init.get(*l) else {
            continue;
        };
        if labels.get(*l) != Some(v) {
            labels.insert(l.to_string(), v.clone());
            changed = true;
        }
        if labels.get(*l).is_some_and(|v| v.is_empty()) {
            labels.remove(*l);
        }
    }
    changed
}

/// Fills in capacity/allocatable when the existing Node has none.
pub fn update_default_resources(initial: &Node, existing: &mut Node) -> bool {
    let init = initial.status.clone().unwrap_or_default();
    let status = existing.status.get_or_insert_with(NodeStatus::default);
    let mut changed = false;
    if status.capacity.is_none() {
        match init.capacity {
            Some(c) => {
                status.capacity = Some(c);
                changed = true;
            }
            None => status.capacity = Some(BTreeMap::new()),
        }
    }
    if status.allocatable.is_none() {
        match init.allocatable {
            Some(a) => {
                status.allocatable = Some(a);
                changed = true;
            }
            None => status.allocatable = Some(BTreeMap::new()),
        }
    }
    changed
}

fn same_quantity(a: Option<&Quantity>, b: Option<&Quantity>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => match (parse_quantity(&a.0), parse_quantity(&b.0)) {
            (Ok(x), Ok(y)) => x.cmp_value(&y).is_eq(),
            _ => a == b,
        },
        (None, None) => true,
        _ => false,
    }
}

/// Zeroes extended resources when the node was recreated (`reset`: the
/// device manager has no checkpoint).
pub fn reconcile_extended_resources(initial: &Node, existing: &mut Node, reset: bool) -> bool {
    let mut changed = update_default_resources(initial, existing);
    if !reset {
        return changed;
    }
    let status = existing.status.get_or_insert_with(NodeStatus::default);
    let names: Vec<String> = status
        .capacity
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .filter(|k| is_extended_resource(k))
        .collect();
    for k in names {
        tracing::info!(resource_name = %k, node = ?existing.metadata.name, "Zero out resource capacity in existing node");
        let status = existing.status.get_or_insert_with(NodeStatus::default);
        status
            .capacity
            .get_or_insert_with(BTreeMap::new)
            .insert(k.clone(), Quantity("0".into()));
        status
            .allocatable
            .get_or_insert_with(BTreeMap::new)
            .insert(k, Quantity("0".into()));
        changed = true;
    }
    changed
}

/// Makes huge page capacity and allocatable of `existing` those of
/// `initial`, removing sizes no longer supported.
pub fn reconcile_huge_page_resources(initial: &Node, existing: &mut Node) -> bool {
    let mut changed = update_default_resources(initial, existing);
    let init = initial.status.clone().unwrap_or_default();
    let init_cap = init.capacity.unwrap_or_default();
    let init_alloc = init.allocatable.unwrap_or_default();
    let status = existing.status.get_or_insert_with(NodeStatus::default);
    let cap = status.capacity.get_or_insert_with(BTreeMap::new);
    let mut supported = Vec::new();
    let mut alloc_updates = Vec::new();
    for (name, q) in init_cap.iter().filter(|(k, _)| is_hugepage_resource(k)) {
        supported.push(name.clone());
        let had = cap.contains_key(name);
        if !had || !same_quantity(cap.get(name), Some(q)) {
            cap.insert(name.clone(), q.clone());
            changed = true;
        }
        alloc_updates.push((name.clone(), had, init_alloc.get(name).cloned()));
    }
    let removed: Vec<String> = cap
        .keys()
        .filter(|k| is_hugepage_resource(k) && !supported.contains(k))
        .cloned()
        .collect();
    for k in &removed {
        cap.remove(k);
    }
    let alloc = status.allocatable.get_or_insert_with(BTreeMap::new);
    for (name, had, want) in alloc_updates {
        if !had || !same_quantity(alloc.get(&name), want.as_ref()) {
            match want {
                Some(q) => alloc.insert(name, q),
                None => alloc.insert(name, Quantity("0".into())),
            };
            changed = true;
        }
    }
    for k in removed {
        alloc.remove(&k);
        tracing::info!(resource_name = %k, "Removing huge page resource which is no longer supported");
        changed = true;
    }
    changed
}

/// Everything the kubelet reconciles on a Node that already exists;
/// `true` when `existing` must be written back.
pub fn reconcile_existing_node(initial: &Node, existing: &mut Node, reset_extended: bool) -> bool {
    let mut changed = reconcile_cmad_annotation(initial, existing);
    changed = update_default_labels(initial, existing) || changed;
    changed = reconcile_extended_resources(initial, existing, reset_extended) || changed;
    changed = reconcile_huge_page_resources(initial, existing) || changed;
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg() -> RegistrationConfig {
        RegistrationConfig {
            node_name: "n1".into(),
            hostname: "n1".into(),
            register_schedulable: true,
            enable_controller_attach_detach: true,
            ..Default::default()
        }
    }

    fn strip_type(v: &mut serde_json::Value) {
        if let Some(m) = v.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
    }

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn initial_node_table() {
        let taint = |k: &str, e: &str| Taint {
            key: k.into(),
            effect: e.into(),
            ..Default::default()
        };
        let cases: Vec<(&str, RegistrationConfig, serde_json::Value)> = vec![
            (
                "defaults",
                cfg(),
                json!({
                    "metadata": {"name": "n1",
                        "labels": {"beta.kubernetes.io/arch": super::super::go_arch(), "beta.kubernetes.io/os": "linux",
                            "kubernetes.io/arch": super::super::go_arch(), "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"},
                        "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
                    "spec": {}, "status": {}
                }),
            ),
            (
                "labels, taints, unschedulable, no attach/detach",
                RegistrationConfig {
                    node_labels: BTreeMap::from([
                        ("role".into(), "edge".into()),
                        ("kubernetes.io/hostname".into(), "alias".into()),
                    ]),
                    register_with_taints: vec![taint("dedicated", "NoExecute")],
                    register_schedulable: false,
                    enable_controller_attach_detach: false,
                    keep_terminated_pod_volumes: true,
                    provider_id: "aws:///i-1".into(),
                    ..cfg()
                },
                json!({
                    "metadata": {"name": "n1",
                        "labels": {"beta.kubernetes.io/arch": super::super::go_arch(), "beta.kubernetes.io/os": "linux",
                            "kubernetes.io/arch": super::super::go_arch(), "kubernetes.io/hostname": "alias", "kubernetes.io/os": "linux", "role": "edge"},
                        "annotations": {"volumes.kubernetes.io/keep-terminated-pod-volumes": "true"}},
                    "spec": {"unschedulable": true, "providerID": "aws:///i-1", "taints": [
                        {"key": "dedicated", "effect": "NoExecute"},
                        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
                    ]}, "status": {}
                }),
            ),
        ];
        for (name, c, want) in cases {
            let mut got = serde_json::to_value(initial_node(&c)).unwrap();
            strip_type(&mut got);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn reconcile_table() {
        let mut initial = initial_node(&cfg());
        initial.status = Some(
            serde_json::from_value(json!({
                "capacity": {"cpu": "2", "hugepages-2Mi": "4Mi", "memory": "1Gi"},
                "allocatable": {"cpu": "2", "hugepages-2Mi": "4Mi", "memory": "1Gi"}
            }))
            .unwrap(),
        );
        let cases: Vec<(&str, serde_json::Value, bool, bool, serde_json::Value)> = vec![
            (
                "in line already",
                serde_json::to_value(&initial).unwrap(),
                false,
                false,
                serde_json::to_value(&initial).unwrap(),
            ),
            (
                "annotation, labels and huge pages",
                json!({
                    "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "old", "custom": "x"}},
                    "status": {"capacity": {"cpu": "2", "hugepages-1Gi": "1Gi", "example.com/gpu": "2"},
                               "allocatable": {"cpu": "2", "hugepages-1Gi": "1Gi", "example.com/gpu": "2"}}
                }),
                true,
                true,
                json!({
                    "metadata": {"name": "n1",
                        "labels": {"beta.kubernetes.io/arch": super::super::go_arch(), "beta.kubernetes.io/os": "linux", "custom": "x",
                            "kubernetes.io/arch": super::super::go_arch(), "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"},
                        "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
                    "status": {"capacity": {"cpu": "2", "example.com/gpu": "0", "hugepages-2Mi": "4Mi"},
                               "allocatable": {"cpu": "2", "example.com/gpu": "0", "hugepages-2Mi": "4Mi"}}
                }),
            ),
            (
                "no status at all",
                json!({"metadata": {"name": "n1", "labels": serde_json::to_value(&initial.metadata.labels).unwrap(),
                "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}),
                false,
                true,
                json!({"metadata": serde_json::to_value(&initial.metadata).unwrap(),
                    "status": serde_json::to_value(&initial.status).unwrap()}),
            ),
        ];
        for (name, existing, reset, want_changed, want) in cases {
            let mut existing = node(existing);
            let changed = reconcile_existing_node(&initial, &mut existing, reset);
            assert_eq!(changed, want_changed, "{name}");
            let mut got = serde_json::to_value(&existing).unwrap();
            let mut want = want;
            for v in [&mut got, &mut want] {
                if let Some(m) = v.as_object_mut() {
                    m.remove("spec");
                }
                strip_type(v);
            }
            assert_eq!(got, want, "{name}");
        }
    }
}
