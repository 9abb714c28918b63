//! The container log manager (pkg/kubelet/logs): every 10 s it looks at the
//! log of each running container and, once the log has reached
//! `containerLogMaxSize`, rotates it: the live file gets its rotation time
//! as a suffix, the runtime is asked to reopen the log (a fresh file), older
//! rotated files are gzip-compressed and the oldest removed so that at most
//! `containerLogMaxFiles` files remain. A container's failure is logged and
//! the round goes on with the next one.
//!
//! Built with the kubelet, started with the runtime-dependent modules once
//! the runtime is up (`initializeRuntimeDependentModules`). Removing a
//! container removes its rotated logs too (the runtime manager's
//! `remove_container_log` removes `<log>*`).

pub mod metrics;
pub mod rotate;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::tz::TimeZone;

use crate::apis::config::types::KubeletConfiguration;
use crate::cri::RuntimeService;
use crate::cri::api::{Container, ContainerState, ContainerStatus};
use crate::cri::error::CriError;
use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet};

/// How often the logs are looked at (Go's logMonitorPeriod).
pub const LOG_MONITOR_PERIOD: Duration = Duration::from_secs(10);

/// When logs rotate and how many files a container keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotatePolicy {
    /// A live log this large (bytes) or larger is rotated.
    pub max_size: u64,
    /// Files a container's log may have, the live one included (> 1).
    pub max_files: usize,
}

/// A log rotation setting the manager cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("invalid MaxFiles {0}, must be > 1 (containerLogMaxFiles, --container-log-max-files)")]
    MaxFiles(i32),
    #[error(
        "failed to parse container log max size {size:?} (containerLogMaxSize, --container-log-max-size): {reason}"
    )]
    MaxSize { size: String, reason: String },
}

impl LogRotatePolicy {
    /// From the configuration's `containerLogMaxSize` (a quantity) and
    /// `containerLogMaxFiles`.
    pub fn new(max_size: &str, max_files: i32) -> Result<Self, PolicyError> {
        if max_files <= 1 {
            return Err(PolicyError::MaxFiles(max_files));
        }
        let bad = |reason: String| PolicyError::MaxSize {
            size: max_size.to_string(),
            reason,
        };
        let quantity = crate::util::quantity::parse(max_size).map_err(|e| bad(e.to_string()))?;
        let bytes = quantity
            .as_int64()
            .ok_or_else(|| bad("invalid max log size".to_string()))?;
        let max_size =
            u64::try_from(bytes).map_err(|_| bad(format!("negative max log size {bytes}")))?;
        Ok(LogRotatePolicy {
            max_size,
            max_files: max_files as usize,
        })
    }
}

/// Why a round, or one container's rotation, failed.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error("failed to list containers: {0}")]
    ListContainers(#[source] Box<CriError>),
    #[error("failed to get the status of container {id}: {source}")]
    Status {
        id: String,
        #[source]
        source: Box<CriError>,
    },
    #[error("container {id} has no status")]
    NoStatus { id: String },
    #[error("failed to stat log {path:?} of container {id}: {source}")]
    Stat {
        id: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("log {path:?} of container {id} is missing and reopening it failed: {source}")]
    Recover {
        id: String,
        path: PathBuf,
        #[source]
        source: Box<CriError>,
    },
    #[error("log {path:?} of container {id} is still missing after reopening it")]
    StillMissing { id: String, path: PathBuf },
    #[error("failed to list the rotated logs of {path:?}: {source}")]
    ListRotated {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to remove unused log {path:?}: {source}")]
    RemoveUnused {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to remove old log {path:?}: {source}")]
    RemoveExcess {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to compress log {path:?}: {source}")]
    Compress {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to rotate log {from:?} to {to:?}: {source}")]
    Rename {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to reopen the log {path:?} of container {id}: {source}")]
    Reopen {
        id: String,
        path: PathBuf,
        #[source]
        source: Box<CriError>,
    },
    #[error(
        "failed to reopen the log {path:?} of container {id}: {source}; renaming {rotated:?} back failed too: {rename}"
    )]
    ReopenAndRenameBack {
        id: String,
        path: PathBuf,
        rotated: PathBuf,
        #[source]
        source: Box<CriError>,
        rename: std::io::Error,
    },
    #[error("log rotation work did not finish: {0}")]
    Blocking(#[from] tokio::task::JoinError),
}

/// What the manager asks of the runtime.
#[async_trait]
pub trait LogRuntime: Send + Sync {
    async fn list_containers(&self) -> Result<Vec<Container>, CriError>;
    async fn container_status(&self, id: &str) -> Result<Option<ContainerStatus>, CriError>;
    async fn reopen_container_log(&self, id: &str) -> Result<(), CriError>;
}

/// The CRI runtime service as the manager's runtime.
pub struct CriLogRuntime(pub Arc<dyn RuntimeService>);

#[async_trait]
impl LogRuntime for CriLogRuntime {
    async fn list_containers(&self) -> Result<Vec<Container>, CriError> {
        self.0.list_containers(None).await
    }

    async fn container_status(&self, id: &str) -> Result<Option<ContainerStatus>, CriError> {
        Ok(self.0.container_status(id, false).await?.status)
    }

    async fn reopen_container_log(&self, id: &str) -> Result<(), CriError> {
        self.0.reopen_container_log(id).await
    }
}

/// What looking at one container's log did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The log is below the size limit.
    Small,
    /// The live log was renamed to this path and reopened.
    Rotated(PathBuf),
}

/// Rotates the logs of the running containers.
pub struct ContainerLogManager {
    runtime: Arc<dyn LogRuntime>,
    policy: LogRotatePolicy,
    clock: Arc<dyn Clock>,
    /// The zone of the rotation time in rotated names (Go: local time).
    tz: TimeZone,
}

async fn blocking<T, F>(f: F) -> Result<T, RotateError>
where
    F: FnOnce() -> Result<T, RotateError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f).await?
}

impl ContainerLogManager {
    pub fn new(
        runtime: Arc<dyn LogRuntime>,
        policy: LogRotatePolicy,
        clock: Arc<dyn Clock>,
        tz: TimeZone,
    ) -> Self {
        ContainerLogManager {
            runtime,
            policy,
            clock,
            tz,
        }
    }

    /// NewContainerLogManager: the manager over the CRI with the
    /// configuration's policy, in the system's time zone.
    pub fn build(
        config: &KubeletConfiguration,
        runtime: Arc<dyn RuntimeService>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, PolicyError> {
        let policy = LogRotatePolicy::new(
            &config.container_log_max_size,
            config.container_log_max_files,
        )?;
        Ok(Arc::new(Self::new(
            Arc::new(CriLogRuntime(runtime)),
            policy,
            clock,
            TimeZone::system(),
        )))
    }

    pub fn policy(&self) -> LogRotatePolicy {
        self.policy
    }

    /// Spawns the rotation loop: a round now, then 10 s after each ends.
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        let me = self.clone();
        tasks.spawn_periodic(
            "container-log-manager",
            Period::sliding(LOG_MONITOR_PERIOD),
            self.clock.clone(),
            move || {
                let me = me.clone();
                async move {
                    if let Err(e) = me.rotate_logs().await {
                        tracing::error!(err = %e, "Could not rotate container logs");
                    }
                }
            },
        );
    }

    /// One round over the running containers; only listing them fails it.
    pub async fn rotate_logs(&self) -> Result<(), RotateError> {
        let containers = self
            .runtime
            .list_containers()
            .await
            .map_err(|e| RotateError::ListContainers(Box::new(e)))?;
        for c in containers {
            // A stopped container writes no more: its log stays as it is.
            if c.state != ContainerState::ContainerRunning as i32 {
                continue;
            }
            match self.rotate_container(&c.id).await {
                Ok(Outcome::Small) => {}
                Ok(Outcome::Rotated(to)) => {
                    crate::vlog!(4, container_id = %c.id, rotated = %to.display(), "Rotated container log")
                }
                Err(e) => {
                    tracing::error!(container_id = %c.id, err = %e, "Could not rotate the log of a container")
                }
            }
        }
        Ok(())
    }

    /// Looks at one running container's log and rotates it when due.
    pub async fn rotate_container(&self, id: &str) -> Result<Outcome, RotateError> {
        let status = self
            .runtime
            .container_status(id)
            .await
            .map_err(|source| RotateError::Status {
                id: id.to_string(),
                source: Box::new(source),
            })?
            .ok_or_else(|| RotateError::NoStatus { id: id.to_string() })?;
        let path = PathBuf::from(status.log_path);
        let size = match self.size(id, &path).await? {
            Some(size) => size,
            None => {
                // A rotation whose reopen failed may have lost the live
                // file: the runtime makes a new one.
                self.runtime
                    .reopen_container_log(id)
                    .await
                    .map_err(|source| RotateError::Recover {
                        id: id.to_string(),
                        path: path.clone(),
                        source: Box::new(source),
                    })?;
                self.size(id, &path)
                    .await?
                    .ok_or_else(|| RotateError::StillMissing {
                        id: id.to_string(),
                        path: path.clone(),
                    })?
            }
        };
        if size < self.policy.max_size {
            return Ok(Outcome::Small);
        }
        self.rotate_log(id, &path).await.map(Outcome::Rotated)
    }

    async fn size(&self, id: &str, path: &Path) -> Result<Option<u64>, RotateError> {
        let (id, path) = (id.to_string(), path.to_path_buf());
        blocking(move || {
            rotate::size_of(&path).map_err(|source| RotateError::Stat { id, path, source })
        })
        .await
    }

    /// The older rotated files first (leftovers, count, compression), then
    /// the live log: renamed, reopened, renamed back if the reopen fails.
    async fn rotate_log(&self, id: &str, log: &Path) -> Result<PathBuf, RotateError> {
        let max_files = self.policy.max_files;
        let rotated = rotate::rotated_name(log, self.clock.now(), &self.tz);
        let (from, to) = (log.to_path_buf(), rotated.clone());
        blocking(move || {
            rotate::prepare(&from, max_files)?;
            std::fs::rename(&from, &to).map_err(|source| RotateError::Rename { from, to, source })
        })
        .await?;
        let Err(source) = self.runtime.reopen_container_log(id).await else {
            return Ok(rotated);
        };
        let source = Box::new(source);
        // Back under its live name, so that the next round tries again.
        let (from, to) = (rotated.clone(), log.to_path_buf());
        let back = tokio::task::spawn_blocking(move || std::fs::rename(from, to)).await?;
        Err(match back {
            Ok(()) => RotateError::Reopen {
                id: id.to_string(),
                path: log.to_path_buf(),
                source,
            },
            Err(rename) => RotateError::ReopenAndRenameBack {
                id: id.to_string(),
                path: log.to_path_buf(),
                rotated,
                source,
                rename,
            },
        })
    }
}

#[cfg(test)]
mod tests;
