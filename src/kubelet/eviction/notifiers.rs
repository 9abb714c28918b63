//! The manager's memcg notifiers: one per memory threshold (node memory on
//! the memory cgroup root, allocatable memory on the pods cgroup), re-armed
//! from fresh stats at most every [`NOTIFIER_REFRESH_INTERVAL`]; a crossing
//! wakes the monitoring loop.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::config::EvictionConfig;
use super::memcg::{CgroupNotifier, MEMORY_USAGE_ATTRIBUTE, memcg_threshold};
use super::threshold::{Signal, Threshold};
use crate::kubelet::stats::Summary;
use crate::util::lifecycle::TaskSet;

/// How often the notifier levels are recomputed.
pub const NOTIFIER_REFRESH_INTERVAL: Duration = Duration::from_secs(10);

struct Slot {
    threshold: Threshold,
    dir: PathBuf,
    armed: Mutex<Option<CancellationToken>>,
}

impl Slot {
    fn allocatable(&self) -> bool {
        self.threshold.signal == Signal::AllocatableMemoryAvailable
    }

    fn description(&self) -> String {
        format!(
            "{}{}memory eviction threshold",
            if self.threshold.is_hard() {
                "hard "
            } else {
                "soft "
            },
            if self.allocatable() {
                "allocatable "
            } else {
                ""
            }
        )
    }
}

/// The notifiers of one manager. They keep no task set: each re-arm spawns
/// its watcher into the set the caller (the monitoring loop) passes.
pub(super) struct Notifiers {
    slots: Vec<Arc<Slot>>,
    wake: Arc<Notify>,
}

impl Notifiers {
    pub(super) fn new(config: &EvictionConfig) -> Self {
        let mut slots = Vec::new();
        if config.kernel_memcg_notification
            && let Some(cg) = &config.memory_cgroup
        {
            for t in &config.thresholds {
                let dir = match t.signal {
                    Signal::MemoryAvailable => cg.mount.clone(),
                    Signal::AllocatableMemoryAvailable => cg.mount.join(&cg.pods_cgroup),
                    _ => continue,
                };
                slots.push(Arc::new(Slot {
                    threshold: t.clone(),
                    dir,
                    armed: Mutex::new(None),
                }));
            }
        }
        Notifiers {
            slots,
            wake: Arc::new(Notify::new()),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many notifiers are registered with the kernel now (a charge past
    /// their level from then on wakes the manager).
    pub(super) fn armed(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                s.armed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .is_some_and(|t| !t.is_cancelled())
            })
            .count()
    }

    /// Resolves when a notifier fired.
    pub(super) async fn woken(&self) {
        self.wake.notified().await
    }

    /// Re-arms every notifier at the level its threshold is met at now; the
    /// watchers run in `tasks` (a re-armed one cancels its predecessor).
    pub(super) async fn update(&self, summary: &Summary, tasks: &TaskSet) {
        for slot in &self.slots {
            let memory = if slot.allocatable() {
                summary.node.allocatable_memory.as_ref()
            } else {
                summary.node.memory.as_ref()
            };
            let level = match memory.map(|m| memcg_threshold(&slot.threshold, m)) {
                Some(Ok(level)) => level,
                Some(Err(e)) => {
                    tracing::info!(notifier = %slot.description(), err = %e, "Eviction manager: failed to update notifier");
                    continue;
                }
                None => continue,
            };
            crate::vlog!(3, notifier = %slot.description(), level, "Eviction manager: setting notifier to capacity");
            let dir = slot.dir.clone();
            let registered = tokio::task::spawn_blocking(move || {
                CgroupNotifier::register(&dir, MEMORY_USAGE_ATTRIBUTE, level)
            })
            .await;
            let notifier = match registered {
                Ok(Ok(n)) => n,
                Ok(Err(e)) => {
                    tracing::info!(notifier = %slot.description(), err = %e, "Eviction manager: failed to update notifier");
                    continue;
                }
                Err(e) => {
                    tracing::info!(notifier = %slot.description(), err = %e, "Eviction manager: failed to update notifier");
                    continue;
                }
            };
            let token = tasks.token().child_token();
            if let Some(old) = slot
                .armed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .replace(token.clone())
            {
                old.cancel();
            }
            let wake = self.wake.clone();
            let description = slot.description();
            tasks.spawn("eviction_memcg_notifier", async move {
                loop {
                    tokio::select! {
                        _ = token.cancelled() => return,
                        r = notifier.crossed() => match r {
                            Ok(()) => {
                                tracing::info!("Eviction manager: {description} crossed");
                                wake.notify_one();
                            }
                            Err(e) => {
                                tracing::info!(err = %e, "Eviction manager: error waiting for memcg events");
                                return;
                            }
                        }
                    }
                }
            });
        }
    }
}
