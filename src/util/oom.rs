//! OOM score adjustment of processes through `/proc/<pid>/oom_score_adj`
//! (the kubelet applies `oomScoreAdj` to itself at start-up).
//!
//! Lowering a score needs CAP_SYS_RESOURCE; without it the write fails with
//! EACCES and the kubelet logs that and goes on, as the Go kubelet does.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many times a write is attempted before giving up (as Go: twice).
const MAX_TRIES: usize = 2;

/// Errors from writing an OOM score.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    #[error("{path:?} does not exist")]
    NotExist { path: PathBuf },
    #[error("failed to set {path:?} to {value:?}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("the OOM score task was aborted: {0}")]
    Aborted(String),
}

impl OomError {
    /// Whether the failure is a missing privilege (EPERM/EACCES).
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, OomError::Write { source, .. } if source.kind() == io::ErrorKind::PermissionDenied)
    }
}

/// Writes OOM scores under a proc root (`/proc` on a real node; a temp dir
/// in tests).
#[derive(Clone, Debug)]
pub struct OomAdjuster {
    proc_root: PathBuf,
    retry_delay: Duration,
}

impl Default for OomAdjuster {
    fn default() -> Self {
        Self::new()
    }
}

impl OomAdjuster {
    /// The adjuster for the real `/proc`.
    pub fn new() -> Self {
        Self::with_proc_root("/proc")
    }

    /// An adjuster rooted elsewhere (tests).
    pub fn with_proc_root(proc_root: impl Into<PathBuf>) -> Self {
        Self {
            proc_root: proc_root.into(),
            retry_delay: Duration::from_millis(100),
        }
    }

    /// The file that holds the score of `pid` (`None`: this process).
    pub fn score_path(&self, pid: Option<u32>) -> PathBuf {
        let dir = match pid {
            Some(pid) => pid.to_string(),
            None => "self".to_string(),
        };
        self.proc_root.join(dir).join("oom_score_adj")
    }

    /// Writes `value` as the OOM score of `pid` (`None`: this process),
    /// retrying once after a short pause. Blocking: use
    /// [`OomAdjuster::apply`] from async code.
    pub fn apply_blocking(&self, pid: Option<u32>, value: i32) -> Result<(), OomError> {
        let path = self.score_path(pid);
        let text = value.to_string();
        crate::vlog!(4, path = %path.display(), value = %text, "Attempting to set OOM score");
        let mut last_err = None;
        for attempt in 0..MAX_TRIES {
            match write_existing(&path, &text) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    crate::vlog!(2, path = %path.display(), "OOM score file does not exist");
                    return Err(OomError::NotExist { path });
                }
                Err(e) => {
                    crate::vlog!(3, path = %path.display(), error = %e, attempt, "Writing OOM score failed");
                    last_err = Some(e);
                    if attempt + 1 < MAX_TRIES {
                        std::thread::sleep(self.retry_delay);
                    }
                }
            }
        }
        let source = last_err.unwrap_or_else(|| io::Error::other("no attempt made"));
        crate::vlog!(2, path = %path.display(), value = %text, error = %source, "Failed to set OOM score");
        Err(OomError::Write {
            path,
            value: text,
            source,
        })
    }

    /// [`OomAdjuster::apply_blocking`] on the blocking pool.
    pub async fn apply(&self, pid: Option<u32>, value: i32) -> Result<(), OomError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.apply_blocking(pid, value))
            .await
            .map_err(|e| OomError::Aborted(e.to_string()))?
    }

    /// run()'s step: applies `oomScoreAdj` to the kubelet itself; a failure
    /// (typically EACCES without CAP_SYS_RESOURCE) is logged and ignored.
    /// Returns whether the score was written.
    pub async fn apply_to_self(&self, value: i32) -> bool {
        match self.apply(None, value).await {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(error = %err, "Failed to ApplyOOMScoreAdj");
                false
            }
        }
    }
}

/// Writes to a file that must already exist (proc files are never created).
fn write_existing(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// Reads the current OOM score of this process from the real `/proc`.
pub fn read_self_score() -> io::Result<i32> {
    let text = std::fs::read_to_string("/proc/self/oom_score_adj")?;
    text.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e}: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(pids: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for pid in pids {
            let d = dir.path().join(pid);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("oom_score_adj"), "0\n").unwrap();
        }
        dir
    }

    #[test]
    fn writes_the_value_to_the_right_file() {
        let cases: [(Option<u32>, i32, &str); 3] = [
            (None, -999, "self"),
            (Some(42), 1000, "42"),
            (None, 0, "self"),
        ];
        for (pid, value, dir) in cases {
            let proc = fake_proc(&["self", "42"]);
            let adj = OomAdjuster::with_proc_root(proc.path());
            adj.apply_blocking(pid, value).unwrap();
            let got = std::fs::read_to_string(proc.path().join(dir).join("oom_score_adj")).unwrap();
            assert_eq!(got, value.to_string(), "pid {pid:?}");
        }
    }

    #[test]
    fn missing_file_is_not_exist_without_retry() {
        let proc = fake_proc(&[]);
        let adj = OomAdjuster::with_proc_root(proc.path());
        let err = adj.apply_blocking(Some(7), 5).unwrap_err();
        assert!(matches!(err, OomError::NotExist { .. }), "{err}");
        assert!(!err.is_permission_denied());
        // The file must not have been created.
        assert!(!proc.path().join("7/oom_score_adj").exists());
    }

    #[test]
    fn unwritable_file_fails_after_retrying() {
        let proc = fake_proc(&[]);
        // A directory where the file should be: every write fails, not NotFound.
        std::fs::create_dir_all(proc.path().join("self/oom_score_adj")).unwrap();
        let mut adj = OomAdjuster::with_proc_root(proc.path());
        adj.retry_delay = Duration::from_millis(1);
        let err = adj.apply_blocking(None, 3).unwrap_err();
        assert!(matches!(err, OomError::Write { .. }), "{err}");
        assert!(err.to_string().contains("failed to set"));
    }

    /// On the real /proc: keeping the current score always works; lowering
    /// it works with CAP_SYS_RESOURCE and fails with a permission error
    /// without it. Either way the kubelet's step carries on.
    #[tokio::test]
    async fn real_proc_self() {
        let current = read_self_score().unwrap();
        let adj = OomAdjuster::new();
        adj.apply(None, current).await.unwrap();
        let lower = (current - 1).max(-1000);
        if lower == current {
            return;
        }
        match adj.apply(None, lower).await {
            Ok(()) => {
                assert_eq!(read_self_score().unwrap(), lower);
                adj.apply(None, current).await.unwrap();
            }
            Err(err) => assert!(err.is_permission_denied(), "{err}"),
        }
        let _ = adj.apply_to_self(current).await;
        assert_eq!(read_self_score().unwrap(), current);
    }
}
