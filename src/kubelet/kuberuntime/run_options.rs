//! The kubelet's half of container creation (GenerateRunContainerOptions
//! and makeMounts in kubelet_pods.go): the container's hostname, its
//! environment, devices, and its mounts in Go's order: the container's
//! volume mounts, then the managed /etc/hosts.
//!
//! Pure: the volume manager supplies the mounted volumes, the caller the
//! resolved environment; the caller creates `<pod dir>/containers/<name>`,
//! writes the hosts file and prepares subPath mounts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::cri::api::MountPropagation;
use crate::kubelet::container::helpers::{ExpandError, expand_container_volume_mount};
use crate::kubelet::container::{DeviceInfo, EnvVar, Mount, RunContainerOptions, SubPathMount};
use crate::kubelet::hosts::{
    ETC_HOSTS_PATH, HostsError, make_hosts_mount, should_mount_hosts_file,
};
use crate::kubelet::network::dns::{
    HostnameError, generate_pod_hostname_and_domain, nodename_for_kernel,
};

/// The kubelet reason for every error here.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// A volume the volume manager has mounted for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedVolume {
    /// The volume's path on the host.
    pub host_path: String,
    /// The volume plugin requires a read-only mount.
    pub read_only: bool,
    /// The volume is managed, supports SELinux and has not been relabeled
    /// yet: ask the runtime to relabel it.
    pub selinux_relabel: bool,
}

/// Mounted volumes by volume name.
pub type VolumeMap = HashMap<String, MountedVolume>;

/// Errors building the run options.
#[derive(Debug, thiserror::Error)]
pub enum RunOptionsError {
    #[error(transparent)]
    Hostname(#[from] HostnameError),
    #[error("cannot find volume {volume:?} to mount into container {container:?}")]
    MissingVolume { volume: String, container: String },
    #[error(transparent)]
    SubPathExpr(#[from] ExpandError),
    #[error("error SubPath `{0}` must not be an absolute path")]
    AbsoluteSubPath(String),
    #[error("unable to provision SubPath `{0}`: must not contain '..'")]
    SubPathBacksteps(String),
    #[error("invalid MountPropagation mode: {0:?}")]
    MountPropagation(String),
    #[error(transparent)]
    Hosts(#[from] HostsError),
}

impl RunOptionsError {
    pub fn reason(&self) -> &'static str {
        CREATE_CONTAINER_CONFIG_ERROR
    }
}

/// Inputs besides the pod and container.
#[derive(Debug, Clone)]
pub struct RunOptionsParams<'a> {
    /// `<root-dir>/pods/<uid>`.
    pub pod_dir: &'a Path,
    /// The pod's IPs (the hosts file is mounted only once there are some).
    pub pod_ips: &'a [String],
    pub cluster_domain: &'a str,
    /// The pod's mounted volumes.
    pub volumes: &'a VolumeMap,
    /// What the container manager allocated (device plugin devices,
    /// mounts, envs and annotations); the kubelet's own entries follow its.
    pub base: RunContainerOptions,
    /// Devices of block volumes, after the container manager's.
    pub block_devices: Vec<DeviceInfo>,
    /// The resolved environment (`envvars::make_environment_variables`).
    pub envs: Vec<EnvVar>,
    /// The node's /etc/hosts, needed for host-network pods.
    pub node_hosts: Option<&'a str>,
}

/// The container's CRI propagation mode.
pub fn translate_mount_propagation(
    mode: Option<&str>,
) -> Result<MountPropagation, RunOptionsError> {
    match mode {
        None | Some("None") => Ok(MountPropagation::PropagationPrivate),
        Some("HostToContainer") => Ok(MountPropagation::PropagationHostToContainer),
        Some("Bidirectional") => Ok(MountPropagation::PropagationBidirectional),
        Some(other) => Err(RunOptionsError::MountPropagation(other.to_string())),
    }
}

fn clean_absolute(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The container's mounts: its volume mounts, then /etc/hosts unless it
/// mounts something there itself. Returns the hosts file to write too.
pub fn make_mounts(
    pod: &Pod,
    container: &Container,
    hostname: &str,
    domain: &str,
    params: &RunOptionsParams<'_>,
    envs: &[EnvVar],
) -> Result<(Vec<Mount>, Option<crate::kubelet::container::EtcHostsFile>), RunOptionsError> {
    let mut mount_etc_hosts = should_mount_hosts_file(params.pod_ips);
    let mut mounts = Vec::new();
    for (index, vm) in container.volume_mounts.iter().flatten().enumerate() {
        mount_etc_hosts = mount_etc_hosts && vm.mount_path != ETC_HOSTS_PATH;
        let vol = params
            .volumes
            .get(&vm.name)
            .ok_or_else(|| RunOptionsError::MissingVolume {
                volume: vm.name.clone(),
                container: container.name.clone(),
            })?;
        let mut sub_path = vm.sub_path.clone().unwrap_or_default();
        if vm.sub_path_expr.as_deref().is_some_and(|e| !e.is_empty()) {
            sub_path = expand_container_volume_mount(vm, envs)?;
        }
        let mut host_path = vol.host_path.clone();
        let mut sub = None;
        if !sub_path.is_empty() {
            if sub_path.starts_with('/') {
                return Err(RunOptionsError::AbsoluteSubPath(sub_path));
            }
            if sub_path.split('/').any(|seg| seg == "..") {
                return Err(RunOptionsError::SubPathBacksteps(sub_path));
            }
            host_path = clean_absolute(&format!("{}/{sub_path}", vol.host_path));
            sub = Some(SubPathMount {
                volume_path: PathBuf::from(&vol.host_path),
                sub_path: sub_path.clone(),
                volume_mount_index: index,
            });
        }
        let container_path = if vm.mount_path.starts_with('/') {
            vm.mount_path.clone()
        } else {
            clean_absolute(&vm.mount_path)
        };
        let propagation = translate_mount_propagation(vm.mount_propagation.as_deref())?;
        mounts.push(Mount {
            name: vm.name.clone(),
            container_path,
            host_path,
            read_only: vm.read_only.unwrap_or(false) || vol.read_only,
            selinux_relabel: vol.selinux_relabel,
            propagation,
            sub_path: sub,
        });
    }
    let mut hosts_file = None;
    if mount_etc_hosts {
        let spec = pod.spec.as_ref();
        let (file, mount) = make_hosts_mount(
            params.pod_dir,
            params.pod_ips,
            hostname,
            domain,
            spec.and_then(|s| s.host_aliases.as_deref()).unwrap_or(&[]),
            spec.and_then(|s| s.host_network).unwrap_or(false),
            params.node_hosts,
        )?;
        mounts.push(mount);
        hosts_file = Some(file);
    }
    Ok((mounts, hosts_file))
}

/// `<pod dir>/containers/<name>`.
pub fn pod_container_dir(pod_dir: &Path, container: &str) -> PathBuf {
    pod_dir.join("containers").join(container)
}

/// Everything the runtime manager needs to create `container`.
pub fn generate_run_container_options(
    pod: &Pod,
    container: &Container,
    params: RunOptionsParams<'_>,
) -> Result<RunContainerOptions, RunOptionsError> {
    let (hostname, domain) = generate_pod_hostname_and_domain(pod, params.cluster_domain)?;
    let set_fqdn = pod.spec.as_ref().and_then(|s| s.set_hostname_as_fqdn);
    let mut opts = params.base.clone();
    opts.hostname = nodename_for_kernel(&hostname, &domain, set_fqdn)?;
    opts.devices.extend(params.block_devices.iter().cloned());
    opts.envs.extend(params.envs.iter().cloned());
    let (mounts, etc_hosts) = make_mounts(pod, container, &hostname, &domain, &params, &opts.envs)?;
    opts.mounts.extend(mounts);
    opts.etc_hosts = etc_hosts;
    opts.pod_container_dir = container
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|_| pod_container_dir(params.pod_dir, &container.name));
    Ok(opts)
}

#[cfg(test)]
#[path = "run_options_tests.rs"]
mod tests;
