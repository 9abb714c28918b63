//! Whole-file replacement that never leaves a half-written file: the bytes
//! go to a temporary file in the same directory, are synced, and the
//! temporary file is renamed over the target (as Go's state files are
//! written).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Writing `path` failed.
#[derive(Debug, thiserror::Error)]
#[error("failed to write {path:?} atomically: {source}")]
pub struct AtomicWriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Replaces `path` with `data` (mode `mode`), through a synced temporary
/// file renamed into place. Blocking: call it off the async threads.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), AtomicWriteError> {
    let err = |source| AtomicWriteError {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        write_atomic(&path, b"one", 0o644).expect("first");
        write_atomic(&path, b"two", 0o600).expect("second");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let missing = write_atomic(&dir.path().join("no/such/dir/f"), b"x", 0o644);
        assert!(missing.is_err_and(|e| e.path.ends_with("no/such/dir/f")));
    }
}
