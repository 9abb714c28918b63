//! Node status patches as the kubelet sends them (Go's PatchNodeStatus): a
//! two-way strategic merge patch (`util::strategicpatch`) from the Node as
//! read to the Node as computed (spec reset to the original, so only status
//! and metadata change), conditions merged by type with `$setElementOrder`
//! in the Node's own order, and the addresses replaced outright when they
//! changed (their merge key is not unique). Also the comparison that
//! decides whether status changed, ignoring heartbeat times.

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use serde_json::{Value, json};

use crate::util::quantity::parse as parse_quantity;
use crate::util::strategicpatch::{DiffError, PatchSchema, create_two_way_merge_patch};

/// Errors computing a patch.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("failed to encode node {node:?} for its status patch")]
    Encode {
        node: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("failed to build the node status patch for node {node:?}")]
    Diff {
        node: String,
        #[source]
        source: DiffError,
    },
}

/// The status patch from `old` to `new` (spec ignored), with the addresses
/// replaced when they changed.
pub fn node_status_patch(old: &Node, new: &Node) -> Result<Value, PatchError> {
    let node = || old.metadata.name.clone().unwrap_or_default();
    let err = |source: serde_json::Error| PatchError::Encode {
        node: node(),
        source,
    };
    let old_addrs = old
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let new_addrs = new
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    let manual_addresses = !old_addrs.is_empty() && old_addrs != new_addrs;
    let mut diff = new.clone();
    diff.spec = old.spec.clone();
    if manual_addresses && let Some(s) = diff.status.as_mut() {
        s.addresses = Some(old_addrs);
    }
    let o = serde_json::to_value(old).map_err(err)?;
    let m = serde_json::to_value(&diff).map_err(err)?;
    let mut patch = create_two_way_merge_patch(&o, &m, PatchSchema::NODE).map_err(|source| {
        PatchError::Diff {
            node: node(),
            source,
        }
    })?;
    if manual_addresses {
        let mut list = serde_json::to_value(&new_addrs).map_err(err)?;
        if let Value::Array(a) = &mut list {
            a.push(json!({"$patch": "replace"}));
        }
        if let Value::Object(p) = &mut patch {
            let status = p.entry("status").or_insert_with(|| json!({}));
            if let Value::Object(s) = status {
                s.insert("addresses".into(), list);
            }
        }
    }
    Ok(patch)
}

fn normalize_quantities(v: &mut Value) {
    if let Value::Object(m) = v {
        for q in m.values_mut() {
            if let Some(s) = q.as_str()
                && let Ok(parsed) = parse_quantity(s)
            {
                *q = Value::String(parsed.to_canonical_string());
            }
        }
    }
}

fn comparable(status: &NodeStatus) -> Value {
    let mut s = status.clone();
    let mut conditions = s.conditions.take().unwrap_or_default();
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    for c in &mut conditions {
        c.last_heartbeat_time = None;
    }
    let mut v = serde_json::to_value(&s).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        if let Some(c) = m.get_mut("capacity") {
            normalize_quantities(c);
        }
        if let Some(a) = m.get_mut("allocatable") {
            normalize_quantities(a);
        }
        m.insert(
            "conditions".into(),
            serde_json::to_value(&conditions).unwrap_or(Value::Null),
        );
    }
    v
}

/// Whether status changed, heartbeat times aside (Go's nodeStatusHasChanged).
pub fn node_status_has_changed(old: Option<&NodeStatus>, new: Option<&NodeStatus>) -> bool {
    match (old, new) {
        (None, None) => false,
        (Some(o), Some(n)) => {
            let (oc, nc) = (
                o.conditions.as_ref().map_or(0, Vec::len),
                n.conditions.as_ref().map_or(0, Vec::len),
            );
            oc != nc || comparable(o) != comparable(n)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(v: Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn heartbeat_patch_merges_conditions_by_type() {
        let old = node(json!({
            "metadata": {"name": "n"},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2023-01-01T00:00:00Z", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2023-01-01T00:00:00Z", "reason": "KubeletReady"}
            ], "capacity": {"cpu": "2"}}
        }));
        let mut new = old.clone();
        new.spec.as_mut().unwrap().pod_cidr = Some("changed-but-ignored".into());
        for c in new.status.as_mut().unwrap().conditions.as_mut().unwrap() {
            c.last_heartbeat_time = Some(super::super::setters::api_time(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000),
            ));
        }
        let p = node_status_patch(&old, &new).unwrap();
        assert_eq!(
            p,
            json!({"status": {
                "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
                "conditions": [
                    {"lastHeartbeatTime": "2023-11-14T22:13:20Z", "type": "MemoryPressure"},
                    {"lastHeartbeatTime": "2023-11-14T22:13:20Z", "type": "Ready"}
                ]
            }})
        );
        assert!(!node_status_has_changed(
            old.status.as_ref(),
            new.status.as_ref()
        ));
    }

    #[test]
    fn patch_table() {
        // (old, new, want patch)
        let cases = vec![
            (
                "label added, annotation removed",
                json!({"metadata": {"name": "n", "labels": {"a": "1"}, "annotations": {"x": "y"}}}),
                json!({"metadata": {"name": "n", "labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"b": "2"}, "annotations": null}}),
            ),
            (
                "new condition and removed one",
                json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Old", "status": "True"}]}}),
                json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "DiskPressure", "status": "False"}, {"type": "Ready", "status": "True"}]}}),
                json!({"status": {
                    "$setElementOrder/conditions": [{"type": "DiskPressure"}, {"type": "Ready"}],
                    "conditions": [{"type": "DiskPressure", "status": "False"}, {"$patch": "delete", "type": "Old"}]
                }}),
            ),
            (
                "addresses replaced",
                json!({"metadata": {"name": "n"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "h"}]}}),
                json!({"metadata": {"name": "n"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "h"}]}}),
                json!({"status": {"addresses": [
                    {"type": "InternalIP", "address": "10.0.0.2"},
                    {"type": "Hostname", "address": "h"},
                    {"$patch": "replace"}
                ]}}),
            ),
            (
                "first addresses are plain",
                json!({"metadata": {"name": "n"}, "status": {}}),
                json!({"metadata": {"name": "n"}, "status": {"addresses": [{"type": "Hostname", "address": "h"}]}}),
                json!({"status": {"addresses": [{"type": "Hostname", "address": "h"}]}}),
            ),
            (
                "images replaced whole",
                json!({"metadata": {"name": "n"}, "status": {"images": [{"names": ["a"], "sizeBytes": 1}]}}),
                json!({"metadata": {"name": "n"}, "status": {"images": [{"names": ["b"], "sizeBytes": 2}, {"names": ["a"], "sizeBytes": 1}]}}),
                json!({"status": {"images": [{"names": ["b"], "sizeBytes": 2}, {"names": ["a"], "sizeBytes": 1}]}}),
            ),
            (
                "nothing",
                json!({"metadata": {"name": "n"}}),
                json!({"metadata": {"name": "n"}}),
                json!({}),
            ),
        ];
        for (name, old, new, want) in cases {
            let p = node_status_patch(&node(old), &node(new)).unwrap();
            assert_eq!(p, want, "{name}");
        }
    }

    #[test]
    fn status_change_table() {
        let base = json!({"capacity": {"memory": "1Gi"}, "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2023-01-01T00:00:00Z"}]});
        let st = |v: Value| -> NodeStatus { serde_json::from_value(v).unwrap() };
        let cases = vec![
            ("same", base.clone(), false),
            (
                "heartbeat only",
                json!({"capacity": {"memory": "1Gi"}, "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-01T00:00:00Z"}]}),
                false,
            ),
            (
                "same quantity spelled differently",
                json!({"capacity": {"memory": "1024Mi"}, "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2023-01-01T00:00:00Z"}]}),
                false,
            ),
            (
                "condition status",
                json!({"capacity": {"memory": "1Gi"}, "conditions": [{"type": "Ready", "status": "False", "lastHeartbeatTime": "2023-01-01T00:00:00Z"}]}),
                true,
            ),
            (
                "capacity",
                json!({"capacity": {"memory": "2Gi"}, "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2023-01-01T00:00:00Z"}]}),
                true,
            ),
            (
                "extra condition",
                json!({"capacity": {"memory": "1Gi"}, "conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]}),
                true,
            ),
        ];
        for (name, new, want) in cases {
            assert_eq!(
                node_status_has_changed(Some(&st(base.clone())), Some(&st(new))),
                want,
                "{name}"
            );
        }
    }
}
