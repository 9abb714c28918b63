//! Issue 7 end to end through the kubelet: what a pod spec asks beyond
//! starting containers (probes, volumes, environment, DNS and hosts), on
//! real containers run by a whole kubelet (the library start path) over a
//! private containerd. One kubelet runs every case at the same time (they
//! use pods of their own and do not interfere); everything is removed on
//! the way out.

#[path = "e2e_pod_spec/dns_hosts.rs"]
mod dns_hosts;
#[path = "e2e_pod_spec/env.rs"]
mod env;
#[allow(dead_code)]
#[path = "e2e/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "e2e_pod_spec/node.rs"]
mod node;
#[path = "e2e_pod_spec/probes.rs"]
mod probes;
mod support;
#[path = "e2e_pod_spec/volumes.rs"]
mod volumes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_spec_through_the_kubelet() {
    let Some(node) = node::Node::start("e2e7_pod_spec", 21400, "").await else {
        return;
    };
    tokio::join!(
        probes::probes(&node),
        volumes::volumes(&node),
        env::env(&node),
        dns_hosts::dns_and_hosts(&node),
    );
    node.stop().await;
}
