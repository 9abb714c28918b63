//! Asking the runtime which cgroup driver it uses (the RuntimeConfig RPC).
//! Runtimes that predate the RPC answer Unimplemented; the kubelet then
//! keeps its own `--cgroup-driver`.

use std::time::Duration;

use super::api;
use super::error::CriError;
use super::service::RuntimeService;
use crate::vlog;

/// How many times a transient failure is retried.
const ATTEMPTS: usize = 3;
/// Pause between attempts.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// A cgroup driver as the kubelet's `cgroupDriver` setting spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupDriver {
    /// `systemd`
    Systemd,
    /// `cgroupfs`
    Cgroupfs,
}

impl CgroupDriver {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupDriver::Systemd => "systemd",
            CgroupDriver::Cgroupfs => "cgroupfs",
        }
    }

    fn from_api(value: i32) -> Option<Self> {
        match api::CgroupDriver::try_from(value).ok()? {
            api::CgroupDriver::Systemd => Some(CgroupDriver::Systemd),
            api::CgroupDriver::Cgroupfs => Some(CgroupDriver::Cgroupfs),
        }
    }
}

impl std::fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The runtime's cgroup driver; `Ok(None)` when the runtime does not support
/// the question (the caller keeps its configured driver). Transient failures
/// are retried a few times before giving up with the last error.
pub async fn runtime_cgroup_driver(
    runtime: &dyn RuntimeService,
) -> Result<Option<CgroupDriver>, CriError> {
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_DELAY).await;
        }
        match runtime.runtime_config().await {
            Ok(resp) => {
                let driver = resp
                    .linux
                    .as_ref()
                    .and_then(|l| CgroupDriver::from_api(l.cgroup_driver));
                if let Some(d) = driver {
                    vlog!(2, cgroup_driver = %d, "Using cgroup driver reported by the runtime");
                }
                return Ok(driver);
            }
            Err(err) if err.is_unimplemented() => {
                tracing::info!(
                    "Container runtime does not support the RuntimeConfig call; using the cgroup driver from the kubelet configuration"
                );
                return Ok(None);
            }
            Err(err) => {
                tracing::warn!(error = %err, attempt = attempt + 1, "RuntimeConfig failed");
                last = Some(err);
            }
        }
    }
    Err(last.unwrap_or_else(|| CriError::InvalidResponse {
        endpoint: String::new(),
        rpc: "RuntimeConfig",
        reason: "no attempt was made".into(),
    }))
}
