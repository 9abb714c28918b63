//! What the kubelet knows of its node before (or without) a registered
//! Node: the node admission sees, the pods' host IPs, DNS, and the
//! allocatable resources.

use std::net::IpAddr;
use std::sync::Arc;

use super::adapters::{NodeResources, allocatable};
use super::api::{self, ApiObjects};
use crate::apis::config::server::KubeletServer;
use crate::cm::ContainerManager;
use crate::features;
use crate::kubelet::network::dns::DnsConfigurer;
use crate::kubelet::sync_loop::fit::{AdmissionNode, NodeFn};

/// The allocatable resources as the container manager first reports them
/// (updated once the container manager starts).
pub async fn resources(server: &KubeletServer, cm: &dyn ContainerManager) -> Arc<NodeResources> {
    let c = &server.config;
    let resources = Arc::new(NodeResources::default());
    let capacity = cm.get_capacity(c.local_storage_capacity_isolation).await;
    resources.set(allocatable(
        &capacity,
        &cm.get_node_allocatable_reservation(),
        i64::from(c.max_pods),
    ));
    resources
}

/// The node as admission sees it in standalone mode (Go's initialNode):
/// its name, hostname/OS/arch labels with `--node-labels`, the taints to
/// register with, and its allocatable resources (with the device plugins'
/// extended resources).
pub fn admission_node(
    env: &super::Env,
    resources: Arc<NodeResources>,
    api: Option<&ApiObjects>,
) -> NodeFn {
    let (server, node_name, hostname) = (&env.server, &env.node_name, &env.hostname);
    let api_node = api.map(|a| a.node.getter());
    let mut labels = server.flags.node_labels.clone();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let os = std::env::consts::OS;
    for (k, v) in [
        ("kubernetes.io/hostname", hostname.as_str()),
        ("kubernetes.io/os", os),
        ("kubernetes.io/arch", arch),
        ("beta.kubernetes.io/os", os),
        ("beta.kubernetes.io/arch", arch),
    ] {
        labels.insert(k.to_string(), v.to_string());
    }
    let taints = server.config.register_with_taints.clone();
    let name = node_name.to_string();
    let cm = env.container_manager.clone();
    // The device plugins' resources (Go's node status has them, and its
    // admission raises them to what is allocated).
    let allocatable = move || {
        let mut a = resources.get();
        a.extend(cm.device_plugin_admission_allocatable());
        a
    };
    Arc::new(move || {
        // The registered Node's labels and taints once it is known (Go's
        // getNodeAnyWay), the initial node's before.
        let known = api_node.as_ref().and_then(|g| g.get_node_any_way().ok());
        match known {
            Some(node) => AdmissionNode {
                name: name.clone(),
                labels: node.metadata.labels.clone().unwrap_or_default(),
                taints: node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default(),
                allocatable: allocatable(),
            },
            None => AdmissionNode {
                name: name.clone(),
                labels: labels.clone(),
                taints: taints.clone(),
                allocatable: allocatable(),
            },
        }
    })
}

/// Where the pods' host IPs come from.
pub async fn host_ips(api: Option<&ApiObjects>, env: &super::Env) -> NodeIps {
    match api {
        Some(a) => NodeIps::Api(a.node.host_ips()),
        None => {
            NodeIps::Local(local_node_host_ips(&env.node_ips, &env.hostname, &env.node_name).await)
        }
    }
}

/// The host IPs of the Node the kubelet would register (standalone mode).
async fn local_node_host_ips(node_ips: &[IpAddr], hostname: &str, node_name: &str) -> Vec<String> {
    use k8s_openapi::api::core::v1::{Node, NodeStatus};
    let cfg = crate::kubelet::nodestatus::AddressConfig {
        node_ips: node_ips.to_vec(),
        hostname: hostname.to_string(),
        ..Default::default()
    };
    match crate::kubelet::nodestatus::node_addresses(&cfg, node_name).await {
        Ok(addresses) => {
            let node = Node {
                status: Some(NodeStatus {
                    addresses: Some(addresses),
                    ..Default::default()
                }),
                ..Default::default()
            };
            api::node_host_ips(&node)
                .iter()
                .map(ToString::to_string)
                .collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, "Could not determine the node's addresses for status.hostIP");
            Vec::new()
        }
    }
}

/// Where pods' host IPs come from: the registered Node, or (standalone) the
/// Node the kubelet would register (Go's initial node).
pub enum NodeIps {
    Api(Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>),
    Local(Vec<String>),
}

impl NodeIps {
    pub fn api(&self) -> Option<Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>> {
        match self {
            NodeIps::Api(f) => Some(f.clone()),
            NodeIps::Local(_) => None,
        }
    }

    pub fn strings(&self) -> Arc<dyn Fn() -> Vec<String> + Send + Sync> {
        match self {
            NodeIps::Api(f) => {
                let f = f.clone();
                Arc::new(move || f().iter().map(ToString::to_string).collect())
            }
            NodeIps::Local(ips) => {
                let ips = ips.clone();
                Arc::new(move || ips.clone())
            }
        }
    }
}

pub fn dns_configurer(server: &KubeletServer, node_ips: &[IpAddr]) -> DnsConfigurer {
    let c = &server.config;
    DnsConfigurer {
        cluster_dns: c
            .cluster_dns
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect(),
        cluster_domain: c.cluster_domain.clone(),
        resolver_config: c.resolver_config.clone(),
        node_ips: node_ips.to_vec(),
        expanded_dns_config: server.feature_gate.enabled(features::EXPANDED_DNS_CONFIG),
    }
}
