//! The kubelet's runtime state (pkg/kubelet/runtime.go): when the container
//! runtime last answered a status check and was ready, whether its network
//! is ready, storage errors, the pod CIDR, and extra health checks (the
//! PLEG's). One value, shared: the sync loop does not iterate while
//! [`RuntimeState::runtime_errors`] reports anything, pods that need the pod
//! network wait for [`RuntimeState::network_errors`], and the Node's Ready
//! condition reports both. One poller feeds it (the kubelet's
//! `runtime-up` task, see `kubelet::run`).

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::kubelet::container::{RuntimeCondition, RuntimeStatus};
use crate::kubelet::nodestatus::sources::RuntimeInfo;
use crate::util::clock::{Clock, RealClock};
use crate::util::lifecycle::TaskSet;

/// How long the runtime may go without a successful status check (Go's
/// maxWaitForContainerRuntime).
pub const MAX_WAIT_FOR_CONTAINER_RUNTIME: Duration = Duration::from_secs(30);
/// How often the runtime's status is checked (updateRuntimeUp).
pub const RUNTIME_UP_PERIOD: Duration = Duration::from_secs(5);
/// The network error before the runtime first reports.
pub const NETWORK_STATE_UNKNOWN: &str = "network state unknown";

/// Why a health check fails (its detail).
pub type HealthError = Box<dyn std::error::Error + Send + Sync>;

/// A named health check: `Err(detail)` when unhealthy. Made from any
/// `Arc`'d closure whose error converts into [`HealthError`].
#[derive(Clone)]
pub struct HealthFn(Arc<dyn Fn() -> Result<(), HealthError> + Send + Sync>);

impl HealthFn {
    pub fn new<F, E>(check: F) -> Self
    where
        F: Fn() -> Result<(), E> + Send + Sync + 'static,
        E: Into<HealthError>,
    {
        HealthFn(Arc::new(move || check().map_err(Into::into)))
    }

    /// Runs the check.
    pub fn check(&self) -> Result<(), HealthError> {
        (self.0)()
    }
}

impl<F, E> From<Arc<F>> for HealthFn
where
    F: Fn() -> Result<(), E> + Send + Sync + 'static,
    E: Into<HealthError>,
{
    fn from(check: Arc<F>) -> Self {
        HealthFn::new(move || check())
    }
}

struct Inner {
    last_base_runtime_sync: Option<Instant>,
    network_error: Option<String>,
    runtime_error: Option<String>,
    storage_error: Option<String>,
    cidr: String,
    health_checks: Vec<(String, HealthFn)>,
}

/// Shared runtime health.
pub struct RuntimeState {
    inner: RwLock<Inner>,
    threshold: Duration,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for RuntimeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeState").finish_non_exhaustive()
    }
}

impl Default for RuntimeState {
    fn default() -> Self {
        Self::new(Arc::new(RealClock))
    }
}

/// Go's `%v` of a runtime condition: `Type=bool reason:R message:M`.
pub fn condition_string(c: Option<&RuntimeCondition>) -> String {
    match c {
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.condition_type, c.status, c.reason, c.message
        ),
        None => "<nil>".to_string(),
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
                network_error: Some(NETWORK_STATE_UNKNOWN.to_string()),
                runtime_error: None,
                storage_error: None,
                cidr: String::new(),
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

    /// Adds a health check reported as `<name> is not healthy: <detail>`.
    pub fn add_health_check(&self, name: &str, check: impl Into<HealthFn>) {
        self.write()
            .health_checks
            .push((name.to_string(), check.into()));
    }

    /// Records a successful runtime status check (now).
    pub fn set_runtime_sync(&self) {
        self.write().last_base_runtime_sync = Some(self.clock.monotonic());
    }

    pub fn set_network_state(&self, err: Option<String>) {
        self.write().network_error = err;
    }

    pub fn set_runtime_state(&self, err: Option<String>) {
        self.write().runtime_error = err;
    }

    pub fn set_storage_state(&self, err: Option<String>) {
        self.write().storage_error = err;
    }

    pub fn set_pod_cidr(&self, cidr: &str) {
        self.write().cidr = cidr.to_string();
    }

    pub fn pod_cidr(&self) -> String {
        self.read().cidr.clone()
    }

    /// Why the runtime is not usable (empty when it is).
    pub fn runtime_errors(&self) -> Vec<String> {
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
            if let Err(detail) = check.check() {
                errs.push(format!("{name} is not healthy: {detail}"));
            }
        }
        if let Some(e) = &inner.runtime_error {
            errs.push(e.clone());
        }
        errs
    }

    /// Why the pod network is not usable (empty when it is).
    pub fn network_errors(&self) -> Vec<String> {
        self.read().network_error.iter().cloned().collect()
    }

    pub fn storage_errors(&self) -> Vec<String> {
        self.read().storage_error.iter().cloned().collect()
    }

    /// Applies a runtime status (the state part of updateRuntimeUp): records
    /// network and runtime readiness and returns whether the runtime is
    /// ready (then the caller runs its one-time initialization and records
    /// the sync).
    pub fn apply_status(&self, status: &RuntimeStatus) -> bool {
        crate::vlog!(4, status = ?status, "Container runtime status");
        let network = status.condition("NetworkReady");
        if network.is_some_and(|c| c.status) {
            self.set_network_state(None);
        } else {
            let s = condition_string(network);
            tracing::error!(network_ready = %s, "Container runtime network not ready");
            self.set_network_state(Some(format!("container runtime network not ready: {s}")));
        }
        let ready = status.condition("RuntimeReady");
        if !ready.is_some_and(|c| c.status) {
            let s = condition_string(ready);
            tracing::error!(runtime_ready = %s, "Container runtime not ready");
            self.set_runtime_state(Some(format!("container runtime not ready: {s}")));
            return false;
        }
        self.set_runtime_state(None);
        true
    }

    /// One runtime status check without one-time initialization (node
    /// status's fast update, and rigs that run node status alone): applies
    /// the status and records the sync; returns whether the runtime is
    /// ready.
    pub async fn update_runtime_up(&self, runtime: &dyn RuntimeInfo) -> bool {
        let status = match runtime.status().await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "Container runtime sanity check failed");
                return false;
            }
        };
        if !self.apply_status(&status) {
            return false;
        }
        self.set_runtime_sync();
        true
    }

    /// Polls the runtime every [`RUNTIME_UP_PERIOD`] (for rigs that run
    /// node status without the kubelet; the kubelet's own poller also
    /// starts the runtime-dependent modules).
    pub fn start_updater(self: &Arc<Self>, tasks: &TaskSet, runtime: Arc<dyn RuntimeInfo>) {
        let me = self.clone();
        let token = tasks.token();
        tasks.spawn("runtime-up", async move {
            loop {
                me.update_runtime_up(runtime.as_ref()).await;
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(RUNTIME_UP_PERIOD) => {}
                }
            }
        });
    }
}

/// Joins errors as Go's aggregate error prints them: one as is, several as
/// `[a, b]`, duplicates once.
pub fn aggregate(errs: &[String]) -> Option<String> {
    let mut seen: Vec<&String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => None,
        [one] => Some((*one).clone()),
        many => Some(format!(
            "[{}]",
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::container::{Image, RuntimeError};
    use crate::kubelet::nodestatus::sources::RuntimeInfoError;
    use crate::util::clock::RealClock;

    /// A runtime whose status check answers this (`Err`: the call fails
    /// with this message).
    struct Fixed(Result<RuntimeStatus, &'static str>);

    #[async_trait::async_trait]
    impl RuntimeInfo for Fixed {
        fn runtime_type(&self) -> String {
            "fake".into()
        }
        async fn version(&self) -> Result<String, RuntimeInfoError> {
            Ok("fake://1".into())
        }
        async fn status(&self) -> Result<RuntimeStatus, RuntimeInfoError> {
            self.0.clone().map_err(|message| {
                RuntimeError::Call {
                    op: "status",
                    message: message.to_string(),
                }
                .into()
            })
        }
        async fn list_images(&self) -> Result<Vec<Image>, RuntimeInfoError> {
            Ok(vec![])
        }
        async fn update_pod_cidr(&self, _cidr: &str) -> Result<(), RuntimeInfoError> {
            Ok(())
        }
    }

    fn cond(t: &str, ok: bool, reason: &str, msg: &str) -> RuntimeCondition {
        RuntimeCondition {
            condition_type: t.into(),
            status: ok,
            reason: reason.into(),
            message: msg.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn errors_follow_the_runtime() {
        let state = RuntimeState::default();
        assert_eq!(
            state.runtime_errors(),
            vec!["container runtime status check may not have completed yet"]
        );
        assert_eq!(state.network_errors(), vec![NETWORK_STATE_UNKNOWN]);

        let not_ready_net = Fixed(Ok(RuntimeStatus {
            conditions: vec![
                cond("RuntimeReady", true, "", ""),
                cond(
                    "NetworkReady",
                    false,
                    "NetworkPluginNotReady",
                    "Network plugin returns error: cni plugin not initialized",
                ),
            ],
        }));
        assert!(state.update_runtime_up(&not_ready_net).await);
        assert!(state.runtime_errors().is_empty());
        assert_eq!(
            state.network_errors(),
            vec![
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
            ]
        );

        let no_runtime_cond = Fixed(Ok(RuntimeStatus {
            conditions: vec![cond("NetworkReady", true, "", "")],
        }));
        assert!(!state.update_runtime_up(&no_runtime_cond).await);
        assert_eq!(
            state.runtime_errors(),
            vec!["container runtime not ready: <nil>"]
        );
        assert!(state.network_errors().is_empty());

        // A status check that fails leaves the last sync in place; 30 s on,
        // the runtime counts as down.
        let failing = Fixed(Err("connection refused"));
        let ok = Fixed(Ok(RuntimeStatus {
            conditions: vec![
                cond("RuntimeReady", true, "", ""),
                cond("NetworkReady", true, "", ""),
            ],
        }));
        assert!(state.update_runtime_up(&ok).await);
        assert!(state.runtime_errors().is_empty());
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(!state.update_runtime_up(&failing).await);
        assert_eq!(state.runtime_errors(), vec!["container runtime is down"]);

        state.add_health_check(
            "PLEG",
            Arc::new(|| Err("pleg was last seen active 3m0s ago; threshold is 3m0s".to_string())),
        );
        assert_eq!(
            aggregate(&state.runtime_errors()).unwrap(),
            "[container runtime is down, PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s]"
        );
    }

    #[test]
    fn aggregate_table() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&["a"], Some("a")),
            (&["a", "b"], Some("[a, b]")),
            (&["a", "a"], Some("a")),
            (&["a", "b", "a"], Some("[a, b]")),
        ];
        for (errs, want) in cases {
            let errs: Vec<String> = errs.iter().map(|s| s.to_string()).collect();
            assert_eq!(aggregate(&errs).as_deref(), *want);
        }
    }

    fn cond2(t: &str, ok: bool) -> RuntimeCondition {
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
            aggregate(&s.runtime_errors()).as_deref(),
            Some("container runtime status check may not have completed yet")
        );
        assert_eq!(
            aggregate(&s.network_errors()).as_deref(),
            Some(NETWORK_STATE_UNKNOWN)
        );
        let status = RuntimeStatus {
            conditions: vec![cond2("RuntimeReady", true), cond2("NetworkReady", false)],
        };
        assert!(s.apply_status(&status));
        s.set_runtime_sync();
        assert!(s.runtime_errors().is_empty());
        assert_eq!(
            aggregate(&s.network_errors()).as_deref(),
            Some(
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"
            )
        );
        tokio::time::advance(MAX_WAIT_FOR_CONTAINER_RUNTIME).await;
        assert_eq!(
            aggregate(&s.runtime_errors()).as_deref(),
            Some("container runtime is down")
        );
        s.set_runtime_sync();
        s.add_health_check(
            "PLEG",
            Arc::new(|| Err("pleg was last seen active 3m0s ago".to_string())),
        );
        assert_eq!(
            aggregate(&s.runtime_errors()).as_deref(),
            Some("PLEG is not healthy: pleg was last seen active 3m0s ago")
        );
        let down = RuntimeStatus {
            conditions: vec![cond2("NetworkReady", true)],
        };
        assert!(!s.apply_status(&down));
        assert_eq!(
            aggregate(&s.runtime_errors()).as_deref(),
            Some(
                "[PLEG is not healthy: pleg was last seen active 3m0s ago, container runtime not ready: <nil>]"
            )
        );
        assert!(s.network_errors().is_empty());
    }
}
