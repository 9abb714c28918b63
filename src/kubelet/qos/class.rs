//! The QoS class of a pod, from the cpu and memory requests and limits of all
//! its containers and init containers (v1.25 rules: the status field is not
//! consulted).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::util::quantity::{self, Quantity};

/// The three QoS classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The API's name for the class.
    pub fn as_str(&self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

fn positive(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<Quantity> {
    quantity::parse(q.0.trim())
        .ok()
        .filter(|v| v.cmp_value(&Quantity::from_decimal(0)).is_gt())
}

fn accumulate(total: &mut BTreeMap<String, Quantity>, name: &str, q: Quantity) {
    let sum = match total.get(name) {
        Some(prev) => q.add(prev),
        None => q,
    };
    total.insert(name.to_string(), sum);
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    })
}

/// The QoS class of `pod`.
pub fn get_pod_qos(pod: &Pod) -> QosClass {
    let mut requests: BTreeMap<String, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<String, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    for c in all_containers(pod) {
        let res = c.resources.as_ref();
        for (name, q) in res.and_then(|r| r.requests.as_ref()).into_iter().flatten() {
            if !QOS_RESOURCES.contains(&name.as_str()) {
                continue;
            }
            if let Some(v) = positive(q) {
                accumulate(&mut requests, name, v);
            }
        }
        let mut found = BTreeSet::new();
        for (name, q) in res.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
            if !QOS_RESOURCES.contains(&name.as_str()) {
                continue;
            }
            if let Some(v) = positive(q) {
                found.insert(name.as_str());
                accumulate(&mut limits, name, v);
            }
        }
        if !QOS_RESOURCES.iter().all(|r| found.contains(r)) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed {
        for (name, req) in &requests {
            match limits.get(name) {
                Some(lim) if lim.cmp_value(req).is_eq() => {}
                _ => {
                    guaranteed = false;
                    break;
                }
            }
        }
    }
    if guaranteed && requests.len() == limits.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(containers: serde_json::Value, init: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "spec": {"containers": containers, "initContainers": init}
        }))
        .expect("pod")
    }

    fn res(req: serde_json::Value, lim: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"name": "c", "resources": {"requests": req, "limits": lim}})
    }

    #[test]
    fn qos_table() {
        use serde_json::json;
        let cases: Vec<(&str, serde_json::Value, serde_json::Value, QosClass)> = vec![
            (
                "no resources",
                json!([{"name": "c"}]),
                json!([]),
                QosClass::BestEffort,
            ),
            (
                "zero quantities count as unset",
                json!([res(json!({"cpu": "0"}), json!({"memory": "0"}))]),
                json!([]),
                QosClass::BestEffort,
            ),
            (
                "non-compute resources ignored",
                json!([res(json!({"ephemeral-storage": "1Gi"}), json!({}))]),
                json!([]),
                QosClass::BestEffort,
            ),
            (
                "requests equal limits",
                json!([res(
                    json!({"cpu": "500m", "memory": "128Mi"}),
                    json!({"cpu": "0.5", "memory": "128Mi"})
                )]),
                json!([]),
                QosClass::Guaranteed,
            ),
            (
                "limits only, undefaulted: request count differs",
                json!([res(json!({}), json!({"cpu": "1", "memory": "1Gi"}))]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "requests below limits",
                json!([res(
                    json!({"cpu": "100m", "memory": "64Mi"}),
                    json!({"cpu": "1", "memory": "256Mi"})
                )]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "memory limit missing",
                json!([res(json!({"cpu": "1"}), json!({"cpu": "1"}))]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "one guaranteed, one best-effort container",
                json!([res(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"})), {"name": "b"}]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "init container counts",
                json!([res(
                    json!({"cpu": "1", "memory": "1Gi"}),
                    json!({"cpu": "1", "memory": "1Gi"})
                )]),
                json!([{"name": "i"}]),
                QosClass::Burstable,
            ),
            (
                "best-effort app with burstable init",
                json!([{"name": "c"}]),
                json!([res(json!({"cpu": "1"}), json!({}))]),
                QosClass::Burstable,
            ),
        ];
        for (name, containers, init, want) in cases {
            assert_eq!(get_pod_qos(&pod(containers, init)), want, "case {name}");
        }
    }

    #[test]
    fn reference_pods() {
        for (file, want) in [
            ("pod-guaranteed.json", QosClass::Guaranteed),
            ("pod-burstable.json", QosClass::Burstable),
            ("pod-besteffort.json", QosClass::BestEffort),
        ] {
            let path = format!(
                "{}/tests/fixtures/go-kubelet-examples/{file}",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(&path).expect("fixture");
            let p: Pod = serde_json::from_str(&text).expect("pod");
            assert_eq!(get_pod_qos(&p), want, "{file}");
            let status = p.status.and_then(|s| s.qos_class).unwrap_or_default();
            assert_eq!(status, want.as_str(), "{file} status");
        }
    }
}
