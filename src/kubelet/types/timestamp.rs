//! The kubelet's own timestamps (e.g. the `config.seen` annotation): RFC 3339
//! with nanoseconds, trailing zeros of the fraction dropped, in the node's
//! local time zone, `Z` when that zone is UTC.

use std::sync::OnceLock;
use std::time::SystemTime;

use jiff::Timestamp;
use jiff::tz::TimeZone;

static LOCAL: OnceLock<TimeZone> = OnceLock::new();

/// The node's time zone, read once (as Go reads its local zone once). Call it
/// in the build phase so the read does not happen on a runtime thread later.
pub fn local_time_zone() -> &'static TimeZone {
    LOCAL.get_or_init(TimeZone::system)
}

/// Formats a wall-clock time as RFC 3339 with up to nine fraction digits, in
/// the node's time zone.
pub fn format_rfc3339_nano(time: SystemTime) -> String {
    let ts = Timestamp::try_from(time).unwrap_or(Timestamp::UNIX_EPOCH);
    format_in_zone(ts, local_time_zone())
}

fn format_in_zone(ts: Timestamp, tz: &TimeZone) -> String {
    let zoned = ts.to_zoned(tz.clone());
    let mut out = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        zoned.year(),
        zoned.month(),
        zoned.day(),
        zoned.hour(),
        zoned.minute(),
        zoned.second()
    );
    let nanos = zoned.subsec_nanosecond();
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    let offset = zoned.offset().seconds();
    if offset == 0 {
        out.push('Z');
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let abs = offset.unsigned_abs();
        out.push_str(&format!("{sign}{:02}:{:02}", abs / 3600, (abs % 3600) / 60));
    }
    out
}

/// Parses an RFC 3339 timestamp (any offset, optional fraction).
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    text.parse::<Timestamp>().ok().map(SystemTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_like_rfc3339_nano() {
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let cases = [
            (Duration::ZERO, TimeZone::UTC, "2023-11-14T22:13:20Z"),
            (
                Duration::from_nanos(120_000_000),
                TimeZone::UTC,
                "2023-11-14T22:13:20.12Z",
            ),
            (
                Duration::from_nanos(1),
                TimeZone::fixed(jiff::tz::offset(8)),
                "2023-11-15T06:13:20.000000001+08:00",
            ),
            (
                Duration::ZERO,
                TimeZone::fixed(jiff::tz::Offset::from_seconds(-(5 * 3600 + 30 * 60)).unwrap()),
                "2023-11-14T16:43:20-05:30",
            ),
        ];
        for (extra, tz, want) in cases {
            let ts = Timestamp::try_from(base + extra).unwrap();
            assert_eq!(format_in_zone(ts, &tz), want);
        }
    }

    #[test]
    fn parses_what_it_formats() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        assert_eq!(parse_rfc3339(&format_rfc3339_nano(t)), Some(t));
        assert_eq!(parse_rfc3339("not a time"), None);
    }
}
