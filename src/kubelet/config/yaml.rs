//! YAML manifests read the way the Go kubelet reads them: YAML 1.1 scalar
//! resolution (as go-yaml v2 does) turned into JSON (as sigs.k8s.io/yaml
//! does). Only the first document counts.
//!
//! Where YAML 1.1 and 1.2 disagree, 1.1 wins: `yes`/`no`/`on`/`off`/`y`/`n`
//! are booleans, `0644` is octal (420), `0o17`, `0x1F`, `0b101` and `1_000`
//! are integers, an unquoted `2024-01-02` is a timestamp that becomes the
//! string `2024-01-02T00:00:00Z`. Non-string mapping keys become strings.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Tag};

/// Why a document could not be turned into JSON.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum YamlError {
    #[error("yaml: {0}")]
    Syntax(String),
    #[error("yaml: unknown anchor referenced")]
    UnknownAnchor,
    #[error("yaml: document contains excessive aliasing")]
    ExcessiveAliasing,
    #[error("yaml: cannot decode {value:?} as a !!{tag}")]
    BadTaggedValue { tag: String, value: String },
    #[error("yaml: map merge requires map or sequence of maps as the value")]
    BadMerge,
    #[error("json: unsupported value: {0}")]
    NonFiniteFloat(String),
    #[error("unsupported map key {0}")]
    UnsupportedKey(String),
}

/// Most values an alias expansion may produce before the document is refused.
const MAX_EXPANDED_NODES: usize = 1_000_000;

/// Converts the first document of `text` to JSON. An empty stream is `null`.
pub fn yaml_to_json(text: &str) -> Result<Value, YamlError> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        nodes: 0,
    };
    builder.first_document()
}

/// A resolved node: values stay apart from the timestamp/merge markers they
/// may be until placed.
enum Node {
    Value(Value),
    MergeKey,
}

struct Builder<'a> {
    parser: Parser<'a, serde_saphyr::granit_parser::StrInput<'a>>,
    anchors: HashMap<usize, Value>,
    nodes: usize,
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<Option<Event<'a>>, YamlError> {
        match self.parser.next() {
            None => Ok(None),
            Some(Ok((event, _span))) => Ok(Some(event)),
            Some(Err(e)) => Err(YamlError::Syntax(e.to_string())),
        }
    }

    fn first_document(&mut self) -> Result<Value, YamlError> {
        loop {
            match self.next()? {
                None | Some(Event::StreamEnd) => return Ok(Value::Null),
                Some(Event::DocumentStart(..)) => break,
                Some(_) => {}
            }
        }
        // The document's single node, or nothing when it is empty.
        loop {
            match self.next()? {
                None | Some(Event::DocumentEnd) | Some(Event::StreamEnd) => {
                    return Ok(Value::Null);
                }
                Some(event) => {
                    if let Some(node) = self.node(event)? {
                        return Ok(match node {
                            Node::Value(v) => v,
                            Node::MergeKey => Value::String("<<".into()),
                        });
                    }
                }
            }
        }
    }

    fn count(&mut self, n: usize) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_EXPANDED_NODES {
            return Err(YamlError::ExcessiveAliasing);
        }
        Ok(())
    }

    /// Builds the node that starts with `event`; `None` for events that are
    /// not nodes (comments, anchor metadata).
    fn node(&mut self, event: Event<'a>) -> Result<Option<Node>, YamlError> {
        self.count(1)?;
        let node = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let node = resolve_scalar(&text, style, tag.as_deref())?;
                if anchor != 0
                    && let Node::Value(v) = &node
                {
                    self.anchors.insert(anchor, v.clone());
                }
                node
            }
            Event::Alias(id) => {
                let value = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or(YamlError::UnknownAnchor)?;
                self.count(size_of_value(&value))?;
                Node::Value(value)
            }
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        None => return Err(YamlError::Syntax("unexpected end of stream".into())),
                        Some(Event::SequenceEnd) => break,
                        Some(event) => {
                            if let Some(node) = self.node(event)? {
                                items.push(match node {
                                    Node::Value(v) => v,
                                    Node::MergeKey => Value::String("<<".into()),
                                });
                            }
                        }
                    }
                }
                let value = Value::Array(items);
                if anchor != 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                Node::Value(value)
            }
            Event::MappingStart(_, anchor, _) => {
                let value = Value::Object(self.mapping()?);
                if anchor != 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                Node::Value(value)
            }
            _ => return Ok(None),
        };
        Ok(Some(node))
    }

    fn mapping(&mut self) -> Result<Map<String, Value>, YamlError> {
        let mut map = Map::new();
        loop {
            let key = match self.next()? {
                None => return Err(YamlError::Syntax("unexpected end of stream".into())),
                Some(Event::MappingEnd) => return Ok(map),
                Some(event) => match self.node(event)? {
                    Some(node) => node,
                    None => continue,
                },
            };
            let value = loop {
                match self.next()? {
                    None | Some(Event::MappingEnd) => {
                        return Err(YamlError::Syntax("mapping key without a value".into()));
                    }
                    Some(event) => {
                        if let Some(node) = self.node(event)? {
                            break match node {
                                Node::Value(v) => v,
                                Node::MergeKey => Value::String("<<".into()),
                            };
                        }
                    }
                }
            };
            match key {
                Node::MergeKey => merge_into(&mut map, value)?,
                Node::Value(k) => {
                    map.insert(key_string(&k)?, value);
                }
            }
        }
    }
}

fn size_of_value(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(size_of_value).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(size_of_value).sum::<usize>(),
        _ => 1,
    }
}

/// `<<: *anchor` or `<<: [*a, *b]`: the merged maps' keys are set in order.
fn merge_into(map: &mut Map<String, Value>, value: Value) -> Result<(), YamlError> {
    match value {
        Value::Object(other) => {
            for (k, v) in other {
                map.insert(k, v);
            }
            Ok(())
        }
        Value::Array(items) => {
            // Earlier maps in the list take precedence over later ones.
            for item in items.into_iter().rev() {
                match item {
                    Value::Object(other) => {
                        for (k, v) in other {
                            map.insert(k, v);
                        }
                    }
                    _ => return Err(YamlError::BadMerge),
                }
            }
            Ok(())
        }
        _ => Err(YamlError::BadMerge),
    }
}

/// How sigs.k8s.io/yaml spells a non-string key.
fn key_string(key: &Value) -> Result<String, YamlError> {
    match key {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Ok(u.to_string())
            } else {
                // go-yaml prints float keys with single precision.
                let f = n.as_f64().unwrap_or_default() as f32;
                Ok(format!("{f}"))
            }
        }
        other => Err(YamlError::UnsupportedKey(other.to_string())),
    }
}

fn resolve_scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Node, YamlError> {
    let core = tag.and_then(|t| t.suffix_in_namespace("tag:yaml.org,2002:"));
    let core = core.as_deref();
    match core {
        Some("str") => return Ok(Node::Value(Value::String(text.to_string()))),
        Some("binary") => {
            use base64::Engine;
            let cleaned: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(cleaned)
                .map_err(|_| YamlError::BadTaggedValue {
                    tag: "binary".into(),
                    value: text.to_string(),
                })?;
            return Ok(Node::Value(Value::String(
                String::from_utf8_lossy(&bytes).into_owned(),
            )));
        }
        _ => {}
    }
    // Quoted and block scalars are strings unless a tag says otherwise.
    if style != ScalarStyle::Plain && core.is_none() {
        return Ok(Node::Value(Value::String(text.to_string())));
    }
    let resolved = resolve_plain(text)?;
    match core {
        None => Ok(resolved),
        Some(want) => {
            let ok = match (&resolved, want) {
                (Node::Value(Value::Null), "null") => true,
                (Node::Value(Value::Bool(_)), "bool") => true,
                (Node::Value(Value::Number(n)), "int") => !n.is_f64(),
                (Node::Value(Value::Number(_)), "float") => true,
                (Node::Value(Value::String(_)), "timestamp") => true,
                (Node::Value(_), "map" | "seq") => false,
                (_, other) => !matches!(other, "null" | "bool" | "int" | "float" | "timestamp"),
            };
            if ok {
                Ok(resolved)
            } else {
                Err(YamlError::BadTaggedValue {
                    tag: want.to_string(),
                    value: text.to_string(),
                })
            }
        }
    }
}

/// go-yaml v2's implicit resolution of a plain scalar.
fn resolve_plain(text: &str) -> Result<Node, YamlError> {
    let value = match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Value::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Value::Bool(false)
        }
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => return Err(YamlError::NonFiniteFloat(text.to_string())),
        "<<" => return Ok(Node::MergeKey),
        _ => {
            let first = text.as_bytes()[0];
            match first {
                b'.' => match text.parse::<f64>() {
                    Ok(f) if f.is_finite() => float_value(f),
                    _ => Value::String(text.to_string()),
                },
                b'0'..=b'9' | b'+' | b'-' => resolve_number(text)?,
                _ => Value::String(text.to_string()),
            }
        }
    };
    Ok(Node::Value(value))
}

fn resolve_number(text: &str) -> Result<Value, YamlError> {
    if let Some(ts) = parse_timestamp(text) {
        return Ok(Value::String(ts));
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(v) = parse_go_int(&plain) {
        return Ok(v);
    }
    if is_yaml_style_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        if !f.is_finite() {
            return Err(YamlError::NonFiniteFloat(text.to_string()));
        }
        return Ok(float_value(f));
    }
    Ok(Value::String(text.to_string()))
}

/// Integral floats small enough to be exact become JSON integers, as Go's
/// encoder prints them without a fraction.
fn float_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// strconv.ParseInt / ParseUint with base 0: sign, then `0x`, `0o`, `0b`, a
/// leading `0` for octal, or decimal.
fn parse_go_int(s: &str) -> Option<Value> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        if magnitude <= i64::MAX as u64 {
            Some(Value::Number(Number::from(-(magnitude as i64))))
        } else if magnitude == i64::MAX as u64 + 1 {
            Some(Value::Number(Number::from(i64::MIN)))
        } else {
            None
        }
    } else if magnitude <= i64::MAX as u64 {
        Some(Value::Number(Number::from(magnitude as i64)))
    } else {
        Some(Value::Number(Number::from(magnitude)))
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// go-yaml v2's timestamps: `YYYY-M-D`, `YYYY-M-D[Tt]H:M:S[.frac](Z|±hh:mm)`
/// or `YYYY-M-D H:M:S[.frac]` (UTC). Returned as Go prints a time.Time in
/// JSON (RFC 3339 with nanoseconds).
fn parse_timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    let mut p = Cursor { b, i: 5 };
    let year: i64 = s[..4].parse().ok()?;
    let month = p.num(1, 2)?;
    p.expect(b'-')?;
    let day = p.num(1, 2)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    if p.done() {
        return Some(format!("{date}T00:00:00Z"));
    }
    let sep = p.take()?;
    let zoned = match sep {
        b'T' | b't' => true,
        b' ' => false,
        _ => return None,
    };
    let hour = p.num(1, 2)?;
    p.expect(b':')?;
    let minute = p.num(1, 2)?;
    p.expect(b':')?;
    let second = p.num(1, 2)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut fraction = String::new();
    if p.peek() == Some(b'.') {
        p.i += 1;
        let start = p.i;
        while p.peek().is_some_and(|c| c.is_ascii_digit()) {
            p.i += 1;
        }
        if p.i == start || p.i - start > 9 {
            return None;
        }
        fraction = s[start..p.i].trim_end_matches('0').to_string();
    }
    let zone = if zoned {
        match p.take()? {
            b'Z' => "Z".to_string(),
            sign @ (b'+' | b'-') => {
                let hh = p.num(2, 2)?;
                p.expect(b':')?;
                let mm = p.num(2, 2)?;
                if hh == 0 && mm == 0 {
                    // A zero offset prints as Z once parsed into UTC.
                    "Z".to_string()
                } else {
                    format!("{}{hh:02}:{mm:02}", sign as char)
                }
            }
            _ => return None,
        }
    } else {
        "Z".to_string()
    };
    if !p.done() {
        return None;
    }
    let frac = if fraction.is_empty() {
        String::new()
    } else {
        format!(".{fraction}")
    };
    Some(format!(
        "{date}T{hour:02}:{minute:02}:{second:02}{frac}{zone}"
    ))
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn take(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }
    fn expect(&mut self, c: u8) -> Option<()> {
        (self.take()? == c).then_some(())
    }
    fn done(&self) -> bool {
        self.i == self.b.len()
    }
    fn num(&mut self, min: usize, max: usize) -> Option<i64> {
        let start = self.i;
        while self.i - start < max && self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.i - start < min {
            return None;
        }
        std::str::from_utf8(&self.b[start..self.i])
            .ok()?
            .parse()
            .ok()
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Scalars go-yaml v2 + sigs.k8s.io/yaml resolve differently from YAML 1.2.
    #[test]
    fn yaml_1_1_scalars() {
        let cases: &[(&str, Value)] = &[
            ("yes", json!(true)),
            ("No", json!(false)),
            ("on", json!(true)),
            ("OFF", json!(false)),
            ("y", json!(true)),
            ("n", json!(false)),
            ("yEs", json!("yEs")),
            ("'yes'", json!("yes")),
            ("\"on\"", json!("on")),
            ("0644", json!(420)),
            ("0o17", json!(15)),
            ("0x1F", json!(31)),
            ("0b101", json!(5)),
            ("-0b101", json!(-5)),
            ("1_000", json!(1000)),
            ("08", json!(8)),
            ("09.5", json!(9.5)),
            ("+12", json!(12)),
            ("1.0", json!(1)),
            ("0.5", json!(0.5)),
            ("1e3", json!(1000)),
            (".5", json!(0.5)),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("~", json!(null)),
            ("", json!(null)),
            ("Null", json!(null)),
            ("2024-01-02", json!("2024-01-02T00:00:00Z")),
            (
                "2001-12-14t21:59:43.10-05:00",
                json!("2001-12-14T21:59:43.1-05:00"),
            ),
            ("2001-12-14 21:59:43.10", json!("2001-12-14T21:59:43.1Z")),
            ("2001-12-14T21:59:43", json!("2001-12-14T21:59:43")),
            ("2001-02-30", json!("2001-02-30")),
            ("1.2.3", json!("1.2.3")),
            ("-x", json!("-x")),
            ("!!str 0644", json!("0644")),
            ("!!int 017", json!(15)),
            ("|\n  yes\n", json!("yes\n")),
        ];
        for (src, want) in cases {
            let doc = format!("v: {src}");
            let got = yaml_to_json(&doc).unwrap_or_else(|e| panic!("{src:?}: {e}"));
            assert_eq!(got["v"], *want, "{src:?}");
        }
    }

    #[test]
    fn non_finite_floats_are_errors() {
        for src in [".inf", "-.Inf", ".nan"] {
            assert!(matches!(
                yaml_to_json(&format!("v: {src}")),
                Err(YamlError::NonFiniteFloat(_))
            ));
        }
    }

    #[test]
    fn keys_anchors_merges_and_documents() {
        let doc = "\
base: &b {x: 1, z: 2}
derived:
  <<: *b
  z: 3
list: [*b]
80: http
yes: t
1.5: f
---
second: doc
";
        let got = yaml_to_json(doc).expect("parses");
        assert_eq!(
            got,
            json!({
                "base": {"x": 1, "z": 2},
                "derived": {"x": 1, "z": 3},
                "list": [{"x": 1, "z": 2}],
                "80": "http",
                "true": "t",
                "1.5": "f",
            })
        );
    }

    #[test]
    fn a_y_key_is_a_boolean_key_as_in_go_yaml_v2() {
        assert_eq!(
            yaml_to_json("y: 1\nn: 2").unwrap(),
            json!({"true": 1, "false": 2})
        );
    }

    #[test]
    fn empty_stream_is_null_and_syntax_errors_surface() {
        assert_eq!(yaml_to_json("").unwrap(), Value::Null);
        assert_eq!(yaml_to_json("# only a comment\n").unwrap(), Value::Null);
        assert!(matches!(
            yaml_to_json("a: [1, 2"),
            Err(YamlError::Syntax(_))
        ));
        assert!(matches!(
            yaml_to_json("a: *nope"),
            Err(YamlError::UnknownAnchor) | Err(YamlError::Syntax(_))
        ));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let prev = i - 1;
            doc.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        assert_eq!(yaml_to_json(&doc), Err(YamlError::ExcessiveAliasing));
    }
}
