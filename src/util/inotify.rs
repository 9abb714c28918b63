//! inotify read through tokio's reactor: one non-blocking inotify instance
//! registered with the runtime, so a task can wait for file events without
//! holding a thread. Used by the static pod file source, the lock file's
//! contention watch and the container log follower.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Why a watch could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum InotifyError {
    #[error("unable to create inotify: {0}")]
    Init(#[source] io::Error),
    #[error("unable to add an inotify watch on {path:?}: {source}")]
    AddWatch {
        path: PathBuf,
        #[source]
        source: Errno,
    },
}

impl InotifyError {
    /// The errno behind the error.
    pub fn errno(&self) -> Errno {
        match self {
            InotifyError::Init(e) => Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            InotifyError::AddWatch { source, .. } => *source,
        }
    }
}

struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// An inotify instance with one watch, readable from async code.
pub struct AsyncInotify {
    fd: AsyncFd<Fd>,
}

impl std::fmt::Debug for AsyncInotify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncInotify").finish_non_exhaustive()
    }
}

impl AsyncInotify {
    /// Watches `path` for the events in `mask`. Must be called within a
    /// tokio runtime.
    pub fn watch(path: &Path, mask: AddWatchFlags) -> Result<Self, InotifyError> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| InotifyError::Init(e.into()))?;
        inotify
            .add_watch(path, mask)
            .map_err(|source| InotifyError::AddWatch {
                path: path.to_path_buf(),
                source,
            })?;
        // SAFETY: the descriptor is owned by the `Inotify` inside `Fd`, which
        // the `AsyncFd` owns: it stays open and unchanged until it drops.
        let fd = unsafe { AsyncFd::register_with_interest(Fd(inotify), Interest::READABLE) }
            .map_err(|e| InotifyError::Init(e.into_parts().1))?;
        Ok(AsyncInotify { fd })
    }

    /// Waits until events are queued and returns every one available, in
    /// order (never an empty list).
    pub async fn next_events(&self) -> io::Result<Vec<InotifyEvent>> {
        loop {
            let mut guard = self.fd.readable().await?;
            let mut out = Vec::new();
            loop {
                match guard.get_inner().0.read_events() {
                    Ok(events) if !events.is_empty() => out.extend(events),
                    Ok(_) => break,
                    Err(Errno::EAGAIN) => {
                        guard.clear_ready();
                        break;
                    }
                    Err(Errno::EINTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn reports_a_write_in_a_watched_directory() {
        let dir = tempfile::tempdir().unwrap();
        let w = AsyncInotify::watch(dir.path(), AddWatchFlags::IN_CREATE).unwrap();
        std::fs::write(dir.path().join("a.log"), "x").unwrap();
        let events = tokio::time::timeout(Duration::from_secs(5), w.next_events())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            events[0].name.as_deref(),
            Some(std::ffi::OsStr::new("a.log"))
        );
    }

    #[tokio::test]
    async fn a_missing_path_is_enoent() {
        let err =
            AsyncInotify::watch(Path::new("/nonexistent/x"), AddWatchFlags::IN_CREATE).unwrap_err();
        assert_eq!(err.errno(), Errno::ENOENT);
        assert!(err.to_string().contains("/nonexistent/x"));
    }
}
