//! The QoS class of a pod (GetPodQOS), computed from its containers' CPU and
//! memory requests and limits. Shared by the cgroup layout and the runtime.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

use super::helpers::{add_quantity, container_resources};
use super::resources::{RESOURCE_CPU, RESOURCE_MEMORY, ResourceList};
use crate::util::quantity::Quantity;

/// A pod's QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The API spelling (`status.qosClass`).
    pub fn as_str(&self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The QoS cgroup directory name (`burstable`, `besteffort`); Guaranteed
    /// pods sit directly under the node allocatable cgroup.
    pub fn cgroup_dir(&self) -> &'static str {
        match self {
            QosClass::Guaranteed => "guaranteed",
            QosClass::Burstable => "burstable",
            QosClass::BestEffort => "besteffort",
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn is_qos_resource(name: &str) -> bool {
    name == RESOURCE_CPU || name == RESOURCE_MEMORY
}

fn accumulate(total: &mut ResourceList, list: &ResourceList) -> Vec<String> {
    let mut positive = Vec::new();
    for (name, q) in list {
        if !is_qos_resource(name) || !q.cmp_value(&Quantity::from_decimal(0)).is_gt() {
            continue;
        }
        positive.push(name.clone());
        let sum = match total.get(name) {
            Some(prev) => add_quantity(q, prev),
            None => *q,
        };
        total.insert(name.clone(), sum);
    }
    positive
}

/// The QoS class: BestEffort without any positive CPU or memory request or
/// limit; Guaranteed when every container (init containers included) limits
/// both CPU and memory and the summed requests equal the summed limits;
/// Burstable otherwise.
pub fn get_pod_qos(pod: &Pod) -> QosClass {
    let mut requests = ResourceList::new();
    let mut limits = ResourceList::new();
    let mut guaranteed = true;
    let Some(spec) = pod.spec.as_ref() else {
        return QosClass::BestEffort;
    };
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let (r, l) = container_resources(c);
        accumulate(&mut requests, &r);
        let found = accumulate(&mut limits, &l);
        if !(found.iter().any(|n| n == RESOURCE_CPU) && found.iter().any(|n| n == RESOURCE_MEMORY))
        {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed {
        let all_match = requests
            .iter()
            .all(|(name, req)| limits.get(name).is_some_and(|l| l.cmp_value(req).is_eq()));
        if all_match && requests.len() == limits.len() {
            return QosClass::Guaranteed;
        }
    }
    QosClass::Burstable
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: serde_json::Value, init: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": containers, "initContainers": init}
        }))
        .unwrap()
    }

    fn c(requests: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
        json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn classes() {
        let cases = [
            (
                "no resources",
                json!([c(json!({}), json!({}))]),
                json!([]),
                QosClass::BestEffort,
            ),
            (
                "only extended resources",
                json!([c(
                    json!({"nvidia.com/gpu": "1"}),
                    json!({"nvidia.com/gpu": "1"})
                )]),
                json!([]),
                QosClass::BestEffort,
            ),
            (
                "zero requests",
                json!([c(json!({"cpu": "0"}), json!({}))]),
                json!([]),
                QosClass::BestEffort,
            ),
            (
                "equal limits and requests",
                json!([c(
                    json!({"cpu": "500m", "memory": "128Mi"}),
                    json!({"cpu": "0.5", "memory": "128Mi"})
                )]),
                json!([]),
                QosClass::Guaranteed,
            ),
            (
                "limits only (requests defaulted away)",
                json!([c(json!({}), json!({"cpu": "1", "memory": "1Gi"}))]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "requests below limits",
                json!([c(
                    json!({"cpu": "100m", "memory": "64Mi"}),
                    json!({"cpu": "1", "memory": "256Mi"})
                )]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "one container without memory limit",
                json!([
                    c(
                        json!({"cpu": "1", "memory": "1Gi"}),
                        json!({"cpu": "1", "memory": "1Gi"})
                    ),
                    c(json!({"cpu": "1"}), json!({"cpu": "1"}))
                ]),
                json!([]),
                QosClass::Burstable,
            ),
            (
                "init container without limits",
                json!([c(
                    json!({"cpu": "1", "memory": "1Gi"}),
                    json!({"cpu": "1", "memory": "1Gi"})
                )]),
                json!([c(json!({}), json!({}))]),
                QosClass::Burstable,
            ),
            (
                "init container also guaranteed",
                json!([c(
                    json!({"cpu": "1", "memory": "1Gi"}),
                    json!({"cpu": "1", "memory": "1Gi"})
                )]),
                json!([c(
                    json!({"cpu": "2", "memory": "1Gi"}),
                    json!({"cpu": "2", "memory": "1Gi"})
                )]),
                QosClass::Guaranteed,
            ),
            (
                "requests on best effort init only",
                json!([c(json!({}), json!({}))]),
                json!([c(json!({"memory": "10Mi"}), json!({}))]),
                QosClass::Burstable,
            ),
        ];
        for (what, containers, init, want) in cases {
            assert_eq!(get_pod_qos(&pod(containers, init)), want, "{what}");
        }
    }

    #[test]
    fn reference_pods() {
        let cases = [
            (
                include_str!("../../tests/fixtures/go-kubelet-examples/pod-guaranteed.json"),
                QosClass::Guaranteed,
            ),
            (
                include_str!("../../tests/fixtures/go-kubelet-examples/pod-burstable.json"),
                QosClass::Burstable,
            ),
            (
                include_str!("../../tests/fixtures/go-kubelet-examples/pod-besteffort.json"),
                QosClass::BestEffort,
            ),
        ];
        for (text, want) in cases {
            let pod: Pod = serde_json::from_str(text).unwrap();
            assert_eq!(get_pod_qos(&pod), want);
            let status = pod.status.as_ref().and_then(|s| s.qos_class.as_deref());
            assert_eq!(status, Some(want.as_str()), "the API server agrees");
        }
    }
}
