//! CRI requests shaped as the kubelet builds them (labels, annotations, DNS,
//! log directory, cgroup parent, security context), pointed at a test rig.

use std::collections::HashMap;

use kubelet::cri::api;

use super::containerd::Containerd;

/// One mebibyte.
pub const MI: i64 = 1024 * 1024;

/// A pod as far as CRI sees it.
pub struct Pod {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
    /// The sandbox config the kubelet would send.
    pub config: api::PodSandboxConfig,
}

/// A random UUID-shaped pod UID.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0xfff,
        u16::from_be_bytes([b[8], b[9]]) & 0xfff,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]]),
    )
}

/// A sandbox config for `namespace/name`, cgroup and logs inside the rig.
#[allow(deprecated)] // seccomp_profile_path: the v1.25 kubelet still sends it
pub fn pod(rig: &Containerd, name: &str, namespace: &str) -> Pod {
    let uid = new_uid();
    let labels = HashMap::from([
        ("io.kubernetes.pod.name".to_string(), name.to_string()),
        (
            "io.kubernetes.pod.namespace".to_string(),
            namespace.to_string(),
        ),
        ("io.kubernetes.pod.uid".to_string(), uid.clone()),
    ]);
    let annotations = HashMap::from([
        ("kubernetes.io/config.source".to_string(), "api".to_string()),
        (
            "kubernetes.io/config.seen".to_string(),
            "2026-11-22T04:03:41.939458530Z".to_string(),
        ),
    ]);
    let config = api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: name.to_string(),
            uid: uid.clone(),
            namespace: namespace.to_string(),
            attempt: 0,
        }),
        hostname: name.to_string(),
        log_directory: rig
            .log_dir(&format!("{namespace}_{name}_{uid}"))
            .display()
            .to_string(),
        dns_config: Some(api::DnsConfig {
            servers: vec!["10.96.0.10".into()],
            searches: vec![
                format!("{namespace}.svc.cluster.local"),
                "svc.cluster.local".into(),
                "cluster.local".into(),
            ],
            options: vec!["ndots:5".into()],
        }),
        port_mappings: vec![],
        labels,
        annotations,
        linux: Some(api::LinuxPodSandboxConfig {
            cgroup_parent: rig.cgroup_parent(&uid),
            security_context: Some(api::LinuxSandboxSecurityContext {
                namespace_options: Some(api::NamespaceOption {
                    pid: api::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                seccomp: Some(api::SecurityProfile::default()),
                seccomp_profile_path: "runtime/default".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        windows: None,
    };
    Pod {
        name: name.to_string(),
        namespace: namespace.to_string(),
        uid,
        config,
    }
}

/// A container config running `command` from `image` in `pod`.
pub fn container(pod: &Pod, name: &str, image: &str, command: &[&str]) -> api::ContainerConfig {
    let labels = HashMap::from([
        ("io.kubernetes.container.name".to_string(), name.to_string()),
        ("io.kubernetes.pod.name".to_string(), pod.name.clone()),
        (
            "io.kubernetes.pod.namespace".to_string(),
            pod.namespace.clone(),
        ),
        ("io.kubernetes.pod.uid".to_string(), pod.uid.clone()),
    ]);
    let annotations = HashMap::from([
        (
            "io.kubernetes.container.hash".to_string(),
            "9f9eb022".to_string(),
        ),
        (
            "io.kubernetes.container.restartCount".to_string(),
            "0".to_string(),
        ),
        (
            "io.kubernetes.container.terminationMessagePath".to_string(),
            "/dev/termination-log".to_string(),
        ),
        (
            "io.kubernetes.container.terminationMessagePolicy".to_string(),
            "File".to_string(),
        ),
        (
            "io.kubernetes.pod.terminationGracePeriod".to_string(),
            "30".to_string(),
        ),
    ]);
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: name.to_string(),
            attempt: 0,
        }),
        image: Some(api::ImageSpec {
            image: image.to_string(),
            ..Default::default()
        }),
        command: command.iter().map(|s| (*s).to_string()).collect(),
        envs: vec![api::KeyValue {
            key: "KUBERNETES_SERVICE_HOST".into(),
            value: "10.96.0.1".into(),
        }],
        labels,
        annotations,
        log_path: format!("{name}/0.log"),
        linux: Some(api::LinuxContainerConfig {
            resources: Some(api::LinuxContainerResources {
                cpu_period: 100_000,
                cpu_quota: 100_000,
                cpu_shares: 102,
                memory_limit_in_bytes: 64 * MI,
                oom_score_adj: 998,
                ..Default::default()
            }),
            security_context: Some(api::LinuxContainerSecurityContext {
                namespace_options: Some(api::NamespaceOption {
                    pid: api::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                seccomp: Some(api::SecurityProfile {
                    profile_type: api::security_profile::ProfileType::Unconfined as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}
