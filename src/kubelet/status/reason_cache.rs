//! Why each container last failed to start (Go's ReasonCache): the reason
//! and message of the latest failed StartContainer step per pod container,
//! shown as the container's waiting state (`CrashLoopBackOff`,
//! `ErrImagePull`, `CreateContainerConfigError`, …) until a start succeeds.
//! Bounded like Go's LRU: the least recently touched entries go first.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::kubelet::container::{PodSyncResult, SyncAction, SyncError};

/// Go keeps at most this many entries.
pub const MAX_REASON_CACHE_ENTRIES: usize = 1000;

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<(String, String), (u64, SyncError)>,
    tick: u64,
}

/// Start-failure reasons by (pod UID, container name).
#[derive(Debug)]
pub struct ReasonCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

impl Default for ReasonCache {
    fn default() -> Self {
        Self::with_capacity(MAX_REASON_CACHE_ENTRIES)
    }
}

impl ReasonCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        ReasonCache {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the start outcomes of one sync: failures are remembered,
    /// successes forget the container's previous failure.
    pub fn update(&self, uid: &str, result: &PodSyncResult) {
        for r in &result.results {
            if r.action != SyncAction::StartContainer {
                continue;
            }
            match &r.error {
                Some(e) => self.add(uid, &r.target, e.clone()),
                None => self.remove(uid, &r.target),
            }
        }
    }

    pub fn add(&self, uid: &str, container: &str, error: SyncError) {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        inner
            .entries
            .insert((uid.to_string(), container.to_string()), (tick, error));
        if inner.entries.len() > self.capacity
            && let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone())
        {
            inner.entries.remove(&oldest);
        }
    }

    pub fn remove(&self, uid: &str, container: &str) {
        self.lock()
            .entries
            .remove(&(uid.to_string(), container.to_string()));
    }

    /// The latest start failure of the container, if it has one.
    pub fn get(&self, uid: &str, container: &str) -> Option<SyncError> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner
            .entries
            .get_mut(&(uid.to_string(), container.to_string()))?;
        entry.0 = tick;
        Some(entry.1.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::container::SyncResult;

    #[test]
    fn start_failures_are_kept_until_a_start_succeeds() {
        let cache = ReasonCache::new();
        let mut failed = PodSyncResult::default();
        failed.add(SyncResult::fail(
            SyncAction::StartContainer,
            "app",
            SyncError::new(
                "CrashLoopBackOff",
                "back-off 10s restarting failed container",
            ),
        ));
        failed.add(SyncResult::fail(
            SyncAction::KillContainer,
            "other",
            SyncError::new("KillContainerError", "x"),
        ));
        cache.update("u", &failed);
        assert_eq!(
            cache.get("u", "app").map(|e| e.reason),
            Some("CrashLoopBackOff".to_string())
        );
        assert!(cache.get("u", "other").is_none(), "only start steps count");
        let mut ok = PodSyncResult::default();
        ok.add(SyncResult::ok(SyncAction::StartContainer, "app"));
        cache.update("u", &ok);
        assert!(cache.get("u", "app").is_none());
    }

    #[test]
    fn least_recently_used_entries_are_evicted() {
        let cache = ReasonCache::with_capacity(2);
        let e = || SyncError::new("ErrImagePull", "m");
        cache.add("u", "a", e());
        cache.add("u", "b", e());
        assert!(cache.get("u", "a").is_some());
        cache.add("u", "c", e());
        assert!(cache.get("u", "b").is_none(), "b was least recently used");
        assert!(cache.get("u", "a").is_some());
        assert!(cache.get("u", "c").is_some());
    }
}
