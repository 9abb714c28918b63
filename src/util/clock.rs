//! The Clock seam: every timer, backoff and timestamp in the kubelet asks a
//! `Clock`, so tests can drive time instead of sleeping.
//!
//! A clock has two readings, as Go's `time.Now()` does: the wall clock
//! (`now`), which an administrator or NTP may step forwards or backwards,
//! and the monotonic clock (`monotonic`), which only moves forwards. A
//! [`Moment`] keeps both, and the difference of two moments that both have
//! a monotonic reading uses it (Go's `Time.Sub`), so intervals measured
//! from the clock's own readings ignore wall-clock jumps while times that
//! come from elsewhere (a container's exit time, an API object's
//! timestamp) are compared on the wall clock.

use std::time::{Duration, SystemTime};

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

/// A point in time as Go's `time.Time` holds one: a wall-clock time and,
/// when it was read from a [`Clock`], that clock's monotonic reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    pub wall: SystemTime,
    pub mono: Option<tokio::time::Instant>,
}

impl Moment {
    /// The clock's current time, with its monotonic reading.
    pub fn now(clock: &dyn Clock) -> Moment {
        Moment {
            wall: clock.now(),
            mono: Some(clock.monotonic()),
        }
    }

    /// A wall-clock time from elsewhere (no monotonic reading).
    pub fn wall(t: SystemTime) -> Moment {
        Moment {
            wall: t,
            mono: None,
        }
    }

    /// `self - earlier` in nanoseconds, negative when `earlier` is later:
    /// on the monotonic readings when both have one, else on the wall
    /// clock (Go's `Time.Sub`).
    pub fn sub_nanos(&self, earlier: &Moment) -> i128 {
        match (self.mono, earlier.mono) {
            (Some(a), Some(b)) => {
                if a >= b {
                    a.duration_since(b).as_nanos() as i128
                } else {
                    -(b.duration_since(a).as_nanos() as i128)
                }
            }
            _ => match self.wall.duration_since(earlier.wall) {
                Ok(d) => d.as_nanos() as i128,
                Err(e) => -(e.duration().as_nanos() as i128),
            },
        }
    }

    /// Whether more than `d` separates `earlier` from `self`.
    pub fn more_than_after(&self, earlier: &Moment, d: Duration) -> bool {
        self.sub_nanos(earlier) > d.as_nanos() as i128
    }
}

impl From<SystemTime> for Moment {
    fn from(t: SystemTime) -> Moment {
        Moment::wall(t)
    }
}

/// Clocks for tests.
#[cfg(test)]
pub mod testing {
    use std::sync::Mutex;
    use std::time::{Duration, SystemTime};

    use super::Clock;

    /// A clock whose wall time the test can step forwards and backwards
    /// ([`JumpClock::jump`]) while its monotonic time is tokio's (so it
    /// only moves forwards, with paused time under the test's control).
    /// Between jumps the wall clock advances with the monotonic one.
    pub struct JumpClock {
        start_wall: SystemTime,
        start_mono: tokio::time::Instant,
        /// Net jump in nanoseconds (negative: the wall clock was set back).
        offset: Mutex<i128>,
    }

    impl JumpClock {
        /// A clock reading `wall` now.
        pub fn new(wall: SystemTime) -> std::sync::Arc<JumpClock> {
            std::sync::Arc::new(JumpClock {
                start_wall: wall,
                start_mono: tokio::time::Instant::now(),
                offset: Mutex::new(0),
            })
        }

        /// A clock starting at 2024-05-01T10:00:00Z.
        pub fn at_a_fixed_date() -> std::sync::Arc<JumpClock> {
            Self::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_600))
        }

        /// Steps the wall clock by `secs` seconds (negative: back); the
        /// monotonic clock does not move.
        pub fn jump(&self, secs: i64) {
            *self.offset.lock().unwrap() += i128::from(secs) * 1_000_000_000;
        }
    }

    impl Clock for JumpClock {
        fn now(&self) -> SystemTime {
            let elapsed = tokio::time::Instant::now().duration_since(self.start_mono);
            let nanos = elapsed.as_nanos() as i128 + *self.offset.lock().unwrap();
            if nanos >= 0 {
                self.start_wall + Duration::from_nanos(nanos as u64)
            } else {
                self.start_wall - Duration::from_nanos((-nanos) as u64)
            }
        }

        fn monotonic(&self) -> tokio::time::Instant {
            tokio::time::Instant::now()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::JumpClock;
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn real_clock_monotonic_follows_tokio_time() {
        let clock = RealClock;
        let before = clock.monotonic();
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert!(clock.monotonic() - before >= std::time::Duration::from_secs(5));
    }

    /// Go's Time.Sub: monotonic when both moments have a reading, wall
    /// otherwise; a wall-clock jump moves only the wall readings.
    #[tokio::test(start_paused = true)]
    async fn moments_subtract_as_go_times_do() {
        let clock = JumpClock::at_a_fixed_date();
        let a = Moment::now(clock.as_ref());
        tokio::time::advance(Duration::from_secs(10)).await;
        clock.jump(-3600);
        let b = Moment::now(clock.as_ref());
        let secs = |n: i128| n / 1_000_000_000;
        let cases = [
            ("both from the clock: monotonic", b.sub_nanos(&a), 10),
            ("and the other way", a.sub_nanos(&b), -10),
            (
                "one wall time: wall",
                b.sub_nanos(&Moment::wall(a.wall)),
                -3590,
            ),
            (
                "wall minus clock: wall",
                Moment::wall(b.wall).sub_nanos(&a),
                -3590,
            ),
            ("the same moment", a.sub_nanos(&a), 0),
        ];
        for (name, got, want) in cases {
            assert_eq!(secs(got), want, "{name}");
        }
        assert!(b.more_than_after(&a, Duration::from_secs(9)));
        assert!(!b.more_than_after(&a, Duration::from_secs(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn jump_clock_steps_the_wall_clock_only() {
        let clock = JumpClock::at_a_fixed_date();
        let (w0, m0) = (clock.now(), clock.monotonic());
        clock.jump(3600);
        assert_eq!(clock.now(), w0 + Duration::from_secs(3600));
        assert_eq!(clock.monotonic(), m0);
        clock.jump(-7200);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(clock.now(), w0 - Duration::from_secs(3599));
        assert_eq!(clock.monotonic(), m0 + Duration::from_secs(1));
    }
}
