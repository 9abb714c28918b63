//! What the fit predicates know about the node (the scheduler's NodeInfo as
//! the kubelet builds it): the Node, the resources its admitted pods request,
//! its allocatable resources and the host ports in use.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::resource_names::is_scalar_resource_name;
use crate::util::quantity;

/// Amounts of resources in the units the fit check compares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    /// Extended, hugepage, prefixed-native and attachable-volume resources.
    pub scalar_resources: BTreeMap<String, i64>,
}

fn value(q: &Quantity) -> Option<quantity::Quantity> {
    // The API server validated these; an unparsable one counts as nothing.
    quantity::parse(&q.0).ok()
}

impl Resource {
    /// The resources of a list (Go's NewResource).
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Self {
        let mut r = Resource::default();
        r.add(list);
        r
    }

    /// Adds every amount of `list`.
    pub fn add(&mut self, list: Option<&BTreeMap<String, Quantity>>) {
        for (name, q) in list.into_iter().flatten() {
            let Some(q) = value(q) else { continue };
            match name.as_str() {
                "cpu" => self.milli_cpu += q.milli_value(),
                "memory" => self.memory += q.value(),
                "pods" => self.allowed_pod_number += q.value(),
                // LocalStorageCapacityIsolation is locked on in v1.25.
                "ephemeral-storage" => self.ephemeral_storage += q.value(),
                other if is_scalar_resource_name(other) => {
                    *self.scalar_resources.entry(other.to_string()).or_default() += q.value();
                }
                _ => {}
            }
        }
    }

    /// Raises every amount to at least the one in `list` (init containers).
    pub fn set_max(&mut self, list: Option<&BTreeMap<String, Quantity>>) {
        for (name, q) in list.into_iter().flatten() {
            let Some(q) = value(q) else { continue };
            match name.as_str() {
                "cpu" => self.milli_cpu = self.milli_cpu.max(q.milli_value()),
                "memory" => self.memory = self.memory.max(q.value()),
                "ephemeral-storage" => {
                    self.ephemeral_storage = self.ephemeral_storage.max(q.value())
                }
                other if is_scalar_resource_name(other) => {
                    let v = self.scalar_resources.entry(other.to_string()).or_default();
                    *v = (*v).max(q.value());
                }
                _ => {}
            }
        }
    }

    fn add_resource(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        for (name, v) in &other.scalar_resources {
            *self.scalar_resources.entry(name.clone()).or_default() += v;
        }
    }
}

/// What a pod asks for: the sum over its containers, at least each init
/// container's request, plus the pod overhead.
pub fn compute_pod_resource_request(pod: &Pod) -> Resource {
    let mut r = Resource::default();
    let Some(spec) = pod.spec.as_ref() else {
        return r;
    };
    for c in &spec.containers {
        r.add(c.resources.as_ref().and_then(|res| res.requests.as_ref()));
    }
    for c in spec.init_containers.iter().flatten() {
        r.set_max(c.resources.as_ref().and_then(|res| res.requests.as_ref()));
    }
    r.add(spec.overhead.as_ref());
    r
}

/// Host ports in use: host IP → (protocol, port). An empty IP means every
/// address (0.0.0.0), an empty protocol TCP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPortInfo(HashMap<String, HashSet<(String, i32)>>);

const BIND_ALL: &str = "0.0.0.0";

fn sanitize(ip: &str, protocol: &str) -> (String, String) {
    let ip = if ip.is_empty() { BIND_ALL } else { ip };
    let protocol = if protocol.is_empty() { "TCP" } else { protocol };
    (ip.to_string(), protocol.to_string())
}

impl HostPortInfo {
    /// Records a port; ports ≤ 0 (no host port) are ignored.
    pub fn add(&mut self, ip: &str, protocol: &str, port: i32) {
        if port <= 0 {
            return;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        self.0.entry(ip).or_default().insert((protocol, port));
    }

    /// Whether (ip, protocol, port) collides with a recorded port: 0.0.0.0
    /// collides with the port on any address, any address with 0.0.0.0.
    pub fn check_conflict(&self, ip: &str, protocol: &str, port: i32) -> bool {
        if port <= 0 {
            return false;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        let key = (protocol, port);
        if ip == BIND_ALL {
            return self.0.values().any(|set| set.contains(&key));
        }
        [BIND_ALL, ip.as_str()]
            .iter()
            .any(|k| self.0.get(*k).is_some_and(|set| set.contains(&key)))
    }

    /// Number of recorded (ip, protocol, port) entries.
    pub fn len(&self) -> usize {
        self.0.values().map(HashSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The node as the predicates see it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node: Node,
    /// How many pods are already on the node.
    pub pod_count: usize,
    /// The sum of what those pods request.
    pub requested: Resource,
    /// The node's allocatable resources.
    pub allocatable: Resource,
    /// The host ports those pods hold.
    pub used_ports: HostPortInfo,
}

impl NodeInfo {
    /// The node with `pods` on it.
    pub fn new(node: Node, pods: &[Arc<Pod>]) -> Self {
        let allocatable =
            Resource::from_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        let mut info = NodeInfo {
            node,
            pod_count: 0,
            requested: Resource::default(),
            allocatable,
            used_ports: HostPortInfo::default(),
        };
        for pod in pods {
            info.add_pod(pod);
        }
        info
    }

    fn add_pod(&mut self, pod: &Pod) {
        self.requested
            .add_resource(&compute_pod_resource_request(pod));
        self.pod_count += 1;
        for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
            for p in c.ports.iter().flatten() {
                self.used_ports.add(
                    p.host_ip.as_deref().unwrap_or(""),
                    p.protocol.as_deref().unwrap_or(""),
                    p.host_port.unwrap_or(0),
                );
            }
        }
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn pod_request_sums_containers_maxes_init_and_adds_overhead() {
        let p = pod(json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi", "example.com/gpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "0.2", "ephemeral-storage": "1Gi"}}},
            ],
            "initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Mi", "example.com/gpu": "2"}}},
            ],
            "overhead": {"cpu": "10m", "memory": "1Ki"},
        }));
        let r = compute_pod_resource_request(&p);
        assert_eq!(r.milli_cpu, 510);
        assert_eq!(r.memory, 64 * 1024 * 1024 + 1024);
        assert_eq!(r.ephemeral_storage, 1 << 30);
        assert_eq!(r.scalar_resources["example.com/gpu"], 2);
        assert_eq!(r.allowed_pod_number, 0);
    }

    #[test]
    fn host_port_conflicts() {
        let mut h = HostPortInfo::default();
        h.add("", "", 80);
        h.add("10.0.0.1", "UDP", 53);
        h.add("", "TCP", 0);
        assert_eq!(h.len(), 2);
        // (ip, protocol, port, conflict)
        let cases = [
            ("", "TCP", 80, true),
            ("10.0.0.2", "TCP", 80, true),
            ("0.0.0.0", "UDP", 80, false),
            ("0.0.0.0", "UDP", 53, true),
            ("10.0.0.1", "UDP", 53, true),
            ("10.0.0.2", "UDP", 53, false),
            ("", "TCP", 0, false),
        ];
        for (ip, proto, port, want) in cases {
            assert_eq!(
                h.check_conflict(ip, proto, port),
                want,
                "{ip} {proto} {port}"
            );
        }
    }
}
