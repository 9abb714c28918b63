//! Container security settings for CRI: the effective security context
//! (pod-level settings overridden by the container's), its CRI form with the
//! default masked and read-only /proc paths, namespaces, seccomp, AppArmor,
//! the image user, supplemental groups, and the runAsNonRoot check.

use k8s_openapi::api::core::v1::{Container, Pod, SecurityContext};

use super::seccomp::{apparmor_profile_from_annotations, seccomp_profile, seccomp_profile_path};
use super::settings::RuntimeSettings;
use crate::cri::api::{
    Capability, Int64Value, LinuxContainerSecurityContext, NamespaceMode, NamespaceOption,
    SeLinuxOption,
};
use crate::kubelet::container::refs::format_pod;

/// Paths masked in every container unless procMount is Unmasked.
pub const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];

/// Paths read-only in every container unless procMount is Unmasked.
pub const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The user an image runs as by default (from the image's config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageUser {
    /// The numeric UID, when the image names one (or names none: root).
    pub uid: Option<i64>,
    /// The user name, when the image names a non-numeric user.
    pub username: String,
}

impl ImageUser {
    /// Root, as the kubelet assumes for an image that names no user.
    pub fn root() -> Self {
        ImageUser {
            uid: Some(0),
            username: String::new(),
        }
    }
}

/// A container that must not run as root would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NonRootError {
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsUserRoot { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    ImageRunsAsRoot { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {container})"
    )]
    NonNumericUser {
        user: String,
        pod: String,
        container: String,
    },
}

/// The pod's security context with the container's settings laid over it.
pub fn determine_effective_security_context(pod: &Pod, container: &Container) -> SecurityContext {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let from_pod = pod_sc.map(|p| SecurityContext {
        se_linux_options: p.se_linux_options.clone(),
        windows_options: p.windows_options.clone(),
        run_as_user: p.run_as_user,
        run_as_group: p.run_as_group,
        run_as_non_root: p.run_as_non_root,
        ..Default::default()
    });
    let container_sc = container.security_context.as_ref();
    let (mut eff, c) = match (from_pod, container_sc) {
        (None, None) => return SecurityContext::default(),
        (Some(p), None) => return p,
        (None, Some(c)) => return c.clone(),
        (Some(p), Some(c)) => (p, c),
    };
    if c.se_linux_options.is_some() {
        eff.se_linux_options = c.se_linux_options.clone();
    }
    if let Some(cw) = &c.windows_options {
        let w = eff.windows_options.get_or_insert_with(Default::default);
        if cw.gmsa_credential_spec_name.is_some() {
            w.gmsa_credential_spec_name = cw.gmsa_credential_spec_name.clone();
        }
        if cw.gmsa_credential_spec.is_some() {
            w.gmsa_credential_spec = cw.gmsa_credential_spec.clone();
        }
        if cw.run_as_user_name.is_some() {
            w.run_as_user_name = cw.run_as_user_name.clone();
        }
        if cw.host_process.is_some() {
            w.host_process = cw.host_process;
        }
    }
    if c.capabilities.is_some() {
        eff.capabilities = c.capabilities.clone();
    }
    eff.privileged = c.privileged.or(eff.privileged);
    eff.run_as_user = c.run_as_user.or(eff.run_as_user);
    eff.run_as_group = c.run_as_group.or(eff.run_as_group);
    eff.run_as_non_root = c.run_as_non_root.or(eff.run_as_non_root);
    eff.read_only_root_filesystem = c
        .read_only_root_filesystem
        .or(eff.read_only_root_filesystem);
    eff.allow_privilege_escalation = c
        .allow_privilege_escalation
        .or(eff.allow_privilege_escalation);
    if c.proc_mount.is_some() {
        eff.proc_mount = c.proc_mount.clone();
    }
    eff
}

/// The paths to mask for a procMount setting.
pub fn masked_paths(proc_mount: Option<&str>) -> Vec<String> {
    if proc_mount == Some("Unmasked") {
        return Vec::new();
    }
    DEFAULT_MASKED_PATHS.iter().map(|s| s.to_string()).collect()
}

/// The paths to make read-only for a procMount setting.
pub fn readonly_paths(proc_mount: Option<&str>) -> Vec<String> {
    if proc_mount == Some("Unmasked") {
        return Vec::new();
    }
    DEFAULT_READONLY_PATHS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// no_new_privs: set when allowPrivilegeEscalation is explicitly false.
pub fn add_no_new_privileges(sc: &SecurityContext) -> bool {
    sc.allow_privilege_escalation == Some(false)
}

/// The CRI form of an effective security context's directly mapped fields.
pub fn convert_to_runtime_security_context(sc: &SecurityContext) -> LinuxContainerSecurityContext {
    LinuxContainerSecurityContext {
        capabilities: sc.capabilities.as_ref().map(|c| Capability {
            add_capabilities: c.add.clone().unwrap_or_default(),
            drop_capabilities: c.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        }),
        selinux_options: sc.se_linux_options.as_ref().map(|o| SeLinuxOption {
            user: o.user.clone().unwrap_or_default(),
            role: o.role.clone().unwrap_or_default(),
            r#type: o.type_.clone().unwrap_or_default(),
            level: o.level.clone().unwrap_or_default(),
        }),
        run_as_user: sc.run_as_user.map(|v| Int64Value { value: v }),
        run_as_group: sc.run_as_group.map(|v| Int64Value { value: v }),
        privileged: sc.privileged.unwrap_or(false),
        readonly_rootfs: sc.read_only_root_filesystem.unwrap_or(false),
        ..Default::default()
    }
}

/// The pod's namespace modes: network and IPC per pod or host, PID per
/// container, pod (shareProcessNamespace) or host.
pub fn namespaces_for_pod(pod: &Pod) -> NamespaceOption {
    let spec = pod.spec.as_ref();
    let flag = |f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>| {
        spec.and_then(f).unwrap_or(false)
    };
    let pid = if flag(|s| s.host_pid) {
        NamespaceMode::Node
    } else if flag(|s| s.share_process_namespace) {
        NamespaceMode::Pod
    } else {
        NamespaceMode::Container
    };
    NamespaceOption {
        network: if flag(|s| s.host_network) {
            NamespaceMode::Node
        } else {
            NamespaceMode::Pod
        } as i32,
        pid: pid as i32,
        ipc: if flag(|s| s.host_ipc) {
            NamespaceMode::Node
        } else {
            NamespaceMode::Pod
        } as i32,
        target_id: String::new(),
        userns_options: None,
    }
}

/// The complete CRI security context of a container.
pub fn determine_effective_linux_security_context(
    pod: &Pod,
    container: &Container,
    image_user: &ImageUser,
    settings: &RuntimeSettings,
    extra_supplemental_groups: &[i64],
) -> LinuxContainerSecurityContext {
    let eff = determine_effective_security_context(pod, container);
    let mut sc = convert_to_runtime_security_context(&eff);
    let empty = std::collections::BTreeMap::new();
    let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    #[allow(deprecated)]
    {
        sc.seccomp_profile_path = seccomp_profile_path(
            annotations,
            &container.name,
            pod_sc,
            container.security_context.as_ref(),
            &settings.seccomp_profile_root,
            settings.seccomp_default,
        );
        sc.apparmor_profile = apparmor_profile_from_annotations(annotations, &container.name);
    }
    sc.seccomp = Some(seccomp_profile(
        pod_sc,
        container.security_context.as_ref(),
        &settings.seccomp_profile_root,
        settings.seccomp_default,
    ));
    if sc.run_as_user.is_none() {
        if let Some(uid) = image_user.uid {
            sc.run_as_user = Some(Int64Value { value: uid });
        } else if !image_user.username.is_empty() {
            sc.run_as_username = image_user.username.clone();
        }
    }
    sc.namespace_options = Some(namespaces_for_pod(pod));
    if let Some(p) = pod_sc {
        if let Some(fs_group) = p.fs_group {
            sc.supplemental_groups.push(fs_group);
        }
        sc.supplemental_groups
            .extend(p.supplemental_groups.iter().flatten().copied());
    }
    sc.supplemental_groups
        .extend(extra_supplemental_groups.iter().copied());
    sc.no_new_privs = add_no_new_privileges(&eff);
    sc.masked_paths = masked_paths(eff.proc_mount.as_deref());
    sc.readonly_paths = readonly_paths(eff.proc_mount.as_deref());
    sc
}

/// Refuses a container with runAsNonRoot that would run as root, or whose
/// non-numeric image user cannot be checked.
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    image_user: &ImageUser,
) -> Result<(), NonRootError> {
    let eff = determine_effective_security_context(pod, container);
    if eff.run_as_non_root != Some(true) {
        return Ok(());
    }
    let pod_s = format_pod(pod);
    let name = container.name.clone();
    if let Some(uid) = eff.run_as_user {
        if uid == 0 {
            return Err(NonRootError::RunAsUserRoot {
                pod: pod_s,
                container: name,
            });
        }
        return Ok(());
    }
    match (&image_user.uid, image_user.username.as_str()) {
        (Some(0), _) => Err(NonRootError::ImageRunsAsRoot {
            pod: pod_s,
            container: name,
        }),
        (None, user) if !user.is_empty() => Err(NonRootError::NonNumericUser {
            user: user.to_string(),
            pod: pod_s,
            container: name,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "security_context_tests.rs"]
mod tests;
