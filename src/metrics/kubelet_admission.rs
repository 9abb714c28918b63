//! The kubelet's families about taking resources back and handing them
//! out: evictions and the age of the stats behind them, preemptions for
//! critical pods, and the pod-resources API's request counts.

use std::sync::{Arc, OnceLock};

use super::kubelet::{counter, histogram};
use super::vec::{CounterVec, Desc, HistogramVec, Stability, default_buckets};

fn alpha_counter(
    cell: &'static OnceLock<Arc<CounterVec>>,
    name: &str,
    help: &str,
    label: &str,
) -> &'static CounterVec {
    counter(cell, Desc::new(name, help, &[label], Stability::Alpha))
}

/// `kubelet_evictions{eviction_signal}`.
pub fn evictions() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    alpha_counter(
        &CELL,
        "kubelet_evictions",
        "Pods the kubelet evicted, per eviction signal.",
        "eviction_signal",
    )
}

/// `kubelet_eviction_stats_age_seconds{eviction_signal}` (histogram).
pub fn eviction_stats_age() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_eviction_stats_age_seconds",
            "Seconds between taking the stats an eviction was decided on and the eviction, per eviction signal.",
            &["eviction_signal"],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_preemptions{preemption_signal}`.
pub fn preemptions() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    alpha_counter(
        &CELL,
        "kubelet_preemptions",
        "Pods the kubelet preempted for critical pods, per resource that was short.",
        "preemption_signal",
    )
}

/// The pod-resources API's counters, each per `server_api_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodResourcesCount {
    /// Every request.
    Requests,
    /// List requests.
    List,
    /// GetAllocatableResources requests.
    GetAllocatable,
    /// List requests that failed.
    ListErrors,
    /// GetAllocatableResources requests that failed.
    GetAllocatableErrors,
}

/// Counts one request of `kind` to the pod-resources API version `version`.
pub fn pod_resources_inc(kind: PodResourcesCount, version: &str) {
    static CELLS: [OnceLock<Arc<CounterVec>>; 5] = [const { OnceLock::new() }; 5];
    let (i, name, help) = match kind {
        PodResourcesCount::Requests => (
            0,
            "kubelet_pod_resources_endpoint_requests_total",
            "Requests to the pod-resources API, per API version.",
        ),
        PodResourcesCount::List => (
            1,
            "kubelet_pod_resources_endpoint_requests_list",
            "List requests to the pod-resources API, per API version.",
        ),
        PodResourcesCount::GetAllocatable => (
            2,
            "kubelet_pod_resources_endpoint_requests_get_allocatable",
            "GetAllocatableResources requests to the pod-resources API, per API version.",
        ),
        PodResourcesCount::ListErrors => (
            3,
            "kubelet_pod_resources_endpoint_errors_list",
            "List requests to the pod-resources API that failed, per API version.",
        ),
        PodResourcesCount::GetAllocatableErrors => (
            4,
            "kubelet_pod_resources_endpoint_errors_get_allocatable",
            "GetAllocatableResources requests to the pod-resources API that failed, per API version.",
        ),
    };
    alpha_counter(&CELLS[i], name, help, "server_api_version").inc(&[version]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_go_names_and_labels() {
        evictions().inc(&["memory.available"]);
        eviction_stats_age().observe(&["memory.available"], 0.5);
        preemptions().inc(&["cpu"]);
        pod_resources_inc(PodResourcesCount::Requests, "v1");
        pod_resources_inc(PodResourcesCount::GetAllocatableErrors, "v1");
        let text = super::super::render_text();
        for want in [
            "kubelet_evictions{eviction_signal=\"memory.available\"} ",
            "kubelet_eviction_stats_age_seconds_bucket{eviction_signal=\"memory.available\",le=\"0.5\"} ",
            "kubelet_preemptions{preemption_signal=\"cpu\"} ",
            "kubelet_pod_resources_endpoint_requests_total{server_api_version=\"v1\"} ",
            "kubelet_pod_resources_endpoint_errors_get_allocatable{server_api_version=\"v1\"} ",
            "# TYPE kubelet_evictions counter",
            "# HELP kubelet_preemptions [ALPHA] ",
        ] {
            assert!(text.contains(want), "{want} missing");
        }
    }
}
