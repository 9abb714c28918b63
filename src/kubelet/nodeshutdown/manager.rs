//! The node shutdown manager: one logind session at a time (inhibitor,
//! PrepareForShutdown watch), re-opened a second after it ends; the
//! shutting-down state the admission, the Ready condition and node status
//! read; the pods stopped by priority range.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::ShutdownError;
use super::groups::{ShutdownGroup, ShutdownRanges};
use super::logind::{InhibitLock, Logind, LogindBus, override_inhibit_delay};
use super::storage::{ShutdownState, StateFile};
use crate::kubelet::events::{EventType, NodeEvents, reasons};
use crate::kubelet::sync_loop::admission::PodAdmitResult;
use crate::metrics::kubelet as metrics;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

/// The reason of a pod stopped for the shutdown.
pub const NODE_SHUTDOWN_REASON: &str = "Terminated";
/// The message of a pod stopped for the shutdown.
pub const NODE_SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// The reason of a pod refused while the node shuts down.
pub const NODE_SHUTDOWN_NOT_ADMITTED_REASON: &str = "NodeShutdown";
/// The message of a pod refused while the node shuts down.
pub const NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE: &str =
    "Pod was rejected as the node is shutting down.";
/// How long after a logind session ended a new one is opened.
const DBUS_RECONNECT_PERIOD: Duration = Duration::from_secs(1);
/// The Ready condition's error while the node shuts down.
const SHUTTING_DOWN: &str = "node is shutting down";

/// Stops a pod for the shutdown.
#[async_trait]
pub trait ShutdownKiller: Send + Sync + 'static {
    /// Stops `pod`'s probes, kills it with `grace_period_seconds` and ends
    /// it Failed (unless it Succeeded) with the shutdown's reason and
    /// message; returns once it is stopped.
    async fn kill_for_shutdown(
        &self,
        pod: &Arc<Pod>,
        grace_period_seconds: i64,
    ) -> Result<(), ShutdownError>;
}

/// What the manager is set to.
#[derive(Debug, Clone)]
pub struct ShutdownConfig {
    pub ranges: ShutdownRanges,
    /// Where logind's drop-in goes when its InhibitDelayMaxSec is too short.
    pub logind_conf_dir: PathBuf,
    /// The shutdown times (kept when GracefulNodeShutdownBasedOnPodPriority
    /// is on, as in Go).
    pub state_file: Option<StateFile>,
}

/// What the manager calls out to.
pub struct ShutdownDeps {
    pub bus: Arc<dyn LogindBus>,
    pub killer: Arc<dyn ShutdownKiller>,
    /// The pods to stop (admitted, not terminated).
    pub active_pods: Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>,
    pub events: NodeEvents,
    pub clock: Arc<dyn Clock>,
}

/// Whether the node is shutting down, for the admission, the Ready
/// condition and node status.
#[derive(Debug, Clone)]
pub struct ShutdownStatus {
    rx: watch::Receiver<bool>,
}

impl ShutdownStatus {
    /// A status that never changes (graceful shutdown off).
    pub fn never() -> Self {
        let (_tx, rx) = watch::channel(false);
        ShutdownStatus { rx }
    }

    pub fn shutting_down(&self) -> bool {
        *self.rx.borrow()
    }

    /// The Ready condition's errors.
    pub fn errors(&self) -> Vec<String> {
        if self.shutting_down() {
            vec![SHUTTING_DOWN.to_string()]
        } else {
            Vec::new()
        }
    }

    /// The admit handler: nothing is admitted while the node shuts down.
    pub fn admit(&self, _pod: &Pod) -> PodAdmitResult {
        if self.shutting_down() {
            PodAdmitResult::reject(
                NODE_SHUTDOWN_NOT_ADMITTED_REASON,
                NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE,
            )
        } else {
            PodAdmitResult::admit()
        }
    }

    /// Waits for the state to change; `false` once the manager is gone.
    pub async fn changed(&mut self) -> bool {
        self.rx.changed().await.is_ok()
    }
}

/// One logind connection with its inhibitor and signal stream.
struct Session {
    logind: Box<dyn Logind>,
    lock: Option<InhibitLock>,
    signals: BoxStream<'static, bool>,
}

/// Graceful node shutdown.
pub struct ShutdownManager {
    config: ShutdownConfig,
    deps: ShutdownDeps,
    state: watch::Sender<bool>,
}

impl std::fmt::Debug for ShutdownManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownManager")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ShutdownManager {
    /// Build phase: nothing connects yet.
    pub fn new(config: ShutdownConfig, deps: ShutdownDeps) -> Arc<Self> {
        tracing::info!(
            ranges = ?config.ranges.ranges(),
            "Creating node shutdown manager"
        );
        let (state, _) = watch::channel(false);
        Arc::new(ShutdownManager {
            config,
            deps,
            state,
        })
    }

    /// The shutting-down state.
    pub fn status(&self) -> ShutdownStatus {
        ShutdownStatus {
            rx: self.state.subscribe(),
        }
    }

    /// Start phase: opens the first logind session (its failure is the
    /// caller's to log; nothing is retried then, as in Go) and watches it,
    /// re-opening a session a second after one ends.
    pub async fn start(self: &Arc<Self>, tasks: &TaskSet) -> Result<(), ShutdownError> {
        let first = self.open_session().await?;
        self.restore_metrics().await;
        let me = self.clone();
        let stop = tasks.token();
        tasks.spawn("node-shutdown", async move {
            let mut session = Some(first);
            loop {
                if let Some(s) = session.take() {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        () = me.watch(s) => {}
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(DBUS_RECONNECT_PERIOD) => {}
                }
                crate::vlog!(1, "Restarting watch for node shutdown events");
                match me.open_session().await {
                    Ok(s) => session = Some(s),
                    Err(e) => {
                        tracing::error!(err = %e, "Unable to watch the node for shutdown events")
                    }
                }
            }
        });
        Ok(())
    }

    /// Connects, makes sure logind lets the inhibitor hold shutdown long
    /// enough (raising its maximum through the drop-in and a reload when
    /// not), takes the inhibitor and subscribes to PrepareForShutdown.
    async fn open_session(&self) -> Result<Session, ShutdownError> {
        let logind = self.deps.bus.connect().await?;
        let current = logind.current_inhibit_delay().await?;
        let requested = self.config.ranges.period_requested();
        if requested > current {
            override_inhibit_delay(&self.config.logind_conf_dir, requested)
                .await
                .map_err(|e| ShutdownError::Override(Box::new(e)))?;
            logind.reload_logind_conf().await?;
            let updated = logind.current_inhibit_delay().await?;
            if requested > updated {
                return Err(ShutdownError::DelayTooShort {
                    requested,
                    current: updated,
                });
            }
        }
        let lock = logind.inhibit_shutdown().await?;
        // On failure the lock is dropped, which releases it.
        let signals = logind.monitor_shutdown().await?;
        Ok(Session {
            logind,
            lock: Some(lock),
            signals,
        })
    }

    /// Handles the session's signals until it ends.
    async fn watch(&self, mut session: Session) {
        while let Some(shutting_down) = session.signals.next().await {
            crate::vlog!(
                1,
                event = if shutting_down {
                    "shutdown"
                } else {
                    "cancelled"
                },
                "Shutdown manager detected new shutdown event"
            );
            let message = if shutting_down {
                "Shutdown manager detected shutdown event"
            } else {
                "Shutdown manager detected shutdown cancellation"
            };
            self.deps
                .events
                .event(EventType::Normal, reasons::NODE_SHUTDOWN, message);
            self.state.send_replace(shutting_down);
            if shutting_down {
                self.process_shutdown().await;
                // The inhibitor goes: the shutdown proceeds.
                session.lock = None;
                crate::vlog!(
                    1,
                    "Shutdown manager completed processing shutdown event, node will shutdown shortly"
                );
            } else {
                match session.logind.inhibit_shutdown().await {
                    Ok(lock) => session.lock = Some(lock),
                    Err(e) => tracing::error!(err = %e, "Failed to take the inhibitor again"),
                }
            }
        }
        tracing::error!("Ended to watching the node for shutdown events");
    }

    /// Stops the active pods, range by range from the lowest priority, each
    /// range waited for at most its grace period.
    async fn process_shutdown(&self) {
        crate::vlog!(1, "Shutdown manager processing shutdown event");
        let pods = (self.deps.active_pods)();
        let start = self.deps.clock.now();
        self.store_state(ShutdownState {
            start: Some(start),
            end: None,
        })
        .await;
        if self.config.state_file.is_some() {
            set_time(metrics::graceful_shutdown_start_time(), start);
            metrics::graceful_shutdown_end_time().set(&[], 0.0);
        }
        for group in self.config.ranges.group(&pods) {
            if group.pods.is_empty() {
                continue;
            }
            let grace = Duration::from_secs(group.range.grace_seconds.max(0) as u64);
            if tokio::time::timeout(grace, self.stop_group(&group))
                .await
                .is_err()
            {
                crate::vlog!(
                    1,
                    grace_period = group.range.grace_seconds,
                    priority = group.range.priority,
                    "Shutdown manager pod killing time out"
                );
            }
        }
        let end = self.deps.clock.now();
        self.store_state(ShutdownState {
            start: Some(start),
            end: Some(end),
        })
        .await;
        if self.config.state_file.is_some() {
            set_time(metrics::graceful_shutdown_end_time(), end);
        }
    }

    async fn stop_group(&self, group: &ShutdownGroup) {
        let kills = group.pods.iter().map(|pod| async move {
            let own = pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds);
            let grace = match own {
                Some(own) if own <= group.range.grace_seconds => own,
                _ => group.range.grace_seconds,
            };
            let name = crate::kubelet::container::format_pod(pod);
            crate::vlog!(1, pod = %name, grace_period = grace, "Shutdown manager killing pod with gracePeriod");
            match self.deps.killer.kill_for_shutdown(pod, grace).await {
                Ok(()) => crate::vlog!(1, pod = %name, "Shutdown manager finished killing pod"),
                Err(e) => crate::vlog!(1, pod = %name, err = %e, "Shutdown manager failed killing pod"),
            }
        });
        futures::future::join_all(kills).await;
    }

    /// The last shutdown's times from the state file, into the gauges (Go's
    /// setMetrics).
    async fn restore_metrics(&self) {
        let Some(file) = self.config.state_file.clone() else {
            return;
        };
        match tokio::task::spawn_blocking(move || file.load()).await {
            Ok(Ok(state)) => {
                if let Some(t) = state.start {
                    set_time(metrics::graceful_shutdown_start_time(), t);
                }
                if let Some(t) = state.end {
                    set_time(metrics::graceful_shutdown_end_time(), t);
                }
            }
            Ok(Err(e)) => tracing::error!(err = %e, "Failed to load graceful shutdown state"),
            Err(e) => tracing::error!(err = %e, "Failed to load graceful shutdown state"),
        }
    }

    async fn store_state(&self, state: ShutdownState) {
        let Some(file) = self.config.state_file.clone() else {
            return;
        };
        let stored = tokio::task::spawn_blocking(move || file.store(state)).await;
        match stored {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(err = %e, "Failed to store graceful shutdown state"),
            Err(e) => tracing::error!(err = %e, "Failed to store graceful shutdown state"),
        }
    }
}

/// A wall-clock time into a Unix-seconds gauge.
fn set_time(gauge: &crate::metrics::GaugeVec, t: std::time::SystemTime) {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    gauge.set(&[], secs as f64);
}
