//! Helpers shared by the api_pods tests.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet::kubelet::config::{ApiserverSource, PodConfig, PodUpdates};
use kubelet::kubelet::types::{PodOperation, PodUpdate};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use serde_json::{Value, json};

/// How long a test waits for something the kubelet side should do.
pub const WAIT: Duration = Duration::from_secs(20);

/// A pod in `ns` bound to `node`, with extra spec fields merged in.
pub fn bound_pod(ns: &str, name: &str, node: &str, spec: Value) -> Pod {
    let mut base = json!({
        "nodeName": node,
        "containers": [{"name": "c", "image": "kubelet-rs.local/busybox:1.35", "command": ["sleep", "3600"]}],
    });
    if let (Some(b), Some(s)) = (base.as_object_mut(), spec.as_object()) {
        for (k, v) in s {
            b.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": base,
    }))
    .unwrap()
}

/// A running "api" source for `node` over `client`, with its update stream.
pub fn start_api_source(client: kube::Client, node: &str) -> (PodConfig, PodUpdates, TaskSet) {
    let (config, updates) = PodConfig::new(Arc::new(RealClock));
    config.add_source(Box::new(ApiserverSource::new(
        client,
        node,
        Arc::new(|| true),
    )));
    let tasks = TaskSet::new();
    config.start(&tasks);
    (config, updates, tasks)
}

/// The next update from the pod config.
pub async fn next_update(updates: &mut PodUpdates) -> PodUpdate {
    next_update_within(updates, WAIT).await
}

/// The next update from the pod config within `wait`.
pub async fn next_update_within(updates: &mut PodUpdates, wait: Duration) -> PodUpdate {
    tokio::time::timeout(wait, updates.recv())
        .await
        .expect("a pod update in time")
        .expect("the update stream is open")
}

/// `(op, [pod names])` of an update.
pub fn summary(u: &PodUpdate) -> (PodOperation, Vec<String>) {
    let mut names: Vec<String> = u
        .pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    (u.op, names)
}

/// Waits for an update of kind `op` naming `name`, returning it; every
/// update seen before it is returned too.
pub async fn wait_op(
    updates: &mut PodUpdates,
    op: PodOperation,
    name: &str,
) -> (PodUpdate, Vec<(PodOperation, Vec<String>)>) {
    wait_op_within(updates, op, name, WAIT).await
}

/// [`wait_op`] with each update allowed `wait` (after an outage the watch
/// comes back on its reconnect back-off, which grows to 30 s as Go's
/// reflector's).
pub async fn wait_op_within(
    updates: &mut PodUpdates,
    op: PodOperation,
    name: &str,
    wait: Duration,
) -> (PodUpdate, Vec<(PodOperation, Vec<String>)>) {
    let mut before = Vec::new();
    loop {
        let u = next_update_within(updates, wait).await;
        let s = summary(&u);
        if s.0 == op && s.1.iter().any(|n| n == name) {
            return (u, before);
        }
        before.push(s);
    }
}
