//! Per-key exponential back-off (client-go's flowcontrol.Backoff): each key
//! starts at an initial delay that doubles on every failure up to a cap, and
//! forgets its history once it has been quiet for twice the cap. The kubelet
//! keys container restarts (CrashLoopBackOff) and image pulls
//! (ImagePullBackOff) with it.
//!
//! Times are wall-clock (`SystemTime`): the events compared against the
//! window, such as a container's finish time, come from the runtime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::util::clock::Clock;

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: SystemTime,
}

/// Back-off state for many keys. Thread-safe; share it through an `Arc`.
pub struct Backoff {
    clock: Arc<dyn Clock>,
    initial: Duration,
    max: Duration,
    max_jitter_factor: f64,
    entries: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Backoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backoff")
            .field("initial", &self.initial)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

/// `a - b` in nanoseconds, negative when `a` is before `b`.
fn signed_nanos(a: SystemTime, b: SystemTime) -> i128 {
    match a.duration_since(b) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

impl Backoff {
    /// A back-off starting at `initial` and doubling up to `max`, no jitter.
    pub fn new(initial: Duration, max: Duration, clock: Arc<dyn Clock>) -> Self {
        Self::with_jitter(initial, max, 0.0, clock)
    }

    /// As [`Backoff::new`], adding up to `max_jitter_factor` × delay of
    /// random jitter on every step.
    pub fn with_jitter(
        initial: Duration,
        max: Duration,
        max_jitter_factor: f64,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Backoff {
            clock,
            initial,
            max,
            max_jitter_factor,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The clock this back-off reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn jitter(&self, delay: Duration) -> Duration {
        if self.max_jitter_factor <= 0.0 {
            return Duration::ZERO;
        }
        delay.mul_f64(rand::random::<f64>() * self.max_jitter_factor)
    }

    /// Whether the key's history is stale: quiet for more than twice the cap.
    fn has_expired(&self, event_time: SystemTime, last_update: SystemTime) -> bool {
        signed_nanos(event_time, last_update) > (self.max * 2).as_nanos() as i128
    }

    /// The key's current delay (zero for an unknown key).
    pub fn get(&self, id: &str) -> Duration {
        self.lock().get(id).map(|e| e.backoff).unwrap_or_default()
    }

    /// Records a failure at `event_time`: the first (or first after a quiet
    /// spell) sets the initial delay, later ones double it up to the cap.
    pub fn next(&self, id: &str, event_time: SystemTime) {
        let now = self.clock.now();
        let mut entries = self.lock();
        let backoff = match entries.get(id) {
            Some(e) if !self.has_expired(event_time, e.last_update) => {
                let delay = e.backoff * 2 + self.jitter(e.backoff);
                delay.min(self.max)
            }
            _ => self.initial + self.jitter(self.initial),
        };
        entries.insert(
            id.to_string(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }

    /// Forgets the key.
    pub fn reset(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether less than the key's delay has passed since `event_time`
    /// (e.g. the container's last exit).
    pub fn is_in_backoff_since(&self, id: &str, event_time: SystemTime) -> bool {
        let entries = self.lock();
        let Some(e) = entries.get(id) else {
            return false;
        };
        if self.has_expired(event_time, e.last_update) {
            return false;
        }
        signed_nanos(self.clock.now(), event_time) < e.backoff.as_nanos() as i128
    }

    /// Whether `event_time` falls within the key's delay after its last
    /// recorded failure.
    pub fn is_in_backoff_since_update(&self, id: &str, event_time: SystemTime) -> bool {
        let entries = self.lock();
        let Some(e) = entries.get(id) else {
            return false;
        };
        if self.has_expired(event_time, e.last_update) {
            return false;
        }
        signed_nanos(event_time, e.last_update) < e.backoff.as_nanos() as i128
    }

    /// Drops keys not updated for more than twice the cap.
    pub fn gc(&self) {
        let now = self.clock.now();
        let limit = (self.max * 2).as_nanos() as i128;
        self.lock()
            .retain(|_, e| signed_nanos(now, e.last_update) <= limit);
    }

    /// Number of keys tracked (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// A duration as Go's `time.Duration.String` prints it: `10s`, `1m20s`,
/// `5m0s`, `1h0m0s`, `1.5s`, `100ms`, `0s`.
pub fn go_duration_string(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (unit, div) = if nanos < 1_000 {
            ("ns", 1u128)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", fraction(nanos, div));
    }
    let hours = nanos / 3_600_000_000_000;
    let rem = nanos % 3_600_000_000_000;
    let minutes = rem / 60_000_000_000;
    let secs_nanos = rem % 60_000_000_000;
    let secs = fraction(secs_nanos, 1_000_000_000);
    if hours > 0 {
        format!("{hours}h{minutes}m{secs}s")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// `value / div` with the fraction's trailing zeros dropped.
fn fraction(value: u128, div: u128) -> String {
    let whole = value / div;
    let frac = value % div;
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// A wall clock the test moves by hand.
    struct ManualClock(StdMutex<SystemTime>);

    impl ManualClock {
        fn new() -> Arc<Self> {
            Arc::new(ManualClock(StdMutex::new(
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
            )))
        }
        fn advance(&self, d: Duration) {
            let mut t = self.0.lock().unwrap();
            *t += d;
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> SystemTime {
            *self.0.lock().unwrap()
        }
        fn monotonic(&self) -> tokio::time::Instant {
            tokio::time::Instant::now()
        }
    }

    #[test]
    fn doubles_to_the_cap_and_resets_after_a_quiet_spell() {
        let clock = ManualClock::new();
        let b = Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(300),
            clock.clone(),
        );
        let mut seen = Vec::new();
        for _ in 0..7 {
            b.next("k", clock.now());
            seen.push(b.get("k").as_secs());
            clock.advance(Duration::from_secs(1));
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300]);
        // Quiet for more than twice the cap: back to the start.
        clock.advance(Duration::from_secs(601));
        b.next("k", clock.now());
        assert_eq!(b.get("k"), Duration::from_secs(10));
        b.reset("k");
        assert_eq!(b.get("k"), Duration::ZERO);
    }

    #[test]
    fn in_backoff_windows() {
        let clock = ManualClock::new();
        let b = Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(300),
            clock.clone(),
        );
        let exited = clock.now();
        assert!(!b.is_in_backoff_since("c", exited), "unknown key");
        b.next("c", exited);
        let cases = [(0, true), (9, true), (10, false), (30, false)];
        for (after, want) in cases {
            let now = exited + Duration::from_secs(after);
            // is_in_backoff_since compares the clock's now with the event.
            *clock.0.lock().unwrap() = now;
            assert_eq!(b.is_in_backoff_since("c", exited), want, "after {after}s");
            assert_eq!(
                b.is_in_backoff_since_update("c", now),
                want,
                "since update after {after}s"
            );
        }
        // An event long after the last update is outside any window.
        *clock.0.lock().unwrap() = exited + Duration::from_secs(700);
        assert!(!b.is_in_backoff_since("c", exited + Duration::from_secs(650)));
    }

    #[test]
    fn gc_drops_stale_keys() {
        let clock = ManualClock::new();
        let b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(5),
            clock.clone(),
        );
        b.next("old", clock.now());
        clock.advance(Duration::from_secs(8));
        b.next("new", clock.now());
        clock.advance(Duration::from_secs(3));
        b.gc();
        assert_eq!(b.get("old"), Duration::ZERO);
        assert_eq!(b.get("new"), Duration::from_secs(1));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn jitter_stays_within_its_factor() {
        let clock = ManualClock::new();
        let b = Backoff::with_jitter(
            Duration::from_secs(10),
            Duration::from_secs(300),
            0.5,
            clock.clone(),
        );
        b.next("j", clock.now());
        let d = b.get("j");
        assert!(
            d >= Duration::from_secs(10) && d <= Duration::from_secs(15),
            "{d:?}"
        );
    }

    #[test]
    fn go_duration_strings() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(80), "1m20s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(100), "100ms"),
            (Duration::from_micros(2), "2µs"),
            (Duration::from_nanos(7), "7ns"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration_string(d), want, "{d:?}");
        }
    }
}
