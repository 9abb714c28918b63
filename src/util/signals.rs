//! Shutdown signals: the first SIGTERM or SIGINT starts a graceful shutdown;
//! a second one ends the process at once with status 1 (as the Go kubelet's
//! signal context does).

use futures::StreamExt;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_tokio::Signals;
use tokio_util::sync::CancellationToken;

/// The signals that stop the kubelet.
pub const SHUTDOWN_SIGNALS: [i32; 2] = [SIGTERM, SIGINT];

/// Errors from installing the handlers.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("failed to install handlers for SIGTERM/SIGINT: {0}")]
    Register(std::io::Error),
}

/// A stream of SIGTERM/SIGINT deliveries. Once registered, those signals no
/// longer kill the process by default.
pub struct ShutdownSignals {
    signals: Signals,
}

impl std::fmt::Debug for ShutdownSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownSignals").finish_non_exhaustive()
    }
}

/// A human name for the two signals.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        _ => "signal",
    }
}

impl ShutdownSignals {
    /// Installs the handlers. Must run inside a tokio runtime.
    pub fn register() -> Result<Self, SignalError> {
        let signals = Signals::new(SHUTDOWN_SIGNALS).map_err(SignalError::Register)?;
        Ok(Self { signals })
    }

    /// The next shutdown signal (`None` only if the handlers were closed).
    pub async fn recv(&mut self) -> Option<i32> {
        self.signals.next().await
    }

    /// Spawns the watcher: the first signal cancels `token`; the second exits
    /// the process with status 1. Not tracked by a TaskSet on purpose: it must
    /// outlive the shutdown it starts.
    pub fn spawn_handler(mut self, token: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let Some(first) = self.recv().await else {
                return;
            };
            tracing::info!(
                signal = signal_name(first),
                "Received shutdown signal, shutting down"
            );
            token.cancel();
            if let Some(second) = self.recv().await {
                tracing::warn!(
                    signal = signal_name(second),
                    "Received second shutdown signal, exiting now"
                );
                std::process::exit(1);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    const CHILD_ENV: &str = "KUBELET_TEST_SIGNAL_CHILD";

    /// Not a test on its own: a child that installs the handler, reports each
    /// step, and idles until killed by the second signal.
    #[test]
    #[ignore]
    fn signal_child() {
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let token = CancellationToken::new();
            let _h = ShutdownSignals::register()
                .unwrap()
                .spawn_handler(token.clone());
            println!("READY");
            token.cancelled().await;
            println!("CANCELLED");
            tokio::time::sleep(Duration::from_secs(30)).await;
            println!("TIMEOUT");
        });
    }

    #[test]
    fn first_signal_cancels_second_exits_with_1() {
        for (sig, name) in [(Signal::SIGTERM, "SIGTERM"), (Signal::SIGINT, "SIGINT")] {
            let exe = std::env::current_exe().unwrap();
            let mut child = Command::new(exe)
                .args([
                    "--exact",
                    "util::signals::tests::signal_child",
                    "--ignored",
                    "--nocapture",
                ])
                .env(CHILD_ENV, "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let pid = Pid::from_raw(child.id() as i32);
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut expect_line = |want: &str| {
                let mut line = String::new();
                loop {
                    line.clear();
                    assert!(
                        out.read_line(&mut line).unwrap() > 0,
                        "{name}: child ended before {want}"
                    );
                    if line.trim() == want {
                        return;
                    }
                }
            };
            expect_line("READY");
            kill(pid, sig).unwrap();
            expect_line("CANCELLED");
            kill(pid, sig).unwrap();
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(1), "{name}");
        }
    }

    #[tokio::test]
    async fn recv_yields_the_signal() {
        let mut signals = ShutdownSignals::register().unwrap();
        // SIGINT is handled now, so raising it does not end the test process.
        nix::sys::signal::raise(Signal::SIGINT).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), signals.recv())
            .await
            .unwrap();
        assert_eq!(got, Some(SIGINT));
        assert_eq!(signal_name(SIGINT), "SIGINT");
    }
}
