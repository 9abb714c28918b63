//! Mounting and mount-point queries (k8s.io/mount-utils), over mount(2) and
//! umount2(2) rather than the mount binaries, and /proc/self/mountinfo.

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use crate::volume::error::VolumeError;

pub use crate::util::mountinfo::{MountInfo, find_mount_info, parse_mountinfo};

/// Mount operations the volume plugins need (mount.Interface).
pub trait MountInterface: Send + Sync {
    /// Mounts `source` on `target` with `-t fstype -o options` semantics.
    fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> Result<(), VolumeError>;
    /// Unmounts `target`.
    fn unmount(&self, target: &Path) -> Result<(), VolumeError>;
    /// Cheap check: true unless `path` sits on another device than its
    /// parent. Bind mounts within one file system go undetected.
    fn is_likely_not_mount_point(&self, path: &Path) -> io::Result<bool>;
    /// Every mount of this mount namespace.
    fn list(&self) -> io::Result<Vec<MountInfo>>;
    /// Makes `path` a mount point with shared propagation (see
    /// [`make_rshared`]).
    fn make_rshared(&self, path: &Path) -> Result<(), SharedMountError>;
}

/// A mounter that mounts nothing (hollow nodes): mounts and unmounts
/// succeed without effect, no path is a mount point, the table is empty.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMounter;

impl MountInterface for NoopMounter {
    fn mount(&self, _s: &str, _t: &Path, _f: &str, _o: &[String]) -> Result<(), VolumeError> {
        Ok(())
    }
    fn unmount(&self, _target: &Path) -> Result<(), VolumeError> {
        Ok(())
    }
    fn is_likely_not_mount_point(&self, _path: &Path) -> io::Result<bool> {
        Ok(true)
    }
    fn list(&self) -> io::Result<Vec<MountInfo>> {
        Ok(Vec::new())
    }
    fn make_rshared(&self, _path: &Path) -> Result<(), SharedMountError> {
        Ok(())
    }
}

/// The host's mount table, through system calls.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMounter;

/// Splits `-o` options into mount(2) flags and file-system data.
pub fn parse_mount_options(options: &[String]) -> (MsFlags, Vec<String>) {
    let mut flags = MsFlags::empty();
    let mut data = Vec::new();
    for o in options {
        match o.as_str() {
            "bind" => flags |= MsFlags::MS_BIND,
            "rbind" => flags |= MsFlags::MS_BIND | MsFlags::MS_REC,
            "ro" => flags |= MsFlags::MS_RDONLY,
            "rw" | "defaults" => {}
            "remount" => flags |= MsFlags::MS_REMOUNT,
            "nosuid" => flags |= MsFlags::MS_NOSUID,
            "nodev" => flags |= MsFlags::MS_NODEV,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            "noatime" => flags |= MsFlags::MS_NOATIME,
            "nodiratime" => flags |= MsFlags::MS_NODIRATIME,
            "relatime" => flags |= MsFlags::MS_RELATIME,
            "sync" => flags |= MsFlags::MS_SYNCHRONOUS,
            "private" => flags |= MsFlags::MS_PRIVATE,
            "rprivate" => flags |= MsFlags::MS_PRIVATE | MsFlags::MS_REC,
            "shared" => flags |= MsFlags::MS_SHARED,
            "rshared" => flags |= MsFlags::MS_SHARED | MsFlags::MS_REC,
            "slave" => flags |= MsFlags::MS_SLAVE,
            "rslave" => flags |= MsFlags::MS_SLAVE | MsFlags::MS_REC,
            other => data.push(other.to_string()),
        }
    }
    (flags, data)
}

fn mount_error(
    source: &str,
    target: &Path,
    fstype: &str,
    options: &[String],
    e: nix::Error,
) -> VolumeError {
    let mut args = String::new();
    if !fstype.is_empty() {
        args.push_str(&format!("-t {fstype} "));
    }
    if !options.is_empty() {
        args.push_str(&format!("-o {} ", options.join(",")));
    }
    VolumeError::other(format!(
        "mount failed: {}\nMounting arguments: {args}{source} {}",
        e.desc().to_lowercase(),
        target.display()
    ))
}

impl MountInterface for SystemMounter {
    fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> Result<(), VolumeError> {
        let (flags, data) = parse_mount_options(options);
        let data = data.join(",");
        let fs = (!fstype.is_empty()).then_some(fstype);
        let data_opt = (!data.is_empty()).then_some(data.as_str());
        let err = |e| mount_error(source, target, fstype, options, e);
        let bind = flags.contains(MsFlags::MS_BIND);
        let extra = flags - (MsFlags::MS_BIND | MsFlags::MS_REC);
        if bind && !extra.is_empty() {
            // A bind mount takes its other flags only on a remount.
            nix::mount::mount(
                Some(source),
                target,
                fs,
                flags & (MsFlags::MS_BIND | MsFlags::MS_REC),
                data_opt,
            )
            .map_err(err)?;
            return nix::mount::mount(
                Some(source),
                target,
                fs,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | extra,
                data_opt,
            )
            .map_err(err);
        }
        nix::mount::mount(Some(source), target, fs, flags, data_opt).map_err(err)
    }

    fn unmount(&self, target: &Path) -> Result<(), VolumeError> {
        crate::vlog!(4, path = %target.display(), "Unmounting");
        nix::mount::umount2(target, MntFlags::empty()).map_err(|e| {
            VolumeError::other(format!(
                "unmount failed: {}\nUnmounting arguments: {}",
                e.desc().to_lowercase(),
                target.display()
            ))
        })
    }

    fn is_likely_not_mount_point(&self, path: &Path) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let st = std::fs::metadata(path)?;
        let text = path.to_string_lossy();
        let trimmed = text.strip_suffix('/').unwrap_or(&text);
        let parent = Path::new(trimmed)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let parent = if parent.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            parent
        };
        let root = std::fs::metadata(parent)?;
        Ok(st.dev() == root.dev())
    }

    fn list(&self) -> io::Result<Vec<MountInfo>> {
        Ok(parse_mountinfo(&std::fs::read_to_string(
            "/proc/self/mountinfo",
        )?))
    }

    fn make_rshared(&self, path: &Path) -> Result<(), SharedMountError> {
        make_rshared(path, self)
    }
}

/// Whether `path` exists (following links). A corrupted mount (ENOTCONN,
/// ESTALE, EIO, EHOSTDOWN) counts as existing, with its error.
pub fn path_exists(path: &Path) -> Result<bool, io::Error> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Errors that mean the mount behind a path is broken.
pub fn is_corrupted_mnt(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOTCONN)
            | Some(libc::ESTALE)
            | Some(libc::EIO)
            | Some(libc::EACCES)
            | Some(libc::EHOSTDOWN)
    )
}

/// Thorough check (IsNotMountPoint): the device comparison first, then the
/// mount table for bind mounts within one file system.
pub fn is_not_mount_point(m: &dyn MountInterface, path: &Path) -> io::Result<bool> {
    let not_mnt = match m.is_likely_not_mount_point(path) {
        Ok(v) => v,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => true,
        Err(e) => return Err(e),
    };
    if !not_mnt {
        return Ok(false);
    }
    let resolved = std::fs::canonicalize(path)?;
    Ok(!m.list()?.iter().any(|mi| mi.mount_point == resolved))
}

/// Unmounts `path` if it is a mount point and removes it
/// (CleanupMountPoint). A missing path is fine.
pub fn cleanup_mount_point(
    path: &Path,
    m: &dyn MountInterface,
    extensive: bool,
) -> Result<(), VolumeError> {
    let corrupted = match path_exists(path) {
        Ok(false) => {
            tracing::warn!(path = %path.display(), "Unmount skipped because path does not exist");
            return Ok(());
        }
        Ok(true) => false,
        Err(e) if is_corrupted_mnt(&e) => true,
        Err(e) => {
            return Err(VolumeError::other(format!(
                "Error checking path: {}",
                VolumeError::io("stat", path, &e)
            )));
        }
    };
    if !corrupted && remove_path_if_not_mount_point(path, m, extensive)? {
        return Ok(());
    }
    crate::vlog!(4, path = %path.display(), "Path is a mountpoint, unmounting");
    m.unmount(path)?;
    if remove_path_if_not_mount_point(path, m, extensive)? {
        crate::vlog!(4, path = %path.display(), "Path is unmounted, deleted the directory");
        return Ok(());
    }
    Err(VolumeError::other(format!(
        "Failed to unmount path {}",
        path.display()
    )))
}

fn remove_path_if_not_mount_point(
    path: &Path,
    m: &dyn MountInterface,
    extensive: bool,
) -> Result<bool, VolumeError> {
    let not_mnt = if extensive {
        is_not_mount_point(m, path)
    } else {
        m.is_likely_not_mount_point(path)
    };
    match not_mnt {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(VolumeError::io("stat", path, &e)),
        Ok(false) => Ok(false),
        Ok(true) => {
            crate::vlog!(4, path = %path.display(), "Path is not a mountpoint, deleting");
            match std::fs::remove_dir(path).or_else(|e| {
                if e.raw_os_error() == Some(libc::ENOTDIR) {
                    std::fs::remove_file(path)
                } else {
                    Err(e)
                }
            }) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
                Err(e) => Err(VolumeError::io("remove", path, &e)),
            }
        }
    }
}

/// Why a directory could not be made a shared mount point.
#[derive(Debug, thiserror::Error)]
pub enum SharedMountError {
    #[error("error reading mountinfo: {0}")]
    MountInfo(#[source] io::Error),
    #[error("cannot find mount point for {0:?}")]
    NoMount(PathBuf),
    #[error("failed to bind-mount {path}: {}", .source.desc().to_lowercase())]
    Bind { path: String, source: nix::Error },
    #[error("failed to make {path} shared: {}", .source.desc().to_lowercase())]
    Share { path: String, source: nix::Error },
}

/// Makes `path` a mount point with shared propagation (bind-mounting it on
/// itself first), unless the mount it lives on is already shared.
pub fn make_rshared(path: &Path, m: &dyn MountInterface) -> Result<(), SharedMountError> {
    let mounts = m.list().map_err(SharedMountError::MountInfo)?;
    let shared = find_mount_info(path, &mounts)
        .ok_or_else(|| SharedMountError::NoMount(path.to_path_buf()))?
        .optional_fields
        .iter()
        .any(|f| f.starts_with("shared:"));
    if shared {
        crate::vlog!(4, path = %path.display(), "Directory is already on a shared mount");
        return Ok(());
    }
    crate::vlog!(2, path = %path.display(), "Bind-mounting with shared mount propagation");
    let p = path.to_string_lossy();
    nix::mount::mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|source| SharedMountError::Bind {
        path: p.to_string(),
        source,
    })?;
    nix::mount::mount(
        None::<&str>,
        path,
        None::<&str>,
        MsFlags::MS_SHARED | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|source| SharedMountError::Share {
        path: p.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_table() {
        let cases: &[(&[&str], MsFlags, &[&str])] = &[
            (&["size=100"], MsFlags::empty(), &["size=100"]),
            (&["bind"], MsFlags::MS_BIND, &[]),
            (&["bind", "ro"], MsFlags::MS_BIND | MsFlags::MS_RDONLY, &[]),
            (
                &["rw", "nodev", "pagesize=2Mi"],
                MsFlags::MS_NODEV,
                &["pagesize=2Mi"],
            ),
            (&["rbind"], MsFlags::MS_BIND | MsFlags::MS_REC, &[]),
        ];
        for (input, flags, data) in cases {
            let opts: Vec<String> = input.iter().map(|s| s.to_string()).collect();
            let (f, d) = parse_mount_options(&opts);
            assert_eq!(f, *flags, "{input:?}");
            assert_eq!(d, data.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn likely_not_mount_point_on_plain_dirs() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).expect("mkdir");
        assert!(SystemMounter.is_likely_not_mount_point(&d).expect("check"));
        assert!(is_not_mount_point(&SystemMounter, &d).expect("check"));
        let err = SystemMounter
            .is_likely_not_mount_point(&tmp.path().join("missing"))
            .expect_err("missing");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        // "/" is on the same device as its parent ("/" itself).
        assert!(!SystemMounter.list().expect("list").is_empty());
    }

    #[test]
    fn cleanup_removes_plain_dirs_and_skips_missing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).expect("mkdir");
        cleanup_mount_point(&d, &SystemMounter, true).expect("cleanup");
        assert!(!d.exists());
        cleanup_mount_point(&d, &SystemMounter, true).expect("missing is fine");
        let f = tmp.path().join("f");
        std::fs::write(&f, b"").expect("file");
        cleanup_mount_point(&f, &SystemMounter, false).expect("file");
        assert!(!f.exists());
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;

    #[test]
    fn make_rshared_bind_mounts_a_private_dir_once() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED make_rshared_bind_mounts_a_private_dir_once: needs root");
            return;
        }
        let tmp = tempfile::tempdir().expect("tmp");
        // A private mount to start from: a tmpfs with private propagation.
        let base = tmp.path().join("base");
        std::fs::create_dir(&base).expect("mkdir");
        SystemMounter
            .mount("tmpfs", &base, "tmpfs", &["size=1m".to_string()])
            .expect("tmpfs");
        nix::mount::mount(
            None::<&str>,
            &base,
            None::<&str>,
            MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .expect("private");
        let root = base.join("kubelet");
        std::fs::create_dir(&root).expect("mkdir");
        let info = |p: &Path| {
            SystemMounter
                .list()
                .expect("list")
                .into_iter()
                .filter(|m| m.mount_point == p)
                .collect::<Vec<_>>()
        };
        make_rshared(&root, &SystemMounter).expect("rshared");
        let mounts = info(&root);
        assert_eq!(mounts.len(), 1, "bind-mounted on itself");
        assert!(
            mounts[0]
                .optional_fields
                .iter()
                .any(|f| f.starts_with("shared:"))
        );
        make_rshared(&root, &SystemMounter).expect("again");
        assert_eq!(info(&root).len(), 1, "already shared: nothing more");
        SystemMounter.unmount(&root).expect("umount root");
        SystemMounter.unmount(&base).expect("umount base");
    }
}
