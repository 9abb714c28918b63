//! The JSON format of the v1.25 line (component-base's zap encoder):
//!
//! ```text
//! {"ts":1669112457208.9,"caller":"app/server.rs:49","msg":"Starting kubelet","v":0,"version":"v1.25.16"}
//! {"ts":1669112457210.1,"caller":"app/server.rs:60","msg":"Failed","err":"boom","pod":"ns/name"}
//! ```
//!
//! `ts` is milliseconds since the epoch as a float; `caller` is the file's
//! directory and name; info and warning entries carry their verbosity `v`,
//! error entries carry `err` instead.

use serde_json::{Map, Number, Value as Json};

use super::record::{Record, Severity, Value};

/// The last directory and the file name, as zap's short caller prints them.
pub fn short_caller(file: &str) -> &str {
    let mut seps = file.rmatch_indices(['/', '\\']);
    match (seps.next(), seps.next()) {
        (Some(_), Some((i, _))) => &file[i + 1..],
        _ => file,
    }
}

fn to_json(value: &Value) -> Json {
    match value {
        Value::Text(t) => Json::String(t.clone()),
        Value::Int(i) => Json::Number((*i).into()),
        Value::Uint(u) => Json::Number((*u).into()),
        Value::Float(f) => Number::from_f64(*f)
            .map(Json::Number)
            .unwrap_or_else(|| Json::String(f.to_string())),
        Value::Bool(b) => Json::Bool(*b),
    }
}

/// Formats one entry as a JSON line (with its newline). `ts_millis` is the
/// entry's time in milliseconds since the Unix epoch.
pub fn format(record: &Record, ts_millis: f64) -> String {
    let mut obj = Map::new();
    obj.insert(
        "ts".into(),
        Number::from_f64(ts_millis)
            .map(Json::Number)
            .unwrap_or(Json::Null),
    );
    obj.insert(
        "caller".into(),
        Json::String(format!("{}:{}", short_caller(&record.file), record.line)),
    );
    obj.insert("msg".into(), Json::String(record.message.clone()));
    match (record.severity, &record.err) {
        (Severity::Error, err) => {
            if let Some(e) = err {
                obj.insert("err".into(), Json::String(e.clone()));
            }
        }
        (_, err) => {
            obj.insert("v".into(), Json::Number(record.verbosity.into()));
            if let Some(e) = err {
                obj.insert("err".into(), Json::String(e.clone()));
            }
        }
    }
    for (k, v) in &record.fields {
        obj.insert(k.clone(), to_json(v));
    }
    let mut line = Json::Object(obj).to_string();
    line.push('\n');
    line
}

/// Milliseconds since the epoch for `t`.
pub fn epoch_millis(t: std::time::SystemTime) -> f64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as f64 / 1e6,
        Err(_) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_lines() {
        let info = Record::new(Severity::Info, "src/app/server.rs", 49, "Starting kubelet")
            .with("version", Value::Text("v1.25.16".into()))
            .with("pods", Value::Uint(3));
        assert_eq!(
            format(&info, 1669112457208.9),
            "{\"ts\":1669112457208.9,\"caller\":\"app/server.rs:49\",\"msg\":\"Starting kubelet\",\"v\":0,\"version\":\"v1.25.16\",\"pods\":3}\n"
        );
        let verbose = Record {
            verbosity: 4,
            ..Record::new(Severity::Warning, "lib.rs", 2, "quiet")
        };
        assert_eq!(
            format(&verbose, 1.5),
            "{\"ts\":1.5,\"caller\":\"lib.rs:2\",\"msg\":\"quiet\",\"v\":4}\n"
        );
        let error = Record {
            err: Some("boom \"x\"".into()),
            ..Record::new(Severity::Error, "/a/b/c.rs", 9, "Failed")
        }
        .with("pod", Value::Text("ns/name".into()));
        assert_eq!(
            format(&error, 2.0),
            "{\"ts\":2.0,\"caller\":\"b/c.rs:9\",\"msg\":\"Failed\",\"err\":\"boom \\\"x\\\"\",\"pod\":\"ns/name\"}\n"
        );
    }

    #[test]
    fn millis() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_500);
        assert_eq!(epoch_millis(t), 1.5);
    }
}
