//! Unit tests for sandbox configs (the reference pods are compared in
//! tests/cri_config_reference.rs).

use super::*;
use crate::cri::api::NamespaceMode;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1",
            "labels": {"app": "a"}, "annotations": {"k": "v"}},
        "spec": spec
    }))
    .expect("pod")
}

fn params<'a>(settings: &'a RuntimeSettings) -> SandboxParams<'a> {
    SandboxParams {
        attempt: 2,
        dns_config: DnsConfig {
            servers: vec!["10.96.0.10".into()],
            searches: vec![],
            options: vec![],
        },
        cluster_domain: "cluster.local",
        cgroup_parent: "/kubepods/podu-1",
        extra_supplemental_groups: &[99],
        settings,
    }
}

#[test]
fn basic_fields() {
    let s = RuntimeSettings::default();
    let p = pod(json!({"containers": [
        {"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
            {"containerPort": 9, "protocol": "SCTP"}]},
        {"name": "b", "ports": [{"containerPort": 8080, "protocol": "TCP"}]}],
        "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "protocol": "TCP"}]}],
        "hostname": "h", "subdomain": "sub", "setHostnameAsFQDN": true}));
    let cfg = generate_pod_sandbox_config(&p, &params(&s)).expect("config");
    let meta = cfg.metadata.clone().expect("metadata");
    assert_eq!(
        (
            meta.name.as_str(),
            meta.namespace.as_str(),
            meta.uid.as_str(),
            meta.attempt
        ),
        ("web", "ns", "u-1", 2)
    );
    assert_eq!(cfg.hostname, "h.sub.ns.svc.cluster.local");
    assert_eq!(cfg.log_directory, "/var/log/pods/ns_web_u-1");
    assert_eq!(cfg.labels.get("app").map(String::as_str), Some("a"));
    assert_eq!(
        cfg.labels.get("io.kubernetes.pod.uid").map(String::as_str),
        Some("u-1")
    );
    assert_eq!(cfg.annotations.get("k").map(String::as_str), Some("v"));
    let ports: Vec<(i32, i32, i32, &str)> = cfg
        .port_mappings
        .iter()
        .map(|p| {
            (
                p.protocol,
                p.container_port,
                p.host_port,
                p.host_ip.as_str(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        vec![
            (Protocol::Tcp as i32, 80, 0, ""),
            (Protocol::Udp as i32, 53, 53, "10.0.0.1"),
            (Protocol::Sctp as i32, 9, 0, ""),
            (Protocol::Tcp as i32, 8080, 0, ""),
        ]
    );
    let linux = cfg.linux.expect("linux");
    assert_eq!(linux.cgroup_parent, "/kubepods/podu-1");
    // No pod security context: no namespace options, no groups.
    let sc = linux.security_context.expect("sc");
    assert!(sc.namespace_options.is_none());
    assert!(sc.supplemental_groups.is_empty());
    #[allow(deprecated)]
    let path = sc.seccomp_profile_path.clone();
    assert_eq!(path, "runtime/default");
    assert_eq!(
        sc.seccomp.map(|s| s.profile_type),
        Some(ProfileType::RuntimeDefault as i32)
    );
}

#[test]
fn host_network_has_no_hostname() {
    let s = RuntimeSettings::default();
    let p = pod(json!({"containers": [{"name": "a"}], "hostNetwork": true, "securityContext": {}}));
    let cfg = generate_pod_sandbox_config(&p, &params(&s)).expect("config");
    assert_eq!(cfg.hostname, "");
    let ns = cfg
        .linux
        .and_then(|l| l.security_context)
        .and_then(|s| s.namespace_options)
        .expect("ns");
    assert_eq!(ns.network, NamespaceMode::Node as i32);
    assert_eq!(ns.pid, NamespaceMode::Container as i32);
    assert_eq!(ns.ipc, NamespaceMode::Pod as i32);
}

#[test]
fn security_context_and_sysctls() {
    let s = RuntimeSettings::default();
    let p = pod(json!({"containers": [{"name": "a"}],
        "initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
            "supplementalGroups": [4000], "seLinuxOptions": {"level": "s0:c1"},
            "sysctls": [{"name": "net/ipv4/ip_local_port_range", "value": "1024 65535"},
                {"name": "kernel.shm_rmid_forced", "value": "1"},
                {"name": "net.ipv4.conf.eno2/100.rp_filter", "value": "1"}]}}));
    let linux = generate_pod_sandbox_config(&p, &params(&s))
        .expect("config")
        .linux
        .expect("linux");
    let sc = linux.security_context.expect("sc");
    assert!(sc.privileged);
    assert_eq!(sc.run_as_user, Some(Int64Value { value: 1000 }));
    assert_eq!(sc.run_as_group, Some(Int64Value { value: 3000 }));
    assert_eq!(sc.supplemental_groups, vec![2000, 99, 4000]);
    assert_eq!(
        sc.selinux_options.map(|o| o.level),
        Some("s0:c1".to_string())
    );
    let mut sysctls: Vec<(String, String)> = linux.sysctls.into_iter().collect();
    sysctls.sort();
    assert_eq!(
        sysctls,
        vec![
            ("kernel.shm_rmid_forced".to_string(), "1".to_string()),
            (
                "net.ipv4.conf.eno2/100.rp_filter".to_string(),
                "1".to_string()
            ),
            (
                "net.ipv4.ip_local_port_range".to_string(),
                "1024 65535".to_string()
            ),
        ]
    );
}

#[test]
fn sysctl_names_table() {
    let cases = [
        ("kernel.msgmax", "kernel.msgmax"),
        ("kernel/msgmax", "kernel.msgmax"),
        (
            "net/ipv4/conf/eno2.100/rp_filter",
            "net.ipv4.conf.eno2/100.rp_filter",
        ),
        (
            "net.ipv4.conf.eno2/100.rp_filter",
            "net.ipv4.conf.eno2/100.rp_filter",
        ),
        ("kernel", "kernel"),
        ("", ""),
    ];
    for (input, want) in cases {
        assert_eq!(normalize_sysctl_name(input), want, "{input}");
    }
}

#[test]
fn invalid_hostname_is_an_error() {
    let s = RuntimeSettings::default();
    let p = pod(json!({"containers": [{"name": "a"}], "hostname": "Not_Valid"}));
    let err = generate_pod_sandbox_config(&p, &params(&s)).expect_err("invalid hostname");
    assert_eq!(err.reason(), "CreatePodSandboxError");
    assert!(err.to_string().contains("Not_Valid"));
}
