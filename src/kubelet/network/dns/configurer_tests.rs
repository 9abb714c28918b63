//! Table tests for pod DNS forming.

#![allow(clippy::type_complexity)]

use super::*;
use serde_json::json;

fn pod(policy: &str, host_network: bool, dns_config: serde_json::Value) -> Pod {
    let mut spec =
        json!({"containers": [{"name": "c"}], "dnsPolicy": policy, "hostNetwork": host_network});
    if !dns_config.is_null() {
        spec["dnsConfig"] = dns_config;
    }
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns1", "uid": "u1"},
        "spec": spec
    }))
    .expect("pod")
}

fn configurer() -> DnsConfigurer {
    DnsConfigurer {
        cluster_dns: vec!["10.96.0.10".parse().expect("ip")],
        cluster_domain: "cluster.local".into(),
        resolver_config: "/etc/resolv.conf".into(),
        node_ips: vec!["10.88.0.1".parse().expect("ip")],
        expanded_dns_config: false,
    }
}

fn host() -> DnsConfig {
    DnsConfig {
        servers: vec!["192.168.1.1".into()],
        searches: vec!["corp.example".into()],
        options: vec!["timeout:2".into()],
    }
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn policy_table() {
    type Want = (
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );
    let cluster_search: &[&str] = &[
        "ns1.svc.cluster.local",
        "svc.cluster.local",
        "cluster.local",
        "corp.example",
    ];
    let cases: Vec<(&str, Pod, Want)> = vec![
        (
            "ClusterFirst",
            pod("ClusterFirst", false, json!(null)),
            (&["10.96.0.10"], cluster_search, &["ndots:5"]),
        ),
        (
            "ClusterFirst on host network falls back to the host",
            pod("ClusterFirst", true, json!(null)),
            (&["192.168.1.1"], &["corp.example"], &["timeout:2"]),
        ),
        (
            "ClusterFirstWithHostNet",
            pod("ClusterFirstWithHostNet", true, json!(null)),
            (&["10.96.0.10"], cluster_search, &["ndots:5"]),
        ),
        (
            "Default",
            pod("Default", false, json!(null)),
            (&["192.168.1.1"], &["corp.example"], &["timeout:2"]),
        ),
        (
            "None without dnsConfig",
            pod("None", false, json!(null)),
            (&[], &[], &[]),
        ),
        (
            "None with dnsConfig",
            pod(
                "None",
                false,
                json!({"nameservers": ["1.1.1.1"],
            "searches": ["a.example"], "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}),
            ),
            (&["1.1.1.1"], &["a.example"], &["ndots:2", "edns0"]),
        ),
        (
            "ClusterFirst merged with dnsConfig",
            pod(
                "ClusterFirst",
                false,
                json!({
            "nameservers": ["10.96.0.10", "8.8.8.8"], "searches": ["svc.cluster.local", "extra.example"],
            "options": [{"name": "ndots", "value": "1"}, {"name": "single-request"}]}),
            ),
            (
                &["10.96.0.10", "8.8.8.8"],
                &[
                    "ns1.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                    "corp.example",
                    "extra.example",
                ],
                &["ndots:1", "single-request"],
            ),
        ),
        (
            "invalid policy treated as ClusterFirst",
            pod("Bogus", false, json!(null)),
            (&["10.96.0.10"], cluster_search, &["ndots:5"]),
        ),
    ];
    let c = configurer();
    for (name, p, (servers, searches, options)) in cases {
        let got = c.pod_dns(&p, &host());
        assert_eq!(got.config.servers, s(servers), "{name}: servers");
        assert_eq!(got.config.searches, s(searches), "{name}: searches");
        assert_eq!(got.config.options, s(options), "{name}: options");
        assert!(got.events.is_empty(), "{name}: {:?}", got.events);
    }
}

#[test]
fn no_cluster_dns_falls_back_with_events() {
    let mut c = configurer();
    c.cluster_dns.clear();
    let got = c.pod_dns(&pod("ClusterFirst", false, json!(null)), &host());
    assert_eq!(got.config.servers, s(&["192.168.1.1"]));
    assert_eq!(got.config.searches, s(&["corp.example"]));
    let targets: Vec<(EventTarget, &str)> =
        got.events.iter().map(|e| (e.target, e.reason)).collect();
    assert_eq!(
        targets,
        vec![
            (EventTarget::Node, "MissingClusterDNS"),
            (EventTarget::Pod, "MissingClusterDNS")
        ]
    );
    assert!(got.events[1].message.contains("p_ns1(u1)"));
}

#[test]
fn no_resolv_conf_uses_loopback() {
    let mut c = configurer();
    c.resolver_config.clear();
    c.node_ips = vec![
        "fd00::1".parse().expect("ip"),
        "10.0.0.1".parse().expect("ip"),
    ];
    let got = c.pod_dns(&pod("Default", false, json!(null)), &DnsConfig::default());
    assert_eq!(got.config.servers, s(&["::1", "127.0.0.1"]));
    assert_eq!(got.config.searches, s(&["."]));

    c.node_ips.clear();
    let got = c.pod_dns(&pod("Default", false, json!(null)), &DnsConfig::default());
    assert_eq!(got.config.servers, s(&["127.0.0.1"]));

    // Cluster-first pods are unaffected.
    let got = c.pod_dns(
        &pod("ClusterFirst", false, json!(null)),
        &DnsConfig::default(),
    );
    assert_eq!(got.config.servers, s(&["10.96.0.10"]));
    assert_eq!(
        got.config.searches,
        s(&[
            "ns1.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local"
        ])
    );
}

#[test]
fn limits_table() {
    let long = |ch: char, n: usize| ch.to_string().repeat(n);
    let cases: Vec<(&str, bool, Vec<String>, Vec<String>, usize, usize)> = vec![
        ("six paths fit", false, s(&["a", "b", "c"]), s(&[]), 6, 0),
        (
            "seventh path dropped",
            false,
            s(&["a", "b", "c", "d"]),
            s(&[]),
            6,
            1,
        ),
        (
            "expanded allows more",
            true,
            s(&["a", "b", "c", "d", "e", "f", "g"]),
            s(&[]),
            10,
            0,
        ),
        (
            "over-long path removed",
            false,
            vec![long('x', 254)],
            s(&[]),
            3,
            1,
        ),
        (
            "line length trimmed from the end",
            false,
            vec![long('a', 70), long('b', 70), long('c', 70)],
            s(&[]),
            5,
            1,
        ),
        (
            "four nameservers cut to three",
            false,
            s(&[]),
            s(&["1.1.1.1", "2.2.2.2", "3.3.3.3"]),
            3,
            1,
        ),
    ];
    for (name, expanded, extra_search, extra_ns, want_searches, want_events) in cases {
        let mut c = configurer();
        c.expanded_dns_config = expanded;
        let p = pod(
            "ClusterFirst",
            false,
            json!({"searches": extra_search, "nameservers": extra_ns}),
        );
        let got = c.pod_dns(&p, &DnsConfig::default());
        assert_eq!(
            got.config.searches.len(),
            want_searches,
            "{name}: {:?}",
            got.config.searches
        );
        assert!(got.config.servers.len() <= MAX_DNS_NAMESERVERS, "{name}");
        assert_eq!(got.events.len(), want_events, "{name}: {:?}", got.events);
        for e in &got.events {
            assert_eq!(e.reason, "DNSConfigForming", "{name}");
        }
        if expanded {
            continue;
        }
        assert!(
            got.config.searches.join(" ").len() <= MAX_DNS_SEARCH_LIST_CHARS_LEGACY,
            "{name}"
        );
    }
}

#[test]
fn resolv_conf_limit_checks() {
    let c = configurer();
    assert_eq!(c.check_limits_for_resolv_conf(&s(&["a", "b", "c"])), None);
    let e = c
        .check_limits_for_resolv_conf(&s(&["a", "b", "c", "d"]))
        .expect("too many");
    assert_eq!(e.reason, "CheckLimitsForResolvConf");
    assert!(e.message.contains("more than 3 domains"), "{}", e.message);
    let mut no_domain = configurer();
    no_domain.cluster_domain.clear();
    assert_eq!(
        no_domain.check_limits_for_resolv_conf(&s(&["a", "b", "c", "d"])),
        None
    );
    assert!(c.check_limits_for_resolv_conf(&["x".repeat(254)]).is_some());
    assert!(
        c.check_limits_for_resolv_conf(&["a".repeat(200), "b".repeat(60)])
            .is_some()
    );
}

#[test]
fn reference_sandbox_dns() {
    // The reference pods: clusterDNS 10.96.0.10, clusterDomain cluster.local,
    // a host resolv.conf without search paths.
    let c = configurer();
    let host = DnsConfig {
        servers: vec!["10.0.2.3".into()],
        searches: vec![],
        options: vec![],
    };
    let mut p = pod("ClusterFirst", false, json!(null));
    p.metadata.namespace = Some("refpack".into());
    let got = c.pod_dns(&p, &host);
    assert_eq!(got.config.servers, s(&["10.96.0.10"]));
    assert_eq!(
        got.config.searches,
        s(&[
            "refpack.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local"
        ])
    );
    assert_eq!(got.config.options, s(&["ndots:5"]));
}
