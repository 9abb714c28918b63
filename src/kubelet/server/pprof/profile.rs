//! A CPU profile in the pprof format (`perftools.profiles.Profile`, what
//! `go tool pprof` and every pprof viewer read), encoded from the sampling
//! profiler's report: one location per frame, its inlined symbols as lines.

use std::collections::HashMap;
use std::time::UNIX_EPOCH;

use prost::Message;

#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// Interns strings into the profile's string table (index 0 is "").
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, v: &str) -> i64 {
        if let Some(i) = self.index.get(v) {
            return *i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// One sampled stack: frames innermost first, each frame's symbols (the
/// inlined chain) as (name, system name, file, line), and the count.
pub struct StackSample {
    pub frames: Vec<Vec<(String, String, String, i64)>>,
    pub thread: String,
    pub count: i64,
}

/// The profile of `samples` taken at `frequency` Hz from `start` for
/// `duration`.
pub fn encode(
    samples: &[StackSample],
    frequency: i32,
    start: std::time::SystemTime,
    duration: std::time::Duration,
) -> Profile {
    let mut strings = Strings::new();
    let period = 1_000_000_000 / i64::from(frequency.max(1));
    let value_type = |s: &mut Strings, t: &str, u: &str| ValueType {
        r#type: s.get(t),
        unit: s.get(u),
    };
    let mut profile = Profile {
        sample_type: vec![
            value_type(&mut strings, "samples", "count"),
            value_type(&mut strings, "cpu", "nanoseconds"),
        ],
        period_type: Some(value_type(&mut strings, "cpu", "nanoseconds")),
        period,
        time_nanos: start
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0),
        duration_nanos: duration.as_nanos() as i64,
        ..Default::default()
    };
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    let thread_key = strings.get("thread");
    for s in samples {
        let mut location_id = Vec::with_capacity(s.frames.len());
        for frame in &s.frames {
            let id = profile.location.len() as u64 + 1;
            let mut lines = Vec::with_capacity(frame.len());
            for (name, sys_name, file, line) in frame {
                let next = functions.len() as u64 + 1;
                let fid = *functions
                    .entry((sys_name.clone(), file.clone()))
                    .or_insert_with(|| {
                        profile.function.push(Function {
                            id: next,
                            name: strings.get(name),
                            system_name: strings.get(sys_name),
                            filename: strings.get(file),
                        });
                        next
                    });
                lines.push(Line {
                    function_id: fid,
                    line: *line,
                });
            }
            profile.location.push(Location { id, line: lines });
            location_id.push(id);
        }
        profile.sample.push(Sample {
            location_id,
            value: vec![s.count, s.count * period],
            label: vec![Label {
                key: thread_key,
                str: strings.get(&s.thread),
            }],
        });
    }
    profile.string_table = strings.table;
    profile
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn samples_locations_functions_and_strings() {
        let f = |n: &str| (n.to_string(), format!("_Z{n}"), "src/x.rs".to_string(), 7);
        let samples = vec![
            StackSample {
                frames: vec![vec![f("leaf")], vec![f("main")]],
                thread: "tokio-rt-worker".into(),
                count: 3,
            },
            StackSample {
                frames: vec![vec![f("main")]],
                thread: "main".into(),
                count: 1,
            },
        ];
        let p = encode(
            &samples,
            100,
            SystemTime::UNIX_EPOCH + Duration::from_secs(2),
            Duration::from_secs(1),
        );
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.period, 10_000_000);
        assert_eq!(p.sample.len(), 2);
        assert_eq!(p.sample[0].value, vec![3, 30_000_000]);
        assert_eq!(p.sample[0].location_id, vec![1, 2]);
        assert_eq!(p.function.len(), 2, "main is one function");
        assert_eq!(p.location.len(), 3);
        let name = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(name(p.function[0].name), "leaf");
        assert_eq!(name(p.sample_type[1].unit), "nanoseconds");
        assert_eq!(p.time_nanos, 2_000_000_000);
        let bytes = p.encode_to_vec();
        assert_eq!(Profile::decode(bytes.as_slice()).unwrap(), p);
    }
}
