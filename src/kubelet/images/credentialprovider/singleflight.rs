//! One run of a piece of work per key at a time (golang.org/x/sync's
//! singleflight): callers asking for a key while its work runs wait for
//! that run and share its result; the next caller after it ends starts a
//! new one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

/// Work in flight, by key.
pub struct SingleFlight<T> {
    calls: Mutex<HashMap<String, Arc<OnceCell<T>>>>,
}

impl<T> Default for SingleFlight<T> {
    fn default() -> Self {
        SingleFlight {
            calls: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> SingleFlight<T> {
    /// `work`'s result, or the result of the run for `key` already under
    /// way. A caller that goes away mid-run leaves the work to the next
    /// waiter.
    pub async fn run<F, Fut>(&self, key: &str, work: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let call = {
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            calls.entry(key.to_string()).or_default().clone()
        };
        let out = call.get_or_init(work).await.clone();
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if calls.get(key).is_some_and(|c| Arc::ptr_eq(c, &call)) {
            calls.remove(key);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_run_per_key() {
        let flights: Arc<SingleFlight<usize>> = Arc::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let call = |key: &'static str| {
            let (flights, runs) = (flights.clone(), runs.clone());
            tokio::spawn(async move {
                flights
                    .run(key, || async {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        runs.fetch_add(1, Ordering::SeqCst) + 1
                    })
                    .await
            })
        };
        let handles = [call("a"), call("a"), call("a"), call("b")];
        let mut results = Vec::new();
        for h in handles {
            results.push(h.await.expect("task"));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2, "one run for a, one for b");
        assert_eq!(results[0], results[1]);
        assert_eq!(results[1], results[2]);
        // Once done, the key runs again.
        let again = call("a").await.expect("task");
        assert_eq!(again, 3);
        assert!(flights.calls.lock().unwrap().is_empty());
    }
}
