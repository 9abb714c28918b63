//! hostPath (pkg/volume/hostpath): a path on the node, checked against the
//! volume's type before containers get it; DirectoryOrCreate and
//! FileOrCreate create what is missing (0755 / 0644). Nothing is mounted
//! and nothing is torn down.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{HostPathVolumeSource, Pod, Volume};

use crate::volume::error::VolumeError;
use crate::volume::plugin::{Mounter, Unmounter, VolumePlugin};
use crate::volume::spec::{Attributes, MounterArgs, Spec};

pub const HOST_PATH_PLUGIN_NAME: &str = "kubernetes.io/host-path";

/// The plugin.
#[derive(Debug, Default)]
pub struct HostPathPlugin;

impl HostPathPlugin {
    pub fn new() -> Self {
        HostPathPlugin
    }
}

impl VolumePlugin for HostPathPlugin {
    fn name(&self) -> &'static str {
        HOST_PATH_PLUGIN_NAME
    }

    fn can_support(&self, spec: &Spec) -> bool {
        spec.host_path().is_some()
    }

    fn requires_remount(&self, _spec: &Spec) -> bool {
        false
    }

    fn new_mounter(&self, spec: &Spec, _pod: &Arc<Pod>) -> Result<Arc<dyn Mounter>, VolumeError> {
        let source = spec
            .host_path()
            .ok_or(VolumeError::WrongSpec("a HostPath"))?;
        Ok(Arc::new(HostPathMounter {
            path: source.path.clone(),
            path_type: source.type_.clone().unwrap_or_default(),
            read_only: spec.read_only,
        }))
    }

    fn new_unmounter(
        &self,
        _volume_name: &str,
        _pod_uid: &str,
    ) -> Result<Arc<dyn Unmounter>, VolumeError> {
        Ok(Arc::new(HostPathUnmounter))
    }

    fn construct_volume_spec(
        &self,
        volume_name: &str,
        _mount_path: &Path,
    ) -> Result<Spec, VolumeError> {
        Ok(Spec::from_volume(Volume {
            name: volume_name.to_string(),
            host_path: Some(HostPathVolumeSource {
                path: volume_name.to_string(),
                type_: None,
            }),
            ..Default::default()
        }))
    }
}

/// Sets up (checks) one hostPath volume.
#[derive(Debug, Clone)]
pub struct HostPathMounter {
    path: String,
    path_type: String,
    read_only: bool,
}

/// What a path on the node is (hostutil's FileType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Directory,
    File,
    Socket,
    CharDevice,
    BlockDevice,
}

/// The type of `path`, following links.
pub fn file_type(path: &str) -> Result<FileType, VolumeError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(VolumeError::other(format!("path {path:?} does not exist")));
        }
        Err(e) => return Err(VolumeError::io("stat", Path::new(path), &e)),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        Ok(FileType::Directory)
    } else if ft.is_file() {
        Ok(FileType::File)
    } else if ft.is_socket() {
        Ok(FileType::Socket)
    } else if ft.is_char_device() {
        Ok(FileType::CharDevice)
    } else if ft.is_block_device() {
        Ok(FileType::BlockDevice)
    } else {
        Err(VolumeError::other(
            "only recognise file, directory, socket, block device and character device",
        ))
    }
}

fn exists(path: &str) -> bool {
    fs::metadata(path).is_ok()
}

fn expect_type(
    path: &str,
    want: FileType,
    what: &str,
    must_exist: bool,
) -> Result<(), VolumeError> {
    if must_exist && !exists(path) {
        return Err(VolumeError::other(format!("path {path:?} does not exist")));
    }
    if file_type(path)? == want {
        Ok(())
    } else {
        Err(VolumeError::other(format!(
            "hostPath type check failed: {path} is not {what}"
        )))
    }
}

fn make_dir(path: &str) -> Result<(), VolumeError> {
    match crate::util::pod_dirs::mkdir_all(Path::new(path), 0o755) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(VolumeError::io("mkdir", Path::new(path), &e)),
    }
}

fn make_file(path: &str) -> Result<(), VolumeError> {
    match fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        // An existing directory is left for the type check to report.
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => Ok(()),
        Err(e) => Err(VolumeError::io("open", Path::new(path), &e)),
    }
}

/// Checks (and for the *OrCreate types creates) `path` as `path_type`
/// demands. Blocking.
pub fn check_type(path: &str, path_type: &str) -> Result<(), VolumeError> {
    match path_type {
        "" => Ok(()),
        "DirectoryOrCreate" => {
            if !exists(path) {
                return make_dir(path);
            }
            expect_type(path, FileType::Directory, "a directory", true)
        }
        "Directory" => expect_type(path, FileType::Directory, "a directory", true),
        "FileOrCreate" => {
            if !exists(path) {
                return make_file(path);
            }
            expect_type(path, FileType::File, "a file", true)
        }
        "File" => expect_type(path, FileType::File, "a file", true),
        "Socket" => expect_type(path, FileType::Socket, "a socket file", false),
        "CharDevice" => expect_type(path, FileType::CharDevice, "a character device", false),
        "BlockDevice" => expect_type(path, FileType::BlockDevice, "a block device", false),
        other => Err(VolumeError::other(format!(
            "{other} is an invalid volume type"
        ))),
    }
}

#[async_trait]
impl Mounter for HostPathMounter {
    fn path(&self) -> PathBuf {
        PathBuf::from(&self.path)
    }

    fn attributes(&self) -> Attributes {
        Attributes {
            read_only: self.read_only,
            managed: false,
            selinux_relabel: false,
        }
    }

    async fn set_up(&self, _args: &MounterArgs) -> Result<(), VolumeError> {
        if self.path.split('/').any(|s| s == "..") {
            return Err(VolumeError::other(format!(
                "invalid HostPath `{}`: must not contain '..'",
                self.path
            )));
        }
        let (path, ty) = (self.path.clone(), self.path_type.clone());
        tokio::task::spawn_blocking(move || check_type(&path, &ty))
            .await
            .map_err(|e| VolumeError::other(format!("hostPath check task failed: {e}")))?
    }
}

/// Tearing a hostPath volume down does nothing.
#[derive(Debug, Clone, Copy)]
pub struct HostPathUnmounter;

#[async_trait]
impl Unmounter for HostPathUnmounter {
    fn path(&self) -> PathBuf {
        PathBuf::new()
    }

    async fn tear_down(&self) -> Result<(), VolumeError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn setup() -> (tempfile::TempDir, String, String, String) {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("dir");
        fs::create_dir(&dir).expect("mkdir");
        let file = tmp.path().join("file");
        fs::write(&file, b"x").expect("file");
        let sock = tmp.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("socket");
        std::mem::forget(_listener);
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        (tmp, s(dir), s(file), s(sock))
    }

    #[test]
    fn type_check_table() {
        let (tmp, dir, file, sock) = setup();
        let missing = tmp.path().join("missing").to_string_lossy().into_owned();
        let dev_null = "/dev/null".to_string();
        let cases: Vec<(&str, &str, Result<(), String>)> = vec![
            (&dir, "", Ok(())),
            (&missing, "", Ok(())),
            (&dir, "Directory", Ok(())),
            (
                &file,
                "Directory",
                Err(format!(
                    "hostPath type check failed: {file} is not a directory"
                )),
            ),
            (
                &missing,
                "Directory",
                Err(format!("path {missing:?} does not exist")),
            ),
            (&file, "File", Ok(())),
            (
                &dir,
                "File",
                Err(format!("hostPath type check failed: {dir} is not a file")),
            ),
            (
                &missing,
                "File",
                Err(format!("path {missing:?} does not exist")),
            ),
            (&sock, "Socket", Ok(())),
            (
                &file,
                "Socket",
                Err(format!(
                    "hostPath type check failed: {file} is not a socket file"
                )),
            ),
            (
                &missing,
                "Socket",
                Err(format!("path {missing:?} does not exist")),
            ),
            (&dev_null, "CharDevice", Ok(())),
            (
                &file,
                "CharDevice",
                Err(format!(
                    "hostPath type check failed: {file} is not a character device"
                )),
            ),
            (
                &dev_null,
                "BlockDevice",
                Err("hostPath type check failed: /dev/null is not a block device".to_string()),
            ),
            (
                &file,
                "DirectoryOrCreate",
                Err(format!(
                    "hostPath type check failed: {file} is not a directory"
                )),
            ),
            (
                &dir,
                "FileOrCreate",
                Err(format!("hostPath type check failed: {dir} is not a file")),
            ),
            (
                &dir,
                "Bogus",
                Err("Bogus is an invalid volume type".to_string()),
            ),
        ];
        for (path, ty, want) in cases {
            let got = check_type(path, ty).map_err(|e| e.to_string());
            assert_eq!(got, want, "{path} as {ty:?}");
        }
    }

    #[test]
    fn or_create_types_create_with_go_modes() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path().join("a/b/c");
        check_type(&d.to_string_lossy(), "DirectoryOrCreate").expect("dir");
        assert!(d.is_dir());
        assert_eq!(
            fs::metadata(&d).expect("meta").permissions().mode() & 0o777,
            0o755
        );
        let f = tmp.path().join("a/new-file");
        check_type(&f.to_string_lossy(), "FileOrCreate").expect("file");
        assert!(f.is_file());
        assert_eq!(
            fs::metadata(&f).expect("meta").permissions().mode() & 0o777,
            0o644
        );
        // Existing ones are checked, not recreated.
        check_type(&d.to_string_lossy(), "DirectoryOrCreate").expect("dir again");
        check_type(&f.to_string_lossy(), "FileOrCreate").expect("file again");
    }

    #[tokio::test]
    async fn mounter_rejects_backsteps_and_reports_its_path() {
        let spec = Spec::from_volume(Volume {
            name: "h".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/etc/../etc/hostname".into(),
                type_: Some("File".into()),
            }),
            ..Default::default()
        });
        let pod = Arc::new(Pod::default());
        let m = HostPathPlugin.new_mounter(&spec, &pod).expect("mounter");
        assert_eq!(m.path(), PathBuf::from("/etc/../etc/hostname"));
        assert_eq!(m.attributes(), Attributes::default());
        let err = m
            .set_up(&MounterArgs::default())
            .await
            .expect_err("backsteps");
        assert_eq!(
            err.to_string(),
            "invalid HostPath `/etc/../etc/hostname`: must not contain '..'"
        );
    }
}
