//! Durations as Go writes and reads them (`metav1.Duration`, `time.Duration`):
//! signed nanoseconds, parsed from `1m30s`, `100ms`, `2h45m`, `1.5h`, `-3s`,
//! and printed as Go prints them (`2m0s`, `4h0m0s`, `100ms`, `1.5µs`).
//!
//! Every duration the kubelet shows (flags, help, /configz, logs) goes
//! through [`Duration`]'s `Display`, so operators see the same text a Go
//! kubelet would print.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// The largest magnitude a duration can reach before the sign is applied.
const LIMIT: u64 = 1 << 63;

/// A span of time in nanoseconds, negative allowed, as Go's `time.Duration`.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    nanos: i64,
}

/// Text that is not a Go duration. The message names the whole input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit { unit: String, input: String },
}

impl Duration {
    /// The zero duration.
    pub const ZERO: Duration = Duration { nanos: 0 };

    pub const fn from_nanos(nanos: i64) -> Self {
        Duration { nanos }
    }

    pub const fn from_millis(millis: i64) -> Self {
        Duration {
            nanos: millis * MILLISECOND as i64,
        }
    }

    pub const fn from_secs(secs: i64) -> Self {
        Duration {
            nanos: secs * SECOND as i64,
        }
    }

    pub const fn from_mins(mins: i64) -> Self {
        Duration {
            nanos: mins * MINUTE as i64,
        }
    }

    pub const fn from_hours(hours: i64) -> Self {
        Duration {
            nanos: hours * HOUR as i64,
        }
    }

    /// Whole nanoseconds, sign included.
    pub const fn as_nanos(&self) -> i64 {
        self.nanos
    }

    /// Whole seconds, truncated toward zero (Go's `int64(d.Seconds())`).
    pub const fn as_secs(&self) -> i64 {
        self.nanos / SECOND as i64
    }

    pub const fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub const fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The duration for timers and sleeps; negative durations become zero.
    pub fn to_std(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.nanos.max(0) as u64)
    }

    /// Parses Go's duration syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or a
    /// bare `0`. Units: `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`.
    pub fn parse(text: &str) -> Result<Duration, DurationError> {
        parse(text)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration {
            nanos: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }
    }
}

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => NANOSECOND,
        "us" | "\u{00b5}s" | "\u{03bc}s" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => MINUTE,
        "h" => HOUR,
        _ => return None,
    })
}

/// Consumes leading ASCII digits; `None` when the value leaves the range.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s
        .bytes()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(s.len());
    let mut x: u64 = 0;
    for c in s[..end].bytes() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, &s[end..]))
}

/// Consumes leading digits after a decimal point; precision stops growing
/// instead of failing when the digits run past 63 bits.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s
        .bytes()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for c in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

fn parse(orig: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(orig.to_string());
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next()
        && (c == '-' || c == '+')
    {
        neg = c == '-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let first = s.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut value, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();
        let (mut frac, mut scale, mut post) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let before = rest.len();
            let (f, sc, rest) = leading_fraction(rest);
            frac = f;
            scale = sc;
            s = rest;
            post = before != s.len();
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .bytes()
            .position(|c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(orig.to_string()));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let nanos = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit.to_string(),
            input: orig.to_string(),
        })?;
        if value > LIMIT / nanos {
            return Err(invalid());
        }
        value *= nanos;
        if frac > 0 {
            value += (frac as f64 * (nanos as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total += value;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if neg {
        return Ok(Duration {
            nanos: (total as i64).wrapping_neg(),
        });
    }
    if total > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(Duration {
        nanos: total as i64,
    })
}

/// Writes `v / 10^prec` with trailing zeros (and a bare point) dropped.
fn push_fraction(out: &mut String, v: u64, prec: u32) -> u64 {
    let mut digits = Vec::with_capacity(prec as usize);
    let mut v = v;
    let mut printing = false;
    for _ in 0..prec {
        let digit = v % 10;
        printing = printing || digit != 0;
        if printing {
            digits.push(char::from(b'0' + digit as u8));
        }
        v /= 10;
    }
    if printing {
        digits.push('.');
    }
    out.extend(digits.iter().rev());
    v
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.nanos < 0;
        let mut u = self.nanos.unsigned_abs();
        if u == 0 {
            return f.write_str("0s");
        }
        // Built back to front, as the number is consumed from its low end.
        let mut parts: Vec<String> = Vec::new();
        if u < SECOND {
            let (prec, unit) = if u < MICROSECOND {
                (0, "ns")
            } else if u < MILLISECOND {
                (3, "\u{00b5}s")
            } else {
                (6, "ms")
            };
            let mut frac = String::new();
            u = push_fraction(&mut frac, u, prec);
            parts.push(format!("{u}{frac}{unit}"));
        } else {
            let mut frac = String::new();
            u = push_fraction(&mut frac, u, 9);
            parts.push(format!("{}{frac}s", u % 60));
            u /= 60;
            if u > 0 {
                parts.push(format!("{}m", u % 60));
                u /= 60;
                if u > 0 {
                    parts.push(format!("{u}h"));
                }
            }
        }
        if neg {
            f.write_str("-")?;
        }
        for part in parts.iter().rev() {
            f.write_str(part)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `time.Duration` fields that Go encodes as a number of nanoseconds (the
/// logging block's `flushFrequency` in the v1.25 line).
pub mod as_nanos {
    use super::Duration;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(d.as_nanos())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        i64::deserialize(d).map(Duration::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_syntax() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("0s", 0),
            ("1ns", 1),
            ("1.1us", 1_100),
            ("2.2\u{00b5}s", 2_200),
            ("3.3\u{03bc}s", 3_300),
            ("100ms", 100_000_000),
            ("1.5s", 1_500_000_000),
            ("1m30s", 90_000_000_000),
            ("2h45m", (2 * 3600 + 45 * 60) * 1_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("-3s", -3_000_000_000),
            ("+5m", 300_000_000_000),
            (".5s", 500_000_000),
            ("5.s", 5_000_000_000),
            ("1h1m1s1ms1us1ns", 3_661_001_001_001),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.100000000000000000000h", 360_000_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(
                Duration::parse(text),
                Ok(Duration::from_nanos(*nanos)),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        let cases: &[(&str, &str)] = &[
            ("", "time: invalid duration \"\""),
            ("3", "time: missing unit in duration \"3\""),
            ("-", "time: invalid duration \"-\""),
            ("s", "time: invalid duration \"s\""),
            (".", "time: invalid duration \".\""),
            ("-.", "time: invalid duration \"-.\""),
            (".s", "time: invalid duration \".s\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            ("1.5", "time: missing unit in duration \"1.5\""),
            (
                "9223372036854775808ns",
                "time: invalid duration \"9223372036854775808ns\"",
            ),
            ("3000000h", "time: invalid duration \"3000000h\""),
            (" 1s", "time: invalid duration \" 1s\""),
        ];
        for (text, msg) in cases {
            let err = Duration::parse(text).expect_err(text);
            assert_eq!(err.to_string(), *msg);
        }
    }

    #[test]
    fn prints_like_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1\u{00b5}s"),
            (2_200_000, "2.2ms"),
            (100_000_000, "100ms"),
            (1_500_000_000, "1.5s"),
            (30_000_000_000, "30s"),
            (60_000_000_000, "1m0s"),
            (120_000_000_000, "2m0s"),
            (90_000_000_000, "1m30s"),
            (14_400_000_000_000, "4h0m0s"),
            (3_661_000_000_000, "1h1m1s"),
            (-3_000_000_000, "-3s"),
            (-1, "-1ns"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(Duration::from_nanos(*nanos).to_string(), *text);
        }
    }

    #[test]
    fn round_trips_through_serde_as_text() {
        let d = Duration::from_mins(5);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, "\"5m0s\"");
        let back: Duration = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
        let err = serde_json::from_str::<Duration>("\"5 minutes\"").unwrap_err();
        assert!(err.to_string().contains("time: unknown unit"), "{err}");
    }
}
