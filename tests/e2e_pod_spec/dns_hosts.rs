//! DNS and hosts through the kubelet: each case is one pod on a real
//! container whose /etc/resolv.conf, /etc/hosts and hostname are compared
//! with what the Go kubelet (v1.25) gives the same spec on a node with
//! clusterDNS 10.96.0.10, clusterDomain cluster.local and the node's
//! resolv.conf ([`HOST_RESOLV_CONF`]). containerd writes the resolver file
//! as `search`, `nameserver` lines, `options`; options the Go kubelet
//! merges through a map come in no fixed order and are compared as a set.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::harness;
use crate::node::*;
use crate::support::containerd::images;

const START: Duration = Duration::from_secs(60);

/// The cluster-first search list for namespace `default` with the node's
/// own domains after it.
const CLUSTER_SEARCH: &str =
    "default.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example";

/// What the resolver file should hold.
struct Resolv {
    search: &'static str,
    nameservers: &'static [&'static str],
    options: &'static [&'static str],
}

/// What the hosts file should hold.
enum Hosts {
    /// The kubelet's own file: pod IP line with this name (and FQDN when a
    /// domain is given), then the aliases block (already formatted).
    Managed {
        hostname: &'static str,
        domain: Option<&'static str>,
        aliases: &'static str,
    },
    /// The node's /etc/hosts as the runtime copies it. The Go kubelet
    /// (v1.25) writes its own file only for pods with sandbox IPs, and
    /// containerd reports none for host-network sandboxes: such pods get
    /// the node's file as is, hostAliases notwithstanding.
    Node,
}

struct Case {
    pod: &'static str,
    spec: &'static str,
    resolv: Resolv,
    hosts: Hosts,
    /// The container's hostname; `None`: the node's.
    hostname: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            pod: "dns-cf",
            spec: "  hostname: web
  subdomain: sub
  hostAliases:
  - {ip: 192.0.2.10, hostnames: [foo, bar]}
  - {ip: '2001:db8::1', hostnames: [six]}
",
            resolv: Resolv {
                search: CLUSTER_SEARCH,
                nameservers: &["10.96.0.10"],
                options: &["ndots:5"],
            },
            hosts: Hosts::Managed {
                hostname: "web",
                domain: Some("sub.default.svc.cluster.local"),
                aliases: "\n# Entries added by HostAliases.\n192.0.2.10\tfoo\tbar\n2001:db8::1\tsix\n",
            },
            hostname: Some("web"),
        },
        Case {
            // dnsConfig appended to ClusterFirst: duplicates dropped, then
            // cut to 3 nameservers and 6 search domains; options merged by
            // name (the pod's win).
            pod: "dns-merge",
            spec: "  dnsConfig:
    nameservers: [192.0.2.1, 192.0.2.2, 192.0.2.3]
    searches: [a.example, corp.example, b.example]
    options:
    - {name: ndots, value: '2'}
    - {name: edns0}
",
            resolv: Resolv {
                search: "default.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example a.example",
                nameservers: &["10.96.0.10", "192.0.2.1", "192.0.2.2"],
                options: &["ndots:2", "edns0"],
            },
            hosts: Hosts::Managed {
                hostname: "dns-merge-e2e7-node",
                domain: None,
                aliases: "",
            },
            hostname: Some("dns-merge-e2e7-node"),
        },
        Case {
            pod: "dns-default",
            spec: "  dnsPolicy: Default\n",
            resolv: Resolv {
                search: "corp.example lab.example",
                nameservers: &["192.0.2.53", "192.0.2.54"],
                options: &["timeout:2", "attempts:3"],
            },
            hosts: Hosts::Managed {
                hostname: "dns-default-e2e7-node",
                domain: None,
                aliases: "",
            },
            hostname: Some("dns-default-e2e7-node"),
        },
        Case {
            pod: "dns-none",
            spec: "  dnsPolicy: None
  dnsConfig:
    nameservers: [192.0.2.77]
    searches: [only.example]
    options: [{name: ndots, value: '1'}]
",
            resolv: Resolv {
                search: "only.example",
                nameservers: &["192.0.2.77"],
                options: &["ndots:1"],
            },
            hosts: Hosts::Managed {
                hostname: "dns-none-e2e7-node",
                domain: None,
                aliases: "",
            },
            hostname: Some("dns-none-e2e7-node"),
        },
        Case {
            pod: "dns-hostnet",
            spec: "  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  hostAliases:
  - {ip: 192.0.2.11, hostnames: [hn]}
",
            resolv: Resolv {
                search: CLUSTER_SEARCH,
                nameservers: &["10.96.0.10"],
                options: &["ndots:5"],
            },
            hosts: Hosts::Node,
            hostname: None,
        },
        Case {
            // ClusterFirst on the host network falls back to Default.
            pod: "dns-hostnet-cf",
            spec: "  hostNetwork: true\n",
            resolv: Resolv {
                search: "corp.example lab.example",
                nameservers: &["192.0.2.53", "192.0.2.54"],
                options: &["timeout:2", "attempts:3"],
            },
            hosts: Hosts::Node,
            hostname: None,
        },
    ]
}

pub async fn dns_and_hosts(node: &Node) {
    futures::future::join_all(cases().into_iter().map(|c| one(node, c))).await;
}

/// The pod's IPs as its status reports them.
fn pod_ips(p: &Pod) -> Vec<String> {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|i| i.ip.clone())
        .collect()
}

async fn one(node: &Node, case: Case) {
    let bb = &images().busybox;
    node.write_pod(
        case.pod,
        &format!(
            "  terminationGracePeriodSeconds: 1
{}  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
",
            case.spec
        ),
    );
    let (pod, _) = node
        .wait(case.pod, START, "running", |p| {
            harness::is_running(p, "main")
        })
        .await;
    let name = case.pod;

    // resolv.conf: search line, nameserver lines, options as a set.
    let resolv = node.sh(&pod, "main", "cat /etc/resolv.conf").await;
    let mut lines = resolv.lines();
    assert_eq!(
        lines.next(),
        Some(format!("search {}", case.resolv.search).as_str()),
        "{name}: resolv.conf {resolv:?}"
    );
    for ns in case.resolv.nameservers {
        assert_eq!(
            lines.next(),
            Some(format!("nameserver {ns}").as_str()),
            "{name}: resolv.conf {resolv:?}"
        );
    }
    let options: BTreeSet<&str> = lines
        .next()
        .and_then(|l| l.strip_prefix("options "))
        .unwrap_or_else(|| panic!("{name}: no options line in {resolv:?}"))
        .split(' ')
        .collect();
    assert_eq!(
        options,
        case.resolv.options.iter().copied().collect::<BTreeSet<_>>(),
        "{name}: options in {resolv:?}"
    );
    assert_eq!(lines.next(), None, "{name}: nothing more in {resolv:?}");

    // /etc/hosts.
    let hosts = node.sh(&pod, "main", "cat /etc/hosts").await;
    let want = match case.hosts {
        Hosts::Managed {
            hostname,
            domain,
            aliases,
        } => {
            let ips = pod_ips(&pod);
            assert!(!ips.is_empty(), "{name}: the status has pod IPs");
            let mut s = String::from(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
            );
            for ip in ips {
                match domain {
                    Some(d) => s.push_str(&format!("{ip}\t{hostname}.{d}\t{hostname}\n")),
                    None => s.push_str(&format!("{ip}\t{hostname}\n")),
                }
            }
            s + aliases
        }
        Hosts::Node => std::fs::read_to_string("/etc/hosts").expect("node /etc/hosts"),
    };
    assert_eq!(hosts, want, "{name}: /etc/hosts");

    let got = node.sh(&pod, "main", "hostname").await;
    let node_hostname = nix::unistd::gethostname()
        .expect("hostname")
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        got.trim(),
        case.hostname.unwrap_or(node_hostname.as_str()),
        "{name}: hostname"
    );
    node.remove_pod(case.pod);
}
