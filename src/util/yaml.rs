//! YAML read the way the Go kubelet reads its configuration file: through
//! sigs.k8s.io/yaml, i.e. YAML 1.1 scalar resolution (go-yaml v2) converted to
//! JSON before the JSON decoder sees it.
//!
//! serde-saphyr's event parser supplies the syntax; this module applies the
//! YAML 1.1 rules to plain scalars, which differ from YAML 1.2 in ways that
//! change a configuration's meaning:
//! - `yes`/`no`/`on`/`off`/`y`/`n` (any of their capitalisations) are booleans;
//! - `0755` is octal (493), `0b101` binary, `1_000` is 1000, `08` is the float 8;
//! - `~`, `null`, an empty value are null; timestamps stay strings.
//!
//! Map keys become strings as sigs.k8s.io/yaml makes them (`on:` is the key
//! `"true"`). Only the first document is read. Repeated keys in one mapping
//! keep the last value and are reported as strictness problems, which the
//! decoder treats as the Go kubelet treats them.

use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Tag};

/// A document that cannot be read as YAML (or JSON).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum YamlError {
    #[error("error converting YAML to JSON: {0}")]
    Syntax(String),
    #[error("error converting YAML to JSON: unsupported value {value} at line {line}")]
    Unsupported { value: String, line: usize },
    #[error("error converting YAML to JSON: a mapping key at line {line} is not a scalar")]
    ComplexKey { line: usize },
    #[error(
        "error converting YAML to JSON: cannot merge a non-mapping into a mapping at line {line}"
    )]
    BadMerge { line: usize },
    #[error("error converting YAML to JSON: document contains excessive aliasing")]
    ExcessiveAliasing,
}

/// go-yaml v2's alias budget (its fix for CVE-2019-11253): once more than
/// 1000 nodes were decoded and more than 100 of them came from aliases, the
/// share of aliased nodes may be at most 99% up to 400,000 nodes, falling
/// linearly to 10% at 4,000,000.
const ALIAS_RATIO_RANGE_LOW: usize = 400_000;
const ALIAS_RATIO_RANGE_HIGH: usize = 4_000_000;

fn allowed_alias_ratio(decoded: usize) -> f64 {
    if decoded <= ALIAS_RATIO_RANGE_LOW {
        0.99
    } else if decoded >= ALIAS_RATIO_RANGE_HIGH {
        0.10
    } else {
        let span = (ALIAS_RATIO_RANGE_HIGH - ALIAS_RATIO_RANGE_LOW) as f64;
        0.99 - 0.89 * ((decoded - ALIAS_RATIO_RANGE_LOW) as f64 / span)
    }
}

/// Walks the tree in decoding order counting what decoding would visit
/// (aliases followed, nothing copied), and refuses the document as soon
/// as aliases make up more of it than go-yaml v2 allows: a "billion laughs"
/// document fails after a few thousand steps, before any value is built.
fn check_aliasing(root: &Node) -> Result<(), YamlError> {
    // The document node counts too.
    let mut decoded = 1usize;
    let mut aliased = 0usize;
    let mut stack: Vec<(&Node, usize)> = vec![(root, 0)];
    while let Some((node, depth)) = stack.pop() {
        let (node, depth) = match node {
            Node::Shared { node, alias: false } => (node.as_ref(), depth),
            other => (other, depth),
        };
        decoded += 1;
        if depth > 0 {
            aliased += 1;
        }
        if aliased > 100
            && decoded > 1000
            && aliased as f64 / decoded as f64 > allowed_alias_ratio(decoded)
        {
            return Err(YamlError::ExcessiveAliasing);
        }
        match node {
            Node::Shared { node, .. } => stack.push((node.as_ref(), depth + 1)),
            Node::Scalar { .. } => {}
            Node::Seq(items) => stack.extend(items.iter().rev().map(|n| (n, depth))),
            Node::Map(pairs, _) => {
                for (k, v) in pairs.iter().rev() {
                    if is_merge_key(k) {
                        match v.target() {
                            Node::Seq(items) => {
                                stack.extend(items.iter().map(|n| (n, depth)));
                            }
                            _ => stack.push((v, depth)),
                        }
                    } else {
                        stack.push((v, depth));
                        stack.push((k, depth));
                    }
                }
            }
        }
    }
    Ok(())
}

fn is_merge_key(key: &Node) -> bool {
    matches!(key.target(), Node::Scalar { text, plain: true, tag: None, .. } if text == "<<")
}

/// A YAML document turned into JSON, with the keys that were repeated.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    pub value: Value,
    /// One message per repeated key, naming it and its line.
    pub duplicates: Vec<String>,
}

#[derive(Debug, Clone)]
enum Node {
    Scalar {
        text: String,
        plain: bool,
        tag: Option<String>,
        line: usize,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>, usize),
    /// An anchored node (`alias: false`) or an alias to one (`alias:
    /// true`), shared rather than copied.
    Shared {
        node: Rc<Node>,
        alias: bool,
    },
}

impl Node {
    /// The node itself, or the one an anchor or alias stands for.
    fn target(&self) -> &Node {
        let mut node = self;
        while let Node::Shared { node: inner, .. } = node {
            node = inner;
        }
        node
    }
}

fn core_tag(tag: &Option<std::borrow::Cow<'_, Tag>>) -> Option<String> {
    tag.as_ref().map(|t| {
        t.core_suffix()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}{}", t.handle(), t.suffix()))
    })
}

/// A collection being built while its events arrive.
enum Frame {
    Seq(Vec<Node>, usize),
    Map {
        pairs: Vec<(Node, Node)>,
        pending_key: Option<Node>,
        anchor: usize,
        line: usize,
    },
}

fn attach(
    stack: &mut [Frame],
    root: &mut Option<Node>,
    anchors: &mut HashMap<usize, Rc<Node>>,
    node: Node,
    anchor: usize,
) {
    let node = if anchor != 0 {
        let shared = Rc::new(node);
        anchors.insert(anchor, shared.clone());
        Node::Shared {
            node: shared,
            alias: false,
        }
    } else {
        node
    };
    match stack.last_mut() {
        Some(Frame::Seq(items, _)) => items.push(node),
        Some(Frame::Map {
            pairs, pending_key, ..
        }) => match pending_key.take() {
            Some(key) => pairs.push((key, node)),
            None => *pending_key = Some(node),
        },
        None => *root = Some(node),
    }
}

/// Builds the node tree of the first document, resolving aliases.
fn parse_tree(text: &str) -> Result<Option<Node>, YamlError> {
    let mut anchors: HashMap<usize, Rc<Node>> = HashMap::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut in_document = false;

    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| YamlError::Syntax(e.to_string()))?;
        let line = span.start.line();
        match event {
            Event::DocumentStart(..) => {
                if in_document || root.is_some() {
                    break;
                }
                in_document = true;
            }
            Event::DocumentEnd if root.is_some() => break,
            Event::Scalar(value, style, anchor, tag) => {
                let node = Node::Scalar {
                    text: value.into_owned(),
                    plain: style == ScalarStyle::Plain,
                    tag: core_tag(&tag),
                    line,
                };
                attach(&mut stack, &mut root, &mut anchors, node, anchor);
            }
            Event::Alias(id) => {
                let node = anchors.get(&id).cloned().ok_or_else(|| {
                    YamlError::Syntax(format!("unknown anchor referenced at line {line}"))
                })?;
                let alias = Node::Shared { node, alias: true };
                attach(&mut stack, &mut root, &mut anchors, alias, 0);
            }
            Event::SequenceStart(_, anchor, _) => stack.push(Frame::Seq(Vec::new(), anchor)),
            Event::MappingStart(_, anchor, _) => stack.push(Frame::Map {
                pairs: Vec::new(),
                pending_key: None,
                anchor,
                line,
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match stack.pop() {
                    Some(Frame::Seq(items, anchor)) => (Node::Seq(items), anchor),
                    Some(Frame::Map {
                        pairs,
                        anchor,
                        line,
                        ..
                    }) => (Node::Map(pairs, line), anchor),
                    None => continue,
                };
                attach(&mut stack, &mut root, &mut anchors, node, anchor);
            }
            Event::StreamEnd => break,
            _ => {}
        }
    }
    Ok(root)
}

/// A resolved plain scalar, before it becomes JSON.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

/// Go's `strconv.ParseInt(s, 0, 64)`/`ParseUint`: sign, then `0x`, `0o`,
/// `0b`, a leading `0` for octal, or decimal. Underscores are already gone.
fn parse_go_int(s: &str) -> Option<Scalar> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
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
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        if magnitude <= i64::MAX as u64 + 1 {
            return Some(Scalar::Int((magnitude as i64).wrapping_neg()));
        }
        return None;
    }
    if magnitude <= i64::MAX as u64 {
        Some(Scalar::Int(magnitude as i64))
    } else {
        Some(Scalar::Uint(magnitude))
    }
}

/// go-yaml v2's float shape: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
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

/// go-yaml v2's implicit resolution of a plain scalar.
fn resolve_plain(s: &str) -> Scalar {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Scalar::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Scalar::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match s.as_bytes()[0] {
        b'.' => {
            if let Ok(f) = s.parse::<f64>() {
                return Scalar::Float(f);
            }
        }
        b'+' | b'-' | b'0'..=b'9' => {
            let plain = s.replace('_', "");
            if let Some(n) = parse_go_int(&plain) {
                return n;
            }
            if is_yaml_style_float(&plain)
                && let Ok(f) = plain.parse::<f64>()
            {
                return Scalar::Float(f);
            }
        }
        _ => {}
    }
    Scalar::Str(s.to_string())
}

/// An explicitly tagged scalar: `!!str` keeps text; the other core tags
/// resolve as go-yaml would, failing when the text does not fit.
fn resolve_tagged(text: &str, tag: &str, line: usize) -> Result<Scalar, YamlError> {
    let bad = || YamlError::Unsupported {
        value: format!("!!{tag} {text:?}"),
        line,
    };
    match tag {
        "str" => Ok(Scalar::Str(text.to_string())),
        "int" => match resolve_plain(text) {
            s @ (Scalar::Int(_) | Scalar::Uint(_)) => Ok(s),
            _ => Err(bad()),
        },
        "float" => match resolve_plain(text) {
            Scalar::Int(i) => Ok(Scalar::Float(i as f64)),
            Scalar::Uint(u) => Ok(Scalar::Float(u as f64)),
            s @ Scalar::Float(_) => Ok(s),
            _ => Err(bad()),
        },
        "bool" => match resolve_plain(text) {
            s @ Scalar::Bool(_) => Ok(s),
            _ => Err(bad()),
        },
        "null" => Ok(Scalar::Null),
        _ => Ok(resolve_plain(text)),
    }
}

fn resolve(node: &Node) -> Result<Option<Scalar>, YamlError> {
    match node.target() {
        Node::Scalar {
            text,
            plain,
            tag,
            line,
        } => Ok(Some(match tag {
            Some(t) => resolve_tagged(text, t, *line)?,
            None if *plain => resolve_plain(text),
            None => Scalar::Str(text.clone()),
        })),
        _ => Ok(None),
    }
}

struct Converter {
    json_input: bool,
    duplicates: Vec<String>,
}

impl Converter {
    /// A float as the JSON text Go's encoder would write, read back: whole
    /// values below 1e21 become integers, as `json.Marshal` prints them so.
    fn float(&self, f: f64, line: usize) -> Result<Value, YamlError> {
        if !f.is_finite() {
            return Err(YamlError::Unsupported {
                value: f.to_string(),
                line,
            });
        }
        if !self.json_input && f.fract() == 0.0 && f.abs() < 1e21 {
            if f >= i64::MIN as f64 && f <= i64::MAX as f64 {
                return Ok(Value::Number(Number::from(f as i64)));
            }
            if f >= 0.0 && f <= u64::MAX as f64 {
                return Ok(Value::Number(Number::from(f as u64)));
            }
        }
        Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| YamlError::Unsupported {
                value: f.to_string(),
                line,
            })
    }

    fn scalar(&self, s: Scalar, line: usize) -> Result<Value, YamlError> {
        Ok(match s {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Int(i) => Value::Number(Number::from(i)),
            Scalar::Uint(u) => Value::Number(Number::from(u)),
            Scalar::Float(f) => self.float(f, line)?,
            Scalar::Str(s) => Value::String(s),
        })
    }

    /// A mapping key as sigs.k8s.io/yaml turns it into a JSON key.
    fn key(&self, node: &Node, map_line: usize) -> Result<String, YamlError> {
        let line = match node.target() {
            Node::Scalar { line, .. } => *line,
            _ => map_line,
        };
        match resolve(node)? {
            Some(Scalar::Str(s)) => Ok(s),
            Some(Scalar::Int(i)) => Ok(i.to_string()),
            Some(Scalar::Uint(u)) => Ok(u.to_string()),
            Some(Scalar::Bool(b)) => Ok(b.to_string()),
            Some(Scalar::Float(f)) => Ok(go_float32_g(f)),
            Some(Scalar::Null) => Err(YamlError::Unsupported {
                value: "null mapping key".to_string(),
                line,
            }),
            None => Err(YamlError::ComplexKey { line }),
        }
    }

    fn convert(&mut self, node: &Node) -> Result<Value, YamlError> {
        match node {
            Node::Shared { node, .. } => self.convert(node),
            Node::Scalar { line, .. } => {
                let s = resolve(node)?.unwrap_or(Scalar::Null);
                self.scalar(s, *line)
            }
            Node::Seq(items) => items
                .iter()
                .map(|n| self.convert(n))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Node::Map(pairs, line) => {
                let mut out = Map::new();
                let mut seen: HashMap<String, usize> = HashMap::new();
                for (key, value) in pairs {
                    if is_merge_key(key) {
                        self.merge(&mut out, value, *line)?;
                        continue;
                    }
                    let name = self.key(key, *line)?;
                    let key_line = match key.target() {
                        Node::Scalar { line, .. } => *line,
                        _ => *line,
                    };
                    if let Some(first) = seen.insert(name.clone(), key_line) {
                        self.duplicates.push(format!(
                            "key {name:?} already set at line {first}, repeated at line {key_line}"
                        ));
                    }
                    let converted = self.convert(value)?;
                    out.insert(name, converted);
                }
                Ok(Value::Object(out))
            }
        }
    }

    /// `<<: *base` or `<<: [*a, *b]`: the merged mappings' entries are
    /// written in order, as go-yaml v2 does.
    fn merge(
        &mut self,
        out: &mut Map<String, Value>,
        value: &Node,
        line: usize,
    ) -> Result<(), YamlError> {
        let sources: Vec<&Node> = match value.target() {
            Node::Map(..) => vec![value],
            Node::Seq(items) => items.iter().collect(),
            _ => return Err(YamlError::BadMerge { line }),
        };
        for source in sources {
            match self.convert(source)? {
                Value::Object(map) => {
                    for (k, v) in map {
                        out.insert(k, v);
                    }
                }
                _ => return Err(YamlError::BadMerge { line }),
            }
        }
        Ok(())
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`, with YAML's names for the
/// special values: how sigs.k8s.io/yaml spells a float map key.
fn go_float32_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    let v = f as f32;
    let exp = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    if (-4..21).contains(&exp) {
        format!("{v}")
    } else {
        let s = format!("{v:e}");
        match s.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', e),
                };
                format!("{m}e{sign}{digits:0>2}")
            }
            None => s,
        }
    }
}

/// Converts a YAML (or JSON) document to JSON as the Go kubelet's decoder
/// does before decoding. An empty document is `null`.
pub fn to_json(text: &str) -> Result<Converted, YamlError> {
    let json_input = text.trim_start().starts_with('{');
    let mut converter = Converter {
        json_input,
        duplicates: Vec::new(),
    };
    let value = match parse_tree(text)? {
        Some(node) => {
            check_aliasing(&node)?;
            converter.convert(&node)?
        }
        None => Value::Null,
    };
    Ok(Converted {
        value,
        duplicates: converter.duplicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convert(yaml: &str) -> Value {
        to_json(yaml).unwrap().value
    }

    /// Golden cases where YAML 1.1 (as the Go kubelet reads it) differs from
    /// YAML 1.2, plus the common cases that must not change.
    #[test]
    fn yaml_1_1_scalars_golden() {
        let cases: &[(&str, Value)] = &[
            ("yes", json!(true)),
            ("Yes", json!(true)),
            ("YES", json!(true)),
            ("y", json!(true)),
            ("Y", json!(true)),
            ("on", json!(true)),
            ("On", json!(true)),
            ("ON", json!(true)),
            ("no", json!(false)),
            ("No", json!(false)),
            ("n", json!(false)),
            ("N", json!(false)),
            ("off", json!(false)),
            ("OFF", json!(false)),
            ("true", json!(true)),
            ("False", json!(false)),
            ("yEs", json!("yEs")),
            ("0755", json!(493)),
            ("-0755", json!(-493)),
            ("0o17", json!(15)),
            ("0x1F", json!(31)),
            ("0b101", json!(5)),
            ("1_000", json!(1000)),
            ("+12", json!(12)),
            ("08", json!(8)),
            ("09.5", json!(9.5)),
            ("1e3", json!(1000)),
            ("1.", json!(1)),
            (".5", json!(0.5)),
            ("1.5", json!(1.5)),
            ("~", Value::Null),
            ("null", Value::Null),
            ("NULL", Value::Null),
            ("", Value::Null),
            ("2001-12-14", json!("2001-12-14")),
            ("1:20", json!("1:20")),
            ("10Mi", json!("10Mi")),
            ("100ms", json!("100ms")),
            ("-x", json!("-x")),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("'yes'", json!("yes")),
            ("\"0755\"", json!("0755")),
            ("!!str on", json!("on")),
            ("!!int \"12\"", json!(12)),
        ];
        for (text, want) in cases {
            let got = convert(&format!("v: {text}\n"));
            assert_eq!(got, json!({ "v": want }), "value {text:?}");
        }
    }

    #[test]
    fn keys_become_strings_as_sigs_yaml_makes_them() {
        let got = convert("on: a\n1: b\n0x10: c\nno: d\n1.5: e\n");
        assert_eq!(
            got,
            json!({"true": "a", "1": "b", "16": "c", "false": "d", "1.5": "e"})
        );
    }

    #[test]
    fn structure_anchors_and_merges() {
        let yaml = "base: &b\n  a: 1\n  b: 2\nderived:\n  <<: *b\n  b: 3\nlist: [x, *b]\n";
        assert_eq!(
            convert(yaml),
            json!({
                "base": {"a": 1, "b": 2},
                "derived": {"a": 1, "b": 3},
                "list": ["x", {"a": 1, "b": 2}],
            })
        );
    }

    #[test]
    fn repeated_keys_keep_the_last_and_are_reported() {
        let out = to_json("port: 1\nport: 2\nnested:\n  a: 1\n  a: 2\n").unwrap();
        assert_eq!(out.value, json!({"port": 2, "nested": {"a": 2}}));
        assert_eq!(out.duplicates.len(), 2);
        assert!(
            out.duplicates[0].contains("\"port\""),
            "{:?}",
            out.duplicates
        );
    }

    #[test]
    fn json_documents_read_as_json() {
        let out = to_json("{\"port\": 10250, \"ratio\": 1.0, \"on\": \"yes\"}").unwrap();
        assert_eq!(out.value, json!({"port": 10250, "ratio": 1.0, "on": "yes"}));
    }

    #[test]
    fn only_the_first_document_counts() {
        assert_eq!(convert("a: 1\n---\nb: 2\n"), json!({"a": 1}));
        assert_eq!(convert("---\na: 1\n...\n---\nb: 2\n"), json!({"a": 1}));
        assert_eq!(convert("# nothing\n"), Value::Null);
    }

    #[test]
    fn errors() {
        assert!(matches!(to_json("a: [1, 2\n"), Err(YamlError::Syntax(_))));
        assert!(matches!(
            to_json("a: .inf\n"),
            Err(YamlError::Unsupported { .. })
        ));
        assert!(matches!(
            to_json("? [a]\n: 1\n"),
            Err(YamlError::ComplexKey { .. })
        ));
    }
}

#[cfg(test)]
mod go_yaml_v2_cases {
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
            // go-yaml v2 resolves these as timestamps but, decoding into
            // interface{} as sigs.k8s.io/yaml does, keeps their text.
            ("2024-01-02", json!("2024-01-02")),
            (
                "2001-12-14t21:59:43.10-05:00",
                json!("2001-12-14t21:59:43.10-05:00"),
            ),
            ("2001-12-14 21:59:43.10", json!("2001-12-14 21:59:43.10")),
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
            let got = to_json(&doc)
                .map(|c| c.value)
                .unwrap_or_else(|e| panic!("{src:?}: {e}"));
            assert_eq!(got["v"], *want, "{src:?}");
        }
    }

    #[test]
    fn non_finite_floats_are_errors() {
        for src in [".inf", "-.Inf", ".nan"] {
            assert!(matches!(
                to_json(&format!("v: {src}")),
                Err(YamlError::Unsupported { .. })
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
        let got = to_json(doc).expect("parses").value;
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
            to_json("y: 1\nn: 2").unwrap().value,
            json!({"true": 1, "false": 2})
        );
    }

    #[test]
    fn empty_stream_is_null_and_syntax_errors_surface() {
        assert_eq!(to_json("").unwrap().value, Value::Null);
        assert_eq!(to_json("# only a comment\n").unwrap().value, Value::Null);
        assert!(matches!(to_json("a: [1, 2"), Err(YamlError::Syntax(_))));
        assert!(matches!(to_json("a: *nope"), Err(YamlError::Syntax(_))));
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
        assert_eq!(to_json(&doc), Err(YamlError::ExcessiveAliasing));
    }

    /// The bomb of the issue (9 aliases per level, 8 and 9 levels, about
    /// 500 bytes): refused while walking shared nodes, so nothing the size
    /// of its expansion (9^9 nodes) is ever built; documents that use
    /// aliases moderately still read.
    #[test]
    fn alias_budget_is_go_yaml_v2s() {
        for levels in [8, 9] {
            let mut doc = String::from(
                "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
            );
            let mut prev = "a".to_string();
            for i in 1..levels {
                let name = format!("l{i}");
                let refs = vec![format!("*{prev}"); 9].join(",");
                doc.push_str(&format!("{name}: &{name} [{refs}]\n"));
                prev = name;
            }
            assert!(doc.len() < 700, "{}", doc.len());
            assert_eq!(
                to_json(&doc),
                Err(YamlError::ExcessiveAliasing),
                "{levels} levels"
            );
        }
        // 300 uses of a three-entry anchor: 75% of the nodes come from
        // aliases, under the 99% go-yaml allows.
        let mut doc = String::from("base: &b {x: 1, y: 2, z: 3}\nitems:\n");
        for _ in 0..300 {
            doc.push_str("- *b\n");
        }
        let v = to_json(&doc).expect("moderate aliasing").value;
        assert_eq!(v["items"].as_array().map(Vec::len), Some(300));
        assert_eq!(v["items"][299]["z"], 3);
        // Below 1000 nodes nothing is counted against it.
        assert_eq!(allowed_alias_ratio(1), 0.99);
        assert_eq!(allowed_alias_ratio(4_000_000), 0.10);
        assert!((allowed_alias_ratio(2_200_000) - 0.545).abs() < 1e-9);
    }
}
