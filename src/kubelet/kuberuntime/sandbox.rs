//! PodSandboxConfig generation (generatePodSandboxConfig and its Linux
//! part): metadata, hostname, log directory, DNS, port mappings, labels and
//! annotations, cgroup parent, sandbox security context, sysctls and the
//! pod-level resources and overhead.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;

use super::labels::{new_pod_annotations, new_pod_labels};
use super::log_paths::build_pod_logs_directory;
use super::resources::{overhead_resources, sandbox_resources};
use super::security_context::namespaces_for_pod;
use super::settings::RuntimeSettings;
use crate::cri::api::security_profile::ProfileType;
use crate::cri::api::{
    DnsConfig, Int64Value, LinuxPodSandboxConfig, LinuxSandboxSecurityContext, PodSandboxConfig,
    PodSandboxMetadata, PortMapping, Protocol, SeLinuxOption, SecurityProfile,
};
use crate::kubelet::container::helpers::{
    has_privileged_container, is_host_network_pod, make_port_mappings,
};
use crate::kubelet::network::dns::{
    HostnameError, generate_pod_hostname_and_domain, nodename_for_kernel,
};

use super::seccomp::SECCOMP_PROFILE_RUNTIME_DEFAULT;

/// The sync-result reason when a sandbox cannot be created.
pub const CREATE_POD_SANDBOX_ERROR: &str = "CreatePodSandboxError";

/// Errors generating a sandbox config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxConfigError {
    #[error("generating the sandbox hostname: {0}")]
    Hostname(#[from] HostnameError),
}

impl SandboxConfigError {
    /// The kubelet reason for pod status and events.
    pub fn reason(&self) -> &'static str {
        CREATE_POD_SANDBOX_ERROR
    }
}

/// What a sandbox config needs beyond the pod.
#[derive(Debug, Clone)]
pub struct SandboxParams<'a> {
    /// Sandbox attempt number (0 for the first).
    pub attempt: u32,
    /// The pod's DNS settings (from `DnsConfigurer::pod_dns`).
    pub dns_config: DnsConfig,
    /// `clusterDomain`, for the pod's subdomain FQDN.
    pub cluster_domain: &'a str,
    /// The pod cgroup (from the container manager), e.g.
    /// `/kubepods/burstable/pod<uid>`.
    pub cgroup_parent: &'a str,
    /// Extra groups from the pod's volumes (GID annotations).
    pub extra_supplemental_groups: &'a [i64],
    pub settings: &'a RuntimeSettings,
}

/// The CRI protocol for an API protocol string (unknown ones become TCP).
pub fn to_runtime_protocol(protocol: &str) -> Protocol {
    match protocol {
        "TCP" => Protocol::Tcp,
        "UDP" => Protocol::Udp,
        "SCTP" => Protocol::Sctp,
        other => {
            crate::vlog!(2, protocol = other, "unknown protocol, defaulting to TCP");
            Protocol::Tcp
        }
    }
}

/// Sysctl names with `/` separators rewritten to `.` form (runc wants dots).
pub fn normalize_sysctl_name(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// The Linux part of the sandbox config (without resources).
pub fn generate_pod_sandbox_linux_config(
    pod: &Pod,
    cgroup_parent: &str,
    extra_supplemental_groups: &[i64],
) -> LinuxPodSandboxConfig {
    #[allow(deprecated)]
    let mut sc = LinuxSandboxSecurityContext {
        privileged: has_privileged_container(pod),
        seccomp_profile_path: SECCOMP_PROFILE_RUNTIME_DEFAULT.to_string(),
        seccomp: Some(SecurityProfile {
            profile_type: ProfileType::RuntimeDefault as i32,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    };
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sysctls: HashMap<String, String> = pod_sc
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (normalize_sysctl_name(&s.name), s.value.clone()))
        .collect();
    if let Some(p) = pod_sc {
        sc.run_as_user = p.run_as_user.map(|v| Int64Value { value: v });
        sc.run_as_group = p.run_as_group.map(|v| Int64Value { value: v });
        sc.namespace_options = Some(namespaces_for_pod(pod));
        if let Some(g) = p.fs_group {
            sc.supplemental_groups.push(g);
        }
        sc.supplemental_groups
            .extend(extra_supplemental_groups.iter().copied());
        sc.supplemental_groups
            .extend(p.supplemental_groups.iter().flatten().copied());
        sc.selinux_options = p.se_linux_options.as_ref().map(|o| SeLinuxOption {
            user: o.user.clone().unwrap_or_default(),
            role: o.role.clone().unwrap_or_default(),
            r#type: o.type_.clone().unwrap_or_default(),
            level: o.level.clone().unwrap_or_default(),
        });
    }
    LinuxPodSandboxConfig {
        cgroup_parent: cgroup_parent.to_string(),
        security_context: Some(sc),
        sysctls,
        overhead: None,
        resources: None,
    }
}

/// The complete PodSandboxConfig for `pod`.
pub fn generate_pod_sandbox_config(
    pod: &Pod,
    params: &SandboxParams<'_>,
) -> Result<PodSandboxConfig, SandboxConfigError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: namespace.clone(),
            attempt: params.attempt,
        }),
        labels: new_pod_labels(pod),
        annotations: new_pod_annotations(pod),
        dns_config: Some(params.dns_config.clone()),
        ..Default::default()
    };
    if !is_host_network_pod(pod) {
        let (hostname, domain) = generate_pod_hostname_and_domain(pod, params.cluster_domain)?;
        let set_fqdn = pod.spec.as_ref().and_then(|s| s.set_hostname_as_fqdn);
        config.hostname = nodename_for_kernel(&hostname, &domain, set_fqdn)?;
    }
    config.log_directory = build_pod_logs_directory(&namespace, &name, &uid)
        .display()
        .to_string();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        for pm in make_port_mappings(c) {
            config.port_mappings.push(PortMapping {
                protocol: to_runtime_protocol(&pm.protocol) as i32,
                container_port: pm.container_port,
                host_port: pm.host_port,
                host_ip: pm.host_ip,
            });
        }
    }
    let mut linux = generate_pod_sandbox_linux_config(
        pod,
        params.cgroup_parent,
        params.extra_supplemental_groups,
    );
    linux.resources = Some(sandbox_resources(pod, params.settings));
    linux.overhead = Some(overhead_resources(pod, params.settings));
    config.linux = Some(linux);
    Ok(config)
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;
