//! The start phase's contract: subsystems spawn their long-running tasks on a
//! [`TaskSet`]; whoever started them keeps the [`ShutdownHandle`], which cancels
//! every task and waits for them within a bound.

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::util::clock::Clock;

/// How a periodic task is paced (Go's `wait.JitterUntil` family).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Period {
    /// The wait between runs.
    pub every: Duration,
    /// Each wait grows by a random part of up to `jitter * every` (0: none).
    pub jitter: f64,
    /// Sliding: the wait starts when a run ends (`wait.Until`); otherwise it
    /// starts when a run begins (`wait.NonSlidingUntil`), so a slow run
    /// eats into the next wait.
    pub sliding: bool,
    /// Wait once before the first run (`wait.PollUntil`'s start) instead
    /// of running at once.
    pub wait_first: bool,
}

impl Period {
    /// Runs now, then `every` after each run ends.
    pub const fn sliding(every: Duration) -> Self {
        Period {
            every,
            jitter: 0.0,
            sliding: true,
            wait_first: false,
        }
    }

    /// Runs now, then every `every` measured from each run's start.
    pub const fn fixed(every: Duration) -> Self {
        Period {
            every,
            jitter: 0.0,
            sliding: false,
            wait_first: false,
        }
    }

    /// The same pace with `factor` jitter.
    pub const fn with_jitter(self, factor: f64) -> Self {
        Period {
            jitter: factor,
            ..self
        }
    }

    /// The same pace, waiting one period before the first run.
    pub const fn waiting_first(self) -> Self {
        Period {
            wait_first: true,
            ..self
        }
    }

    /// The next wait, with its jitter.
    fn next_wait(&self) -> Duration {
        if self.jitter > 0.0 {
            self.every + self.every.mul_f64(self.jitter * rand::random::<f64>())
        } else {
            self.every
        }
    }
}

/// What one run of a periodic task says about the next: `()` always goes
/// on; [`ControlFlow::Break`] ends the task (e.g. a start-up loop that is
/// done).
pub trait Tick {
    fn go_on(self) -> bool;
}

impl Tick for () {
    fn go_on(self) -> bool {
        true
    }
}

impl Tick for ControlFlow<()> {
    fn go_on(self) -> bool {
        self.is_continue()
    }
}

/// Runs `f` at `period`'s pace until `token` is cancelled (a run in flight
/// is dropped) or a run breaks; waits are measured with `clock`.
pub async fn run_periodic<F, Fut>(
    token: CancellationToken,
    period: Period,
    clock: Arc<dyn Clock>,
    f: F,
) where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Tick,
{
    run_periodic_or_woken(token, period, clock, std::future::pending::<()>, f).await
}

/// [`run_periodic`], and also as soon as `woken()` resolves during a wait
/// (a run wanted early); the next wait then counts from that run.
pub async fn run_periodic_or_woken<F, Fut, W, WFut>(
    token: CancellationToken,
    period: Period,
    clock: Arc<dyn Clock>,
    mut woken: W,
    mut f: F,
) where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Tick,
    W: FnMut() -> WFut,
    WFut: Future<Output = ()>,
{
    if period.wait_first {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tokio::time::sleep(period.next_wait()) => {}
            _ = woken() => {}
        }
    }
    loop {
        let wait = period.next_wait();
        let started = clock.monotonic();
        tokio::select! {
            _ = token.cancelled() => return,
            flow = f() => if !flow.go_on() { return },
        }
        let wait = if period.sliding {
            wait
        } else {
            wait.saturating_sub(clock.monotonic().saturating_duration_since(started))
        };
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
            _ = woken() => {}
        }
    }
}

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

    /// Spawns a named task that runs `f` on `period` until shutdown (see
    /// [`run_periodic`]).
    pub fn spawn_periodic<F, Fut>(
        &self,
        name: &'static str,
        period: Period,
        clock: Arc<dyn Clock>,
        f: F,
    ) where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: Tick,
    {
        self.spawn(name, run_periodic(self.token(), period, clock, f));
    }

    /// [`TaskSet::spawn_periodic`], also running as soon as `woken()`
    /// resolves during a wait (see [`run_periodic_or_woken`]).
    pub fn spawn_periodic_or_woken<F, Fut, W, WFut>(
        &self,
        name: &'static str,
        period: Period,
        clock: Arc<dyn Clock>,
        woken: W,
        f: F,
    ) where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: Tick,
        W: FnMut() -> WFut + Send + 'static,
        WFut: Future<Output = ()> + Send + 'static,
    {
        self.spawn(
            name,
            run_periodic_or_woken(self.token(), period, clock, woken, f),
        );
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
    use crate::util::clock::RealClock;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::time::Instant;

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

    /// The offsets from the start at which each run began, over `total`.
    async fn run_starts(period: Period, run_takes: Duration, total: Duration) -> Vec<Duration> {
        let set = TaskSet::new();
        let starts = Arc::new(Mutex::new(Vec::new()));
        let origin = Instant::now();
        let seen = starts.clone();
        set.spawn_periodic("periodic", period, Arc::new(RealClock), move || {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(origin.elapsed());
                tokio::time::sleep(run_takes).await;
            }
        });
        tokio::time::sleep(total).await;
        set.into_shutdown_handle()
            .shutdown(Duration::from_secs(60))
            .await
            .expect("the periodic task stops");
        starts.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_pacing_table() {
        let s = Duration::from_secs;
        let cases: [(&str, Period, Duration, Vec<Duration>); 4] = [
            (
                "sliding",
                Period::sliding(s(10)),
                s(2),
                vec![s(0), s(12), s(24)],
            ),
            (
                "fixed",
                Period::fixed(s(10)),
                s(2),
                vec![s(0), s(10), s(20), s(30)],
            ),
            (
                "fixed, slow runs",
                Period::fixed(s(10)),
                s(15),
                vec![s(0), s(15), s(30)],
            ),
            (
                "waiting first",
                Period::sliding(s(10)).waiting_first(),
                s(0),
                vec![s(10), s(20), s(30)],
            ),
        ];
        for (name, period, run_takes, want) in cases {
            let got = run_starts(period, run_takes, s(35)).await;
            assert_eq!(got, want, "{name}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_jitter_stays_within_its_factor() {
        let s = Duration::from_secs;
        let got = run_starts(Period::sliding(s(10)).with_jitter(0.5), s(0), s(100)).await;
        assert!(got.len() >= 7 && got.len() <= 11, "{got:?}");
        for pair in got.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap >= s(10) && gap <= s(15), "{gap:?}");
        }
    }
}
