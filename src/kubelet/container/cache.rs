//! The pod status cache the PLEG fills and the pod workers read (Go's
//! kubecontainer.Cache). A reader can ask for a status "newer than" an
//! instant and wait until the PLEG has observed the runtime after it, which is
//! how a pod worker avoids acting on what it saw before its own last sync.
//! Such a wait, or a worker that has just changed its pod in the runtime,
//! asks the PLEG for a relist now rather than at its next period.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::runtime::{PodStatus, PodUid, RuntimeError};

/// A cached status, or the error the runtime gave when inspecting the pod.
#[derive(Debug, Clone)]
pub struct CachedStatus {
    pub status: Arc<PodStatus>,
    pub error: Option<Arc<RuntimeError>>,
}

impl CachedStatus {
    fn empty(uid: &str) -> Self {
        Self {
            status: Arc::new(PodStatus::empty(uid)),
            error: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    data: CachedStatus,
    modified: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    pods: HashMap<PodUid, Entry>,
    /// Every entry is at least as fresh as this; `None` until the first relist.
    timestamp: Option<Instant>,
    subscribers: HashMap<PodUid, Vec<(Instant, oneshot::Sender<CachedStatus>)>>,
}

impl Inner {
    fn newer_than(&self, uid: &str, min: Instant) -> Option<CachedStatus> {
        let global_newer = self.timestamp.is_some_and(|t| t > min);
        match self.pods.get(uid) {
            None if global_newer => Some(CachedStatus::empty(uid)),
            Some(e) if e.modified > min || global_newer => Some(e.data.clone()),
            _ => None,
        }
    }

    fn notify(&mut self, uid: &str) {
        let Some(waiting) = self.subscribers.remove(uid) else {
            return;
        };
        let mut still_waiting = Vec::new();
        for (min, tx) in waiting {
            match self.newer_than(uid, min) {
                Some(data) => {
                    let _ = tx.send(data);
                }
                None if !tx.is_closed() => still_waiting.push((min, tx)),
                None => {}
            }
        }
        if !still_waiting.is_empty() {
            self.subscribers.insert(uid.to_string(), still_waiting);
        }
    }
}

/// Thread-safe pod status cache.
#[derive(Debug, Default)]
pub struct PodCache {
    inner: Mutex<Inner>,
    /// Holds one permit while a relist is wanted early.
    relist_wanted: tokio::sync::Notify,
}

impl PodCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in
        // a way readers could misinterpret, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks the PLEG for a relist now: a pod worker has just changed its
    /// pod in the runtime, or waits for a fresher observation. Requests made
    /// while one is pending or a relist runs make one more relist.
    pub fn want_relist(&self) {
        self.relist_wanted.notify_one();
    }

    /// Resolves when a relist is wanted early (for the PLEG's loop).
    pub async fn relist_wanted(&self) {
        self.relist_wanted.notified().await
    }

    /// The cached status, or an empty one for an unknown pod.
    pub fn get(&self, uid: &str) -> CachedStatus {
        self.lock()
            .pods
            .get(uid)
            .map(|e| e.data.clone())
            .unwrap_or_else(|| CachedStatus::empty(uid))
    }

    /// Waits until the cache holds an observation of the pod made after `min`
    /// (its own entry, or a relist of all pods), then returns it.
    pub async fn get_newer_than(&self, uid: &str, min: Instant) -> CachedStatus {
        let rx = {
            let mut inner = self.lock();
            if let Some(data) = inner.newer_than(uid, min) {
                return data;
            }
            let (tx, rx) = oneshot::channel();
            inner
                .subscribers
                .entry(uid.to_string())
                .or_default()
                .push((min, tx));
            rx
        };
        self.want_relist();
        // The sender is only dropped with the cache itself.
        rx.await.unwrap_or_else(|_| CachedStatus::empty(uid))
    }

    /// Records what the runtime reported for the pod at `observed`.
    pub fn set(
        &self,
        uid: &str,
        status: PodStatus,
        error: Option<Arc<RuntimeError>>,
        observed: Instant,
    ) {
        let mut inner = self.lock();
        inner.pods.insert(
            uid.to_string(),
            Entry {
                data: CachedStatus {
                    status: Arc::new(status),
                    error,
                },
                modified: observed,
            },
        );
        inner.notify(uid);
    }

    pub fn delete(&self, uid: &str) {
        self.lock().pods.remove(uid);
    }

    /// Marks every entry as fresh as `observed` (a whole relist finished).
    pub fn update_time(&self, observed: Instant) {
        let mut inner = self.lock();
        inner.timestamp = Some(observed);
        let uids: Vec<PodUid> = inner.subscribers.keys().cloned().collect();
        for uid in uids {
            inner.notify(&uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn status(uid: &str, ip: &str) -> PodStatus {
        PodStatus {
            ips: vec![ip.to_string()],
            ..PodStatus::empty(uid)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn get_returns_empty_for_unknown_and_value_after_set() {
        let cache = PodCache::new();
        assert!(cache.get("a").status.ips.is_empty());
        cache.set("a", status("a", "10.0.0.1"), None, Instant::now());
        assert_eq!(cache.get("a").status.ips, vec!["10.0.0.1"]);
        cache.delete("a");
        assert!(cache.get("a").status.ips.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn get_newer_than_waits_for_a_fresher_set() {
        let cache = Arc::new(PodCache::new());
        let t0 = Instant::now();
        cache.set("a", status("a", "old"), None, t0);
        tokio::time::advance(Duration::from_millis(10)).await;
        let min = Instant::now();
        let c = cache.clone();
        let waiter = tokio::spawn(async move { c.get_newer_than("a", min).await });
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "stale entry must not satisfy the wait"
        );
        tokio::time::advance(Duration::from_millis(10)).await;
        cache.set("a", status("a", "new"), None, Instant::now());
        let got = waiter.await.expect("waiter");
        assert_eq!(got.status.ips, vec!["new"]);
    }

    #[tokio::test(start_paused = true)]
    async fn global_timestamp_releases_waiters_with_default_status() {
        let cache = Arc::new(PodCache::new());
        let min = Instant::now();
        let c = cache.clone();
        let waiter = tokio::spawn(async move { c.get_newer_than("gone", min).await });
        tokio::task::yield_now().await;
        // Same instant is not "newer".
        cache.update_time(min);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        tokio::time::advance(Duration::from_millis(1)).await;
        cache.update_time(Instant::now());
        let got = waiter.await.expect("waiter");
        assert_eq!(got.status.id, "gone");
        assert!(got.status.container_statuses.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn error_is_cached_with_status() {
        let cache = PodCache::new();
        cache.set(
            "a",
            PodStatus::empty("a"),
            Some(Arc::new(RuntimeError::Call {
                op: "PodSandboxStatus",
                message: "rpc failed".into(),
            })),
            Instant::now(),
        );
        assert_eq!(
            cache.get("a").error.map(|e| e.to_string()).as_deref(),
            Some("runtime call PodSandboxStatus failed: rpc failed")
        );
    }
}
