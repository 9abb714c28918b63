//! What a plugin is asked to mount (Go's `volume.Spec` for inline pod
//! volumes), the arguments of a mount, and what a mounted volume tells the
//! container runtime about itself.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, DownwardAPIVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource,
    Pod, ProjectedVolumeSource, SecretVolumeSource, Volume,
};

/// One pod volume as the plugins see it: its name and its one source,
/// shared between the desired and the actual state. Not the API's
/// `Volume`, which holds every source type inline (kilobytes per volume,
/// almost all of it empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    volume: Arc<VolumeSpec>,
    /// Mount read-only whatever the volume mounts ask (persistent volumes
    /// only; inline volumes are never forced read-only).
    pub read_only: bool,
}

#[derive(Debug, PartialEq)]
struct VolumeSpec {
    name: String,
    source: Source,
}

/// The source of a volume, of the types the kubelet's plugins mount.
#[derive(Debug, PartialEq)]
enum Source {
    Secret(SecretVolumeSource),
    ConfigMap(ConfigMapVolumeSource),
    Projected(ProjectedVolumeSource),
    DownwardApi(DownwardAPIVolumeSource),
    EmptyDir(EmptyDirVolumeSource),
    HostPath(HostPathVolumeSource),
    /// A type no plugin here mounts (or none at all): kept whole, so that
    /// what is reported about it stays exact.
    Other(Box<Volume>),
}

impl Source {
    fn of(volume: &Volume) -> Source {
        let Volume {
            secret,
            config_map,
            projected,
            downward_api,
            empty_dir,
            host_path,
            ..
        } = volume;
        // Validation admits one source per volume; the first set one wins.
        match (
            secret,
            config_map,
            projected,
            downward_api,
            empty_dir,
            host_path,
        ) {
            (Some(s), ..) => Source::Secret(s.clone()),
            (_, Some(s), ..) => Source::ConfigMap(s.clone()),
            (_, _, Some(s), ..) => Source::Projected(s.clone()),
            (_, _, _, Some(s), ..) => Source::DownwardApi(s.clone()),
            (_, _, _, _, Some(s), _) => Source::EmptyDir(s.clone()),
            (.., Some(s)) => Source::HostPath(s.clone()),
            _ => Source::Other(Box::new(volume.clone())),
        }
    }
}

impl Spec {
    pub fn from_volume(volume: Volume) -> Self {
        Self::of(&volume)
    }

    /// The spec of a pod's volume (copies only its source).
    pub fn of(volume: &Volume) -> Self {
        Spec {
            volume: Arc::new(VolumeSpec {
                name: volume.name.clone(),
                source: Source::of(volume),
            }),
            read_only: false,
        }
    }

    /// The volume's name in the pod spec (or the wrapper's name).
    pub fn name(&self) -> &str {
        &self.volume.name
    }

    pub fn secret(&self) -> Option<&SecretVolumeSource> {
        match &self.volume.source {
            Source::Secret(s) => Some(s),
            _ => None,
        }
    }

    pub fn config_map(&self) -> Option<&ConfigMapVolumeSource> {
        match &self.volume.source {
            Source::ConfigMap(s) => Some(s),
            _ => None,
        }
    }

    pub fn projected(&self) -> Option<&ProjectedVolumeSource> {
        match &self.volume.source {
            Source::Projected(s) => Some(s),
            _ => None,
        }
    }

    pub fn downward_api(&self) -> Option<&DownwardAPIVolumeSource> {
        match &self.volume.source {
            Source::DownwardApi(s) => Some(s),
            _ => None,
        }
    }

    pub fn empty_dir(&self) -> Option<&EmptyDirVolumeSource> {
        match &self.volume.source {
            Source::EmptyDir(s) => Some(s),
            _ => None,
        }
    }

    pub fn host_path(&self) -> Option<&HostPathVolumeSource> {
        match &self.volume.source {
            Source::HostPath(s) => Some(s),
            _ => None,
        }
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
