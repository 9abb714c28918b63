//! The Clock seam: every timer, backoff and timestamp in the kubelet asks a
//! `Clock`, so tests can drive time instead of sleeping.

use std::time::SystemTime;

/// Wall-clock and monotonic time.
pub trait Clock: Send + Sync + 'static {
    /// Wall-clock time, used for timestamps written to the API and to disk.
    fn now(&self) -> SystemTime;
    /// Monotonic time, used for intervals, ages and backoff.
    fn monotonic(&self) -> tokio::time::Instant;
}

/// The real clock. `monotonic` follows tokio's clock, so tests that pause
/// tokio time also steer it.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn real_clock_monotonic_follows_tokio_time() {
        let clock = RealClock;
        let before = clock.monotonic();
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert!(clock.monotonic() - before >= std::time::Duration::from_secs(5));
    }
}
