//! Filesystem numbers: capacity and free space of a filesystem (statfs) and
//! what a directory tree occupies on its device (as `du` counts: allocated
//! blocks, each inode once, without crossing into other mounts).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::types::FsStats;

/// A filesystem that could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum FsUsageError {
    #[error("statfs {path}: {source}")]
    Statfs {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("stat {path}: {source}")]
    Stat {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Capacity, availability and inodes of the filesystem holding `path`.
pub fn statfs_usage(path: &Path) -> Result<FsStats, FsUsageError> {
    let st = nix::sys::statvfs::statvfs(path).map_err(|source| FsUsageError::Statfs {
        path: path.to_path_buf(),
        source,
    })?;
    let frsize = st.fragment_size() as u64;
    let capacity = st.blocks() as u64 * frsize;
    let available = st.blocks_available() as u64 * frsize;
    let free = st.blocks_free() as u64 * frsize;
    let inodes = st.files() as u64;
    let inodes_free = st.files_free() as u64;
    Ok(FsStats {
        time: Some(SystemTime::now()),
        available_bytes: Some(available),
        capacity_bytes: Some(capacity),
        used_bytes: Some(capacity.saturating_sub(free)),
        inodes_free: Some(inodes_free),
        inodes: Some(inodes),
        inodes_used: Some(inodes.saturating_sub(inodes_free)),
    })
}

/// (bytes, inodes) a directory tree occupies on its own device. A missing
/// directory occupies nothing.
pub fn dir_usage(path: &Path) -> Result<(u64, u64), FsUsageError> {
    let root = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(source) => {
            return Err(FsUsageError::Stat {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let dev = root.dev();
    let mut seen = HashSet::new();
    let mut bytes = 0u64;
    let mut inodes = 0u64;
    let mut stack = vec![(path.to_path_buf(), root)];
    while let Some((p, meta)) = stack.pop() {
        if meta.dev() != dev || !seen.insert(meta.ino()) {
            continue;
        }
        bytes += meta.blocks() * 512;
        inodes += 1;
        if meta.is_dir() {
            // Entries that vanish while we walk are skipped, as du does.
            let Ok(entries) = std::fs::read_dir(&p) else {
                continue;
            };
            for entry in entries.flatten() {
                if let Ok(m) = entry.metadata() {
                    stack.push((entry.path(), m));
                }
            }
        }
    }
    Ok((bytes, inodes))
}

/// `FsStats` of a directory tree: used bytes and inodes only.
pub fn dir_fs_stats(path: &Path) -> Result<FsStats, FsUsageError> {
    let (bytes, inodes) = dir_usage(path)?;
    Ok(FsStats {
        time: Some(SystemTime::now()),
        used_bytes: Some(bytes),
        inodes_used: Some(inodes),
        ..FsStats::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_usage_counts_allocated_blocks_and_inodes() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("f"), vec![1u8; 64 * 1024]).unwrap();
        std::fs::hard_link(sub.join("f"), sub.join("g")).unwrap();
        let (bytes, inodes) = dir_usage(dir.path()).unwrap();
        // root, a, f (g is the same inode)
        assert_eq!(inodes, 3);
        assert!(bytes >= 64 * 1024, "{bytes}");
        assert!(bytes < 2 * 64 * 1024 + 64 * 1024, "{bytes}");
        assert_eq!(dir_usage(&dir.path().join("missing")).unwrap(), (0, 0));
    }

    #[test]
    fn statfs_of_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let st = statfs_usage(dir.path()).unwrap();
        let cap = st.capacity_bytes.unwrap();
        assert!(cap > 0);
        assert!(st.available_bytes.unwrap() <= cap);
        assert!(st.inodes_free.unwrap() <= st.inodes.unwrap());
    }
}
