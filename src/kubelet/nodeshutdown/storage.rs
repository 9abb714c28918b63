//! `graceful_node_shutdown_state` in the root dir: when the last graceful
//! shutdown began and ended, as Go's kubelet records it (JSON, Go's time
//! format, the zero time for "not yet").

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::ShutdownError;
use crate::kubelet::types::{format_rfc3339_nano, parse_rfc3339};

/// The state file's name under the root dir.
pub const STATE_FILE: &str = "graceful_node_shutdown_state";
/// Go's zero time.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

#[derive(Debug, Serialize, Deserialize)]
struct OnDisk {
    #[serde(rename = "startTime")]
    start_time: String,
    #[serde(rename = "endTime")]
    end_time: String,
}

/// One shutdown's times; `None` is Go's zero time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownState {
    pub start: Option<SystemTime>,
    pub end: Option<SystemTime>,
}

fn encode(t: Option<SystemTime>) -> String {
    t.map(format_rfc3339_nano)
        .unwrap_or_else(|| ZERO_TIME.to_string())
}

fn decode(s: &str) -> Option<SystemTime> {
    (s != ZERO_TIME).then(|| parse_rfc3339(s)).flatten()
}

/// The state file.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn in_dir(root: &Path) -> Self {
        StateFile {
            path: root.join(STATE_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `state` (atomically; blocking).
    pub fn store(&self, state: ShutdownState) -> Result<(), ShutdownError> {
        let body = serde_json::to_vec(&OnDisk {
            start_time: encode(state.start),
            end_time: encode(state.end),
        })
        .map_err(|e| ShutdownError::State {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        crate::util::atomic_file::write_atomic(&self.path, &body, 0o644).map_err(|e| {
            ShutdownError::Io {
                path: e.path,
                source: e.source,
            }
        })
    }

    /// The recorded state; the default when there is no file (blocking).
    pub fn load(&self) -> Result<ShutdownState, ShutdownError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(source) => {
                return Err(ShutdownError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let on_disk: OnDisk = serde_json::from_slice(&bytes).map_err(|e| ShutdownError::State {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        Ok(ShutdownState {
            start: decode(&on_disk.start_time),
            end: decode(&on_disk.end_time),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn round_trip_in_go_format() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = StateFile::in_dir(dir.path());
        assert_eq!(file.load().expect("no file"), ShutdownState::default());
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        file.store(ShutdownState {
            start: Some(start),
            end: None,
        })
        .expect("store");
        let raw = std::fs::read_to_string(file.path()).expect("read");
        let json: serde_json::Value = serde_json::from_str(&raw).expect("json");
        assert_eq!(json["endTime"], "0001-01-01T00:00:00Z");
        assert!(
            json["startTime"]
                .as_str()
                .is_some_and(|s| s.starts_with("2023-11-"))
        );
        assert_eq!(file.load().expect("load").start, Some(start));
        // A file the Go kubelet wrote.
        std::fs::write(
            file.path(),
            r#"{"startTime":"2022-05-10T10:12:13.123456789+02:00","endTime":"2022-05-10T08:12:40Z"}"#,
        )
        .expect("write");
        let s = file.load().expect("go file");
        let secs = |t: Option<SystemTime>| {
            t.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
        };
        assert_eq!(secs(s.start), Some(1_652_170_333));
        assert_eq!(secs(s.end), Some(1_652_170_360));
        std::fs::write(file.path(), "{").expect("write");
        assert!(
            file.load()
                .is_err_and(|e| e.to_string().contains(STATE_FILE))
        );
    }
}
