//! Exec probes: the command runs in the container through CRI ExecSync with
//! the probe's timeout; exit code 0 is success, any other exit a failure
//! whose combined output (stdout then stderr, at most 10 KiB) is the message.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::error::ProberError;
use super::probe::Outcome;
use crate::cri::{CriError, RuntimeService};
use crate::kubelet::container::ContainerId;
use crate::vlog;

/// Most output kept from an exec probe.
pub const MAX_READ_LENGTH: usize = 10 * 1024;

/// How a command in a container did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// It ran and exited with `code`; `output` is stdout then stderr.
    Exit { code: i32, output: Vec<u8> },
    /// It ran past its timeout; `message` names the command.
    Timeout { message: String, timeout: Duration },
    /// It could not be run.
    Other(String),
}

/// Runs a command in a container and waits for it (Go's CommandRunner);
/// the runtime manager implements it over CRI ExecSync.
#[async_trait]
pub trait CommandRunner: Send + Sync + 'static {
    /// Output is stdout then stderr.
    async fn run_in_container(
        &self,
        id: &ContainerId,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<Vec<u8>, RunError>;
}

/// A [`CommandRunner`] over a CRI runtime service.
#[derive(Clone)]
pub struct CriCommandRunner {
    runtime: Arc<dyn RuntimeService>,
}

impl std::fmt::Debug for CriCommandRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CriCommandRunner").finish_non_exhaustive()
    }
}

impl CriCommandRunner {
    pub fn new(runtime: Arc<dyn RuntimeService>) -> Self {
        Self { runtime }
    }
}

#[async_trait]
impl CommandRunner for CriCommandRunner {
    async fn run_in_container(
        &self,
        id: &ContainerId,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<Vec<u8>, RunError> {
        match self.runtime.exec_sync(&id.id, cmd, timeout).await {
            Ok(out) => {
                let mut all = out.stdout;
                all.extend_from_slice(&out.stderr);
                Ok(all)
            }
            Err(CriError::ExitCode {
                code,
                mut stdout,
                stderr,
                ..
            }) => {
                stdout.extend_from_slice(&stderr);
                Err(RunError::Exit {
                    code,
                    output: stdout,
                })
            }
            Err(e @ CriError::ExecTimeout { .. }) => Err(RunError::Timeout {
                message: e.to_string(),
                timeout,
            }),
            Err(e) => Err(RunError::Other(e.to_string())),
        }
    }
}

/// Runs exec probes.
pub(crate) struct ExecProber {
    runner: Arc<dyn CommandRunner>,
    /// The ExecProbeTimeout gate.
    timeout_fails: bool,
}

impl ExecProber {
    pub(crate) fn new(runner: Arc<dyn CommandRunner>, timeout_fails: bool) -> Self {
        Self {
            runner,
            timeout_fails,
        }
    }

    pub(crate) async fn probe(
        &self,
        id: &ContainerId,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<(Outcome, String), ProberError> {
        let result = self.runner.run_in_container(id, cmd, timeout).await;
        let text = |data: &[u8]| {
            let cut = &data[..data.len().min(MAX_READ_LENGTH)];
            String::from_utf8_lossy(cut).into_owned()
        };
        match result {
            Ok(data) => {
                vlog!(4, response = %text(&data), "Exec probe response");
                Ok((Outcome::Success, text(&data)))
            }
            Err(RunError::Exit { code, output }) => {
                vlog!(4, response = %text(&output), "Exec probe response");
                let outcome = if code == 0 {
                    Outcome::Success
                } else {
                    Outcome::Failure
                };
                Ok((outcome, text(&output)))
            }
            Err(RunError::Timeout { message, timeout }) => {
                if self.timeout_fails {
                    // No output arrives from a command that timed out; the
                    // message says which one.
                    return Ok((Outcome::Failure, message));
                }
                tracing::warn!(
                    timeout = ?timeout,
                    "Exec probe timed out but the ExecProbeTimeout feature gate is disabled"
                );
                Err(ProberError::Exec {
                    container_id: id.to_string(),
                    message,
                })
            }
            Err(RunError::Other(message)) => Err(ProberError::Exec {
                container_id: id.to_string(),
                message,
            }),
        }
    }
}
