//! Recursive removal that never crosses into a mounted file system
//! (pkg/util/removeall). Used by the orphaned pod directory cleanup, so
//! unlike Go's it also checks the mount table, not only device numbers:
//! a bind mount within the same file system stops it too. Blocking.

use std::fs;
use std::io;
use std::path::Path;

use super::mount::{MountInterface, is_not_mount_point};
use crate::volume::error::VolumeError;

/// Removes `path` and everything below it, failing on mount points.
pub fn remove_all_one_filesystem(m: &dyn MountInterface, path: &Path) -> Result<(), VolumeError> {
    remove_common(m, path, &|p| match fs::remove_file(p) {
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => fs::remove_dir(p),
        other => other,
    })
}

/// Removes the directories under `path` and `path` itself, failing on any
/// file that is not a directory and on mount points.
pub fn remove_dirs_one_filesystem(m: &dyn MountInterface, path: &Path) -> Result<(), VolumeError> {
    remove_common(m, path, &|p| fs::remove_dir(p))
}

fn remove_common(
    m: &dyn MountInterface,
    path: &Path,
    remove: &dyn Fn(&Path) -> io::Result<()>,
) -> Result<(), VolumeError> {
    let first = match remove(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => e,
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(());
        }
        Err(e) => return Err(VolumeError::io("lstat", path, &e)),
    };
    if !meta.is_dir() {
        return Err(VolumeError::io("remove", path, &first));
    }
    match is_not_mount_point(m, path) {
        Ok(true) => {}
        Ok(false) => {
            return Err(VolumeError::other(format!(
                "cannot delete directory {}: it is a mount point",
                path.display()
            )));
        }
        Err(e) => return Err(VolumeError::io("stat", path, &e)),
    }
    let entries = match fs::read_dir(path) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(VolumeError::io("open", path, &e)),
    };
    let mut err = None;
    for entry in entries {
        match entry {
            Ok(entry) => {
                if let Err(e) = remove_common(m, &entry.path(), remove) {
                    err.get_or_insert(e);
                }
            }
            Err(e) => {
                err.get_or_insert(VolumeError::io("readdirent", path, &e));
            }
        }
    }
    match remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err.unwrap_or_else(|| VolumeError::io("remove", path, &e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume::util::mount::SystemMounter;

    #[test]
    fn remove_all_and_dirs_only() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path().join("r");
        fs::create_dir_all(root.join("a/b")).expect("mkdir");
        fs::write(root.join("a/b/f"), b"x").expect("write");
        let err = remove_dirs_one_filesystem(&SystemMounter, &root).expect_err("a file blocks");
        assert!(err.to_string().contains("not a directory"), "{err}");
        assert!(root.join("a/b/f").exists());
        remove_all_one_filesystem(&SystemMounter, &root).expect("remove all");
        assert!(!root.exists());
        fs::create_dir_all(root.join("x/y")).expect("mkdir");
        remove_dirs_one_filesystem(&SystemMounter, &root).expect("dirs only");
        assert!(!root.exists());
        remove_all_one_filesystem(&SystemMounter, &root).expect("missing is fine");
    }
}
