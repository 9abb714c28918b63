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
        // Validation admits one source per volume; the first set one wins.
        let v = volume;
        v.secret
            .clone()
            .map(Source::Secret)
            .or_else(|| v.config_map.clone().map(Source::ConfigMap))
            .or_else(|| v.projected.clone().map(Source::Projected))
            .or_else(|| v.downward_api.clone().map(Source::DownwardApi))
            .or_else(|| v.empty_dir.clone().map(Source::EmptyDir))
            .or_else(|| v.host_path.clone().map(Source::HostPath))
            .unwrap_or_else(|| Source::Other(Box::new(v.clone())))
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
}

/// `Spec::<kind>()`: the volume's source when it is of that kind.
macro_rules! source_accessors {
    ($($name:ident: $variant:ident($ty:ty);)*) => {
        impl Spec {
            $(
                pub fn $name(&self) -> Option<&$ty> {
                    match &self.volume.source {
                        Source::$variant(s) => Some(s),
                        _ => None,
                    }
                }
            )*
        }
    };
}

source_accessors! {
    secret: Secret(SecretVolumeSource);
    config_map: ConfigMap(ConfigMapVolumeSource);
    projected: Projected(ProjectedVolumeSource);
    downward_api: DownwardApi(DownwardAPIVolumeSource);
    empty_dir: EmptyDir(EmptyDirVolumeSource);
    host_path: HostPath(HostPathVolumeSource);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_keeps_the_name_and_the_one_source() {
        let volume = |v: serde_json::Value| -> Volume { serde_json::from_value(v).unwrap() };
        // (volume, the accessor that answers, or none)
        let cases = [
            (
                volume(serde_json::json!({"name": "s", "secret": {"secretName": "x"}})),
                Some("secret"),
            ),
            (
                volume(serde_json::json!({"name": "c", "configMap": {"name": "x"}})),
                Some("config_map"),
            ),
            (
                volume(serde_json::json!({"name": "p", "projected": {"sources": []}})),
                Some("projected"),
            ),
            (
                volume(serde_json::json!({"name": "d", "downwardAPI": {}})),
                Some("downward_api"),
            ),
            (
                volume(serde_json::json!({"name": "e", "emptyDir": {"medium": "Memory"}})),
                Some("empty_dir"),
            ),
            (
                volume(serde_json::json!({"name": "h", "hostPath": {"path": "/x"}})),
                Some("host_path"),
            ),
            (
                volume(
                    serde_json::json!({"name": "v", "persistentVolumeClaim": {"claimName": "x"}}),
                ),
                None,
            ),
            (volume(serde_json::json!({"name": "n"})), None),
        ];
        for (v, want) in cases {
            let spec = Spec::of(&v);
            assert_eq!(spec.name(), v.name);
            let got: Vec<&str> = [
                ("secret", spec.secret().is_some()),
                ("config_map", spec.config_map().is_some()),
                ("projected", spec.projected().is_some()),
                ("downward_api", spec.downward_api().is_some()),
                ("empty_dir", spec.empty_dir().is_some()),
                ("host_path", spec.host_path().is_some()),
            ]
            .into_iter()
            .filter_map(|(k, set)| set.then_some(k))
            .collect();
            assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{}", v.name);
            assert_eq!(spec, Spec::from_volume(v.clone()), "{}", v.name);
        }
        assert_eq!(
            Spec::of(&volume(
                serde_json::json!({"name": "e", "emptyDir": {"medium": "Memory"}})
            ))
            .empty_dir()
            .and_then(|e| e.medium.as_deref()),
            Some("Memory")
        );
    }
}
