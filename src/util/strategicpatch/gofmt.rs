//! Go's `%v` of a value decoded from JSON into `interface{}`: strings bare,
//! numbers as `float64` prints them (shortest form, exponent from 1e+06 up
//! and below 1e-4), `<nil>`, `map[k:v …]` with sorted keys, `[a b …]`.
//! Strategic merge patches order merge keys by this text, and the API server
//! quotes patch lists this way in its errors.

use serde_json::Value;

/// `fmt.Sprintf("%v", v)` for `v` as Go's JSON decoder builds it.
pub fn v(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value);
    out
}

fn write(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                if let Some(item) = map.get(k) {
                    write(out, item);
                }
            }
            out.push(']');
        }
    }
}

/// `%v` of a float64: the shortest digits that round trip, in exponent
/// form when the decimal exponent is below -4 or at least 6.
fn float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.5e3".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let s = format!("{f}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_v_table() {
        let cases = [
            (json!("Ready"), "Ready"),
            (json!(null), "<nil>"),
            (json!(true), "true"),
            (json!(8080), "8080"),
            (json!(1.5), "1.5"),
            (json!(123456), "123456"),
            (json!(1_000_000), "1e+06"),
            (json!(1234567), "1.234567e+06"),
            (json!(1e21), "1e+21"),
            (json!(0.00001), "1e-05"),
            (json!(0.0001), "0.0001"),
            (json!([1, "a"]), "[1 a]"),
            (
                json!({"type": "DiskPressure", "lastHeartbeatTime": "2024-01-01T00:00:00Z"}),
                "map[lastHeartbeatTime:2024-01-01T00:00:00Z type:DiskPressure]",
            ),
            (
                json!([{"type": "A"}, {"$patch": "delete", "type": "B"}]),
                "[map[type:A] map[$patch:delete type:B]]",
            ),
        ];
        for (value, want) in cases {
            assert_eq!(v(&value), want, "{value}");
        }
    }
}
