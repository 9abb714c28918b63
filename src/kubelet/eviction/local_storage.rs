//! Local storage capacity isolation: a pod whose emptyDir outgrows its
//! sizeLimit, whose local ephemeral storage outgrows the sum of its
//! containers' limits, or one of whose containers outgrows its own
//! ephemeral-storage limit is evicted at once (grace period 0).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::manager::EvictionManager;
use super::message::{
    container_ephemeral_storage_message, empty_dir_message, pod_ephemeral_storage_message,
};
use super::signals::PodStatsIndex;
use crate::cm::helpers::{container_resources, pod_requests_and_limits};
use crate::kubelet::stats::PodStats;
use crate::util::quantity::Quantity;

const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// Evicts every active pod past a local storage limit; returns them.
pub(super) async fn local_storage_eviction(
    manager: &EvictionManager,
    pods: &[Arc<Pod>],
    stats: &PodStatsIndex,
    dedicated_image_fs: bool,
) -> Vec<Arc<Pod>> {
    let mut evicted = Vec::new();
    for pod in pods {
        let Some(pod_stats) = stats.get(pod) else {
            continue;
        };
        if let Some(message) = local_storage_violation(pod, pod_stats, dedicated_image_fs)
            && manager.evict_pod(pod, 0, message).await
        {
            evicted.push(pod.clone());
        }
    }
    evicted
}

/// The eviction message for the first local storage limit `pod` exceeds:
/// emptyDir size limits, then the pod limit, then container limits.
pub fn local_storage_violation(
    pod: &Pod,
    stats: &PodStats,
    dedicated_image_fs: bool,
) -> Option<String> {
    empty_dir_violation(pod, stats)
        .or_else(|| pod_limit_violation(pod, stats))
        .or_else(|| container_limit_violation(pod, stats, dedicated_image_fs))
}

fn empty_dir_violation(pod: &Pod, stats: &PodStats) -> Option<String> {
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(limit) = v
            .empty_dir
            .as_ref()
            .and_then(|e| e.size_limit.as_ref())
            .and_then(|q| q.0.parse::<Quantity>().ok())
        else {
            continue;
        };
        let Some(used) = stats
            .volume_stats
            .iter()
            .find(|s| s.name == v.name)
            .and_then(|s| s.fs.used_bytes)
        else {
            continue;
        };
        if limit.cmp_value(&Quantity::from_decimal(0)).is_gt()
            && Quantity::from_binary(used as i64).cmp_value(&limit).is_gt()
        {
            return Some(empty_dir_message(&v.name, &limit));
        }
    }
    None
}

fn pod_limit_violation(pod: &Pod, stats: &PodStats) -> Option<String> {
    let (_, limits) = pod_requests_and_limits(pod);
    let limit = limits.get(EPHEMERAL_STORAGE)?;
    let used = stats
        .ephemeral_storage
        .as_ref()
        .and_then(|e| e.used_bytes)
        .unwrap_or(0);
    Quantity::from_binary(used as i64)
        .cmp_value(limit)
        .is_gt()
        .then(|| pod_ephemeral_storage_message(limit))
}

fn container_limit_violation(
    pod: &Pod,
    stats: &PodStats,
    dedicated_image_fs: bool,
) -> Option<String> {
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    let limits: Vec<(String, Quantity)> = containers
        .filter_map(|c| {
            let (_, l) = container_resources(c);
            let q = *l.get(EPHEMERAL_STORAGE)?;
            (q.value() != 0).then(|| (c.name.clone(), q))
        })
        .collect();
    for cs in &stats.containers {
        let mut used = cs.logs.as_ref().and_then(|f| f.used_bytes).unwrap_or(0);
        if !dedicated_image_fs {
            used += cs.rootfs.as_ref().and_then(|f| f.used_bytes).unwrap_or(0);
        }
        if let Some((_, limit)) = limits.iter().find(|(n, _)| *n == cs.name)
            && limit.cmp_value(&Quantity::from_binary(used as i64)).is_lt()
        {
            return Some(container_ephemeral_storage_message(&cs.name, limit));
        }
    }
    None
}
