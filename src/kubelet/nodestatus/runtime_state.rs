//! The kubelet's runtime state (pkg/kubelet/runtime.go): whether the
//! container runtime answered recently and is ready, whether its network is
//! ready, storage errors, and health checks (the PLEG's) — the errors the
//! Ready condition and the sync loop report.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use super::sources::RuntimeInfo;
use crate::kubelet::container::RuntimeCondition;
use crate::util::lifecycle::TaskSet;

/// How long a runtime status may be old before the runtime counts as down
/// (Go's maxWaitForContainerRuntime).
pub const RUNTIME_SYNC_THRESHOLD: Duration = Duration::from_secs(30);
/// How often the runtime's status is polled (Go: every 5 s).
pub const RUNTIME_UP_PERIOD: Duration = Duration::from_secs(5);

/// The network error before the runtime first reports.
pub const NETWORK_STATE_UNKNOWN: &str = "network state unknown";

/// A named health check: `Err(detail)` when unhealthy.
pub type HealthCheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

struct Inner {
    last_base_runtime_sync: Option<Instant>,
    network_error: Option<String>,
    runtime_error: Option<String>,
    storage_error: Option<String>,
    cidr: String,
    health_checks: Vec<(String, HealthCheckFn)>,
}

/// Shared runtime state.
pub struct RuntimeState {
    threshold: Duration,
    inner: RwLock<Inner>,
}

impl std::fmt::Debug for RuntimeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeState").finish_non_exhaustive()
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

impl Default for RuntimeState {
    fn default() -> Self {
        Self::new(RUNTIME_SYNC_THRESHOLD)
    }
}

impl RuntimeState {
    pub fn new(threshold: Duration) -> Self {
        RuntimeState {
            threshold,
            inner: RwLock::new(Inner {
                last_base_runtime_sync: None,
                network_error: Some(NETWORK_STATE_UNKNOWN.to_string()),
                runtime_error: None,
                storage_error: None,
                cidr: String::new(),
                health_checks: Vec::new(),
            }),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a health check reported as `<name> is not healthy: <detail>`.
    pub fn add_health_check(&self, name: &str, check: HealthCheckFn) {
        self.write().health_checks.push((name.to_string(), check));
    }

    /// The runtime answered and is ready now.
    pub fn set_runtime_sync(&self, at: Instant) {
        self.write().last_base_runtime_sync = Some(at);
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
        let s = self.read();
        let mut errs = Vec::new();
        match s.last_base_runtime_sync {
            None => {
                errs.push("container runtime status check may not have completed yet".to_string())
            }
            Some(t) if t + self.threshold <= Instant::now() => {
                errs.push("container runtime is down".to_string())
            }
            Some(_) => {}
        }
        for (name, check) in &s.health_checks {
            if let Err(detail) = check() {
                errs.push(format!("{name} is not healthy: {detail}"));
            }
        }
        if let Some(e) = &s.runtime_error {
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

    /// One runtime status check (Go's updateRuntimeUp): records network and
    /// runtime readiness; returns whether the runtime is ready.
    pub async fn update_runtime_up(&self, runtime: &dyn RuntimeInfo) -> bool {
        let status = match runtime.status().await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "Container runtime sanity check failed");
                return false;
            }
        };
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
        self.set_runtime_sync(Instant::now());
        true
    }

    /// Polls the runtime every [`RUNTIME_UP_PERIOD`]; `on_ready` runs once,
    /// the first time the runtime is ready (Go's one-time initialisation of
    /// runtime-dependent modules).
    pub fn start_updater(
        self: &Arc<Self>,
        tasks: &TaskSet,
        runtime: Arc<dyn RuntimeInfo>,
        on_ready: Option<Box<dyn FnOnce() + Send>>,
    ) {
        let me = self.clone();
        let token = tasks.token();
        tasks.spawn("runtime-up", async move {
            let mut on_ready = on_ready;
            loop {
                if me.update_runtime_up(runtime.as_ref()).await
                    && let Some(f) = on_ready.take()
                {
                    f();
                }
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
    use crate::kubelet::container::{Image, RuntimeStatus};

    struct Fixed(Result<RuntimeStatus, String>);

    #[async_trait::async_trait]
    impl RuntimeInfo for Fixed {
        fn runtime_type(&self) -> String {
            "fake".into()
        }
        async fn version(&self) -> Result<String, String> {
            Ok("fake://1".into())
        }
        async fn status(&self) -> Result<RuntimeStatus, String> {
            self.0.clone()
        }
        async fn list_images(&self) -> Result<Vec<Image>, String> {
            Ok(vec![])
        }
        async fn update_pod_cidr(&self, _cidr: &str) -> Result<(), String> {
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
        let failing = Fixed(Err("connection refused".into()));
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
            Arc::new(|| Err("pleg was last seen active 3m0s ago; threshold is 3m0s".into())),
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
}
