//! Keeps a repeated per-object failure (e.g. ContainerStatus of a container
//! that keeps failing) from flooding the log: an identical message for the
//! same id is logged again only after a delay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::util::clock::Clock;

/// How long an identical message stays quiet.
pub const IDENTICAL_ERROR_DELAY: Duration = Duration::from_secs(60);

/// Last message and when it was logged, per object id.
pub struct LogReduction {
    clock: Arc<dyn Clock>,
    delay: Duration,
    last: Mutex<HashMap<String, (String, tokio::time::Instant)>>,
}

impl LogReduction {
    /// A reducer with the given quiet period.
    pub fn new(clock: Arc<dyn Clock>, delay: Duration) -> Self {
        LogReduction {
            clock,
            delay,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `message` for `id` should be logged now (and records it).
    pub fn should_log(&self, message: &str, id: &str) -> bool {
        let now = self.clock.monotonic();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match last.get(id) {
            Some((prev, at)) if prev == message && now.duration_since(*at) < self.delay => false,
            _ => {
                last.insert(id.to_string(), (message.to_string(), now));
                true
            }
        }
    }

    /// Forgets `id` (after success or removal).
    pub fn clear(&self, id: &str) {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;

    #[tokio::test(start_paused = true)]
    async fn identical_messages_are_quiet_for_the_delay() {
        let r = LogReduction::new(Arc::new(RealClock), Duration::from_secs(60));
        assert!(r.should_log("boom", "c1"));
        assert!(!r.should_log("boom", "c1"));
        assert!(r.should_log("boom", "c2"), "other ids are independent");
        assert!(r.should_log("other", "c1"), "a different message logs");
        assert!(!r.should_log("other", "c1"));
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(r.should_log("other", "c1"), "logs again after the delay");
        r.clear("c1");
        assert!(r.should_log("other", "c1"), "cleared ids log at once");
    }
}
