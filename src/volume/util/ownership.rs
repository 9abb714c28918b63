//! fsGroup ownership of a volume's files (SetVolumeOwnership in
//! volume_linux.go): every file and directory gets the group, group read
//! (and write unless the volume is read-only), directories also group
//! execute and setgid. Symlinks are re-grouped but never chmod-ed (that
//! would change their targets). With fsGroupChangePolicy OnRootMismatch the
//! walk is skipped when the root already has the group and the bits.
//! Blocking.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::volume::error::VolumeError;
use crate::volume::spec::FS_GROUP_CHANGE_ON_ROOT_MISMATCH;

const RW_MASK: u32 = 0o660;
const RO_MASK: u32 = 0o440;
const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// Applies `fs_group` to everything under `dir` (nothing when unset).
pub fn set_volume_ownership(
    dir: &Path,
    read_only: bool,
    fs_group: Option<i64>,
    change_policy: Option<&str>,
) -> Result<(), VolumeError> {
    let Some(gid) = fs_group else {
        return Ok(());
    };
    if change_policy == Some(FS_GROUP_CHANGE_ON_ROOT_MISMATCH)
        && !requires_permission_change(dir, gid, read_only)
    {
        crate::vlog!(3, path = %dir.display(), "Skipping permission and ownership change for volume");
        return Ok(());
    }
    crate::vlog!(4, path = %dir.display(), "Perform recursive ownership change for directory");
    walk_deep(dir, &mut |path, meta| {
        change_file_permission(path, gid, read_only, meta);
    })
    .map_err(|e| VolumeError::io("lstat", dir, &e))
}

/// Whether the root lacks the group or the bits (OnRootMismatch).
pub fn requires_permission_change(root: &Path, gid: i64, read_only: bool) -> bool {
    let meta = match fs::metadata(root) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(path = %root.display(), error = %e, "Performing recursive ownership change on rootDir because reading permissions of root volume failed");
            return true;
        }
    };
    if i64::from(meta.gid()) != gid {
        crate::vlog!(4, path = %root.display(), gid = meta.gid(), "Expected group ownership of volume did not match with Gid");
        return true;
    }
    if !meta.is_dir() {
        return true;
    }
    let want = if read_only { RO_MASK } else { RW_MASK } | EXEC_MASK;
    let perm = meta.permissions().mode();
    if want & perm & 0o777 != want || perm & SETGID == 0 {
        crate::vlog!(4, path = %root.display(), "Performing recursive ownership change on rootDir because of mismatching mode");
        return true;
    }
    false
}

fn change_file_permission(path: &Path, gid: i64, read_only: bool, meta: &fs::Metadata) {
    if let Err(e) = std::os::unix::fs::lchown(path, None, Some(gid as u32)) {
        tracing::error!(path = %path.display(), error = %e, "Lchown failed");
    }
    if meta.file_type().is_symlink() {
        return;
    }
    let mut mask = if read_only { RO_MASK } else { RW_MASK };
    if meta.is_dir() {
        mask |= SETGID | EXEC_MASK;
    }
    let mode = (meta.permissions().mode() & 0o7777) | mask;
    if let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(mode)) {
        tracing::error!(path = %path.display(), error = %e, "chmod failed");
    }
}

/// Visits children before their directory, without following links.
fn walk_deep(root: &Path, f: &mut dyn FnMut(&Path, &fs::Metadata)) -> io::Result<()> {
    let meta = fs::symlink_metadata(root)?;
    walk(root, &meta, f)
}

fn walk(
    path: &Path,
    meta: &fs::Metadata,
    f: &mut dyn FnMut(&Path, &fs::Metadata),
) -> io::Result<()> {
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            let child = entry?.path();
            if let Ok(m) = fs::symlink_metadata(&child) {
                walk(&child, &m, f)?;
            }
        }
    }
    f(path, meta);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).expect("meta").permissions().mode() & 0o7777
    }

    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        fs::create_dir(root.join("sub")).expect("mkdir");
        fs::write(root.join("sub/file"), b"x").expect("write");
        fs::set_permissions(root.join("sub/file"), fs::Permissions::from_mode(0o600))
            .expect("chmod");
        fs::set_permissions(root.join("sub"), fs::Permissions::from_mode(0o700)).expect("chmod");
        fs::set_permissions(root, fs::Permissions::from_mode(0o700)).expect("chmod");
        std::os::unix::fs::symlink("sub/file", root.join("link")).expect("symlink");
        tmp
    }

    #[test]
    fn no_fs_group_changes_nothing() {
        let t = tree();
        set_volume_ownership(t.path(), false, None, None).expect("ok");
        assert_eq!(mode(&t.path().join("sub/file")), 0o600);
    }

    #[test]
    fn modes_table() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED modes_table: chown to another group needs root");
            return;
        }
        // (read_only, file mode, dir mode)
        let cases = [(false, 0o660, 0o2770), (true, 0o640, 0o2750)];
        for (ro, file_mode, dir_mode) in cases {
            let t = tree();
            set_volume_ownership(t.path(), ro, Some(1234), None).expect("ok");
            let f = t.path().join("sub/file");
            assert_eq!(mode(&f), file_mode, "ro={ro}");
            assert_eq!(mode(&t.path().join("sub")), dir_mode, "ro={ro}");
            assert_eq!(mode(t.path()), dir_mode, "ro={ro}");
            assert_eq!(fs::metadata(&f).expect("meta").gid(), 1234);
            let link = fs::symlink_metadata(t.path().join("link")).expect("link");
            assert_eq!(link.gid(), 1234, "links are re-grouped");
        }
    }

    #[test]
    fn on_root_mismatch_skips_a_matching_root() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED on_root_mismatch_skips_a_matching_root: needs root");
            return;
        }
        let t = tree();
        assert!(requires_permission_change(t.path(), 1234, false));
        set_volume_ownership(t.path(), false, Some(1234), Some("OnRootMismatch")).expect("ok");
        assert_eq!(mode(&t.path().join("sub/file")), 0o660);
        // Root matches now; a later change below it is left alone.
        assert!(!requires_permission_change(t.path(), 1234, false));
        fs::set_permissions(t.path().join("sub/file"), fs::Permissions::from_mode(0o600))
            .expect("chmod");
        set_volume_ownership(t.path(), false, Some(1234), Some("OnRootMismatch")).expect("ok");
        assert_eq!(mode(&t.path().join("sub/file")), 0o600, "skipped");
        // Always walks.
        set_volume_ownership(t.path(), false, Some(1234), Some("Always")).expect("ok");
        assert_eq!(mode(&t.path().join("sub/file")), 0o660);
        // Another group on the root: walk again.
        assert!(requires_permission_change(t.path(), 4321, false));
    }
}
