//! inotify on the static pod path (a directory or one file), read through
//! tokio's reactor. Events are reduced to what the file source needs: a
//! manifest appeared or changed, a manifest went away, or the watch itself
//! is gone (the path was removed or moved) or overflowed and the path must
//! be listed again.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::AddWatchFlags;

use crate::util::inotify::{AsyncInotify, InotifyError};

/// What happened to a manifest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// Created, written, moved in or had its metadata changed.
    Changed(PathBuf),
    /// Deleted or moved away.
    Removed(PathBuf),
    /// The watch is no longer valid; watch again and list the path.
    Lost,
    /// Events were dropped by the kernel; list the path.
    Resync,
}

/// Why a watch could not be set up or read.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("unable to create inotify: {0}")]
    Init(#[source] std::io::Error),
    #[error("unable to create inotify for path {path:?}: {source}")]
    AddWatch {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("error while watching {path:?}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl WatchError {
    /// The path does not exist (yet).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            WatchError::AddWatch {
                source: Errno::ENOENT,
                ..
            }
        )
    }
}

/// A live inotify watch on one path.
pub struct Watcher {
    inotify: AsyncInotify,
    path: PathBuf,
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
}

fn hidden(name: &OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

impl Watcher {
    /// Watches `path` (following a symlink to it). Must be called within a
    /// tokio runtime.
    pub fn new(path: &Path) -> Result<Self, WatchError> {
        let inotify = AsyncInotify::watch(path, mask()).map_err(|e| match e {
            InotifyError::Init(e) => WatchError::Init(e),
            InotifyError::AddWatch { path, source } => WatchError::AddWatch { path, source },
        })?;
        Ok(Watcher {
            inotify,
            path: path.to_path_buf(),
        })
    }

    /// Waits for events and returns every one available, in order.
    pub async fn next_batch(&mut self) -> Result<Vec<WatchEvent>, WatchError> {
        loop {
            let raw = self
                .inotify
                .next_events()
                .await
                .map_err(|source| WatchError::Read {
                    path: self.path.clone(),
                    source,
                })?;
            let events = self.translate(raw);
            if !events.is_empty() {
                return Ok(events);
            }
        }
    }

    fn translate(&self, raw: Vec<nix::sys::inotify::InotifyEvent>) -> Vec<WatchEvent> {
        let mut out = Vec::new();
        for ev in raw {
            let m = ev.mask;
            if m.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                out.push(WatchEvent::Resync);
                continue;
            }
            match ev.name {
                None => {
                    // The watched path itself.
                    if m.intersects(
                        AddWatchFlags::IN_DELETE_SELF
                            | AddWatchFlags::IN_MOVE_SELF
                            | AddWatchFlags::IN_IGNORED,
                    ) {
                        out.push(WatchEvent::Lost);
                    } else if m.intersects(AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ATTRIB)
                        && !m.contains(AddWatchFlags::IN_ISDIR)
                        && !self.path.file_name().is_some_and(hidden)
                    {
                        out.push(WatchEvent::Changed(self.path.clone()));
                    }
                }
                Some(name) => {
                    if hidden(&name) {
                        crate::vlog!(4, event_name = ?name, "Ignored pod manifest, because it starts with dots");
                        continue;
                    }
                    let path = self.path.join(&name);
                    if m.intersects(
                        AddWatchFlags::IN_CREATE
                            | AddWatchFlags::IN_MOVED_TO
                            | AddWatchFlags::IN_MODIFY
                            | AddWatchFlags::IN_ATTRIB,
                    ) {
                        out.push(WatchEvent::Changed(path));
                    } else if m.intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM)
                    {
                        out.push(WatchEvent::Removed(path));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn batch(w: &mut Watcher) -> Vec<WatchEvent> {
        tokio::time::timeout(Duration::from_secs(5), w.next_batch())
            .await
            .expect("events arrive")
            .expect("watch works")
    }

    #[tokio::test]
    async fn directory_events() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Watcher::new(dir.path()).unwrap();
        let file = dir.path().join("pod.yaml");
        std::fs::write(&file, "x").unwrap();
        std::fs::write(dir.path().join(".hidden"), "x").unwrap();
        let events = batch(&mut w).await;
        assert!(
            events
                .iter()
                .all(|e| *e == WatchEvent::Changed(file.clone())),
            "{events:?}"
        );
        std::fs::remove_file(&file).unwrap();
        assert_eq!(batch(&mut w).await, vec![WatchEvent::Removed(file.clone())]);
        std::fs::remove_file(dir.path().join(".hidden")).unwrap();
        let path = dir.path().to_path_buf();
        drop(dir);
        let events = batch(&mut w).await;
        assert!(
            events.contains(&WatchEvent::Lost),
            "{events:?} for {path:?}"
        );
    }

    #[tokio::test]
    async fn missing_paths_are_reported_as_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = Watcher::new(&dir.path().join("absent"))
            .err()
            .expect("no such path");
        assert!(err.is_not_found(), "{err}");
    }
}
