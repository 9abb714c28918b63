//! Per-key exponential back-off (client-go's flowcontrol.Backoff): each key
//! starts at an initial delay that doubles on every failure up to a cap, and
//! forgets its history once it has been quiet for twice the cap. The kubelet
//! keys container restarts (CrashLoopBackOff) and image pulls
//! (ImagePullBackOff) with it.
//!
//! Times are [`Moment`]s, Go's `time.Time`: the back-off's own readings of
//! its clock (the last update, "now") carry the monotonic reading, so the
//! image pull back-off, which passes the clock's now as its event time,
//! measures its windows on the monotonic clock and ignores wall-clock
//! jumps, as Go's does; an event time from elsewhere (a container's finish
//! time from the runtime) is compared on the wall clock, as Go compares it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::util::clock::{Clock, Moment};

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Moment,
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

    /// The clock's now, with its monotonic reading (Go's `Clock.Now()`).
    pub fn now(&self) -> Moment {
        Moment::now(self.clock.as_ref())
    }

    fn jitter(&self, delay: Duration) -> Duration {
        if self.max_jitter_factor <= 0.0 {
            return Duration::ZERO;
        }
        delay.mul_f64(rand::random::<f64>() * self.max_jitter_factor)
    }

    /// Whether the key's history is stale: quiet for more than twice the cap.
    fn has_expired(&self, event_time: &Moment, last_update: &Moment) -> bool {
        event_time.more_than_after(last_update, self.max * 2)
    }

    /// The key's current delay (zero for an unknown key).
    pub fn get(&self, id: &str) -> Duration {
        self.lock().get(id).map(|e| e.backoff).unwrap_or_default()
    }

    /// Records a failure at `event_time`: the first (or first after a quiet
    /// spell) sets the initial delay, later ones double it up to the cap.
    pub fn next(&self, id: &str, event_time: impl Into<Moment>) {
        let event_time = event_time.into();
        let now = self.now();
        let mut entries = self.lock();
        let backoff = match entries.get(id) {
            Some(e) if !self.has_expired(&event_time, &e.last_update) => {
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
    pub fn is_in_backoff_since(&self, id: &str, event_time: impl Into<Moment>) -> bool {
        let event_time = event_time.into();
        let now = self.now();
        let entries = self.lock();
        let Some(e) = entries.get(id) else {
            return false;
        };
        if self.has_expired(&event_time, &e.last_update) {
            return false;
        }
        now.sub_nanos(&event_time) < e.backoff.as_nanos() as i128
    }

    /// Whether `event_time` falls within the key's delay after its last
    /// recorded failure.
    pub fn is_in_backoff_since_update(&self, id: &str, event_time: impl Into<Moment>) -> bool {
        let event_time = event_time.into();
        let entries = self.lock();
        let Some(e) = entries.get(id) else {
            return false;
        };
        if self.has_expired(&event_time, &e.last_update) {
            return false;
        }
        event_time.sub_nanos(&e.last_update) < e.backoff.as_nanos() as i128
    }

    /// Drops keys not updated for more than twice the cap (measured on
    /// the monotonic clock, as Go's `GC` measures it).
    pub fn gc(&self) {
        let now = self.now();
        let limit = self.max * 2;
        self.lock()
            .retain(|_, e| !now.more_than_after(&e.last_update, limit));
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
    use crate::util::clock::testing::JumpClock;

    const INITIAL: Duration = Duration::from_secs(10);
    const MAX: Duration = Duration::from_secs(300);

    async fn advance(secs: u64) {
        tokio::time::advance(Duration::from_secs(secs)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn doubles_to_the_cap_and_resets_after_a_quiet_spell() {
        let clock = JumpClock::at_a_fixed_date();
        let b = Backoff::new(INITIAL, MAX, clock.clone());
        let mut seen = Vec::new();
        for _ in 0..7 {
            b.next("k", clock.now());
            seen.push(b.get("k").as_secs());
            advance(1).await;
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300]);
        // Quiet for more than twice the cap: back to the start.
        advance(601).await;
        b.next("k", clock.now());
        assert_eq!(b.get("k"), INITIAL);
        b.reset("k");
        assert_eq!(b.get("k"), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn in_backoff_windows() {
        let clock = JumpClock::at_a_fixed_date();
        let b = Backoff::new(INITIAL, MAX, clock.clone());
        let exited = clock.now();
        assert!(!b.is_in_backoff_since("c", exited), "unknown key");
        b.next("c", exited);
        let mut at = 0;
        for (after, want) in [(0, true), (9, true), (10, false), (30, false)] {
            advance(after - at).await;
            at = after;
            // is_in_backoff_since compares the clock's now with the event.
            assert_eq!(b.is_in_backoff_since("c", exited), want, "after {after}s");
            assert_eq!(
                b.is_in_backoff_since_update("c", b.now()),
                want,
                "since update after {after}s"
            );
        }
        // An event long after the last update is outside any window.
        advance(670).await;
        assert!(!b.is_in_backoff_since("c", exited + Duration::from_secs(650)));
    }

    #[tokio::test(start_paused = true)]
    async fn gc_drops_stale_keys() {
        let clock = JumpClock::at_a_fixed_date();
        let b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(5),
            clock.clone(),
        );
        b.next("old", clock.now());
        advance(8).await;
        b.next("new", clock.now());
        advance(3).await;
        b.gc();
        assert_eq!(b.get("old"), Duration::ZERO);
        assert_eq!(b.get("new"), Duration::from_secs(1));
        assert_eq!(b.len(), 1);
    }

    /// When the wall clock is stepped relative to a container's exit.
    #[derive(Debug, Clone, Copy)]
    enum Jump {
        None,
        /// Before the container exits: the runtime's finish time is on the
        /// new wall clock.
        BeforeExit(i64),
        /// A second after it exited: the finish time is on the old one.
        AfterExit(i64),
    }

    /// CrashLoopBackOff across wall-clock steps, as Go's Backoff decides
    /// with the runtime's finish time (a wall time) as the event: a restart
    /// is recorded at an exit, the container runs 5 s and exits again, the
    /// clock is stepped, and from a second after the exit the decision
    /// "still backing off?" is taken after each monotonic advance (the
    /// 10 s window ends 9 s into the checks); once allowed, the next delay. Never
    /// infinite, never negative: a step back after the exit holds the
    /// restart until the wall clock is past the exit again (Go's
    /// `Clock.Since(finishedAt)`), a step forward reads as a quiet spell.
    #[tokio::test(start_paused = true)]
    async fn crash_backoff_across_wall_clock_jumps() {
        // (case, step, (seconds into the checks, still backing off), next delay in s)
        type Case = (&'static str, Jump, &'static [(u64, bool)], u64);
        #[rustfmt::skip]
        let cases: &[Case] = &[
            ("no jump", Jump::None, &[(0, true), (8, true), (9, false)], 20),
            ("+1 h before the exit: a quiet spell, back to the start",
                Jump::BeforeExit(3600), &[(0, false)], 10),
            ("-1 h before the exit: the usual window",
                Jump::BeforeExit(-3600), &[(0, true), (8, true), (9, false)], 20),
            ("+1 h after the exit: the window is long over",
                Jump::AfterExit(3600), &[(0, false)], 20),
            ("-1 h after the exit: held until the wall clock passes the exit + 10 s",
                Jump::AfterExit(-3600), &[(0, true), (600, true), (3608, true), (3609, false)], 20),
        ];
        for (name, jump, checks, want_next) in cases {
            let clock = JumpClock::at_a_fixed_date();
            let b = Backoff::new(INITIAL, MAX, clock.clone());
            b.next("pod_c", clock.now());
            advance(5).await;
            if let Jump::BeforeExit(s) = jump {
                clock.jump(*s);
            }
            let exited = clock.now();
            advance(1).await;
            if let Jump::AfterExit(s) = jump {
                clock.jump(*s);
            }
            let mut at = 0;
            for (after, want) in *checks {
                advance(after - at).await;
                at = *after;
                assert_eq!(
                    b.is_in_backoff_since("pod_c", exited),
                    *want,
                    "{name}: in back-off {after} s after the check began"
                );
                assert!(b.get("pod_c") <= MAX, "{name}");
            }
            b.next("pod_c", exited);
            assert_eq!(b.get("pod_c"), Duration::from_secs(*want_next), "{name}");
        }
    }

    /// ImagePullBackOff across wall-clock steps: the image manager passes
    /// the clock's now (with its monotonic reading) as the event, so, as in
    /// Go, a step either way changes nothing: the window runs its 10 s of
    /// monotonic time, and the next failure doubles it.
    #[tokio::test(start_paused = true)]
    async fn image_pull_backoff_ignores_wall_clock_jumps() {
        for jump in [0i64, 3600, -3600] {
            let clock = JumpClock::at_a_fixed_date();
            let b = Backoff::new(INITIAL, MAX, clock.clone());
            b.next("uid_image", b.now());
            advance(1).await;
            clock.jump(jump);
            let mut at = 1;
            for (after, want) in [(1, true), (9, true), (10, false)] {
                advance(after - at).await;
                at = after;
                assert_eq!(
                    b.is_in_backoff_since_update("uid_image", b.now()),
                    want,
                    "jump {jump} s: {after} s after the failure"
                );
            }
            b.next("uid_image", b.now());
            assert_eq!(b.get("uid_image"), Duration::from_secs(20), "jump {jump} s");
            clock.jump(-jump);
            assert!(b.is_in_backoff_since_update("uid_image", b.now()));
            advance(20).await;
            assert!(!b.is_in_backoff_since_update("uid_image", b.now()));
        }
    }

    /// GC ages keys on the monotonic clock: a step forward drops nothing,
    /// a step back keeps nothing alive.
    #[tokio::test(start_paused = true)]
    async fn gc_ignores_wall_clock_jumps() {
        let clock = JumpClock::at_a_fixed_date();
        let b = Backoff::new(INITIAL, MAX, clock.clone());
        b.next("k", b.now());
        clock.jump(3600);
        b.gc();
        assert_eq!(b.len(), 1, "kept after a step forward");
        clock.jump(-7200);
        advance(601).await;
        b.gc();
        assert_eq!(b.len(), 0, "dropped after 2 x max of monotonic time");
    }

    #[tokio::test]
    async fn jitter_stays_within_its_factor() {
        let clock = JumpClock::at_a_fixed_date();
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
