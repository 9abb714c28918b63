//! client-go's event correlator: before an event is written it is
//!
//! 1. aggregated: events of one source, object, type and reason with
//!    different messages are counted per 10 minutes; from the 10th distinct
//!    message on they are replaced by one event "(combined from similar
//!    events): <message>";
//! 2. deduplicated: an event identical to one already written becomes a
//!    PATCH of that event's count, lastTimestamp and message;
//! 3. spam-filtered: per source and object a token bucket (burst 25,
//!    refilling one token every 5 minutes) drops the excess.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::lru::Lru;
use crate::util::clock::Moment;

const MAX_LRU_CACHE_ENTRIES: usize = 4096;
const AGGREGATE_MAX_EVENTS: usize = 10;
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
const SPAM_BURST: f64 = 25.0;
const SPAM_QPS: f64 = 1.0 / 300.0;

/// The prefix of an aggregated event's message.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("")
}

fn source(e: &Event) -> (&str, &str) {
    match &e.source {
        Some(src) => (s(&src.component), s(&src.host)),
        None => ("", ""),
    }
}

/// A cache key: a 128-bit digest of the concatenated parts (client-go
/// keys its caches by the joined strings themselves; a digest of the same
/// bytes tells the same events apart, and the three caches of 4096
/// entries hold 16 bytes per key instead of a few hundred).
pub type Key = u128;

fn digest(parts: &[&str]) -> Key {
    use std::hash::{DefaultHasher, Hasher};
    let (mut a, mut b) = (DefaultHasher::new(), DefaultHasher::new());
    // A different first byte makes the second half an independent hash.
    b.write_u8(0x5a);
    for p in parts {
        a.write(p.as_bytes());
        b.write(p.as_bytes());
    }
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// Everything that makes two events the same event.
pub fn event_key(e: &Event) -> Key {
    let (component, host) = source(e);
    let o = &e.involved_object;
    digest(&[
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.field_path),
        s(&o.uid),
        s(&o.api_version),
        s(&e.type_),
        s(&e.reason),
        s(&e.message),
    ])
}

fn spam_key(e: &Event) -> Key {
    let (component, host) = source(e);
    let o = &e.involved_object;
    digest(&[
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
    ])
}

/// (aggregate key, local key): similar events share the first; the message
/// tells them apart.
fn aggregate_key(e: &Event) -> (Key, Key) {
    let (component, host) = source(e);
    let o = &e.involved_object;
    let key = digest(&[
        component,
        host,
        s(&o.kind),
        s(&o.namespace),
        s(&o.name),
        s(&o.uid),
        s(&o.api_version),
        s(&e.type_),
        s(&e.reason),
        s(&e.reporting_component),
        s(&e.reporting_instance),
    ]);
    (key, digest(&[s(&e.message)]))
}

/// `<object name>.<unix nanoseconds in hex>`.
pub fn event_name(object_name: &str, t: SystemTime) -> String {
    let nanos = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{object_name}.{nanos:x}")
}

pub(crate) fn api_time(t: SystemTime) -> Time {
    Time(jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

struct AggregateRecord {
    local_keys: HashSet<Key>,
    last: Moment,
}

#[derive(Clone)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
    resource_version: Option<String>,
}

struct SpamRecord {
    tokens: f64,
    last: Moment,
}

/// What to do with an event.
#[derive(Debug, Clone, PartialEq)]
pub struct Correlated {
    /// The event to write (possibly the aggregate, possibly with a count).
    pub event: Event,
    /// For a repeated event: the strategic merge patch of its count,
    /// lastTimestamp and message.
    pub patch: Option<serde_json::Value>,
}

/// The correlator state of one sink.
pub struct EventCorrelator {
    aggregates: Lru<Key, AggregateRecord>,
    logs: Lru<Key, EventLog>,
    spam: Lru<Key, SpamRecord>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self::new()
    }
}

impl EventCorrelator {
    pub fn new() -> Self {
        EventCorrelator {
            aggregates: Lru::new(MAX_LRU_CACHE_ENTRIES),
            logs: Lru::new(MAX_LRU_CACHE_ENTRIES),
            spam: Lru::new(MAX_LRU_CACHE_ENTRIES),
        }
    }

    fn aggregate(&mut self, e: &Event, now: Moment) -> (Event, Key) {
        let ekey = event_key(e);
        let (akey, local) = aggregate_key(e);
        let fresh = || AggregateRecord {
            local_keys: HashSet::new(),
            last: Moment::wall(UNIX_EPOCH),
        };
        let rec = match self.aggregates.get(&akey) {
            Some(r) => r,
            None => {
                self.aggregates.put(akey, fresh());
                match self.aggregates.get(&akey) {
                    Some(r) => r,
                    None => return (e.clone(), ekey),
                }
            }
        };
        if now.more_than_after(&rec.last, AGGREGATE_INTERVAL) {
            *rec = fresh();
        }
        rec.local_keys.insert(local);
        rec.last = now;
        if rec.local_keys.len() < AGGREGATE_MAX_EVENTS {
            return (e.clone(), ekey);
        }
        // Keep the set one short of the limit: every further distinct
        // message also goes to the aggregate.
        if let Some(any) = rec.local_keys.iter().next().copied() {
            rec.local_keys.remove(&any);
        }
        let t = api_time(now.wall);
        let agg = Event {
            metadata: ObjectMeta {
                name: Some(event_name(s(&e.involved_object.name), now.wall)),
                namespace: e.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(t.clone()),
            last_timestamp: Some(t),
            involved_object: e.involved_object.clone(),
            message: Some(format!("{COMBINED_PREFIX}{}", s(&e.message))),
            type_: e.type_.clone(),
            reason: e.reason.clone(),
            source: e.source.clone(),
            ..Default::default()
        };
        (agg, akey)
    }

    fn observe(&mut self, e: Event, key: Key) -> (Event, Option<serde_json::Value>) {
        let mut e = e;
        let mut patch = None;
        if let Some(last) = self.logs.get(&key).cloned()
            && last.count > 0
        {
            e.metadata.name = Some(last.name);
            e.metadata.resource_version = last.resource_version;
            e.first_timestamp = last.first_timestamp;
            e.count = Some(last.count + 1);
            let mut p = serde_json::Map::new();
            p.insert("count".into(), serde_json::json!(last.count + 1));
            if let Some(t) = &e.last_timestamp {
                p.insert(
                    "lastTimestamp".into(),
                    serde_json::to_value(t).unwrap_or_default(),
                );
            }
            if !s(&e.message).is_empty() {
                p.insert("message".into(), serde_json::json!(s(&e.message)));
            }
            patch = Some(serde_json::Value::Object(p));
        }
        self.logs.put(
            key,
            EventLog {
                count: e.count.unwrap_or(0),
                first_timestamp: e.first_timestamp.clone(),
                name: e.metadata.name.clone().unwrap_or_default(),
                resource_version: e.metadata.resource_version.clone(),
            },
        );
        (e, patch)
    }

    /// Whether the spam filter drops `e` now.
    fn filtered(&mut self, e: &Event, now: Moment) -> bool {
        let key = spam_key(e);
        if self.spam.get(&key).is_none() {
            self.spam.put(
                key,
                SpamRecord {
                    tokens: SPAM_BURST,
                    last: now,
                },
            );
        }
        let Some(r) = self.spam.get(&key) else {
            return false;
        };
        // x/time/rate's advance: no refill for a time before the last one.
        let elapsed = now.sub_nanos(&r.last).max(0) as f64 / 1e9;
        r.tokens = (r.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        r.last = now;
        if r.tokens >= 1.0 {
            r.tokens -= 1.0;
            false
        } else {
            true
        }
    }

    /// Correlates `e` at `now` (the clock's reading: intervals are
    /// measured on its monotonic part, as Go's `clock.Now()` values are);
    /// `None` when the spam filter drops it.
    pub fn correlate(&mut self, e: &Event, now: impl Into<Moment>) -> Option<Correlated> {
        let now = now.into();
        let (agg, key) = self.aggregate(e, now);
        let (event, patch) = self.observe(agg, key);
        if self.filtered(&event, now) {
            return None;
        }
        Some(Correlated { event, patch })
    }

    /// Records what the server stored (name, count, resourceVersion) for the
    /// event's own key.
    pub fn update_state(&mut self, stored: &Event) {
        self.logs.put(
            event_key(stored),
            EventLog {
                count: stored.count.unwrap_or(0),
                first_timestamp: stored.first_timestamp.clone(),
                name: stored.metadata.name.clone().unwrap_or_default(),
                resource_version: stored.metadata.resource_version.clone(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    fn ev(object: &str, reason: &str, message: &str, t: SystemTime) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(object, t)),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some(object.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{object}")),
                api_version: Some("v1".into()),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            count: Some(1),
            first_timestamp: Some(api_time(t)),
            last_timestamp: Some(api_time(t)),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("n1".into()),
            }),
            reporting_component: Some("kubelet".into()),
            reporting_instance: Some("n1".into()),
            ..Default::default()
        }
    }

    fn stored(mut e: Event, rv: u32) -> Event {
        e.metadata.resource_version = Some(rv.to_string());
        e
    }

    #[test]
    fn keys_are_digests_of_the_joined_parts() {
        // client-go joins the parts with no separator: the same bytes are
        // the same key, however they were split.
        assert_eq!(digest(&["ab", "c"]), digest(&["a", "bc"]));
        assert_ne!(digest(&["ab", "c"]), digest(&["ab", "d"]));
        assert_ne!(digest(&[""]), digest(&["x"]));
        let t = UNIX_EPOCH + Duration::from_secs(1);
        let (a, b) = (ev("p", "Pulled", "m", t), ev("q", "Pulled", "m", t));
        assert_ne!(event_key(&a), event_key(&b));
        assert_eq!(event_key(&a), event_key(&ev("p", "Pulled", "m", t)));
    }

    #[test]
    fn name_is_object_and_hex_nanos() {
        let t = UNIX_EPOCH + Duration::from_nanos(0x1234_5678_9abc);
        assert_eq!(event_name("web", t), "web.123456789abc");
    }

    #[test]
    fn identical_events_become_count_patches() {
        let mut c = EventCorrelator::new();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let first = c
            .correlate(&ev("p", "Pulling", "pulling x", t0), t0)
            .unwrap();
        assert!(first.patch.is_none());
        assert_eq!(first.event.count, Some(1));
        c.update_state(&stored(first.event.clone(), 5));

        let t1 = t0 + Duration::from_secs(3);
        let second = c
            .correlate(&ev("p", "Pulling", "pulling x", t1), t1)
            .unwrap();
        assert_eq!(second.event.metadata.name, first.event.metadata.name);
        assert_eq!(second.event.metadata.resource_version.as_deref(), Some("5"));
        assert_eq!(second.event.count, Some(2));
        assert_eq!(second.event.first_timestamp, first.event.first_timestamp);
        assert_eq!(
            second.patch,
            Some(serde_json::json!({
                "count": 2,
                "lastTimestamp": "2023-11-14T22:13:23Z",
                "message": "pulling x",
            }))
        );
    }

    #[test]
    fn ten_distinct_messages_aggregate() {
        let mut c = EventCorrelator::new();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut outcomes = Vec::new();
        for i in 0..12 {
            let t = t0 + Duration::from_secs(i);
            let r = c
                .correlate(&ev("p", "BackOff", &format!("msg {i}"), t), t)
                .unwrap();
            c.update_state(&stored(r.event.clone(), 10 + i as u32));
            outcomes.push((
                r.event.message.clone().unwrap(),
                r.event.count,
                r.patch.is_some(),
            ));
        }
        for (i, (msg, count, patched)) in outcomes.iter().enumerate().take(9) {
            assert_eq!(msg, &format!("msg {i}"));
            assert_eq!((*count, *patched), (Some(1), false));
        }
        // The 10th similar event is the aggregate, the next ones count it up.
        assert_eq!(outcomes[9].0, format!("{COMBINED_PREFIX}msg 9"));
        assert_eq!((outcomes[9].1, outcomes[9].2), (Some(1), false));
        assert_eq!(outcomes[10].0, format!("{COMBINED_PREFIX}msg 10"));
        assert_eq!((outcomes[10].1, outcomes[10].2), (Some(2), true));
        assert_eq!(outcomes[11].1, Some(3));

        // After ten quiet minutes the aggregation starts over.
        let later = t0 + Duration::from_secs(12 + 601);
        let r = c
            .correlate(&ev("p", "BackOff", "fresh", later), later)
            .unwrap();
        assert_eq!(r.event.message.as_deref(), Some("fresh"));
    }

    #[test]
    fn spam_filter_allows_a_burst_of_25_per_object_then_one_per_5_minutes() {
        let mut c = EventCorrelator::new();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut passed = 0;
        for i in 0..30 {
            // Distinct reasons so that nothing aggregates.
            if c.correlate(&ev("p", &format!("R{i}"), "m", t0), t0)
                .is_some()
            {
                passed += 1;
            }
        }
        assert_eq!(passed, 25);
        // Another object has its own bucket.
        assert!(c.correlate(&ev("q", "R", "m", t0), t0).is_some());
        let t1 = t0 + Duration::from_secs(299);
        assert!(c.correlate(&ev("p", "Rx", "m", t1), t1).is_none());
        let t2 = t0 + Duration::from_secs(301);
        assert!(c.correlate(&ev("p", "Ry", "m", t2), t2).is_some());
        assert!(c.correlate(&ev("p", "Rz", "m", t2), t2).is_none());
    }

    /// The spam filter and the aggregation window across wall-clock steps
    /// (Go's correlator reads `clock.Now()`, so both run on the monotonic
    /// clock): after its burst an object gets its next event 5 minutes
    /// later whichever way the wall clock stepped, and a step forward does
    /// not end an aggregation window.
    #[tokio::test(start_paused = true)]
    async fn spam_filter_and_aggregation_ignore_wall_clock_jumps() {
        use crate::util::clock::Clock;
        use crate::util::clock::testing::JumpClock;
        for jump in [0i64, 3600, -3600] {
            let clock = JumpClock::at_a_fixed_date();
            let now = || Moment::now(clock.as_ref());
            let mut c = EventCorrelator::new();
            let passed = (0..30)
                .filter(|i| {
                    c.correlate(&ev("p", &format!("R{i}"), "m", clock.now()), now())
                        .is_some()
                })
                .count();
            assert_eq!(passed, 25, "jump {jump} s");
            clock.jump(jump);
            tokio::time::advance(Duration::from_secs(299)).await;
            assert!(
                c.correlate(&ev("p", "Rx", "m", clock.now()), now())
                    .is_none(),
                "jump {jump} s: still empty after 299 s"
            );
            tokio::time::advance(Duration::from_secs(2)).await;
            assert!(
                c.correlate(&ev("p", "Ry", "m", clock.now()), now())
                    .is_some(),
                "jump {jump} s: one token after 301 s"
            );

            // Nine distinct messages, a step, the tenth: still aggregated.
            let mut c = EventCorrelator::new();
            for i in 0..9 {
                c.correlate(&ev("a", "BackOff", &format!("msg {i}"), clock.now()), now());
            }
            clock.jump(jump);
            let r = c
                .correlate(&ev("a", "BackOff", "msg 9", clock.now()), now())
                .unwrap();
            assert_eq!(
                r.event.message.as_deref(),
                Some(&*format!("{COMBINED_PREFIX}msg 9")),
                "jump {jump} s"
            );
        }
    }
}
