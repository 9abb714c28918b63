//! The runtime's health as the sync loop and node status see it (Go's
//! runtimeState): when the runtime last answered a status check, whether it
//! and its network are ready, and extra health checks (the PLEG). The sync
//! loop does not iterate while [`RuntimeState::runtime_errors`] reports
//! anything; pods that need the pod network wait for
//! [`RuntimeState::network_errors`] to clear.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::kubelet::container::{RuntimeCondition, RuntimeStatus};
use crate::util::clock::Clock;

/// How long the runtime may go without a successful status check.
pub const MAX_WAIT_FOR_CONTAINER_RUNTIME: Duration = Duration::from_secs(30);
/// How often the runtime's status is checked (updateRuntimeUp).
pub const RUNTIME_UP_PERIOD: Duration = Duration::from_secs(5);
/// The network is unknown until the first status check.
pub const NETWORK_UNKNOWN: &str = "network state unknown";

/// A named health check: `Err(message)` when unhealthy.
pub type HealthFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

struct Inner {
    last_base_runtime_sync: Option<Instant>,
    network_error: Option<String>,
    runtime_error: Option<String>,
    health_checks: Vec<(String, HealthFn)>,
}

/// Shared runtime health.
pub struct RuntimeState {
    inner: RwLock<Inner>,
    threshold: Duration,
    clock: Arc<dyn Clock>,
}

/// Go's `%v` of a runtime condition pointer.
fn describe(c: Option<&RuntimeCondition>) -> String {
    match c {
        None => "<nil>".to_string(),
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.condition_type, c.status, c.reason, c.message
        ),
    }
}

/// Joins errors as Go's aggregate prints them.
pub fn aggregate(errs: &[String]) -> Option<String> {
    match errs {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

impl RuntimeState {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_threshold(clock, MAX_WAIT_FOR_CONTAINER_RUNTIME)
    }

    pub fn with_threshold(clock: Arc<dyn Clock>, threshold: Duration) -> Self {
        RuntimeState {
            inner: RwLock::new(Inner {
                last_base_runtime_sync: None,
                network_error: Some(NETWORK_UNKNOWN.to_string()),
                runtime_error: None,
                health_checks: Vec::new(),
            }),
            threshold,
            clock,
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a health check the sync loop waits for (e.g. "PLEG").
    pub fn add_health_check(&self, name: &str, check: HealthFn) {
        self.write().health_checks.push((name.to_string(), check));
    }

    /// Records a successful runtime status check.
    pub fn set_runtime_sync(&self) {
        self.write().last_base_runtime_sync = Some(self.clock.monotonic());
    }

    pub fn set_network_state(&self, err: Option<String>) {
        self.write().network_error = err;
    }

    pub fn set_runtime_state(&self, err: Option<String>) {
        self.write().runtime_error = err;
    }

    /// Applies a runtime status (updateRuntimeUp). Returns whether the
    /// runtime is ready (then the caller runs its one-time initialization
    /// and records the sync).
    pub fn apply_status(&self, status: &RuntimeStatus) -> bool {
        crate::vlog!(4, status = ?status, "Container runtime status");
        let network = status.condition("NetworkReady");
        if network.is_none_or(|c| !c.status) {
            let d = describe(network);
            tracing::error!(network_ready = %d, "Container runtime network not ready");
            self.set_network_state(Some(format!("container runtime network not ready: {d}")));
        } else {
            self.set_network_state(None);
        }
        let runtime = status.condition("RuntimeReady");
        if runtime.is_none_or(|c| !c.status) {
            let d = describe(runtime);
            tracing::error!(runtime_ready = %d, "Container runtime not ready");
            self.set_runtime_state(Some(format!("container runtime not ready: {d}")));
            return false;
        }
        self.set_runtime_state(None);
        true
    }

    /// Why pods cannot be synced now, if anything.
    pub fn runtime_errors(&self) -> Option<String> {
        let inner = self.read();
        let mut errs = Vec::new();
        match inner.last_base_runtime_sync {
            None => {
                errs.push("container runtime status check may not have completed yet".to_string())
            }
            Some(t) if t + self.threshold <= self.clock.monotonic() => {
                errs.push("container runtime is down".to_string())
            }
            Some(_) => {}
        }
        for (name, check) in &inner.health_checks {
            if let Err(e) = check() {
                errs.push(format!("{name} is not healthy: {e}"));
            }
        }
        if let Some(e) = &inner.runtime_error {
            errs.push(e.clone());
        }
        aggregate(&errs)
    }

    /// Why pods needing the pod network cannot start now, if anything.
    pub fn network_errors(&self) -> Option<String> {
        self.read().network_error.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;

    fn cond(t: &str, ok: bool) -> RuntimeCondition {
        RuntimeCondition {
            condition_type: t.into(),
            status: ok,
            reason: if ok { "" } else { "NetworkPluginNotReady" }.into(),
            message: if ok { "" } else { "cni config uninitialized" }.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn runtime_and_network_errors_follow_status_checks() {
        let s = RuntimeState::new(Arc::new(RealClock));
        assert_eq!(
            s.runtime_errors().as_deref(),
            Some("container runtime status check may not have completed yet")
        );
        assert_eq!(s.network_errors().as_deref(), Some(NETWORK_UNKNOWN));
        let status = RuntimeStatus {
            conditions: vec![cond("RuntimeReady", true), cond("NetworkReady", false)],
        };
        assert!(s.apply_status(&status));
        s.set_runtime_sync();
        assert_eq!(s.runtime_errors(), None);
        assert_eq!(
            s.network_errors().as_deref(),
            Some(
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"
            )
        );
        tokio::time::advance(MAX_WAIT_FOR_CONTAINER_RUNTIME).await;
        assert_eq!(
            s.runtime_errors().as_deref(),
            Some("container runtime is down")
        );
        s.set_runtime_sync();
        s.add_health_check(
            "PLEG",
            Arc::new(|| Err("pleg was last seen active 3m0s ago".into())),
        );
        assert_eq!(
            s.runtime_errors().as_deref(),
            Some("PLEG is not healthy: pleg was last seen active 3m0s ago")
        );
        let down = RuntimeStatus {
            conditions: vec![cond("NetworkReady", true)],
        };
        assert!(!s.apply_status(&down));
        assert_eq!(
            s.runtime_errors().as_deref(),
            Some(
                "[PLEG is not healthy: pleg was last seen active 3m0s ago, container runtime not ready: <nil>]"
            )
        );
        assert_eq!(s.network_errors(), None);
    }
}
