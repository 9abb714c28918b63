//! ContainerConfig generation (generateContainerConfig,
//! generateLinuxContainerConfig and the runtime half of makeMounts):
//! metadata, image, expanded command and args, environment, mounts with the
//! termination-log file last, devices, labels and annotations, log path,
//! stdin/tty, resources with oom_score_adj and huge pages, security context.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::labels::{new_container_annotations, new_container_labels};
use super::log_paths::{build_container_log_path, build_container_logs_directory};
use super::resources::{container_linux_resources, hugepage_limits};
use super::security_context::{
    ImageUser, NonRootError, determine_effective_linux_security_context, verify_run_as_non_root,
};
use super::settings::RuntimeSettings;
use crate::cri::api::{
    ContainerConfig, ContainerMetadata, Device, ImageSpec, KeyValue, LinuxContainerConfig, Mount,
    NamespaceMode,
};
use crate::kubelet::container::RunContainerOptions;
use crate::kubelet::container::helpers::expand_container_command_and_args;
use crate::kubelet::qos::get_container_oom_score_adjust;

/// The kubelet reason for errors here.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// Errors generating a container config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerConfigError {
    #[error(transparent)]
    NonRoot(#[from] NonRootError),
}

impl ContainerConfigError {
    pub fn reason(&self) -> &'static str {
        CREATE_CONTAINER_CONFIG_ERROR
    }
}

/// What a container config needs beyond the pod and container.
#[derive(Debug, Clone)]
pub struct ContainerParams<'a> {
    /// The container's restart count (the metadata attempt).
    pub restart_count: u32,
    /// The resolved image reference (image ID) to run.
    pub image_ref: &'a str,
    /// The image's default user.
    pub image_user: &'a ImageUser,
    /// From `generate_run_container_options`.
    pub opts: &'a RunContainerOptions,
    /// For ephemeral containers targeting another container's PID namespace.
    pub ns_target_container_id: Option<&'a str>,
    /// Extra groups from the pod's volumes.
    pub extra_supplemental_groups: &'a [i64],
    pub settings: &'a RuntimeSettings,
}

/// A generated config and the host-side preparation it expects.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedContainerConfig {
    pub config: ContainerConfig,
    /// `/var/log/pods/<ns>_<name>_<uid>/<container>`: create (0755) first.
    pub log_directory: PathBuf,
    /// `<pod dir>/containers/<name>/<8 hex>`: create empty with mode 0666
    /// before CreateContainer; on failure drop the last mount, as the Go
    /// kubelet creates the mount only for a file it could create.
    pub termination_log: Option<PathBuf>,
}

/// A random 8-hex-digit name, as the kubelet uses for termination-log files.
pub fn make_uid() -> String {
    format!("{:08x}", rand::random::<u32>())
}

fn make_mounts(
    opts: &RunContainerOptions,
    container: &Container,
    settings: &RuntimeSettings,
) -> (Vec<Mount>, Option<PathBuf>) {
    let mut mounts: Vec<Mount> = opts
        .mounts
        .iter()
        .map(|m| Mount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.read_only,
            selinux_relabel: m.selinux_relabel && settings.selinux_enabled,
            propagation: m.propagation as i32,
        })
        .collect();
    let mut termination_log = None;
    let tmp = container.termination_message_path.as_deref().unwrap_or("");
    if let Some(dir) = opts.pod_container_dir.as_ref().filter(|_| !tmp.is_empty()) {
        let path = dir.join(make_uid());
        mounts.push(Mount {
            container_path: tmp.to_string(),
            host_path: path.display().to_string(),
            readonly: false,
            selinux_relabel: settings.selinux_enabled,
            propagation: 0,
        });
        termination_log = Some(path);
    }
    (mounts, termination_log)
}

/// The Linux part: resources, OOM score, huge pages, security context.
pub fn generate_linux_container_config(
    container: &Container,
    pod: &Pod,
    params: &ContainerParams<'_>,
) -> LinuxContainerConfig {
    let mut sc = determine_effective_linux_security_context(
        pod,
        container,
        params.image_user,
        params.settings,
        params.extra_supplemental_groups,
    );
    if let (Some(target), Some(ns)) = (params.ns_target_container_id, sc.namespace_options.as_mut())
        && ns.pid == NamespaceMode::Container as i32
    {
        ns.pid = NamespaceMode::Target as i32;
        ns.target_id = target.to_string();
    }
    let mut resources = container_linux_resources(container.resources.as_ref(), params.settings);
    resources.oom_score_adj =
        get_container_oom_score_adjust(pod, container, params.settings.memory_capacity);
    resources.hugepage_limits = hugepage_limits(
        container.resources.as_ref(),
        &params.settings.hugepage_sizes,
    );
    LinuxContainerConfig {
        resources: Some(resources),
        security_context: Some(sc),
    }
}

/// The ContainerConfig for `container` of `pod`.
pub fn generate_container_config(
    container: &Container,
    pod: &Pod,
    params: &ContainerParams<'_>,
) -> Result<GeneratedContainerConfig, ContainerConfigError> {
    verify_run_as_non_root(pod, container, params.image_user)?;
    let opts = params.opts;
    let (command, args) = expand_container_command_and_args(container, &opts.envs);
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let log_directory = build_container_logs_directory(namespace, name, uid, &container.name);
    let (mounts, termination_log) = make_mounts(opts, container, params.settings);
    let config = ContainerConfig {
        metadata: Some(ContainerMetadata {
            name: container.name.clone(),
            attempt: params.restart_count,
        }),
        image: Some(ImageSpec {
            image: params.image_ref.to_string(),
            annotations: Default::default(),
        }),
        command,
        args,
        working_dir: container.working_dir.clone().unwrap_or_default(),
        envs: opts
            .envs
            .iter()
            .map(|e| KeyValue {
                key: e.name.clone(),
                value: e.value.clone(),
            })
            .collect(),
        mounts,
        devices: opts
            .devices
            .iter()
            .map(|d| Device {
                container_path: d.path_in_container.clone(),
                host_path: d.path_on_host.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        labels: new_container_labels(container, pod),
        annotations: new_container_annotations(container, pod, params.restart_count, opts),
        log_path: build_container_log_path(&container.name, params.restart_count),
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false),
        linux: Some(generate_linux_container_config(container, pod, params)),
        windows: None,
    };
    Ok(GeneratedContainerConfig {
        config,
        log_directory,
        termination_log,
    })
}

#[cfg(test)]
#[path = "container_tests.rs"]
mod tests;
