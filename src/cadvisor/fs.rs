//! Filesystem capacity of a directory: statfs for the numbers, mountinfo for
//! the device and mount point (the longest mount point containing it).

use std::path::Path;

use super::{FsInfo, MachineInfoError};
use crate::util::mountinfo::{find_mount_info, parse_mountinfo};

/// The filesystem holding `path`; `mountinfo` is the text of
/// /proc/self/mountinfo (empty when unavailable: device and mount point stay empty).
pub fn fs_info_at(path: &Path, mountinfo: &str) -> Result<FsInfo, MachineInfoError> {
    let st = nix::sys::statfs::statfs(path).map_err(|source| MachineInfoError::Statfs {
        path: path.to_path_buf(),
        source,
    })?;
    let bsize = st.block_size() as u64;
    let (device, mountpoint) = mount_of(path, mountinfo);
    Ok(FsInfo {
        device,
        mountpoint,
        capacity: st.blocks() * bsize,
        free: st.blocks_free() * bsize,
        available: st.blocks_available() * bsize,
        inodes: st.files(),
        inodes_free: st.files_free(),
    })
}

fn mount_of(path: &Path, mountinfo: &str) -> (String, String) {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = parse_mountinfo(mountinfo);
    find_mount_info(&target, &mounts)
        .map(|m| {
            (
                m.source.clone(),
                m.mount_point.to_string_lossy().into_owned(),
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statfs_of_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let info = fs_info_at(dir.path(), "").unwrap();
        assert!(info.capacity > 0);
        assert!(info.capacity >= info.free && info.free >= info.available);
        assert!(fs_info_at(&dir.path().join("missing"), "").is_err());
    }

    #[test]
    fn device_is_the_longest_mount() {
        let mountinfo = "1 0 8:1 / / rw - ext4 /dev/vda rw\n\
                         2 1 0:5 / /var/lib rw - xfs /dev/vdb rw\n\
                         3 1 0:6 / /var/lib2 rw - xfs /dev/vdc rw\n";
        assert_eq!(
            mount_of(Path::new("/var/lib/kubelet"), mountinfo),
            ("/dev/vdb".to_string(), "/var/lib".to_string())
        );
        assert_eq!(
            mount_of(Path::new("/etc"), mountinfo),
            ("/dev/vda".to_string(), "/".to_string())
        );
    }
}
