//! A small writer for cgroup interface files: open-without-create writes (as
//! the kernel provides the files), reads, recursive removal with retries, and
//! process listing. `v1` and `v2` apply a [`ResourceConfig`] file by file.
//!
//! [`ResourceConfig`]: super::resources::ResourceConfig

pub mod v1;
pub mod v2;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::CmError;

/// How interface files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// A real cgroup filesystem: the kernel creates the interface files, and
    /// writing one that does not exist is an error (the controller is missing).
    #[default]
    Kernel,
    /// A plain directory tree standing in for cgroupfs (tests): files are
    /// created on first write, and nothing is removed by the kernel.
    PlainFiles,
}

/// Writes and reads cgroup interface files.
#[derive(Debug, Clone, Copy, Default)]
pub struct CgroupWriter {
    pub mode: WriteMode,
}

impl CgroupWriter {
    pub fn new(mode: WriteMode) -> Self {
        CgroupWriter { mode }
    }

    /// Writes `value` to `dir/file`, retrying on EINTR.
    pub fn write(&self, dir: &Path, file: &str, value: &str) -> Result<(), CmError> {
        let path = dir.join(file);
        crate::vlog!(6, path = %path.display(), value, "writing cgroup file");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).truncate(true);
        if self.mode == WriteMode::PlainFiles {
            opts.create(true);
        }
        loop {
            let res = opts
                .open(&path)
                .and_then(|mut f| f.write_all(value.as_bytes()));
            match res {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CmError::io("write", &path, e)),
                Ok(()) => return Ok(()),
            }
        }
    }

    /// Reads `dir/file`, trimmed.
    pub fn read(&self, dir: &Path, file: &str) -> Result<String, CmError> {
        let path = dir.join(file);
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .map_err(|e| CmError::io("read", &path, e))
    }

    /// Reads `dir/file` as an unsigned integer; `max` reads as u64::MAX.
    pub fn read_u64(&self, dir: &Path, file: &str) -> Result<u64, CmError> {
        let text = self.read(dir, file)?;
        if text == "max" {
            return Ok(u64::MAX);
        }
        text.parse().map_err(|_| CmError::Parse {
            path: dir.join(file),
            detail: format!("{text:?} is not an unsigned integer"),
        })
    }

    /// Removes the cgroup directory `path` and every child cgroup under it,
    /// deepest first. A missing directory is success. In plain-file mode the
    /// interface files are removed too.
    pub fn remove_path(&self, path: &Path) -> Result<(), CmError> {
        match self.rmdir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(_) => {}
        }
        let entries = match std::fs::read_dir(path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(CmError::io("read dir", path, e)),
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.remove_path(&entry.path())?;
            }
        }
        self.rmdir(path)
    }

    fn rmdir(&self, path: &Path) -> Result<(), CmError> {
        if self.mode == WriteMode::PlainFiles && path.is_dir() {
            let files = std::fs::read_dir(path).map_err(|e| CmError::io("read dir", path, e))?;
            for f in files.flatten() {
                if f.file_type().is_ok_and(|t| t.is_file()) {
                    let _ = std::fs::remove_file(f.path());
                }
            }
        }
        match std::fs::remove_dir(path) {
            Ok(()) => Ok(()),
            Err(e) => Err(CmError::io("remove", path, e)),
        }
    }

    /// Removes every path, retrying with a doubling delay as runc does, and
    /// reports the ones that survive.
    pub fn remove_paths(&self, paths: &[PathBuf]) -> Result<(), CmError> {
        let mut left: Vec<PathBuf> = paths.to_vec();
        let mut delay = Duration::from_millis(10);
        for attempt in 0..5 {
            if attempt > 0 {
                std::thread::sleep(delay);
                delay *= 2;
            }
            left.retain(|p| {
                if let Err(e) = self.remove_path(p) {
                    crate::vlog!(4, path = %p.display(), error = %e, "cgroup removal attempt failed");
                }
                p.exists()
            });
            if left.is_empty() {
                return Ok(());
            }
        }
        Err(CmError::Remove { paths: left })
    }
}

/// The process ids in `dir/cgroup.procs`; none when the file does not exist.
pub fn cgroup_procs(dir: &Path) -> Result<Vec<i32>, CmError> {
    let path = dir.join("cgroup.procs");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CmError::io("read", &path, e)),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim().parse().map_err(|_| CmError::Parse {
                path: path.clone(),
                detail: format!("could not convert {l:?} to a pid"),
            })
        })
        .collect()
}

/// The process ids in `dir` and every cgroup below it.
pub fn cgroup_procs_recursive(dir: &Path, out: &mut Vec<i32>) {
    match cgroup_procs(dir) {
        Ok(pids) => out.extend(pids),
        Err(e) => {
            crate::vlog!(4, path = %dir.display(), error = %e, "could not list cgroup processes");
            return;
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            cgroup_procs_recursive(&entry.path(), out);
        }
    }
}

/// Joins a cgroup literal (`/a/b`) under a mount point.
pub fn join_literal(mount: &Path, literal: &str) -> PathBuf {
    let rel = literal.trim_start_matches('/');
    if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_modes() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = CgroupWriter::new(WriteMode::Kernel);
        assert!(
            kernel
                .write(dir.path(), "cpu.shares", "2")
                .unwrap_err()
                .is_not_found()
        );
        let plain = CgroupWriter::new(WriteMode::PlainFiles);
        plain.write(dir.path(), "cpu.shares", "1024").unwrap();
        plain.write(dir.path(), "cpu.shares", "2").unwrap();
        assert_eq!(plain.read(dir.path(), "cpu.shares").unwrap(), "2");
        kernel.write(dir.path(), "cpu.shares", "3").unwrap();
        assert_eq!(kernel.read_u64(dir.path(), "cpu.shares").unwrap(), 3);
    }

    #[test]
    fn removal_is_recursive_and_tolerates_missing() {
        let dir = tempfile::tempdir().unwrap();
        let w = CgroupWriter::new(WriteMode::PlainFiles);
        let a = dir.path().join("a");
        std::fs::create_dir_all(a.join("b/c")).unwrap();
        w.write(&a.join("b"), "cgroup.procs", "").unwrap();
        w.remove_paths(&[a.clone(), dir.path().join("never")])
            .unwrap();
        assert!(!a.exists());
    }

    #[test]
    fn procs_listing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("child")).unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "10\n11\n").unwrap();
        std::fs::write(dir.path().join("child/cgroup.procs"), "12\n").unwrap();
        let mut pids = Vec::new();
        cgroup_procs_recursive(dir.path(), &mut pids);
        pids.sort();
        assert_eq!(pids, [10, 11, 12]);
        std::fs::write(dir.path().join("cgroup.procs"), "x\n").unwrap();
        assert!(cgroup_procs(dir.path()).is_err());
        assert!(cgroup_procs(&dir.path().join("none")).unwrap().is_empty());
    }

    #[test]
    fn literal_join() {
        assert_eq!(join_literal(Path::new("/m"), "/"), PathBuf::from("/m"));
        assert_eq!(
            join_literal(Path::new("/m"), "/a/b"),
            PathBuf::from("/m/a/b")
        );
    }
}
