//! The `failSwapOn` check: the kubelet refuses to start while swap is on.
//!
//! `/proc/swaps` is a header line followed by one line per active swap area;
//! more than one line means swap is on. The path is a seam so tests inject a
//! fake file instead of turning swap on.

use std::io;
use std::path::{Path, PathBuf};

/// Where the kernel lists active swap areas.
pub const PROC_SWAPS: &str = "/proc/swaps";

/// Errors from the swap check.
#[derive(Debug, thiserror::Error)]
pub enum SwapError {
    /// The message operators know from the Go kubelet.
    #[error(
        "running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false. {path} contained: [{}]",
        .lines.join(" ")
    )]
    SwapOn { path: String, lines: Vec<String> },
    #[error("failed to read {path:?}: {source}")]
    Read { path: PathBuf, source: io::Error },
}

/// Reads the swap table from a configurable path.
#[derive(Clone, Debug)]
pub struct SwapCheck {
    swaps_path: PathBuf,
}

impl Default for SwapCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl SwapCheck {
    /// The check against the real `/proc/swaps`.
    pub fn new() -> Self {
        Self::with_path(PROC_SWAPS)
    }

    /// The check against another file (tests).
    pub fn with_path(path: impl Into<PathBuf>) -> Self {
        Self {
            swaps_path: path.into(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.swaps_path
    }

    /// Fails when `fail_swap_on` is set and swap is enabled. A missing swap
    /// table means no swap (logged).
    pub async fn check(&self, fail_swap_on: bool) -> Result<(), SwapError> {
        if !fail_swap_on {
            return Ok(());
        }
        let data = match tokio::fs::read(&self.swaps_path).await {
            Ok(data) => data,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::info!(
                    path = %self.swaps_path.display(),
                    "File does not exist, assuming that swap is disabled"
                );
                return Ok(());
            }
            Err(source) => {
                return Err(SwapError::Read {
                    path: self.swaps_path.clone(),
                    source,
                });
            }
        };
        let lines = swap_lines(&String::from_utf8_lossy(&data));
        if lines.len() > 1 {
            return Err(SwapError::SwapOn {
                path: self.swaps_path.display().to_string(),
                lines,
            });
        }
        Ok(())
    }
}

/// The table's lines after trimming surrounding whitespace (an empty table is
/// one empty line, like the header alone: swap off).
fn swap_lines(data: &str) -> Vec<String> {
    data.trim().split('\n').map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";

    #[tokio::test]
    async fn table() {
        struct Case {
            name: &'static str,
            content: Option<String>,
            fail_swap_on: bool,
            want_err: Option<&'static str>,
        }
        let on = format!(
            "{HEADER}/dev/sda2                               partition\t8388604\t\t0\t\t-2\n"
        );
        let cases = [
            Case {
                name: "header only",
                content: Some(HEADER.to_string()),
                fail_swap_on: true,
                want_err: None,
            },
            Case {
                name: "empty file",
                content: Some(String::new()),
                fail_swap_on: true,
                want_err: None,
            },
            Case {
                name: "missing file",
                content: None,
                fail_swap_on: true,
                want_err: None,
            },
            Case {
                name: "swap on",
                content: Some(on.clone()),
                fail_swap_on: true,
                want_err: Some("running with swap on is not supported, please disable swap!"),
            },
            Case {
                name: "swap on but failSwapOn=false",
                content: Some(on.clone()),
                fail_swap_on: false,
                want_err: None,
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("swaps");
            if let Some(content) = &case.content {
                std::fs::write(&path, content).unwrap();
            }
            let res = SwapCheck::with_path(&path).check(case.fail_swap_on).await;
            match (res, case.want_err) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(want), "{}: {msg}", case.name);
                    assert!(msg.contains("set --fail-swap-on flag to false"), "{msg}");
                    assert!(
                        msg.contains("/dev/sda2"),
                        "{}: lines listed: {msg}",
                        case.name
                    );
                    assert!(msg.contains("contained: [Filename"), "{msg}");
                }
                (res, want) => panic!("{}: got {res:?}, want error {want:?}", case.name),
            }
        }
    }

    #[tokio::test]
    async fn unreadable_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        // A directory cannot be read as a file.
        let err = SwapCheck::with_path(dir.path())
            .check(true)
            .await
            .unwrap_err();
        assert!(matches!(err, SwapError::Read { .. }), "{err}");
    }
}
