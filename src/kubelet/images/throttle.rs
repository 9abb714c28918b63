//! The registry pull rate limit (registryPullQPS / registryBurst): a token
//! bucket that starts full with `burst` tokens and refills at `qps` per
//! second; a pull that finds no token fails at once ("pull QPS exceeded"),
//! as the Go kubelet's throttled image service does.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::util::clock::Clock;

#[derive(Debug)]
struct State {
    tokens: f64,
    last: Instant,
}

/// A non-blocking token bucket.
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl std::fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenBucket")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

impl TokenBucket {
    /// `None` when `qps` is zero (no limit), as the kubelet treats it.
    pub fn new(qps: f64, burst: u32, clock: Arc<dyn Clock>) -> Option<Self> {
        if qps <= 0.0 {
            return None;
        }
        let now = clock.monotonic();
        Some(TokenBucket {
            qps,
            burst: f64::from(burst),
            clock,
            state: Mutex::new(State {
                tokens: f64::from(burst),
                last: now,
            }),
        })
    }

    /// Takes a token if one is available.
    pub fn try_accept(&self) -> bool {
        let now = self.clock.monotonic();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(s.last).as_secs_f64();
        s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
        s.last = now;
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn burst_then_refill_at_qps() {
        assert!(TokenBucket::new(0.0, 10, Arc::new(RealClock)).is_none());
        let b = TokenBucket::new(2.0, 3, Arc::new(RealClock)).expect("limited");
        let first: Vec<bool> = (0..4).map(|_| b.try_accept()).collect();
        assert_eq!(first, vec![true, true, true, false]);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(b.try_accept(), "one token after 1/qps");
        assert!(!b.try_accept());
        tokio::time::advance(Duration::from_secs(60)).await;
        let later: Vec<bool> = (0..4).map(|_| b.try_accept()).collect();
        assert_eq!(
            later,
            vec![true, true, true, false],
            "refill capped at burst"
        );
    }
}
