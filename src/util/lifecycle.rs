//! The start phase's contract: subsystems spawn their long-running tasks on a
//! [`TaskSet`]; whoever started them keeps the [`ShutdownHandle`], which cancels
//! every task and waits for them within a bound.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where tasks are spawned during the start phase. Cloning is cheap; every
/// clone spawns into the same set and observes the same cancellation.
#[derive(Clone, Debug, Default)]
pub struct TaskSet {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl TaskSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The token cancelled when shutdown begins; tasks select on
    /// `token.cancelled()` and return promptly.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Spawns a named task. The name is logged if the task is still running
    /// when shutdown gives up waiting.
    pub fn spawn<F>(&self, name: &'static str, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let span = tracing::debug_span!("task", name);
        self.tracker
            .spawn(tracing::Instrument::instrument(fut, span));
    }

    /// Runs a blocking closure on the blocking pool, tracked like any task.
    pub fn spawn_blocking<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.tracker.spawn_blocking(f);
    }

    /// A child set whose token is cancelled with this one (or on its own),
    /// sharing the same tracker so shutdown still waits for its tasks.
    pub fn child(&self) -> TaskSet {
        TaskSet {
            token: self.token.child_token(),
            tracker: self.tracker.clone(),
        }
    }

    /// Consumes the start phase and returns the handle that stops it.
    pub fn into_shutdown_handle(self) -> ShutdownHandle {
        ShutdownHandle { tasks: self }
    }
}

/// Returned by the start phase. Dropping it does not stop anything.
#[derive(Debug)]
pub struct ShutdownHandle {
    tasks: TaskSet,
}

/// Shutdown gave up waiting; some tasks were still running.
#[derive(Debug, thiserror::Error)]
#[error("{remaining} task(s) still running after {timeout:?}")]
pub struct ShutdownTimedOut {
    pub remaining: usize,
    pub timeout: Duration,
}

impl ShutdownHandle {
    /// The token observed by every task; cancelled by [`ShutdownHandle::shutdown`].
    pub fn token(&self) -> CancellationToken {
        self.tasks.token()
    }

    /// Cancels every task and waits up to `timeout` for them to finish.
    pub async fn shutdown(self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        self.tasks.token.cancel();
        self.tasks.tracker.close();
        match tokio::time::timeout(timeout, self.tasks.tracker.wait()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(ShutdownTimedOut {
                remaining: self.tasks.tracker.len(),
                timeout,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn shutdown_cancels_and_waits_for_every_task() {
        let set = TaskSet::new();
        let stopped = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let token = set.token();
            let stopped = stopped.clone();
            set.spawn("waiter", async move {
                token.cancelled().await;
                stopped.fetch_add(1, Ordering::SeqCst);
            });
        }
        let child = set.child();
        let token = child.token();
        let s = stopped.clone();
        child.spawn("child", async move {
            token.cancelled().await;
            s.fetch_add(1, Ordering::SeqCst);
        });
        set.into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .expect("all tasks stop");
        assert_eq!(stopped.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_reports_tasks_that_ignore_cancellation() {
        let set = TaskSet::new();
        set.spawn("stubborn", async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let err = set
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(1))
            .await
            .expect_err("a stubborn task outlives the bound");
        assert_eq!(err.remaining, 1);
    }
}
