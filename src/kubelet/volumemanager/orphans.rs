//! Housekeeping of pod directories no pod owns any more
//! (cleanupOrphanedPodDirs in kubelet_volumes.go). Careful by design: a pod
//! directory is skipped while the volume manager may still have a volume
//! of it mounted or any of its volume directories is a mount point;
//! volume directories are only rmdir-ed (a non-empty one stays); the
//! `volumes` directory is never removed recursively; other subdirectories
//! are removed without crossing into another file system. Blocking.

use std::collections::HashSet;
use std::io;
use std::path::PathBuf;

use super::error::VolumeManagerError;
use crate::kubelet::pod_dirs::{PodDirs, VOLUMES_DIR_NAME};
use crate::volume::util::mount::{MountInterface, is_not_mount_point};
use crate::volume::util::removeall::{remove_all_one_filesystem, remove_dirs_one_filesystem};
use crate::volume::util::unescape_qualified_name;

/// Failures of one cleanup pass (the pass goes on past each).
#[derive(Debug, thiserror::Error)]
#[error("{}", crate::volume::error::aggregate_message(.0))]
pub struct OrphanCleanupError(pub Vec<String>);

/// `pods/<uid>/volumes/<plugin>/<volume>` paths (getPodVolumePathListFromDisk).
pub fn pod_volume_paths_from_disk(dirs: &PodDirs, uid: &str) -> io::Result<Vec<PathBuf>> {
    let vol_dir = dirs.pod_volumes_dir(uid);
    let plugins = match std::fs::read_dir(&vol_dir) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            tracing::warn!(path = %vol_dir.display(), "Path does not exist");
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for plugin in plugins {
        let plugin = plugin?;
        let name = unescape_qualified_name(&plugin.file_name().to_string_lossy());
        for vol in std::fs::read_dir(plugin.path())? {
            let vol = vol?.path();
            if name == "kubernetes.io/csi" {
                // CSI volumes are mounted one level down.
                let mount = vol.join("mount");
                if mount.exists() {
                    out.push(mount);
                }
            } else {
                out.push(vol);
            }
        }
    }
    Ok(out)
}

/// The pod's volume paths that are mount points (getMountedVolumePathListFromDisk).
pub fn mounted_volume_paths_from_disk(
    dirs: &PodDirs,
    m: &dyn MountInterface,
    uid: &str,
) -> Result<Vec<PathBuf>, VolumeManagerError> {
    let paths = pod_volume_paths_from_disk(dirs, uid).map_err(VolumeManagerError::ReadPodDir)?;
    let mut out = Vec::new();
    for p in paths {
        match is_not_mount_point(m, &p) {
            Ok(true) => {}
            Ok(false) => out.push(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(VolumeManagerError::MountPoint { path: p, source }),
        }
    }
    Ok(out)
}

/// `pods/<uid>/volume-subpaths/<volume>/<container>/<index>` paths.
pub fn pod_volume_subpaths_from_disk(dirs: &PodDirs, uid: &str) -> io::Result<Vec<PathBuf>> {
    let dir = dirs.pod_volume_subpaths_dir(uid);
    let vols = match std::fs::read_dir(&dir) {
        Ok(v) => v,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for vol in vols {
        for container in std::fs::read_dir(vol?.path())? {
            for idx in std::fs::read_dir(container?.path())? {
                out.push(idx?.path());
            }
        }
    }
    Ok(out)
}

/// Whether any of the pod's volumes may still be mounted: per the volume
/// manager (`possibly_mounted`), or per the disk. Doubt counts as yes.
pub fn pod_volumes_exist(
    dirs: &PodDirs,
    m: &dyn MountInterface,
    uid: &str,
    possibly_mounted: bool,
) -> bool {
    if possibly_mounted {
        return true;
    }
    match mounted_volume_paths_from_disk(dirs, m, uid) {
        Err(e) => {
            tracing::error!(pod = uid, error = %e, "Pod found, but error occurred during checking mounted volumes from disk");
            true
        }
        Ok(paths) if !paths.is_empty() => {
            crate::vlog!(4, pod = uid, paths = ?paths, "Pod found, but volumes are still mounted on disk");
            true
        }
        Ok(_) => false,
    }
}

fn remove_orphaned_pod_volume_dirs(
    dirs: &PodDirs,
    m: &dyn MountInterface,
    uid: &str,
) -> Vec<String> {
    let mut errs = Vec::new();
    match pod_volume_paths_from_disk(dirs, uid) {
        Err(e) => {
            errs.push(format!(
                "orphaned pod {uid:?} found, but error occurred during reading volume dir from disk: {e}"
            ));
            return errs;
        }
        Ok(paths) => {
            for p in paths {
                match std::fs::remove_dir(&p) {
                    Ok(()) => {
                        tracing::info!(pod = uid, path = %p.display(), "Cleaned up orphaned volume from pod")
                    }
                    Err(e) => errs.push(format!(
                        "orphaned pod {uid:?} found, but failed to rmdir() volume at path {}: {}",
                        p.display(),
                        crate::volume::error::io_reason(&e)
                    )),
                }
            }
        }
    }
    match pod_volume_subpaths_from_disk(dirs, uid) {
        Err(e) => {
            errs.push(format!(
                "orphaned pod {uid:?} found, but error occurred during reading of volume-subpaths dir from disk: {e}"
            ));
            return errs;
        }
        Ok(paths) => {
            for p in paths {
                match std::fs::remove_dir(&p) {
                    Ok(()) => {
                        tracing::info!(pod = uid, path = %p.display(), "Cleaned up orphaned volume subpath from pod")
                    }
                    Err(e) => errs.push(format!(
                        "orphaned pod {uid:?} found, but failed to rmdir() subpath at path {}: {}",
                        p.display(),
                        crate::volume::error::io_reason(&e)
                    )),
                }
            }
        }
    }
    let vol_dir = dirs.pod_volumes_dir(uid);
    match remove_dirs_one_filesystem(m, &vol_dir) {
        Ok(()) => tracing::info!(pod = uid, path = %vol_dir.display(), "Cleaned up orphaned pod volumes dir"),
        Err(e) => errs.push(format!(
            "orphaned pod {uid:?} found, but error occurred when trying to remove the volumes dir: {e}"
        )),
    }
    errs
}

/// Removes the directories of pods not in `active` (the pods the kubelet
/// knows plus those the runtime still runs). `possibly_mounted(uid)` asks
/// the volume manager's actual state.
pub fn cleanup_orphaned_pod_dirs(
    dirs: &PodDirs,
    m: &dyn MountInterface,
    active: &HashSet<String>,
    possibly_mounted: &dyn Fn(&str) -> bool,
) -> Result<(), OrphanCleanupError> {
    let found = match dirs.list_pods_from_disk() {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(OrphanCleanupError(vec![e.to_string()])),
    };
    let mut removal_errs = Vec::new();
    let mut volume_errs = Vec::new();
    let (mut total, mut error_pods) = (0, 0);
    for uid in found {
        if active.contains(&uid) {
            continue;
        }
        total += 1;
        if pod_volumes_exist(dirs, m, &uid, possibly_mounted(&uid)) {
            error_pods += 1;
            crate::vlog!(3, pod = %uid, "Orphaned pod found, but volumes are not cleaned up");
            continue;
        }
        let errs = remove_orphaned_pod_volume_dirs(dirs, m, &uid);
        if !errs.is_empty() {
            error_pods += 1;
            volume_errs.extend(errs);
            continue;
        }
        let pod_dir = dirs.pod_dir(&uid);
        let subdirs = match std::fs::read_dir(&pod_dir) {
            Ok(s) => s,
            Err(e) => {
                error_pods += 1;
                removal_errs.push(format!(
                    "orphaned pod {uid:?} found, but error occurred during reading the pod dir from disk: {e}"
                ));
                continue;
            }
        };
        let mut failed = false;
        for sub in subdirs.flatten() {
            let path = sub.path();
            if sub.file_name() == VOLUMES_DIR_NAME {
                failed = true;
                tracing::error!(pod = %uid, path = %path.display(), "Orphaned pod found, but failed to remove volumes subdir: volumes subdir was found after it was removed");
                continue;
            }
            if let Err(e) = remove_all_one_filesystem(m, &path) {
                failed = true;
                tracing::error!(pod = %uid, path = %path.display(), error = %e, "Failed to remove orphaned pod subdir");
                removal_errs.push(format!(
                    "orphaned pod {uid:?} found, but error occurred when trying to remove subdir {:?}: {e}",
                    path.display().to_string()
                ));
            }
        }
        crate::vlog!(3, pod = %uid, "Orphaned pod found, removing");
        if let Err(e) = std::fs::remove_dir(&pod_dir) {
            failed = true;
            tracing::error!(pod = %uid, error = %e, "Failed to remove orphaned pod dir");
            removal_errs.push(format!(
                "orphaned pod {uid:?} found, but error occurred when trying to remove the pod directory: {}",
                crate::volume::error::io_reason(&e)
            ));
        }
        if failed {
            error_pods += 1;
        }
    }
    for errs in [&volume_errs, &removal_errs] {
        if !errs.is_empty() {
            tracing::error!(errors = errs.len(), total_pods = total, error_pods, first = %errs[0], "There were many similar errors. Turn up verbosity to see them.");
        }
    }
    if removal_errs.is_empty() {
        Ok(())
    } else {
        Err(OrphanCleanupError(removal_errs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume::testing::{is_mounted, is_root};
    use crate::volume::util::mount::SystemMounter;
    use std::fs;

    fn layout(dirs: &PodDirs, uid: &str) -> PathBuf {
        let vol = dirs.pod_volume_dir(uid, "kubernetes.io~empty-dir", "scratch");
        fs::create_dir_all(&vol).expect("vol");
        fs::create_dir_all(dirs.pod_volume_dir(uid, "kubernetes.io~configmap", "cfg"))
            .expect("cfg");
        fs::create_dir_all(dirs.pod_container_dir(uid, "c")).expect("containers");
        fs::write(dirs.pod_container_dir(uid, "c").join("abcd"), b"").expect("termination log");
        fs::write(dirs.pod_etc_hosts_path(uid), b"127.0.0.1 localhost\n").expect("hosts");
        fs::create_dir_all(
            dirs.pod_plugin_dir(uid, "kubernetes.io~empty-dir")
                .join("scratch"),
        )
        .expect("plugins");
        vol
    }

    #[test]
    fn removes_only_what_is_safe() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dirs = PodDirs::new(tmp.path());
        let m = SystemMounter;
        layout(&dirs, "active");
        layout(&dirs, "orphan");
        let data = layout(&dirs, "has-data");
        fs::write(data.join("precious"), b"keep me").expect("data");
        layout(&dirs, "asw-mounted");
        fs::create_dir_all(dirs.pod_volume_subpaths_dir("orphan").join("v/c/0")).expect("subpaths");

        let active: HashSet<String> = ["active".to_string()].into();
        let possibly = |uid: &str| uid == "asw-mounted";
        cleanup_orphaned_pod_dirs(&dirs, &m, &active, &possibly).expect("no removal errors");

        assert!(
            dirs.pod_dir("active").join("etc-hosts").exists(),
            "active pods untouched"
        );
        assert!(
            !dirs.pod_dir("orphan").exists(),
            "an orphan without data goes"
        );
        assert_eq!(
            fs::read(data.join("precious")).expect("kept"),
            b"keep me",
            "data is never deleted"
        );
        assert!(
            dirs.pod_etc_hosts_path("has-data").exists(),
            "the pod dir stays while volumes do"
        );
        assert!(
            dirs.pod_etc_hosts_path("asw-mounted").exists(),
            "possibly mounted: skipped"
        );
    }

    #[test]
    fn mounted_volume_dirs_keep_the_pod() {
        if !is_root() {
            eprintln!("SKIPPED mounted_volume_dirs_keep_the_pod: mounting needs root");
            return;
        }
        let tmp = tempfile::tempdir().expect("tmp");
        let dirs = PodDirs::new(tmp.path());
        let m = SystemMounter;
        let tmpfs_vol = layout(&dirs, "tmpfs");
        m.mount("tmpfs", &tmpfs_vol, "tmpfs", &["size=1m".to_string()])
            .expect("tmpfs");
        // A bind mount within the same file system: same device numbers.
        let bind_vol = layout(&dirs, "bind");
        let src = tmp.path().join("src");
        fs::create_dir(&src).expect("src");
        m.mount(&src.to_string_lossy(), &bind_vol, "", &["bind".to_string()])
            .expect("bind");

        for uid in ["tmpfs", "bind"] {
            assert!(pod_volumes_exist(&dirs, &m, uid, false), "{uid}");
        }
        cleanup_orphaned_pod_dirs(&dirs, &m, &HashSet::new(), &|_| false).expect("cleanup");
        assert!(is_mounted(&tmpfs_vol) && is_mounted(&bind_vol));
        assert!(dirs.pod_etc_hosts_path("tmpfs").exists());
        assert!(dirs.pod_etc_hosts_path("bind").exists());

        m.unmount(&tmpfs_vol).expect("umount");
        m.unmount(&bind_vol).expect("umount");
        cleanup_orphaned_pod_dirs(&dirs, &m, &HashSet::new(), &|_| false).expect("cleanup");
        assert!(!dirs.pod_dir("tmpfs").exists() && !dirs.pod_dir("bind").exists());
    }
}
