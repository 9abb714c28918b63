//! Issue 7 end to end through the kubelet: what a pod spec asks beyond
//! starting containers (probes, volumes, environment, DNS and hosts), on
//! real containers run by a whole kubelet (the library start path) over a
//! private containerd. Each test starts one kubelet and runs its cases on
//! it at the same time; everything is removed on the way out.

#[allow(dead_code)]
#[path = "e2e/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "e2e_pod_spec/node.rs"]
mod node;
#[path = "e2e_pod_spec/probes.rs"]
mod probes;
mod support;
