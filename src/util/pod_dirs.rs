//! The layout under `--root-dir` (kubelet_getters.go): where pods, their
//! volumes, plugin data, container files and the kubelet's own state live,
//! and the start-up step that creates the top-level directories
//! (setupDataDirs).
//!
//! ```text
//! <root>/pods/<uid>/volumes/<escaped plugin>/<volume>
//! <root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>
//! <root>/pods/<uid>/volumeDevices/<escaped plugin>
//! <root>/pods/<uid>/plugins/<escaped plugin>/<volume>
//! <root>/pods/<uid>/containers/<container>/<id>
//! <root>/pods/<uid>/etc-hosts
//! <root>/plugins/<plugin>            <root>/plugins_registry
//! <root>/pod-resources               <root>/checkpoints
//! ```

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::util::path::clean_path;
use crate::volume::util::mount::SharedMountError;

/// `pods`: one directory per pod UID.
pub const PODS_DIR_NAME: &str = "pods";
/// `volumes`: per-pod volume directories, by escaped plugin name.
pub const VOLUMES_DIR_NAME: &str = "volumes";
/// `volume-subpaths`: per-pod bind mounts of subPath volume mounts.
pub const VOLUME_SUBPATHS_DIR_NAME: &str = "volume-subpaths";
/// `volumeDevices`: per-pod block volume devices.
pub const VOLUME_DEVICES_DIR_NAME: &str = "volumeDevices";
/// `plugins`: plugin data, node-wide and per pod.
pub const PLUGINS_DIR_NAME: &str = "plugins";
/// `plugins_registry`: where plugins register their sockets.
pub const PLUGINS_REGISTRATION_DIR_NAME: &str = "plugins_registry";
/// `containers`: per-pod container data (termination-log files).
pub const CONTAINERS_DIR_NAME: &str = "containers";
/// `pod-resources`: the pod resources API socket.
pub const POD_RESOURCES_DIR_NAME: &str = "pod-resources";
/// `checkpoints`: container checkpoint archives.
pub const CHECKPOINTS_DIR_NAME: &str = "checkpoints";
/// The managed hosts file in a pod's directory.
pub const ETC_HOSTS_FILE_NAME: &str = "etc-hosts";

/// Paths under the kubelet's root directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDirs {
    root: PathBuf,
}

impl PodDirs {
    /// The layout under `root` (cleaned lexically, as Go's `path.Clean`).
    pub fn new(root: impl AsRef<Path>) -> Self {
        PodDirs {
            root: clean_path(root.as_ref()),
        }
    }

    pub fn root_dir(&self) -> &Path {
        &self.root
    }

    /// `<root>/pods`.
    pub fn pods_dir(&self) -> PathBuf {
        self.root.join(PODS_DIR_NAME)
    }

    /// `<root>/plugins`.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join(PLUGINS_DIR_NAME)
    }

    /// `<root>/plugins_registry`.
    pub fn plugins_registration_dir(&self) -> PathBuf {
        self.root.join(PLUGINS_REGISTRATION_DIR_NAME)
    }

    /// `<root>/plugins/<plugin>`: node-wide data of one plugin.
    pub fn plugin_dir(&self, plugin_name: &str) -> PathBuf {
        self.plugins_dir().join(plugin_name)
    }

    /// `<root>/plugins/<plugin>/volumeDevices`.
    pub fn volume_device_plugin_dir(&self, plugin_name: &str) -> PathBuf {
        self.plugin_dir(plugin_name).join(VOLUME_DEVICES_DIR_NAME)
    }

    /// `<root>/pod-resources`.
    pub fn pod_resources_dir(&self) -> PathBuf {
        self.root.join(POD_RESOURCES_DIR_NAME)
    }

    /// `<root>/checkpoints`.
    pub fn checkpoints_dir(&self) -> PathBuf {
        self.root.join(CHECKPOINTS_DIR_NAME)
    }

    /// `<root>/pods/<uid>`.
    pub fn pod_dir(&self, pod_uid: &str) -> PathBuf {
        self.pods_dir().join(pod_uid)
    }

    /// `<root>/pods/<uid>/volumes`.
    pub fn pod_volumes_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join(VOLUMES_DIR_NAME)
    }

    /// `<root>/pods/<uid>/volumes/<escaped plugin>/<volume>`.
    pub fn pod_volume_dir(&self, pod_uid: &str, escaped_plugin: &str, volume: &str) -> PathBuf {
        self.pod_volumes_dir(pod_uid)
            .join(escaped_plugin)
            .join(volume)
    }

    /// `<root>/pods/<uid>/volume-subpaths`.
    pub fn pod_volume_subpaths_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join(VOLUME_SUBPATHS_DIR_NAME)
    }

    /// `<root>/pods/<uid>/volumeDevices`.
    pub fn pod_volume_devices_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join(VOLUME_DEVICES_DIR_NAME)
    }

    /// `<root>/pods/<uid>/volumeDevices/<escaped plugin>`.
    pub fn pod_volume_device_dir(&self, pod_uid: &str, escaped_plugin: &str) -> PathBuf {
        self.pod_volume_devices_dir(pod_uid).join(escaped_plugin)
    }

    /// `<root>/pods/<uid>/plugins`.
    pub fn pod_plugins_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join(PLUGINS_DIR_NAME)
    }

    /// `<root>/pods/<uid>/plugins/<escaped plugin>`.
    pub fn pod_plugin_dir(&self, pod_uid: &str, escaped_plugin: &str) -> PathBuf {
        self.pod_plugins_dir(pod_uid).join(escaped_plugin)
    }

    /// `<root>/pods/<uid>/containers/<container>`.
    pub fn pod_container_dir(&self, pod_uid: &str, container: &str) -> PathBuf {
        self.pod_dir(pod_uid)
            .join(CONTAINERS_DIR_NAME)
            .join(container)
    }

    /// `<root>/pods/<uid>/etc-hosts`.
    pub fn pod_etc_hosts_path(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join(ETC_HOSTS_FILE_NAME)
    }

    /// The pod UIDs that have a directory under `<root>/pods`
    /// (listPodsFromDisk): directories only, in directory order.
    pub fn list_pods_from_disk(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.pods_dir())? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }

    /// Creates the pod's directory with its `volumes` and `plugins`
    /// directories (makePodDataDirs), mode 0750; existing ones are kept.
    pub fn make_pod_data_dirs(&self, pod_uid: &str) -> Result<(), PodDirsError> {
        for dir in [
            self.pod_dir(pod_uid),
            self.pod_volumes_dir(pod_uid),
            self.pod_plugins_dir(pod_uid),
        ] {
            mkdir_all(&dir, 0o750).map_err(|source| PodDirsError::Create {
                what: "pod data",
                path: dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

/// A directory could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum PodDirsError {
    #[error("error creating {what} directory {path:?}: {source}")]
    Create {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("error configuring root directory: {0}")]
    RootShared(#[source] SharedMountError),
}

/// `mkdir -p` with `mode` for the directories it creates (umask applies,
/// as with Go's MkdirAll).
pub fn mkdir_all(path: &Path, mode: u32) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(mode).create(path)
}

/// What setup_data_dirs should do besides creating the directories.
#[derive(Debug, Clone, Copy, Default)]
pub struct DataDirOptions {
    /// The ContainerCheckpoint feature gate: create `checkpoints` (0700).
    pub container_checkpoint: bool,
}

/// Creates the root directory and the node-wide directories under it
/// (setupDataDirs), and makes the root directory a shared mount point so
/// mounts made under it propagate into containers that ask for it.
pub fn setup_data_dirs(
    dirs: &PodDirs,
    opts: DataDirOptions,
    make_rshared: impl FnOnce(&Path) -> Result<(), SharedMountError>,
) -> Result<(), PodDirsError> {
    let create = |what: &'static str, path: PathBuf, mode: u32| {
        mkdir_all(&path, mode).map_err(|source| PodDirsError::Create { what, path, source })
    };
    create("root", dirs.root_dir().to_path_buf(), 0o750)?;
    make_rshared(dirs.root_dir()).map_err(PodDirsError::RootShared)?;
    create("pods", dirs.pods_dir(), 0o750)?;
    create("plugins", dirs.plugins_dir(), 0o750)?;
    create("plugins registry", dirs.plugins_registration_dir(), 0o750)?;
    create("podresources", dirs.pod_resources_dir(), 0o750)?;
    if opts.container_checkpoint {
        create("checkpoint", dirs.checkpoints_dir(), 0o700)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn layout_table() {
        let d = PodDirs::new("/var/lib/kubelet/");
        let uid = "520ef51a";
        let cases: Vec<(PathBuf, &str)> = vec![
            (d.pods_dir(), "/var/lib/kubelet/pods"),
            (d.plugins_dir(), "/var/lib/kubelet/plugins"),
            (
                d.plugins_registration_dir(),
                "/var/lib/kubelet/plugins_registry",
            ),
            (
                d.plugin_dir("kubernetes.io/csi"),
                "/var/lib/kubelet/plugins/kubernetes.io/csi",
            ),
            (
                d.volume_device_plugin_dir("p"),
                "/var/lib/kubelet/plugins/p/volumeDevices",
            ),
            (d.pod_resources_dir(), "/var/lib/kubelet/pod-resources"),
            (d.checkpoints_dir(), "/var/lib/kubelet/checkpoints"),
            (d.pod_dir(uid), "/var/lib/kubelet/pods/520ef51a"),
            (
                d.pod_volumes_dir(uid),
                "/var/lib/kubelet/pods/520ef51a/volumes",
            ),
            (
                d.pod_volume_dir(uid, "kubernetes.io~configmap", "cfg"),
                "/var/lib/kubelet/pods/520ef51a/volumes/kubernetes.io~configmap/cfg",
            ),
            (
                d.pod_volume_subpaths_dir(uid),
                "/var/lib/kubelet/pods/520ef51a/volume-subpaths",
            ),
            (
                d.pod_volume_device_dir(uid, "x~y"),
                "/var/lib/kubelet/pods/520ef51a/volumeDevices/x~y",
            ),
            (
                d.pod_plugin_dir(uid, "kubernetes.io~empty-dir"),
                "/var/lib/kubelet/pods/520ef51a/plugins/kubernetes.io~empty-dir",
            ),
            (
                d.pod_container_dir(uid, "main"),
                "/var/lib/kubelet/pods/520ef51a/containers/main",
            ),
            (
                d.pod_etc_hosts_path(uid),
                "/var/lib/kubelet/pods/520ef51a/etc-hosts",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, PathBuf::from(want));
        }
    }

    #[test]
    fn root_is_cleaned() {
        let cases = [
            ("/var/lib//kubelet/./", "/var/lib/kubelet"),
            ("/var/lib/kubelet/../k", "/var/lib/k"),
            ("rel/dir/..", "rel"),
            ("", "."),
        ];
        for (input, want) in cases {
            assert_eq!(PodDirs::new(input).root_dir(), Path::new(want), "{input}");
        }
    }

    #[test]
    fn data_dirs_are_created_and_listed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dirs = PodDirs::new(tmp.path().join("root"));
        let mut shared = None;
        setup_data_dirs(
            &dirs,
            DataDirOptions {
                container_checkpoint: true,
            },
            |p| {
                shared = Some(p.to_path_buf());
                Ok(())
            },
        )
        .expect("setup");
        assert_eq!(shared.as_deref(), Some(dirs.root_dir()));
        for p in [
            dirs.pods_dir(),
            dirs.plugins_dir(),
            dirs.plugins_registration_dir(),
            dirs.pod_resources_dir(),
        ] {
            assert!(p.is_dir(), "{p:?}");
        }
        let mode = std::fs::metadata(dirs.checkpoints_dir())
            .expect("checkpoints")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);

        dirs.make_pod_data_dirs("u1").expect("pod dirs");
        std::fs::write(dirs.pods_dir().join("stray-file"), b"").expect("file");
        assert!(dirs.pod_volumes_dir("u1").is_dir());
        assert!(dirs.pod_plugins_dir("u1").is_dir());
        assert_eq!(dirs.list_pods_from_disk().expect("list"), vec!["u1"]);

        let err = setup_data_dirs(&dirs, DataDirOptions::default(), |p| {
            Err(SharedMountError::NoMount(p.to_path_buf()))
        })
        .expect_err("rshared failure is reported");
        assert_eq!(
            err.to_string(),
            format!(
                "error configuring root directory: cannot find mount point for {:?}",
                dirs.root_dir()
            )
        );
    }
}
