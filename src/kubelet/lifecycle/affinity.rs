//! Required node affinity (component-helpers' nodeaffinity): a pod's
//! `nodeSelector` and `requiredDuringSchedulingIgnoredDuringExecution` terms
//! matched against the node's labels and its `metadata.name` field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, Pod};

use crate::kubelet::config::validation::{is_qualified_name, is_valid_label_value};

/// One parsed `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
}

impl LabelRequirement {
    fn parse(r: &NodeSelectorRequirement) -> Option<Self> {
        let key = r.key.clone();
        if !is_qualified_name(&key).is_empty() {
            return None;
        }
        let values = r.values.clone().unwrap_or_default();
        if values.iter().any(|v| !is_valid_label_value(v).is_empty()) {
            return None;
        }
        let one_int = |values: &[String]| -> Option<i64> {
            match values {
                [v] => v.parse().ok(),
                _ => None,
            }
        };
        match r.operator.as_str() {
            "In" if !values.is_empty() => Some(Self::In(key, values)),
            "NotIn" if !values.is_empty() => Some(Self::NotIn(key, values)),
            "Exists" if values.is_empty() => Some(Self::Exists(key)),
            "DoesNotExist" if values.is_empty() => Some(Self::DoesNotExist(key)),
            "Gt" => one_int(&values).map(|v| Self::Gt(key, v)),
            "Lt" => one_int(&values).map(|v| Self::Lt(key, v)),
            _ => None,
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Self::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Self::Exists(k) => labels.contains_key(k),
            Self::DoesNotExist(k) => !labels.contains_key(k),
            Self::Gt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Self::Lt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// One parsed `matchFields` entry: `key == value` or `key != value`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl FieldRequirement {
    fn parse(r: &NodeSelectorRequirement) -> Option<Self> {
        let equal = match r.operator.as_str() {
            "In" => true,
            "NotIn" => false,
            _ => return None,
        };
        match r.values.as_deref() {
            Some([v]) => Some(FieldRequirement {
                key: r.key.clone(),
                value: v.clone(),
                equal,
            }),
            _ => None,
        }
    }

    fn matches(&self, fields: &BTreeMap<&str, &str>) -> bool {
        // A field the node does not have reads as empty.
        let got = fields.get(self.key.as_str()).copied().unwrap_or("");
        (got == self.value) == self.equal
    }
}

/// A term of a node selector; `None` parts were not given.
#[derive(Debug, Clone)]
struct Term {
    labels: Option<Vec<LabelRequirement>>,
    fields: Option<Vec<FieldRequirement>>,
    /// The term has an invalid requirement and never matches.
    invalid: bool,
}

impl Term {
    fn parse(t: &k8s_openapi::api::core::v1::NodeSelectorTerm) -> Option<Self> {
        let exprs = t.match_expressions.as_deref().unwrap_or_default();
        let fields = t.match_fields.as_deref().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            // An empty term selects nothing and is dropped.
            return None;
        }
        let mut invalid = false;
        let labels = (!exprs.is_empty()).then(|| {
            exprs
                .iter()
                .filter_map(|r| {
                    let p = LabelRequirement::parse(r);
                    invalid |= p.is_none();
                    p
                })
                .collect()
        });
        let fields = (!fields.is_empty()).then(|| {
            fields
                .iter()
                .filter_map(|r| {
                    let p = FieldRequirement::parse(r);
                    invalid |= p.is_none();
                    p
                })
                .collect()
        });
        Some(Term {
            labels,
            fields,
            invalid,
        })
    }

    fn matches(&self, labels: &BTreeMap<String, String>, fields: &BTreeMap<&str, &str>) -> bool {
        if self.invalid {
            return false;
        }
        if let Some(reqs) = &self.labels
            && !reqs.iter().all(|r| r.matches(labels))
        {
            return false;
        }
        if let Some(reqs) = &self.fields
            && !fields.is_empty()
            && !reqs.iter().all(|r| r.matches(fields))
        {
            return false;
        }
        true
    }
}

fn node_fields(node: &Node) -> BTreeMap<&str, &str> {
    let mut f = BTreeMap::new();
    if let Some(name) = node.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        f.insert("metadata.name", name);
    }
    f
}

fn node_labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

/// Whether the node matches any term of `selector` (terms are ORed; empty
/// or invalid terms match nothing).
pub fn match_node_selector_terms(node: &Node, selector: &NodeSelector) -> bool {
    let labels = node_labels(node);
    let fields = node_fields(node);
    selector
        .node_selector_terms
        .iter()
        .filter_map(Term::parse)
        .any(|t| t.matches(&labels, &fields))
}

/// A pod's `nodeSelector` and required node affinity, both of which must match.
#[derive(Debug, Clone, Default)]
pub struct RequiredNodeAffinity {
    node_selector: Option<BTreeMap<String, String>>,
    required: Option<NodeSelector>,
}

impl RequiredNodeAffinity {
    /// Reads the pod's requirements.
    pub fn from_pod(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        RequiredNodeAffinity {
            node_selector: spec
                .and_then(|s| s.node_selector.clone())
                .filter(|m| !m.is_empty()),
            required: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|na| {
                    na.required_during_scheduling_ignored_during_execution
                        .clone()
                }),
        }
    }

    /// Whether the pod may be placed on `node`.
    pub fn matches(&self, node: &Node) -> bool {
        if let Some(sel) = &self.node_selector {
            let labels = node_labels(node);
            if !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                return false;
            }
        }
        match &self.required {
            Some(required) => match_node_selector_terms(node, required),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {
                "kubernetes.io/hostname": "n1", "zone": "a", "gpus": "4", "kubernetes.io/os": "linux"
            }}
        }))
        .unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn required(terms: serde_json::Value) -> serde_json::Value {
        json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
    }

    #[test]
    fn node_selector_and_affinity_table() {
        let cases = [
            ("no constraints", json!({"containers": []}), true),
            (
                "selector matches",
                json!({"containers": [], "nodeSelector": {"zone": "a"}}),
                true,
            ),
            (
                "selector differs",
                json!({"containers": [], "nodeSelector": {"zone": "b"}}),
                false,
            ),
            (
                "selector missing label",
                json!({"containers": [], "nodeSelector": {"rack": "1"}}),
                false,
            ),
            (
                "In",
                required(
                    json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]),
                ),
                true,
            ),
            (
                "NotIn",
                required(
                    json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]),
                ),
                false,
            ),
            (
                "NotIn absent label",
                required(
                    json!([{"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["a"]}]}]),
                ),
                true,
            ),
            (
                "Exists",
                required(json!([{"matchExpressions": [{"key": "gpus", "operator": "Exists"}]}])),
                true,
            ),
            (
                "DoesNotExist",
                required(
                    json!([{"matchExpressions": [{"key": "gpus", "operator": "DoesNotExist"}]}]),
                ),
                false,
            ),
            (
                "Gt",
                required(
                    json!([{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["3"]}]}]),
                ),
                true,
            ),
            (
                "Lt",
                required(
                    json!([{"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["3"]}]}]),
                ),
                false,
            ),
            (
                "Gt on text",
                required(
                    json!([{"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["3"]}]}]),
                ),
                false,
            ),
            (
                "terms are ORed",
                required(json!([
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}])),
                true,
            ),
            (
                "expressions are ANDed",
                required(json!([{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]},
                {"key": "gpus", "operator": "In", "values": ["1"]}]}])),
                false,
            ),
            ("empty term matches nothing", required(json!([{}])), false),
            ("no terms matches nothing", required(json!([])), false),
            (
                "invalid operator",
                required(
                    json!([{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]),
                ),
                false,
            ),
            (
                "Exists with values is invalid",
                required(
                    json!([{"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}]}]),
                ),
                false,
            ),
            (
                "invalid term does not spoil a valid one",
                required(json!([
                {"matchExpressions": [{"key": "zone", "operator": "In"}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}])),
                true,
            ),
            (
                "matchFields name",
                required(
                    json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]),
                ),
                true,
            ),
            (
                "matchFields other name",
                required(
                    json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]),
                ),
                false,
            ),
            (
                "matchFields NotIn",
                required(
                    json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]}]),
                ),
                true,
            ),
            (
                "matchFields two values invalid",
                required(
                    json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}]),
                ),
                false,
            ),
            (
                "selector and affinity both needed",
                json!({"containers": [], "nodeSelector": {"zone": "b"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}}),
                false,
            ),
        ];
        let n = node();
        for (name, spec, want) in cases {
            let got = RequiredNodeAffinity::from_pod(&pod(spec)).matches(&n);
            assert_eq!(got, want, "{name}");
        }
    }
}
