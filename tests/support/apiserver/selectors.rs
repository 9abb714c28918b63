//! Label selectors (=, ==, !=, in, notin, exists, !exists, gt, lt) and field
//! selectors (=, ==, != over the resource's supported field labels).

use serde_json::Value;

use super::meta;
use super::resources::ResourceDef;

#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq)]
struct LabelReq {
    key: String,
    op: LabelOp,
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set of values, found {rest:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn parse_req(raw: &str) -> Result<LabelReq, String> {
    let s = raw.trim();
    if let Some(key) = s.strip_prefix('!') {
        let key = key.trim();
        if !valid_key(key) {
            return Err(format!("invalid label key {key:?}"));
        }
        return Ok(LabelReq {
            key: key.to_string(),
            op: LabelOp::NotExists,
        });
    }
    for (tok, ctor) in [("notin", true), ("in", false)] {
        let pat = format!(" {tok} ");
        if let Some(i) = s.find(&pat).or_else(|| s.find(&format!(" {tok}("))) {
            let key = s[..i].trim();
            let rest = &s[i + 1 + tok.len()..];
            if !valid_key(key) {
                return Err(format!("invalid label key {key:?}"));
            }
            let set = parse_set(rest)?;
            return Ok(LabelReq {
                key: key.to_string(),
                op: if ctor {
                    LabelOp::NotIn(set)
                } else {
                    LabelOp::In(set)
                },
            });
        }
    }
    type Ctor = fn(&str) -> Result<LabelOp, String>;
    let ops: [(&str, Ctor); 5] = [
        ("!=", |v| Ok(LabelOp::NotEq(v.to_string()))),
        ("==", |v| Ok(LabelOp::Eq(v.to_string()))),
        ("=", |v| Ok(LabelOp::Eq(v.to_string()))),
        (">", |v| {
            v.parse()
                .map(LabelOp::Gt)
                .map_err(|_| format!("{v:?} is not an integer"))
        }),
        ("<", |v| {
            v.parse()
                .map(LabelOp::Lt)
                .map_err(|_| format!("{v:?} is not an integer"))
        }),
    ];
    for (tok, ctor) in ops {
        if let Some(i) = s.find(tok) {
            let key = s[..i].trim();
            let val = s[i + tok.len()..].trim();
            if !valid_key(key) {
                return Err(format!("invalid label key {key:?}"));
            }
            return Ok(LabelReq {
                key: key.to_string(),
                op: ctor(val)?,
            });
        }
    }
    if !valid_key(s) {
        return Err(format!("unable to parse requirement: {s:?}"));
    }
    Ok(LabelReq {
        key: s.to_string(),
        op: LabelOp::Exists,
    })
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        split_top(s)
            .iter()
            .map(|r| parse_req(r))
            .collect::<Result<Vec<_>, _>>()
            .map(LabelSelector)
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = meta::labels(obj);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| {
            let v = get(&r.key);
            match &r.op {
                LabelOp::Eq(x) => v == Some(x.as_str()),
                LabelOp::NotEq(x) => v != Some(x.as_str()),
                LabelOp::In(set) => v.is_some_and(|v| set.iter().any(|x| x == v)),
                LabelOp::NotIn(set) => v.is_none_or(|v| !set.iter().any(|x| x == v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
                LabelOp::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                LabelOp::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
struct FieldReq {
    field: String,
    value: String,
    equal: bool,
}

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldReq>);

/// Splits on unescaped commas and unescapes `\,`, `\=`, `\\` afterwards.
fn split_escaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            cur.push('\\');
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            out.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldSelector {
    /// Parses `s` and checks every field is a label `res` supports.
    pub fn parse(s: &str, res: &ResourceDef) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut reqs = Vec::new();
        for part in split_escaped(s, ',') {
            let part = part.trim();
            let (field, value, equal) = if let Some(i) = part.find("!=") {
                (&part[..i], &part[i + 2..], false)
            } else if let Some(i) = part.find("==") {
                (&part[..i], &part[i + 2..], true)
            } else if let Some(i) = part.find('=') {
                (&part[..i], &part[i + 1..], true)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            let supported = field == "metadata.name"
                || field == "metadata.namespace"
                || res.field_labels.contains(&field);
            if !supported {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push(FieldReq {
                field: field.to_string(),
                value: unescape(value.trim()),
                equal,
            });
        }
        Ok(FieldSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let actual = if r.field == "source" {
                meta::field_string(obj, "source.component")
            } else {
                meta::field_string(obj, &r.field)
            };
            (actual == r.value) == r.equal
        })
    }

    /// The value this selector pins `field` to with `=`, if any.
    pub fn pinned(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.equal && r.field == field)
            .map(|r| r.value.as_str())
    }
}

/// Both selectors of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    pub fn is_empty(&self) -> bool {
        self.labels.0.is_empty() && self.fields.0.is_empty()
    }
}
