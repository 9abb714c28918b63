//! What the kubelet hands the runtime manager to create one container
//! (kubecontainer's `RunContainerOptions` and its parts).

use std::path::PathBuf;

/// One resolved environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

impl EnvVar {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        EnvVar {
            name: name.into(),
            value: value.into(),
        }
    }
}

pub use crate::volume::container_mount::{Mount, SubPathMount};

/// A device made available to a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub path_on_host: String,
    pub path_in_container: String,
    /// cgroup permissions: some combination of `r`, `w`, `m`.
    pub permissions: String,
}

/// A container annotation requested by a device plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub name: String,
    pub value: String,
}

/// A port mapping as kubecontainer keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    pub host_port: i32,
    pub container_port: i32,
    /// The API's protocol string (`TCP`, `UDP`, `SCTP`, or empty).
    pub protocol: String,
    pub host_ip: String,
}

/// The contents of the managed `/etc/hosts` file a container mount needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcHostsFile {
    /// `<pod dir>/etc-hosts`.
    pub path: PathBuf,
    pub content: String,
}

/// Everything the runtime manager needs beyond the container spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContainerOptions {
    pub envs: Vec<EnvVar>,
    pub mounts: Vec<Mount>,
    pub devices: Vec<DeviceInfo>,
    pub annotations: Vec<Annotation>,
    /// `<pod dir>/containers/<name>`: where the termination-log file goes.
    /// `None` when the container has no termination message path.
    pub pod_container_dir: Option<PathBuf>,
    /// The container's hostname (the FQDN when setHostnameAsFQDN).
    pub hostname: String,
    /// The hosts file to write before the container starts, when mounted.
    pub etc_hosts: Option<EtcHostsFile>,
}
