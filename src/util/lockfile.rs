//! The kubelet's lock file (`--lock-file`) and the watch behind
//! `--exit-on-lock-contention`.
//!
//! The lock is an exclusive `flock(2)` on the file, taken blocking: a second
//! kubelet started with the same lock file waits until the first one lets go.
//! With exit-on-lock-contention the holder watches the file with inotify; the
//! moment another process opens it (or the file is deleted) the holder's
//! [`ContentionWatch`] resolves and the caller shuts down, handing the lock over.

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::inotify::AddWatchFlags;

use crate::util::inotify::AsyncInotify;

/// Errors from taking or watching the lock file.
#[derive(Debug, thiserror::Error)]
pub enum LockFileError {
    #[error("cannot exit on lock file contention: no lock file specified")]
    NoLockFile,
    #[error("unable to open lock file {path:?}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("unable to acquire file lock on {path:?}: {source}")]
    Acquire { path: PathBuf, source: Errno },
    #[error("the lock file task for {path:?} was aborted: {reason}")]
    Aborted { path: PathBuf, reason: String },
    #[error("unable to watch lock file {path:?}: {source}")]
    Watch { path: PathBuf, source: Errno },
}

/// `--lock-file` and `--exit-on-lock-contention`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockFileParams {
    /// The lock file; `None` (flag left empty) takes no lock.
    pub path: Option<PathBuf>,
    pub exit_on_contention: bool,
}

/// A held exclusive lock. The lock lasts as long as this value (Go keeps the
/// descriptor open until the process exits; keep this alive likewise).
#[derive(Debug)]
pub struct LockFile {
    path: PathBuf,
    _lock: Flock<File>,
}

impl LockFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open_lock_file(path: &Path) -> Result<File, LockFileError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|source| LockFileError::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Takes the lock, waiting for as long as another process holds it (blocking
/// call; see [`acquire`] for async callers).
pub fn acquire_blocking(path: &Path) -> Result<LockFile, LockFileError> {
    let file = open_lock_file(path)?;
    let lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, source)| {
        LockFileError::Acquire {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok(LockFile {
        path: path.to_path_buf(),
        _lock: lock,
    })
}

/// Takes the lock if it is free; `Ok(None)` when another process holds it.
pub fn try_acquire(path: &Path) -> Result<Option<LockFile>, LockFileError> {
    let file = open_lock_file(path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(LockFile {
            path: path.to_path_buf(),
            _lock: lock,
        })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, source)) => Err(LockFileError::Acquire {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Takes the lock on the blocking pool, waiting while another process holds it.
pub async fn acquire(path: &Path) -> Result<LockFile, LockFileError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || acquire_blocking(&owned))
        .await
        .map_err(|e| LockFileError::Aborted {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?
}

/// An inotify watch on the lock file for open and delete-self events.
pub struct ContentionWatch {
    path: PathBuf,
    inotify: AsyncInotify,
}

impl std::fmt::Debug for ContentionWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentionWatch")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Starts watching `path` for another process opening it. Must be called from
/// within a tokio runtime. Set up after taking the lock, so our own open does
/// not count.
pub fn watch_for_contention(path: &Path) -> Result<ContentionWatch, LockFileError> {
    let inotify = AsyncInotify::watch(path, AddWatchFlags::IN_OPEN | AddWatchFlags::IN_DELETE_SELF)
        .map_err(|e| LockFileError::Watch {
            path: path.to_path_buf(),
            source: e.errno(),
        })?;
    Ok(ContentionWatch {
        path: path.to_path_buf(),
        inotify,
    })
}

impl ContentionWatch {
    /// Resolves on the first inotify event (or a watch error, which Go treats
    /// the same way: the caller shuts down).
    pub async fn contended(self) {
        match self.inotify.next_events().await {
            Ok(events) => {
                let masks: Vec<String> = events.iter().map(|e| format!("{:?}", e.mask)).collect();
                tracing::info!(path = %self.path.display(), event = ?masks, "Inotify event");
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "inotify watcher error");
            }
        }
    }
}

/// The lock as run() holds it: the lock itself and, with exit-on-contention,
/// the watch whose resolution means "shut down now".
#[derive(Debug, Default)]
pub struct KubeletLock {
    lock: Option<LockFile>,
    watch: Option<ContentionWatch>,
}

impl KubeletLock {
    /// Whether a lock is held.
    pub fn is_held(&self) -> bool {
        self.lock.is_some()
    }

    /// A future that resolves when another process wants the lock; it never
    /// resolves when exit-on-lock-contention is off. The watch moves into the
    /// first future asked for; later calls get one that never resolves.
    pub fn contended(&mut self) -> impl Future<Output = ()> + Send + 'static {
        let watch = self.watch.take();
        async move {
            match watch {
                Some(watch) => watch.contended().await,
                None => std::future::pending().await,
            }
        }
    }
}

/// run()'s lock-file step: checks the flag combination, takes the lock
/// (waiting while it is held elsewhere) and sets up the contention watch.
pub async fn obtain(params: &LockFileParams) -> Result<KubeletLock, LockFileError> {
    let path = match &params.path {
        Some(path) if !path.as_os_str().is_empty() => path,
        _ if params.exit_on_contention => return Err(LockFileError::NoLockFile),
        _ => return Ok(KubeletLock::default()),
    };
    tracing::info!(path = %path.display(), "Acquiring file lock");
    let lock = acquire(path).await?;
    let watch = if params.exit_on_contention {
        tracing::info!(path = %path.display(), "Watching for inotify events");
        Some(watch_for_contention(path)?)
    } else {
        None
    };
    Ok(KubeletLock {
        lock: Some(lock),
        watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    const CHILD_ENV: &str = "KUBELET_TEST_LOCK_CHILD";

    /// Not a test on its own: the second process of the two-process tests. It
    /// takes the lock named in the environment, says so, and holds it until
    /// its stdin closes.
    #[test]
    #[ignore]
    fn lock_holder_child() {
        let Ok(path) = std::env::var(CHILD_ENV) else {
            return;
        };
        let _lock = acquire_blocking(Path::new(&path)).expect("child takes the lock");
        println!("LOCKED");
        std::io::stdout().flush().expect("flush");
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }

    fn spawn_holder(path: &Path) -> (Child, BufReader<std::process::ChildStdout>) {
        let exe = std::env::current_exe().expect("test binary path");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "util::lockfile::tests::lock_holder_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        (child, BufReader::new(stdout))
    }

    fn wait_for_locked(reader: &mut BufReader<std::process::ChildStdout>) {
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader.read_line(&mut line).expect("read child");
            assert!(n > 0, "child exited before taking the lock");
            if line.contains("LOCKED") {
                return;
            }
        }
    }

    #[tokio::test]
    async fn obtain_table() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kubelet.lock");
        struct Case {
            name: &'static str,
            params: LockFileParams,
            want_err: bool,
            want_held: bool,
        }
        let cases = [
            Case {
                name: "no lock file",
                params: LockFileParams::default(),
                want_err: false,
                want_held: false,
            },
            Case {
                name: "exit on contention without a lock file",
                params: LockFileParams {
                    path: None,
                    exit_on_contention: true,
                },
                want_err: true,
                want_held: false,
            },
            Case {
                name: "lock file",
                params: LockFileParams {
                    path: Some(file.clone()),
                    exit_on_contention: false,
                },
                want_err: false,
                want_held: true,
            },
        ];
        for case in cases {
            match obtain(&case.params).await {
                Ok(lock) => {
                    assert!(!case.want_err, "{}: expected an error", case.name);
                    assert_eq!(lock.is_held(), case.want_held, "{}", case.name);
                }
                Err(e) => {
                    assert!(case.want_err, "{}: unexpected error {e}", case.name);
                    assert!(e.to_string().contains("no lock file specified"));
                }
            }
        }
    }

    #[test]
    fn lock_file_is_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let _lock = acquire_blocking(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[tokio::test]
    async fn second_process_blocks_until_the_holder_exits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        let (mut child, mut out) = spawn_holder(&path);
        wait_for_locked(&mut out);

        // Held elsewhere: a non-blocking attempt fails, a blocking one waits.
        assert!(try_acquire(&path).unwrap().is_none());
        let waiter = tokio::spawn({
            let path = path.clone();
            async move { acquire(&path).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !waiter.is_finished(),
            "acquire returned while the child holds the lock"
        );

        drop(child.stdin.take()); // the child releases the lock and exits
        let lock = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("lock handed over")
            .unwrap()
            .unwrap();
        assert_eq!(lock.path(), path.as_path());
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn contention_watch_fires_when_another_process_opens_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        let mut lock = obtain(&LockFileParams {
            path: Some(path.clone()),
            exit_on_contention: true,
        })
        .await
        .unwrap();
        let contended = tokio::spawn(lock.contended());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!contended.is_finished(), "no event yet");

        // A second kubelet opens the file and blocks on the lock.
        let (mut child, _out) = spawn_holder(&path);
        tokio::time::timeout(Duration::from_secs(10), contended)
            .await
            .expect("contention noticed")
            .unwrap();

        // Releasing our lock lets the newcomer take it.
        drop(lock);
        drop(child.stdin.take());
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn contention_watch_fires_when_the_file_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        // The file stays alive while a descriptor holds it, so delete-self
        // fires only once nobody (the lock holder included) has it open.
        drop(acquire(&path).await.unwrap());
        let watch = watch_for_contention(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        tokio::time::timeout(Duration::from_secs(5), watch.contended())
            .await
            .expect("delete noticed");
    }

    #[tokio::test]
    async fn without_exit_on_contention_the_future_stays_pending() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        let mut lock = obtain(&LockFileParams {
            path: Some(path.clone()),
            exit_on_contention: false,
        })
        .await
        .unwrap();
        let fut = lock.contended();
        std::fs::File::open(&path).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(200), fut)
                .await
                .is_err()
        );
    }
}
