//! The reason and messages the eviction manager writes into pod status and
//! events, worded as the Go kubelet of the v1.25 line words them.

use k8s_openapi::api::core::v1::Pod;

use super::evaluate::{NodeConditionType, format_conditions};
use super::signals::PodStatsIndex;
use crate::cm::helpers::resource_list;
use crate::util::quantity::Quantity;

/// The reason of an evicted pod's status and of the eviction event.
pub const REASON: &str = "Evicted";
/// The reason of the node event recorded when a threshold is acted on.
pub const THRESHOLD_MET_REASON: &str = "EvictionThresholdMet";

/// "The node was low on resource: R. " and, for memory and
/// ephemeral-storage, one sentence per container using more than it
/// requests.
pub fn eviction_message(resource: &str, pod: &Pod, stats: &PodStatsIndex) -> String {
    let mut message = format!("The node was low on resource: {resource}. ");
    let Some(pod_stats) = stats.get(pod) else {
        return message;
    };
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    let containers: Vec<_> = containers.collect();
    for cs in &pod_stats.containers {
        let Some(container) = containers.iter().find(|c| c.name == cs.name) else {
            continue;
        };
        let requests = resource_list(
            container
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref()),
        );
        let request = requests
            .get(resource)
            .copied()
            .unwrap_or_else(|| Quantity::from_decimal(0));
        let usage = match resource {
            "ephemeral-storage" => match (
                cs.rootfs.as_ref().and_then(|f| f.used_bytes),
                cs.logs.as_ref().and_then(|f| f.used_bytes),
            ) {
                (Some(r), Some(l)) => Some(Quantity::from_binary((r + l) as i64)),
                _ => None,
            },
            "memory" => cs
                .memory
                .as_ref()
                .and_then(|m| m.working_set_bytes)
                .map(|w| Quantity::from_binary(w as i64)),
            _ => None,
        };
        if let Some(usage) = usage
            && usage.cmp_value(&request).is_gt()
        {
            message.push_str(&format!(
                "Container {} was using {usage}, which exceeds its request of {request}. ",
                container.name
            ));
        }
    }
    message
}

/// The admission refusal: "The node had condition: [C]. ".
pub fn node_condition_message(conditions: &[NodeConditionType]) -> String {
    format!(
        "The node had condition: {}. ",
        format_conditions(conditions)
    )
}

/// An emptyDir past its sizeLimit.
pub fn empty_dir_message(volume: &str, limit: &Quantity) -> String {
    format!("Usage of EmptyDir volume \"{volume}\" exceeds the limit \"{limit}\". ")
}

/// A container past its ephemeral-storage limit.
pub fn container_ephemeral_storage_message(container: &str, limit: &Quantity) -> String {
    format!("Container {container} exceeded its local ephemeral storage limit \"{limit}\". ")
}

/// A pod past the sum of its containers' ephemeral-storage limits.
pub fn pod_ephemeral_storage_message(limit: &Quantity) -> String {
    format!("Pod ephemeral local storage usage exceeds the total limit of containers {limit}. ")
}
