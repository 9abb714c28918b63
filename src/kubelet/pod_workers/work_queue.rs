//! The kubelet's work queue (Go's queue.BasicWorkQueue): pod UIDs with the
//! time they are due for a sync. The pod workers enqueue a pod after every
//! sync (resync interval, back-off, or at once on a phase change); the sync
//! ticker takes what is due.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::util::clock::Clock;

/// Due times by pod UID; enqueueing again replaces the due time.
pub struct WorkQueue {
    clock: Arc<dyn Clock>,
    queue: Mutex<HashMap<String, Instant>>,
}

impl WorkQueue {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        WorkQueue {
            clock,
            queue: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pod is due `delay` from now.
    pub fn enqueue(&self, uid: &str, delay: Duration) {
        let due = self.clock.monotonic() + delay;
        self.lock().insert(uid.to_string(), due);
    }

    /// Takes every UID that is due.
    pub fn get_work(&self) -> Vec<String> {
        let now = self.clock.monotonic();
        let mut queue = self.lock();
        let due: Vec<String> = queue
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in &due {
            queue.remove(uid);
        }
        due
    }

    /// Number of queued UIDs.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `d` plus up to `factor * d` at random (Go's wait.Jitter).
pub fn jitter(d: Duration, factor: f64) -> Duration {
    let factor = if factor <= 0.0 { 1.0 } else { factor };
    let extra: f64 = rand::rng().random::<f64>() * factor;
    d + d.mul_f64(extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;

    #[tokio::test(start_paused = true)]
    async fn due_items_come_out_once() {
        let q = WorkQueue::new(Arc::new(RealClock));
        q.enqueue("a", Duration::ZERO);
        q.enqueue("b", Duration::from_secs(10));
        assert_eq!(q.get_work(), vec!["a".to_string()]);
        assert!(q.get_work().is_empty());
        tokio::time::advance(Duration::from_secs(10)).await;
        q.enqueue("c", Duration::from_secs(1));
        assert_eq!(q.get_work(), vec!["b".to_string()]);
        // Re-enqueueing replaces the due time.
        q.enqueue("c", Duration::ZERO);
        assert_eq!(q.get_work(), vec!["c".to_string()]);
        assert!(q.is_empty());
    }

    #[test]
    fn jitter_stays_within_its_factor() {
        let base = Duration::from_secs(10);
        for _ in 0..1000 {
            let j = jitter(base, 0.5);
            assert!(j >= base && j <= base + base / 2, "{j:?}");
        }
    }
}
