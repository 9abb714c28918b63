//! The DNS settings a pod sandbox gets, per dnsPolicy:
//!
//! - `ClusterFirst` (off the host network) and `ClusterFirstWithHostNet`: the
//!   cluster DNS servers, `<ns>.svc.<domain> svc.<domain> <domain>` before the
//!   host's search paths, `ndots:5`. Without clusterDNS the pod falls back to
//!   `Default` with a `MissingClusterDNS` warning.
//! - `Default` (and `ClusterFirst` on the host network): the host's
//!   resolv.conf; with `--resolv-conf=""`, loopback nameservers and search `.`.
//! - `None`: nothing but the pod's dnsConfig.
//!
//! The pod's dnsConfig is then merged in (duplicates dropped, options by
//! name), and the result trimmed to the resolver limits with a
//! `DNSConfigForming` warning when something had to go.

use std::net::IpAddr;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfig};

use super::resolv::{DnsError, read_resolv_conf};
use crate::cri::api::DnsConfig;
use crate::kubelet::container::helpers::is_host_network_pod;
use crate::kubelet::container::refs::format_pod;
use crate::kubelet::container::validation::DNS1123_SUBDOMAIN_MAX_LENGTH;

/// Most nameservers a resolver uses.
pub const MAX_DNS_NAMESERVERS: usize = 3;
/// Search path limits without the ExpandedDNSConfig feature (v1.25 default).
pub const MAX_DNS_SEARCH_PATHS_LEGACY: usize = 6;
pub const MAX_DNS_SEARCH_LIST_CHARS_LEGACY: usize = 256;
/// Search path limits with ExpandedDNSConfig.
pub const MAX_DNS_SEARCH_PATHS_EXPANDED: usize = 32;
pub const MAX_DNS_SEARCH_LIST_CHARS_EXPANDED: usize = 2048;
/// The options cluster-first pods get.
pub const DEFAULT_DNS_OPTIONS: &[&str] = &["ndots:5"];

/// Event reasons.
pub const REASON_DNS_CONFIG_FORMING: &str = "DNSConfigForming";
pub const REASON_MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";
pub const REASON_CHECK_LIMITS_FOR_RESOLV_CONF: &str = "CheckLimitsForResolvConf";

/// What a warning event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTarget {
    Pod,
    Node,
}

/// A warning event for the caller to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    pub target: EventTarget,
    pub reason: &'static str,
    pub message: String,
}

/// A pod's DNS config and the warnings forming it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDns {
    pub config: DnsConfig,
    pub events: Vec<DnsEvent>,
}

/// The node's DNS settings (clusterDNS, clusterDomain, resolvConf).
#[derive(Debug, Clone, Default)]
pub struct DnsConfigurer {
    /// `clusterDNS`.
    pub cluster_dns: Vec<IpAddr>,
    /// `clusterDomain` ("" when unset).
    pub cluster_domain: String,
    /// `resolvConf` path ("" disables host DNS).
    pub resolver_config: String,
    /// The node's IPs (for the loopback choice without a resolv.conf).
    pub node_ips: Vec<IpAddr>,
    /// The ExpandedDNSConfig feature gate (off by default in v1.25).
    pub expanded_dns_config: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodDnsType {
    Cluster,
    Host,
    None,
}

fn omit_duplicates(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect()
}

/// A dnsPolicy the kubelet does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid DNSPolicy={0}")]
pub struct DnsPolicyError(pub String);

fn pod_dns_type(pod: &Pod) -> Result<PodDnsType, DnsPolicyError> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("");
    match policy {
        "None" => Ok(PodDnsType::None),
        "ClusterFirstWithHostNet" => Ok(PodDnsType::Cluster),
        "ClusterFirst" if !is_host_network_pod(pod) => Ok(PodDnsType::Cluster),
        "ClusterFirst" | "Default" => Ok(PodDnsType::Host),
        other => Err(DnsPolicyError(other.to_string())),
    }
}

/// Merges options by name; the pod's options override the existing ones.
fn merge_dns_options(existing: &[String], pod: &PodDNSConfig) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| match merged.iter_mut().find(|(n, _)| n == name) {
        Some(e) => e.1 = value.to_string(),
        None => merged.push((name.to_string(), value.to_string())),
    };
    for op in existing {
        match op.split_once(':') {
            Some((n, v)) => set(n, v),
            None => set(op, ""),
        }
    }
    for op in pod.options.iter().flatten() {
        set(
            op.name.as_deref().unwrap_or(""),
            op.value.as_deref().unwrap_or(""),
        );
    }
    merged
        .into_iter()
        .map(|(n, v)| if v.is_empty() { n } else { format!("{n}:{v}") })
        .collect()
}

fn append_dns_config(mut existing: DnsConfig, pod: &PodDNSConfig) -> DnsConfig {
    existing
        .servers
        .extend(pod.nameservers.iter().flatten().cloned());
    existing.servers = omit_duplicates(existing.servers);
    existing
        .searches
        .extend(pod.searches.iter().flatten().cloned());
    existing.searches = omit_duplicates(existing.searches);
    existing.options = merge_dns_options(&existing.options, pod);
    existing
}

impl DnsConfigurer {
    fn search_limits(&self) -> (usize, usize) {
        if self.expanded_dns_config {
            (
                MAX_DNS_SEARCH_PATHS_EXPANDED,
                MAX_DNS_SEARCH_LIST_CHARS_EXPANDED,
            )
        } else {
            (
                MAX_DNS_SEARCH_PATHS_LEGACY,
                MAX_DNS_SEARCH_LIST_CHARS_LEGACY,
            )
        }
    }

    /// The host's DNS settings from `resolver_config` (empty when unset).
    /// Blocking: call from `spawn_blocking`.
    pub fn host_dns_config(&self) -> Result<DnsConfig, DnsError> {
        if self.resolver_config.is_empty() {
            return Ok(DnsConfig::default());
        }
        let rc = read_resolv_conf(Path::new(&self.resolver_config))?;
        Ok(DnsConfig {
            servers: rc.nameservers,
            searches: rc.searches,
            options: rc.options,
        })
    }

    fn searches_for_cluster_first(&self, host: Vec<String>, pod: &Pod) -> Vec<String> {
        if self.cluster_domain.is_empty() {
            return host;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let domain = &self.cluster_domain;
        let mut all = vec![
            format!("{ns}.svc.{domain}"),
            format!("svc.{domain}"),
            domain.clone(),
        ];
        all.extend(host);
        omit_duplicates(all)
    }

    fn fit_searches(&self, searches: Vec<String>, events: &mut Vec<DnsEvent>) -> Vec<String> {
        let (max_paths, max_chars) = self.search_limits();
        let mut exceeded = false;
        let mut searches = searches;
        if searches.len() > max_paths {
            searches.truncate(max_paths);
            exceeded = true;
        }
        let before = searches.len();
        searches.retain(|s| s.len() <= DNS1123_SUBDOMAIN_MAX_LENGTH);
        if searches.len() != before {
            exceeded = true;
        }
        let line_len = searches.join(" ").len();
        if line_len > max_chars {
            let mut cut_len = 0;
            let mut cut_num = 0;
            for s in searches.iter().rev() {
                cut_len += s.len() + 1;
                cut_num += 1;
                if line_len.saturating_sub(cut_len) <= max_chars {
                    break;
                }
            }
            searches.truncate(searches.len() - cut_num);
            exceeded = true;
        }
        if exceeded {
            let message = format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                searches.join(" ")
            );
            tracing::error!(%message, "search line limits exceeded");
            events.push(DnsEvent {
                target: EventTarget::Pod,
                reason: REASON_DNS_CONFIG_FORMING,
                message,
            });
        }
        searches
    }

    fn fit_nameservers(&self, mut servers: Vec<String>, events: &mut Vec<DnsEvent>) -> Vec<String> {
        if servers.len() > MAX_DNS_NAMESERVERS {
            servers.truncate(MAX_DNS_NAMESERVERS);
            let message = format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                servers.join(" ")
            );
            tracing::error!(%message, "nameserver limits exceeded");
            events.push(DnsEvent {
                target: EventTarget::Pod,
                reason: REASON_DNS_CONFIG_FORMING,
                message,
            });
        }
        servers
    }

    /// The DNS config for `pod`, given the host's settings (from
    /// [`Self::host_dns_config`]).
    pub fn pod_dns(&self, pod: &Pod, host: &DnsConfig) -> PodDns {
        let mut events = Vec::new();
        let mut config = host.clone();
        let dns_type = pod_dns_type(pod).unwrap_or_else(|e| {
            tracing::error!(pod = %format_pod(pod), error = %e,
                "failed to get DNS type for pod, falling back to ClusterFirst");
            PodDnsType::Cluster
        });
        let mut use_host = dns_type == PodDnsType::Host;
        match dns_type {
            PodDnsType::None => config = DnsConfig::default(),
            PodDnsType::Cluster if !self.cluster_dns.is_empty() => {
                config.servers = self.cluster_dns.iter().map(|ip| ip.to_string()).collect();
                config.searches = self.searches_for_cluster_first(config.searches, pod);
                config.options = DEFAULT_DNS_OPTIONS.iter().map(|s| s.to_string()).collect();
            }
            PodDnsType::Cluster => {
                let node_msg = "kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";
                events.push(DnsEvent {
                    target: EventTarget::Node,
                    reason: REASON_MISSING_CLUSTER_DNS,
                    message: node_msg.to_string(),
                });
                events.push(DnsEvent {
                    target: EventTarget::Pod,
                    reason: REASON_MISSING_CLUSTER_DNS,
                    message: format!("pod: \"{}\". {node_msg}", format_pod(pod)),
                });
                use_host = true;
            }
            PodDnsType::Host => {}
        }
        if use_host && self.resolver_config.is_empty() {
            for ip in &self.node_ips {
                let v6 = matches!(ip, IpAddr::V6(v) if v.to_ipv4_mapped().is_none());
                config
                    .servers
                    .push(if v6 { "::1" } else { "127.0.0.1" }.to_string());
            }
            if config.servers.is_empty() {
                config.servers.push("127.0.0.1".to_string());
            }
            config.searches = vec![".".to_string()];
        }
        if let Some(pod_cfg) = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref()) {
            config = append_dns_config(config, pod_cfg);
        }
        config.servers = self.fit_nameservers(config.servers, &mut events);
        config.searches = self.fit_searches(config.searches, &mut events);
        PodDns { config, events }
    }

    /// Warns (as a node event) when the host's search line leaves no room for
    /// the cluster search paths or breaks the resolver limits.
    pub fn check_limits_for_resolv_conf(&self, host_searches: &[String]) -> Option<DnsEvent> {
        let (mut count_limit, max_chars) = self.search_limits();
        if !self.cluster_domain.is_empty() {
            count_limit -= 3;
        }
        let file = &self.resolver_config;
        let message = if host_searches.len() > count_limit {
            format!(
                "Resolv.conf file '{file}' contains search line consisting of more than {count_limit} domains!"
            )
        } else if host_searches
            .iter()
            .any(|s| s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH)
        {
            format!(
                "Resolv.conf file {file:?} contains a search path which length is more than allowed {DNS1123_SUBDOMAIN_MAX_LENGTH} chars!"
            )
        } else if host_searches.join(" ").len() > max_chars {
            format!(
                "Resolv.conf file '{file}' contains search line which length is more than allowed {max_chars} chars!"
            )
        } else {
            return None;
        };
        Some(DnsEvent {
            target: EventTarget::Node,
            reason: REASON_CHECK_LIMITS_FOR_RESOLV_CONF,
            message,
        })
    }
}

#[cfg(test)]
#[path = "configurer_tests.rs"]
mod tests;
