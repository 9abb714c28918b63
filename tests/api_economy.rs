//! API economy (issue 15): 30 pause pods bound to one node at once, with
//! the v1.25 client limits (kubeAPIQPS 5, burst 10; events 5/10), the
//! default syncFrequency and no clusterDNS, cost each pod at most two
//! status PATCHes (Pending, Running), no GET the cached API copy could
//! answer, no PATCH that leaves the status as it was, and no more event
//! writes than the Go kubelet makes (Pulled, Created, Started, plus the
//! pod's own MissingClusterDNS warning); the node-level MissingClusterDNS
//! warning lands on the Node. Every pod ends Running and ready in the API.
//!
//! Counts come from the API server double's request log; against a real
//! kube-apiserver (KUBELET_RS_TEST_KUBECONFIG) only the outcome is checked.

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

#[path = "api_economy/density.rs"]
mod density;
#[path = "api_economy/rig.rs"]
#[allow(dead_code)]
mod rig;

use std::time::Duration;

use harness::Ports;
use rig::{NodeRig, Settings, run_batch, running_and_ready};

const PODS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_pause_pods_cost_few_api_writes() {
    let settings = Settings::defaults(Ports {
        main: 22320,
        read_only: 22321,
        healthz: 22322,
    });
    let Some(node) = NodeRig::start("api_economy", &settings).await else {
        return;
    };
    let batch = run_batch(&node, PODS, "pause", Duration::from_secs(3)).await;
    eprintln!(
        "{PODS} pods Running and ready in {:?} (p50 {:?}, p99 {:?})",
        batch.wall,
        rig::percentile(&batch.latencies, 50.0),
        rig::percentile(&batch.latencies, 99.0)
    );

    // Nothing lost: each pod's final status is in the API.
    for name in &batch.names {
        let pod = node
            .api
            .get::<k8s_openapi::api::core::v1::Pod>(Some(&node.ns), name)
            .await
            .expect("pod");
        assert!(running_and_ready(&pod), "{name}: {:?}", pod.status);
    }

    let Some(counts) = rig::count_requests(&node).await else {
        eprintln!("NOTE: request counts need the API server double; skipped");
        node.stop().await;
        return;
    };
    eprintln!("requests by verb and resource: {:#?}", counts.by_verb);
    let mut failures = Vec::new();
    for name in &batch.names {
        let patches = counts.pod(name, "PATCH", "pods/status");
        let gets = counts.pod(name, "GET", "pods");
        let changes = batch.changes.get(name).copied().unwrap_or(0);
        let events = counts.events_on("Pod", name);
        let other_events: usize = events
            .iter()
            .filter(|(r, _)| *r != "MissingClusterDNS")
            .map(|(_, n)| n)
            .sum();
        let dns_events = events.get("MissingClusterDNS").copied().unwrap_or(0);
        if patches > 2 {
            failures.push(format!("{name}: {patches} status PATCHes"));
        }
        if patches > changes {
            failures.push(format!(
                "{name}: {patches} status PATCHes but {changes} changes: a PATCH changed nothing"
            ));
        }
        // The watch's copy of the pod answers what a GET would.
        if gets > 0 {
            failures.push(format!("{name}: {gets} GETs for {patches} PATCHes"));
        }
        // Go: Pulled, Created, Started (one write each).
        if other_events > 3 {
            failures.push(format!("{name}: event writes {events:?}"));
        }
        // Go records the pod's own MissingClusterDNS warning on the pod
        // each time it builds the sandbox config: at sandbox creation and
        // in every SyncPod (the create sync and one per PLEG event of the
        // sandbox and the container): one POST, then PATCHes of its count.
        if dns_events > 4 {
            failures.push(format!("{name}: MissingClusterDNS writes {dns_events}"));
        }
    }
    // The node-level warning is on the Node, bounded by the spam filter
    // (25 events per object, then one per 5 minutes).
    let on_node = counts.events_on("Node", &node.node);
    let node_dns = on_node.get("MissingClusterDNS").copied().unwrap_or(0);
    eprintln!("event writes on the Node: {on_node:?}");
    if node_dns == 0 || node_dns > 25 {
        failures.push(format!("Node MissingClusterDNS writes: {node_dns}"));
    }
    let total_status: usize = batch
        .names
        .iter()
        .map(|n| counts.pod(n, "PATCH", "pods/status"))
        .sum();
    let total_gets: usize = batch
        .names
        .iter()
        .map(|n| counts.pod(n, "GET", "pods"))
        .sum();
    let event_writes: usize = counts.event_writes.values().map(|(a, b)| a + b).sum();
    eprintln!(
        "per pod: {:.2} status PATCH, {:.2} GET pod, {:.2} event writes (all objects)",
        total_status as f64 / PODS as f64,
        total_gets as f64 / PODS as f64,
        event_writes as f64 / PODS as f64
    );
    assert!(failures.is_empty(), "{failures:#?}");
    node.stop().await;
}

/// The density figures of bench/density.sh (prints only; settings from the
/// environment, see `density`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: bench/density.sh runs it"]
async fn density() {
    density::run().await;
}
