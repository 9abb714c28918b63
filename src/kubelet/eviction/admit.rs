//! Admission under resource pressure: with no pressure every pod is
//! admitted, critical pods always are; under memory pressure alone a pod is
//! admitted unless it is BestEffort and does not tolerate the
//! memory-pressure taint; under any other pressure no pod is.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Toleration};

use super::evaluate::NodeConditionType;
use super::manager::EvictionManager;
use super::message::{REASON, node_condition_message};
use crate::cm::qos::{QosClass, get_pod_qos};
use crate::kubelet::sync_loop::admission::PodAdmitResult;
use crate::kubelet::types::is_critical_pod;

/// The taint a node under memory pressure carries.
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";

fn tolerates_memory_pressure(t: &Toleration) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && effect != "NoSchedule"
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != TAINT_NODE_MEMORY_PRESSURE {
        return false;
    }
    match t.operator.as_deref().unwrap_or_default() {
        "Exists" => true,
        "Equal" | "" => t.value.as_deref().unwrap_or_default().is_empty(),
        _ => false,
    }
}

/// Whether a pod may start on a node with `conditions`.
pub fn admit_under_pressure(conditions: &[NodeConditionType], pod: &Pod) -> PodAdmitResult {
    if conditions.is_empty() || is_critical_pod(pod) {
        return PodAdmitResult::admit();
    }
    if conditions == [NodeConditionType::MemoryPressure] {
        if get_pod_qos(pod) != QosClass::BestEffort {
            return PodAdmitResult::admit();
        }
        let tolerations = pod.spec.iter().flat_map(|s| s.tolerations.iter().flatten());
        if tolerations.into_iter().any(tolerates_memory_pressure) {
            return PodAdmitResult::admit();
        }
    }
    tracing::info!(
        pod = %crate::kubelet::container::format_pod(pod),
        node_condition = %super::evaluate::format_conditions(conditions),
        "Failed to admit pod to node"
    );
    PodAdmitResult::reject(REASON, node_condition_message(conditions))
}

/// The admit handler the kubelet's admission chain calls: the manager's
/// current conditions through [`admit_under_pressure`].
#[derive(Clone)]
pub struct EvictionAdmitHandler {
    manager: Arc<EvictionManager>,
}

impl EvictionAdmitHandler {
    pub fn new(manager: Arc<EvictionManager>) -> Self {
        EvictionAdmitHandler { manager }
    }

    pub fn admit(&self, pod: &Pod) -> PodAdmitResult {
        admit_under_pressure(&self.manager.node_conditions(), pod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

    fn pod(best_effort: bool, priority: Option<i32>, tolerations: Vec<Toleration>) -> Pod {
        let mut c = Container {
            name: "c".into(),
            ..Default::default()
        };
        if !best_effort {
            c.resources = Some(ResourceRequirements {
                requests: Some([("memory".to_string(), ApiQuantity("10Mi".into()))].into()),
                ..Default::default()
            });
        }
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![c],
                priority,
                tolerations: Some(tolerations),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn toleration(key: &str, op: &str, effect: &str) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some(op.into()),
            effect: Some(effect.into()),
            ..Default::default()
        }
    }

    #[test]
    fn admission_table() {
        use NodeConditionType::*;
        let critical = Some(2_000_000_000);
        let tol_mem = toleration(TAINT_NODE_MEMORY_PRESSURE, "Exists", "NoSchedule");
        let tol_disk = toleration("node.kubernetes.io/disk-pressure", "Exists", "NoSchedule");
        let tol_all = toleration("", "Exists", "");
        let tol_exec = toleration(TAINT_NODE_MEMORY_PRESSURE, "Exists", "NoExecute");
        let cases: Vec<(&str, Vec<NodeConditionType>, Pod, Option<&str>)> = vec![
            (
                "no pressure, best effort",
                vec![],
                pod(true, None, vec![]),
                None,
            ),
            (
                "memory, burstable",
                vec![MemoryPressure],
                pod(false, None, vec![]),
                None,
            ),
            (
                "memory, best effort",
                vec![MemoryPressure],
                pod(true, None, vec![]),
                Some("The node had condition: [MemoryPressure]. "),
            ),
            (
                "memory, critical best effort",
                vec![MemoryPressure],
                pod(true, critical, vec![]),
                None,
            ),
            (
                "memory, best effort tolerating",
                vec![MemoryPressure],
                pod(true, None, vec![tol_mem]),
                None,
            ),
            (
                "memory, best effort tolerating all",
                vec![MemoryPressure],
                pod(true, None, vec![tol_all]),
                None,
            ),
            (
                "memory, best effort tolerating disk",
                vec![MemoryPressure],
                pod(true, None, vec![tol_disk]),
                Some("The node had condition: [MemoryPressure]. "),
            ),
            (
                "memory, best effort tolerating NoExecute only",
                vec![MemoryPressure],
                pod(true, None, vec![tol_exec]),
                Some("The node had condition: [MemoryPressure]. "),
            ),
            (
                "disk, burstable",
                vec![DiskPressure],
                pod(false, None, vec![]),
                Some("The node had condition: [DiskPressure]. "),
            ),
            (
                "memory and disk, burstable",
                vec![MemoryPressure, DiskPressure],
                pod(false, None, vec![]),
                Some("The node had condition: [MemoryPressure DiskPressure]. "),
            ),
            (
                "pid, burstable",
                vec![PidPressure],
                pod(false, None, vec![]),
                Some("The node had condition: [PIDPressure]. "),
            ),
            (
                "disk, critical",
                vec![DiskPressure],
                pod(false, critical, vec![]),
                None,
            ),
        ];
        for (name, conditions, pod, want) in cases {
            let got = admit_under_pressure(&conditions, &pod);
            match want {
                None => assert!(got.admit, "{name}: {got:?}"),
                Some(msg) => {
                    assert!(!got.admit, "{name}");
                    assert_eq!(got.reason, "Evicted", "{name}");
                    assert_eq!(got.message, msg, "{name}");
                }
            }
        }
    }
}
