//! subPath mounts (pkg/volume/util/subpath, Linux): the sub path is opened
//! component by component without following links so it cannot escape the
//! volume, then bind-mounted through `/proc/<pid>/fd/<fd>` to
//! `<pod>/volume-subpaths/<volume>/<container>/<index>`; that bind target
//! is what the container mounts. A missing sub path directory is created
//! the same safe way with the volume root's mode. The bind mounts go when
//! the volume is unmounted (`clean_subpaths`). Blocking, except
//! `prepare_subpath_mounts`.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::OFlag;
use nix::sys::stat::{Mode, SFlag};

use crate::util::pod_dirs::VOLUME_SUBPATHS_DIR_NAME;
use crate::volume::container_mount::{Mount, SubPathMount};
use crate::volume::error::VolumeError;
use crate::volume::util::mount::{MountInterface, cleanup_mount_point, is_not_mount_point};

/// One subPath mount to prepare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPath {
    pub volume_mount_index: usize,
    /// The full path on the host (volume path joined with the sub path).
    pub path: PathBuf,
    /// The (inner) volume name.
    pub volume_name: String,
    pub volume_path: PathBuf,
    pub pod_dir: PathBuf,
    pub container_name: String,
}

/// Whether `path` is `base` or below it (lexically).
pub fn path_within_base(path: &Path, base: &Path) -> bool {
    match path.strip_prefix(base) {
        Ok(rel) => !rel.components().any(|c| c == Component::ParentDir),
        Err(_) => false,
    }
}

/// Opens `path`, which must be under `base`, following no symlink on the
/// way; returns an O_PATH descriptor.
fn safe_open(path: &Path, base: &Path) -> Result<OwnedFd, VolumeError> {
    let rel = path.strip_prefix(base).map_err(|_| {
        VolumeError::other(format!(
            "path {} is outside of allowed base {}",
            path.display(),
            base.display()
        ))
    })?;
    let mut parent = nix::fcntl::open(
        base,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        VolumeError::other(format!(
            "cannot open directory {}: {}",
            base.display(),
            e.desc().to_lowercase()
        ))
    })?;
    let mut current = base.to_path_buf();
    for seg in rel.components() {
        let Component::Normal(seg) = seg else {
            return Err(VolumeError::other(format!(
                "path {} is outside of allowed base {}",
                path.display(),
                base.display()
            )));
        };
        current.push(seg);
        let child = nix::fcntl::openat(
            &parent,
            seg,
            OFlag::O_NOFOLLOW | OFlag::O_PATH | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            VolumeError::other(format!(
                "cannot open {}: {}",
                current.display(),
                e.desc().to_lowercase()
            ))
        })?;
        let st = nix::sys::stat::fstat(&child).map_err(|e| {
            VolumeError::other(format!(
                "error running fstat on {} with {}",
                current.display(),
                e.desc().to_lowercase()
            ))
        })?;
        if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK {
            return Err(VolumeError::other(format!(
                "unexpected symlink found {}",
                current.display()
            )));
        }
        parent = child;
    }
    Ok(parent)
}

/// Creates `subdir` under `base` (and missing parents) with `perm`, never
/// following a symlink out of `base` (SafeMakeDir).
pub fn safe_make_dir(subdir: &str, base: &Path, perm: u32) -> Result<(), VolumeError> {
    let real_base = fs::canonicalize(base).map_err(|e| {
        VolumeError::other(format!(
            "error resolving symlinks in {}: {}",
            base.display(),
            crate::volume::error::io_reason(&e)
        ))
    })?;
    let full = real_base.join(subdir);
    if !path_within_base(&full, &real_base) {
        return Err(VolumeError::other(format!(
            "path {} is outside of allowed base {}",
            full.display(),
            real_base.display()
        )));
    }
    if let Ok(meta) = fs::metadata(&full) {
        if meta.is_dir() {
            return Ok(());
        }
        return Err(VolumeError::io(
            "mkdir",
            &full,
            &io::Error::from_raw_os_error(libc::ENOTDIR),
        ));
    }
    // Find the longest existing prefix.
    let rel: Vec<_> = full
        .strip_prefix(&real_base)
        .map(|r| {
            r.components()
                .map(|c| c.as_os_str().to_os_string())
                .collect()
        })
        .unwrap_or_default();
    let mut existing = real_base.clone();
    let mut to_create = Vec::new();
    for (i, seg) in rel.iter().enumerate() {
        let next = existing.join(seg);
        if fs::symlink_metadata(&next).is_err() {
            to_create = rel[i..].to_vec();
            break;
        }
        existing = next;
    }
    let resolved = fs::canonicalize(&existing).map_err(|e| {
        VolumeError::other(format!(
            "error opening directory {}: {}",
            existing.display(),
            crate::volume::error::io_reason(&e)
        ))
    })?;
    if !path_within_base(&resolved, &real_base) {
        return Err(VolumeError::other(format!(
            "path {} is outside of allowed base {}",
            resolved.display(),
            real_base.display()
        )));
    }
    let mut parent = safe_open(&resolved, &real_base)?;
    // O_PATH descriptors cannot be used for mkdirat; reopen as a directory.
    parent = reopen_dir(&parent)?;
    let mut current = resolved;
    for dir in to_create {
        current.push(&dir);
        nix::sys::stat::mkdirat(
            &parent,
            dir.as_os_str(),
            Mode::from_bits_truncate(perm & 0o777),
        )
        .map_err(|e| {
            VolumeError::other(format!(
                "cannot create directory {}: {}",
                current.display(),
                e.desc().to_lowercase()
            ))
        })?;
        let child = nix::fcntl::openat(
            &parent,
            dir.as_os_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            VolumeError::other(format!(
                "cannot open {}: {}",
                current.display(),
                e.desc().to_lowercase()
            ))
        })?;
        nix::sys::stat::fchmod(&child, Mode::from_bits_truncate(perm & 0o7777)).map_err(|e| {
            VolumeError::other(format!(
                "chmod {:?} failed: {}",
                current.display().to_string(),
                e.desc().to_lowercase()
            ))
        })?;
        parent = child;
    }
    Ok(())
}

fn reopen_dir(fd: &OwnedFd) -> Result<OwnedFd, VolumeError> {
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    nix::fcntl::open(
        proc_path.as_str(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        VolumeError::other(format!(
            "cannot open directory: {}",
            e.desc().to_lowercase()
        ))
    })
}

/// `<pod>/volume-subpaths/<volume>/<container>/<index>`.
pub fn subpath_bind_target(sp: &SubPath) -> PathBuf {
    sp.pod_dir
        .join(VOLUME_SUBPATHS_DIR_NAME)
        .join(&sp.volume_name)
        .join(&sp.container_name)
        .join(sp.volume_mount_index.to_string())
}

/// Bind-mounts the sub path to its target and returns the target
/// (PrepareSafeSubpath). An existing bind of the same file is reused.
pub fn prepare_safe_subpath(m: &dyn MountInterface, sp: &SubPath) -> Result<PathBuf, VolumeError> {
    let resolve = |p: &Path| {
        fs::canonicalize(p).map_err(|e| {
            VolumeError::other(format!(
                "error resolving symlinks in {:?}: {}",
                p.display().to_string(),
                VolumeError::io("lstat", p, &e)
            ))
        })
    };
    let volume_path = resolve(&sp.volume_path)?;
    let path = resolve(&sp.path)?;
    if !path_within_base(&path, &volume_path) {
        return Err(VolumeError::other(format!(
            "subpath {:?} not within volume path {:?}",
            path.display().to_string(),
            volume_path.display().to_string()
        )));
    }
    let fd = safe_open(&path, &volume_path).map_err(|e| {
        VolumeError::other(format!("error opening subpath {}: {e}", path.display()))
    })?;
    let target = subpath_bind_target(sp);
    match is_not_mount_point(m, &target) {
        Ok(true) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(VolumeError::other(format!(
                "error checking path {} for mount: {}",
                target.display(),
                crate::volume::error::io_reason(&e)
            )));
        }
        Ok(false) => {
            if same_file(&path, &target) {
                crate::vlog!(5, target = %target.display(), "Skipping bind-mounting subpath: already mounted");
                return Ok(target);
            }
            m.unmount(&target)?;
        }
    }
    let parent = target.parent().unwrap_or(Path::new("/"));
    crate::util::pod_dirs::mkdir_all(parent, 0o750).map_err(|e| {
        VolumeError::other(format!(
            "error creating directory {}: {}",
            parent.display(),
            crate::volume::error::io_reason(&e)
        ))
    })?;
    let meta = fs::symlink_metadata(&path).map_err(|e| {
        VolumeError::other(format!(
            "lstat {} failed: {}",
            path.display(),
            crate::volume::error::io_reason(&e)
        ))
    })?;
    if meta.is_dir() {
        match fs::DirBuilder::new().create(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(VolumeError::other(format!(
                    "error creating directory {}: {}",
                    target.display(),
                    crate::volume::error::io_reason(&e)
                )));
            }
        }
        let _ = fs::set_permissions(&target, fs::Permissions::from_mode(0o750));
    } else {
        fs::write(&target, b"").map_err(|e| {
            VolumeError::other(format!(
                "error creating file {}: {}",
                target.display(),
                crate::volume::error::io_reason(&e)
            ))
        })?;
        let _ = fs::set_permissions(&target, fs::Permissions::from_mode(0o640));
    }
    let source = format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd());
    crate::vlog!(5, source = %source, target = %target.display(), "Bind mounting subpath");
    if let Err(e) = m.mount(&source, &target, "", &["bind".to_string()]) {
        if let Err(ce) = clean_subpath(m, &target) {
            tracing::error!(target = %target.display(), error = %ce, "Failed to clean subpath");
        }
        return Err(VolumeError::other(format!(
            "error mounting {}: {e}",
            sp.path.display()
        )));
    }
    crate::vlog!(3, path = %sp.path.display(), target = %target.display(), "Bound SubPath");
    Ok(target)
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn clean_subpath(m: &dyn MountInterface, path: &Path) -> Result<(), VolumeError> {
    cleanup_mount_point(path, m, true).map_err(|e| {
        VolumeError::other(format!(
            "error cleaning subpath mount {}: {e}",
            path.display()
        ))
    })
}

/// Unmounts and removes the subPath bind mounts of `volume_name` in the
/// pod (CleanSubPaths), then the directories that held them.
pub fn clean_subpaths(
    m: &dyn MountInterface,
    pod_dir: &Path,
    volume_name: &str,
) -> Result<(), VolumeError> {
    let subpath_dir = pod_dir.join(VOLUME_SUBPATHS_DIR_NAME).join(volume_name);
    crate::vlog!(4, dir = %subpath_dir.display(), "Cleaning up subpath mounts");
    let containers = match fs::read_dir(&subpath_dir) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(VolumeError::other(format!(
                "error reading {}: {}",
                subpath_dir.display(),
                crate::volume::error::io_reason(&e)
            )));
        }
    };
    for entry in containers {
        let entry = entry.map_err(|e| VolumeError::io("readdirent", &subpath_dir, &e))?;
        let container_dir = entry.path();
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let subs = fs::read_dir(&container_dir).map_err(|e| {
            VolumeError::other(format!(
                "error processing {}: {}",
                container_dir.display(),
                crate::volume::error::io_reason(&e)
            ))
        })?;
        for sub in subs {
            let sub = sub.map_err(|e| VolumeError::io("readdirent", &container_dir, &e))?;
            clean_subpath(m, &sub.path()).map_err(|e| {
                VolumeError::other(format!("error processing {}: {e}", container_dir.display()))
            })?;
        }
        fs::remove_dir(&container_dir).map_err(|e| {
            VolumeError::other(format!(
                "error deleting {}: {}",
                container_dir.display(),
                crate::volume::error::io_reason(&e)
            ))
        })?;
    }
    fs::remove_dir(&subpath_dir).map_err(|e| {
        VolumeError::other(format!(
            "error deleting {}: {}",
            subpath_dir.display(),
            crate::volume::error::io_reason(&e)
        ))
    })?;
    let pod_subpath_dir = pod_dir.join(VOLUME_SUBPATHS_DIR_NAME);
    match fs::remove_dir(&pod_subpath_dir) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(VolumeError::other(format!(
            "error deleting {}: {}",
            pod_subpath_dir.display(),
            crate::volume::error::io_reason(&e)
        ))),
    }
}

/// Prepares one subPath mount of `container`: creates the sub directory
/// when missing, then binds it safely; returns the path the runtime mounts.
pub fn prepare_subpath_mount(
    m: &dyn MountInterface,
    pod_dir: &Path,
    container_name: &str,
    volume_name: &str,
    sub: &SubPathMount,
) -> Result<PathBuf, VolumeError> {
    let host_path = sub.volume_path.join(&sub.sub_path);
    match fs::metadata(&host_path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let perm = fs::metadata(&sub.volume_path)
                .map_err(|e| VolumeError::io("stat", &sub.volume_path, &e))?
                .permissions()
                .mode();
            if let Err(e) = safe_make_dir(&sub.sub_path, &sub.volume_path, perm) {
                tracing::error!(container = container_name, volume = volume_name, error = %e, "Failed to create subPath directory for volumeMount of the container");
                return Err(VolumeError::other(format!(
                    "failed to create subPath directory for volumeMount {volume_name:?} of container {container_name:?}"
                )));
            }
        }
        Err(e) => {
            tracing::error!(path = %host_path.display(), error = %e, "Could not determine if subPath exists, will not attempt to change its permissions");
        }
    }
    prepare_safe_subpath(
        m,
        &SubPath {
            volume_mount_index: sub.volume_mount_index,
            path: host_path,
            volume_name: volume_name.to_string(),
            volume_path: sub.volume_path.clone(),
            pod_dir: pod_dir.to_path_buf(),
            container_name: container_name.to_string(),
        },
    )
}

/// Prepares every subPath mount among `mounts` and points their host
/// paths at the bind targets. Runs on the blocking pool.
pub async fn prepare_subpath_mounts(
    m: Arc<dyn MountInterface>,
    pod_dir: PathBuf,
    container_name: String,
    mut mounts: Vec<Mount>,
) -> Result<Vec<Mount>, VolumeError> {
    tokio::task::spawn_blocking(move || {
        for mount in mounts.iter_mut() {
            if let Some(sub) = &mount.sub_path {
                let target =
                    prepare_subpath_mount(m.as_ref(), &pod_dir, &container_name, &mount.name, sub)?;
                mount.host_path = target.to_string_lossy().into_owned();
            }
        }
        Ok(mounts)
    })
    .await
    .map_err(|e| VolumeError::other(format!("subpath task failed: {e}")))?
}

#[cfg(test)]
#[path = "subpath_tests.rs"]
mod tests;
