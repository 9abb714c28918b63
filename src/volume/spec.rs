//! What a plugin is asked to mount (Go's `volume.Spec` for inline pod
//! volumes), the arguments of a mount, and what a mounted volume tells the
//! container runtime about itself.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

/// One pod volume as the plugins see it. The volume is shared: a `Volume`
/// holds every source type inline (kilobytes), and the desired and actual
/// states keep a spec for each pod's use of each volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub volume: Arc<Volume>,
    /// Mount read-only whatever the volume mounts ask (persistent volumes
    /// only; inline volumes are never forced read-only).
    pub read_only: bool,
}

impl Spec {
    pub fn from_volume(volume: impl Into<Arc<Volume>>) -> Self {
        Spec {
            volume: volume.into(),
            read_only: false,
        }
    }

    /// The volume's name in the pod spec (or the wrapper's name).
    pub fn name(&self) -> &str {
        &self.volume.name
    }
}

/// How a mounted volume behaves towards containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Containers must mount it read-only.
    pub read_only: bool,
    /// The kubelet manages its contents (ownership, labels).
    pub managed: bool,
    /// The runtime may relabel it for SELinux.
    pub selinux_relabel: bool,
}

/// Arguments of one SetUp call, taken from the pod at mount time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MounterArgs {
    /// The user every container runs as, when they all agree.
    pub fs_user: Option<i64>,
    /// The pod's `securityContext.fsGroup`.
    pub fs_group: Option<i64>,
    /// The pod's `securityContext.fsGroupChangePolicy`.
    pub fs_group_change_policy: Option<String>,
}

impl MounterArgs {
    /// The arguments the kubelet passes when mounting `pod`'s volumes.
    pub fn for_pod(pod: &Pod) -> Self {
        let sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
        MounterArgs {
            fs_user: crate::volume::util::fs_user::fs_user_from(pod),
            fs_group: sc.and_then(|s| s.fs_group),
            fs_group_change_policy: sc.and_then(|s| s.fs_group_change_policy.clone()),
        }
    }
}

/// The fsGroupChangePolicy that skips the recursive walk when the root
/// already has the right group and mode.
pub const FS_GROUP_CHANGE_ON_ROOT_MISMATCH: &str = "OnRootMismatch";
