//! Reading a container's log file for `kubectl logs` (the kuberuntime logs
//! package): the CRI log file the runtime writes under /var/log/pods is
//! parsed line by line and its content streamed, with the options of a pod
//! log request (tail, since, timestamps, a byte limit, follow).
//!
//! Following waits on inotify for the log directory, re-reads at least once
//! a second, and when the log is rotated (the file under the path is a new
//! one: the kubelet's log manager renamed the old one and the runtime
//! reopened it) reads the old file to its end before going on with the new
//! one; it ends once the container has stopped and everything it wrote has
//! been sent.

pub mod parse;
pub mod tail;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use nix::sys::inotify::AddWatchFlags;
use tokio::io::{AsyncBufReadExt, AsyncSeekExt, BufReader};
use tokio::sync::mpsc;

use crate::cri::RuntimeService;
use crate::cri::api::ContainerState;
use crate::util::inotify::{AsyncInotify, InotifyError};
use parse::{LogMessage, ParseFn, format_time, parser_for};

/// How long a follower waits for a file event before reading again anyway.
const FORCE_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// A pod log request's options (the v1 PodLogOptions the server decodes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<Timestamp>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
}

/// The reader's own form of the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOptions {
    /// Lines from the end; negative for all.
    pub tail: i64,
    /// Bytes at most; negative for no limit.
    pub bytes: i64,
    /// Lines older than this are skipped.
    pub since: Option<Timestamp>,
    pub follow: bool,
    pub timestamp: bool,
}

impl LogOptions {
    /// From a request's options at time `now`: `sinceTime` wins over
    /// `sinceSeconds` when it is later.
    pub fn new(api: &PodLogOptions, now: Timestamp) -> Self {
        let mut since = api
            .since_seconds
            .map(|s| now - jiff::SignedDuration::from_secs(s));
        if let Some(t) = api.since_time
            && since.is_none_or(|s| t > s)
        {
            since = Some(t);
        }
        LogOptions {
            tail: api.tail_lines.unwrap_or(-1),
            bytes: api.limit_bytes.unwrap_or(-1),
            since,
            follow: api.follow,
            timestamp: api.timestamps,
        }
    }
}

/// Why a log could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error("failed to try resolving symlinks in path {path:?}: {source}")]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to open log file {path:?}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to tail {lines} lines of log file {path:?}: {source}")]
    Tail {
        lines: i64,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to read log file {path:?}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to get parse function: {0}")]
    Format(#[source] parse::ParseError),
    #[error("failed to watch directory {dir:?}: {source}")]
    Watch { dir: PathBuf, source: InotifyError },
    #[error("failed to get the status of container {id}: {reason}")]
    Status { id: String, reason: String },
}

/// Where the log's bytes go: one chunk per line written; a closed channel
/// means the client went away.
pub type LogSink = mpsc::Sender<Bytes>;

enum Written {
    More,
    /// The byte limit is reached, or the client is gone: stop quietly.
    Done,
}

struct LogWriter<'a> {
    out: &'a LogSink,
    remain: i64,
    since: Option<Timestamp>,
    timestamps: bool,
}

impl LogWriter<'_> {
    async fn write(&mut self, msg: &LogMessage, add_prefix: bool) -> Written {
        if self.since.is_some_and(|s| msg.timestamp < s) {
            return Written::More;
        }
        let mut line = Vec::with_capacity(msg.log.len() + 32);
        if self.timestamps && add_prefix {
            line.extend_from_slice(format_time(msg.timestamp, msg.offset_seconds).as_bytes());
            line.push(b' ');
        }
        line.extend_from_slice(&msg.log);
        if line.len() as i64 > self.remain {
            line.truncate(self.remain.max(0) as usize);
        }
        self.remain -= line.len() as i64;
        if self.out.send(Bytes::from(line)).await.is_err() {
            return Written::Done;
        }
        if self.remain <= 0 {
            crate::vlog!(2, "Finished parsing log file, hit bytes limit");
            return Written::Done;
        }
        Written::More
    }
}

async fn open(path: &Path) -> Result<tokio::fs::File, std::io::Error> {
    tokio::fs::File::open(path).await
}

/// The inode of an open file (which one the reader follows).
async fn inode_of(file: &tokio::fs::File) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    file.metadata().await.ok().map(|m| m.ino())
}

/// Whether `path` now names another file than inode `ino`: the log was
/// rotated and the runtime reopened it (a missing file is not yet a new one).
async fn replaced(path: &Path, ino: Option<u64>) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (tokio::fs::metadata(path).await, ino) {
        (Ok(m), Some(ino)) => m.ino() != ino,
        _ => false,
    }
}

async fn tail_start(path: &Path, lines: i64) -> Result<u64, LogsError> {
    let owned = path.to_path_buf();
    let result = tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::open(&owned)?;
        tail::find_tail_line_start(&mut f, lines)
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))
    .and_then(|r| r);
    result.map_err(|source| LogsError::Tail {
        lines,
        path: path.to_path_buf(),
        source,
    })
}

/// Answers whether a container still runs: a follower keeps waiting for
/// more log only while it does.
#[async_trait::async_trait]
pub trait ContainerRunning: Send + Sync {
    async fn is_running(&self, id: &str) -> Result<bool, LogsError>;
}

/// The runtime's answer, from the container's CRI status.
pub struct RuntimeContainerRunning<'a>(pub &'a dyn RuntimeService);

#[async_trait::async_trait]
impl ContainerRunning for RuntimeContainerRunning<'_> {
    async fn is_running(&self, id: &str) -> Result<bool, LogsError> {
        is_container_running(id, self.0).await
    }
}

async fn is_container_running(id: &str, runtime: &dyn RuntimeService) -> Result<bool, LogsError> {
    let resp = runtime
        .container_status(id, false)
        .await
        .map_err(|e| LogsError::Status {
            id: id.to_string(),
            reason: e.to_string(),
        })?;
    let status = resp.status.ok_or_else(|| LogsError::Status {
        id: id.to_string(),
        reason: "container status is nil".to_string(),
    })?;
    let running = status.state == ContainerState::ContainerRunning as i32;
    if !running {
        crate::vlog!(
            5,
            container_id = id,
            state = status.state,
            "Container is not running"
        );
    }
    Ok(running)
}

/// What waiting for more log brought.
struct Wait {
    /// The container still runs: keep following.
    found: bool,
    /// The log file was created anew (rotated): reopen it.
    recreated: bool,
}

async fn wait_logs(
    id: &str,
    log_name: &std::ffi::OsStr,
    watcher: &AsyncInotify,
    running: &dyn ContainerRunning,
    out: &LogSink,
) -> Result<Option<Wait>, LogsError> {
    if !running.is_running(id).await? {
        return Ok(Some(Wait {
            found: false,
            recreated: false,
        }));
    }
    tokio::select! {
        _ = out.closed() => Ok(None),
        events = watcher.next_events() => {
            let recreated = match events {
                Ok(events) => events.iter().any(|e| {
                    e.mask.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                        && e.name.as_deref() == Some(log_name)
                }),
                Err(e) => {
                    tracing::error!(error = %e, "Received an inotify error while following a log");
                    false
                }
            };
            Ok(Some(Wait { found: true, recreated }))
        }
        _ = tokio::time::sleep(FORCE_CHECK_PERIOD) => Ok(Some(Wait { found: true, recreated: false })),
    }
}

fn watch_mask() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_ATTRIB
}

/// Streams the log at `path` of container `container_id` into `out`.
pub async fn read_logs(
    path: &Path,
    container_id: &str,
    opts: &LogOptions,
    running: &dyn ContainerRunning,
    out: &LogSink,
) -> Result<(), LogsError> {
    let path = tokio::fs::canonicalize(path)
        .await
        .map_err(|source| LogsError::Resolve {
            path: path.to_path_buf(),
            source,
        })?;
    let open_err = |source| LogsError::Open {
        path: path.clone(),
        source,
    };
    let read_err = |source| LogsError::Read {
        path: path.clone(),
        source,
    };
    let mut file = open(&path).await.map_err(open_err)?;
    let mut ino = inode_of(&file).await;
    let start = tail_start(&path, opts.tail).await?;
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(read_err)?;
    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let base = path.file_name().unwrap_or_default().to_os_string();

    let limited = opts.tail >= 0 && !opts.follow;
    let mut lines_left = opts.tail;
    let mut reader = BufReader::new(file);
    let mut parse: Option<ParseFn> = None;
    let mut writer = LogWriter {
        out,
        remain: if opts.bytes < 0 { i64::MAX } else { opts.bytes },
        since: opts.since,
        timestamps: opts.timestamp,
    };
    let mut watcher: Option<AsyncInotify> = None;
    let mut pending: Vec<u8> = Vec::new();
    let (mut stop, mut found, mut new_line) = (false, true, true);
    // The log was rotated: finish the old file, then go on with the new one.
    let mut reopen = false;
    loop {
        if stop || (limited && lines_left == 0) {
            crate::vlog!(2, path = %path.display(), "Finished parsing log file");
            return Ok(());
        }
        let mut line = std::mem::take(&mut pending);
        reader
            .read_until(b'\n', &mut line)
            .await
            .map_err(read_err)?;
        if line.last() != Some(&b'\n') {
            // End of the file for now.
            if opts.follow {
                if reopen {
                    match open(&path).await {
                        Ok(f) => {
                            ino = inode_of(&f).await;
                            reader = BufReader::new(f);
                            reopen = false;
                            crate::vlog!(4, path = %path.display(), "Following the rotated log's new file");
                            continue;
                        }
                        Err(e) if e.kind() == ErrorKind::NotFound => {}
                        Err(e) => return Err(open_err(e)),
                    }
                }
                if !found {
                    return Ok(());
                }
                // An unfinished line is read again, whole, later.
                pending = line;
                let Some(w) = watcher.as_ref() else {
                    watcher = Some(AsyncInotify::watch(&dir, watch_mask()).map_err(|source| {
                        LogsError::Watch {
                            dir: dir.clone(),
                            source,
                        }
                    })?);
                    // Read once more: a write may have come before the watch.
                    continue;
                };
                let Some(wait) = wait_logs(container_id, &base, w, running, out).await? else {
                    return Ok(());
                };
                found = wait.found;
                // Events can be missed (a rotation before the watch began):
                // the inode under the path tells as well.
                if wait.recreated || replaced(&path, ino).await {
                    reopen = true;
                }
                continue;
            }
            stop = true;
            if line.is_empty() {
                continue;
            }
            tracing::info!(path = %path.display(), line = %String::from_utf8_lossy(&line), "Incomplete line in log file");
        }
        let parse_fn = match parse {
            Some(p) => p,
            None => {
                let p = parser_for(&line).map_err(LogsError::Format)?;
                parse = Some(p);
                p
            }
        };
        let msg = match parse_fn(&line) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(path = %path.display(), line = %String::from_utf8_lossy(&line), error = %e, "Failed when parsing line in log file");
                continue;
            }
        };
        if let Written::Done = writer.write(&msg, new_line).await {
            return Ok(());
        }
        if limited {
            lines_left -= 1;
        }
        new_line = msg.log.last().is_none_or(|b| *b == b'\n');
    }
}

#[cfg(test)]
mod tests;
