//! The pod status patch (Go's statusutil.PatchPodStatus): a two-way
//! strategic merge patch from the status the API server has to the status
//! the kubelet wants, with the pod's UID as a precondition
//! (`{"metadata":{"uid":…},"status":{…}}`). Lists with a merge key
//! (`conditions` by `type`, `podIPs` by `ip`) are patched element by element
//! with a `$setElementOrder` directive, other lists are replaced whole,
//! removed fields are set to null; keys are sorted as Go writes maps.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::PodStatus;
use serde_json::{Map, Value};

use super::go_json::pod_status_to_go_value;

/// Lists of the pod status patched by merge key: (field, merge key).
const STATUS_MERGE_LISTS: [(&str, &str); 2] = [("conditions", "type"), ("podIPs", "ip")];

const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// A status patch, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPatch {
    /// The patch document.
    pub patch: Value,
    /// Nothing but the UID precondition: the API server already has this status.
    pub unchanged: bool,
}

impl StatusPatch {
    /// The patch as Go writes it (sorted keys, compact).
    pub fn to_json(&self) -> String {
        self.patch.to_string()
    }
}

/// The patch that turns `old` into `new` for the pod with `uid`.
pub fn prepare_pod_status_patch(uid: &str, old: &PodStatus, new: &PodStatus) -> StatusPatch {
    let old = pod_status_to_go_value(old);
    let new = pod_status_to_go_value(new);
    let empty = Map::new();
    let diff = diff_maps(
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
        &STATUS_MERGE_LISTS,
    );
    let mut metadata = Map::new();
    metadata.insert("uid".to_string(), Value::String(uid.to_string()));
    let mut patch = Map::new();
    patch.insert("metadata".to_string(), Value::Object(metadata));
    let unchanged = diff.is_empty();
    if !unchanged {
        patch.insert("status".to_string(), Value::Object(diff));
    }
    StatusPatch {
        patch: sort_keys(Value::Object(patch)),
        unchanged,
    }
}

/// Recursively orders object keys as Go's encoder does for maps.
fn sort_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

fn same_kind(a: &Value, b: &Value) -> bool {
    matches!(
        (a, b),
        (Value::Null, Value::Null)
            | (Value::Bool(_), Value::Bool(_))
            | (Value::Number(_), Value::Number(_))
            | (Value::String(_), Value::String(_))
            | (Value::Array(_), Value::Array(_))
            | (Value::Object(_), Value::Object(_))
    )
}

/// Go's diffMaps with SetElementOrder on; `merge_lists` names the lists of
/// this level patched by merge key (nested levels have none in a pod status).
fn diff_maps(
    original: &Map<String, Value>,
    modified: &Map<String, Value>,
    merge_lists: &[(&str, &str)],
) -> Map<String, Value> {
    let mut patch = Map::new();
    for (key, new) in modified {
        let Some(old) = original.get(key) else {
            patch.insert(key.clone(), new.clone());
            continue;
        };
        if !same_kind(old, new) {
            patch.insert(key.clone(), new.clone());
            continue;
        }
        match (old, new) {
            (Value::Object(o), Value::Object(n)) => {
                let sub = diff_maps(o, n, &[]);
                if !sub.is_empty() {
                    patch.insert(key.clone(), Value::Object(sub));
                }
            }
            (Value::Array(o), Value::Array(n)) => {
                match merge_lists.iter().find(|(field, _)| field == key) {
                    Some((_, merge_key)) => diff_merge_list(key, o, n, merge_key, &mut patch),
                    None => {
                        if o != n {
                            patch.insert(key.clone(), new.clone());
                        }
                    }
                }
            }
            _ => {
                if old != new {
                    patch.insert(key.clone(), new.clone());
                }
            }
        }
    }
    for key in original.keys() {
        if !modified.contains_key(key) {
            patch.insert(key.clone(), Value::Null);
        }
    }
    patch
}

fn merge_key_string(item: &Value, merge_key: &str) -> String {
    match item.get(merge_key) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Go's diffLists for a list of maps with a merge key: changed and added
/// elements (only their changed fields, plus the key), deletions as
/// `{"$patch":"delete", key: value}` at the end, and the new order in
/// `$setElementOrder/<field>` whenever anything changed.
fn diff_merge_list(
    field: &str,
    original: &[Value],
    modified: &[Value],
    merge_key: &str,
    patch: &mut Map<String, Value>,
) {
    let by_key = |list: &[Value]| {
        let mut v: Vec<Value> = list.to_vec();
        v.sort_by_key(|item| merge_key_string(item, merge_key));
        v
    };
    let (orig_sorted, mod_sorted) = (by_key(original), by_key(modified));
    let empty = Map::new();
    let mut changes: Vec<Value> = Vec::new();
    let mut deletes: Vec<Value> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < orig_sorted.len() || j < mod_sorted.len() {
        let ok = orig_sorted.get(i).map(|v| merge_key_string(v, merge_key));
        let mk = mod_sorted.get(j).map(|v| merge_key_string(v, merge_key));
        let order = match (&ok, &mk) {
            (Some(a), Some(b)) => a.cmp(b),
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (None, None) => break,
        };
        match order {
            Ordering::Equal => {
                let o = orig_sorted[i].as_object().unwrap_or(&empty);
                let n = mod_sorted[j].as_object().unwrap_or(&empty);
                let mut sub = diff_maps(o, n, &[]);
                if !sub.is_empty() {
                    sub.insert(
                        merge_key.to_string(),
                        n.get(merge_key).cloned().unwrap_or(Value::Null),
                    );
                    changes.push(Value::Object(sub));
                }
                i += 1;
                j += 1;
            }
            // The modified list has an element the original lacks.
            Ordering::Greater => {
                changes.push(mod_sorted[j].clone());
                j += 1;
            }
            // The original has an element the modified list lacks.
            Ordering::Less => {
                let mut d = Map::new();
                d.insert("$patch".to_string(), Value::String("delete".to_string()));
                d.insert(
                    merge_key.to_string(),
                    orig_sorted[i]
                        .get(merge_key)
                        .cloned()
                        .unwrap_or(Value::Null),
                );
                deletes.push(Value::Object(d));
                i += 1;
            }
        }
    }
    // Changes in the order of the modified list, deletions last.
    let position = |item: &Value| {
        let k = merge_key_string(item, merge_key);
        modified
            .iter()
            .position(|m| merge_key_string(m, merge_key) == k)
    };
    changes.sort_by(|a, b| match (position(a), position(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => Ordering::Equal,
    });
    let order_same = original.len() == modified.len()
        && original
            .iter()
            .zip(modified)
            .all(|(a, b)| merge_key_string(a, merge_key) == merge_key_string(b, merge_key));
    changes.extend(deletes);
    if !changes.is_empty() || !order_same {
        let order: Vec<Value> = modified
            .iter()
            .map(|m| {
                let mut o = Map::new();
                o.insert(
                    merge_key.to_string(),
                    m.get(merge_key).cloned().unwrap_or(Value::Null),
                );
                Value::Object(o)
            })
            .collect();
        patch.insert(
            format!("{SET_ELEMENT_ORDER_PREFIX}/{field}"),
            Value::Array(order),
        );
    }
    if !changes.is_empty() {
        patch.insert(field.to_string(), Value::Array(changes));
    }
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
