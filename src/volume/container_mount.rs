//! A mount into a container as the kubelet hands it to the runtime
//! (kubecontainer's Mount), and what a subPath mount still needs: the
//! volume layer prepares subPaths, the runtime manager mounts them.

use std::path::PathBuf;

use crate::cri::api::MountPropagation;

/// How a subPath mount still has to be prepared on the host before the
/// container starts (create the directory, bind it safely). The volume
/// manager does that I/O; `Mount::host_path` already names the joined path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPathMount {
    /// The volume's own host path.
    pub volume_path: PathBuf,
    /// The sub path within the volume, expanded and checked.
    pub sub_path: String,
    /// Index of the mount within `container.volumeMounts`.
    pub volume_mount_index: usize,
}

/// One mount into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The volume name (`k8s-managed-etc-hosts` for the hosts file).
    pub name: String,
    pub container_path: String,
    pub host_path: String,
    pub read_only: bool,
    pub selinux_relabel: bool,
    pub propagation: MountPropagation,
    /// Set for subPath / subPathExpr mounts.
    pub sub_path: Option<SubPathMount>,
}
