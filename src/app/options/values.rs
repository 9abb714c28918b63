//! Flag value types with pflag's semantics: how each kind of flag parses
//! one occurrence, whether a repeated flag replaces or accumulates, and how
//! its current value prints (help defaults, `FLAG:` log lines).
//!
//! `first` tells a setter whether this is the flag's first occurrence in
//! the current parse: list and map flags replace the old value on their first
//! occurrence and accumulate afterwards, as pflag's do.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Taint;

use crate::apis::config::duration::Duration;
use crate::apis::config::types::MemoryReservation;
use crate::logs::config::{VModuleItem, parse_vmodule};
use crate::util::quantity::{self, Quantity};

use super::labels::{self, LabelError};
use crate::apis::config::duration::DurationError;
use crate::logs::config::VModuleError;
use crate::util::quantity::QuantityError;

/// Why a flag value was refused; the texts are those of the Go parsers
/// behind each flag kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("strconv.{func}: parsing {input:?}: invalid syntax")]
    Syntax { func: &'static str, input: String },
    #[error("strconv.{func}: parsing {input:?}: value out of range")]
    Range { func: &'static str, input: String },
    #[error("parse error on line 1, column {column}: {problem}")]
    Csv {
        column: usize,
        problem: &'static str,
    },
    #[error("{0:?} is not a valid IP address")]
    Ip(String),
    #[error(transparent)]
    Duration(#[from] DurationError),
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    #[error(transparent)]
    VModule(#[from] VModuleError),
    #[error("malformed pair, expect {expect}")]
    MalformedPair { expect: &'static str },
    #[error("invalid value of {key}: {value}, err: {source}")]
    PairValue {
        key: String,
        value: String,
        source: Box<ValueError>,
    },
    #[error("invalid taint spec: {spec}")]
    TaintSpec { spec: String },
    #[error("invalid taint spec: {spec}, {source}")]
    TaintName { spec: String, source: LabelError },
    #[error("invalid taint effect: {effect}, unsupported taint effect")]
    TaintEffect { effect: String },
    #[error("duplicated taints with the same key and effect: {key}:{effect}")]
    DuplicateTaint { key: String, effect: String },
    #[error(
        "the reserved memory has an incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got {0}"
    )]
    ReservationFormat(String),
    #[error("the NUMA node ID must be an integer, got {0}")]
    NumaNode(String),
    #[error("the reserved limit has an incorrect value, expected type=quantity, got {0}")]
    ReservedLimit(String),
    #[error("memory type conversion error, unknown type: {0:?}")]
    MemoryType(String),
    #[error("failed to parse the quantity, expected a quantity, got {0}")]
    ReservedQuantity(String),
    #[error("unknown severity level {0:?}")]
    Severity(String),
    #[error("syntax error: expect file:line")]
    TraceLocation,
}

/// One kind of flag value.
pub trait FlagValue {
    /// What the value lives in.
    type Target;
    /// The type as help shows it after the flag name.
    const TYPE: &'static str;
    /// The value a bare `--flag` means; `None` when the flag needs a value.
    const NO_OPT: Option<&'static str> = None;
    fn set(target: &mut Self::Target, value: &str, first: bool) -> Result<(), ValueError>;
    fn get(target: &Self::Target) -> String;
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Result<bool, ValueError> {
    crate::util::strconv::parse_go_bool(s).map_err(|e| ValueError::Syntax {
        func: "ParseBool",
        input: e.input,
    })
}

/// Go's rule for `_` in integer literals: only between digits (or after a
/// base prefix).
fn underscores_ok(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let b = s.as_bytes();
    let mut i = 0;
    let mut saw = b'^';
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.to_ascii_lowercase().is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// Splits sign, radix and digits the way base-0 `strconv.ParseInt` does.
fn split_radix(s: &str) -> (bool, u32, String) {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower)
    };
    (neg, radix, digits.replace('_', ""))
}

/// Go's `strconv.ParseInt(s, 0, bits)`, with its error text.
pub fn parse_go_int(s: &str, bits: u32) -> Result<i64, ValueError> {
    let syntax = || ValueError::Syntax {
        func: "ParseInt",
        input: s.to_string(),
    };
    let range = || ValueError::Range {
        func: "ParseInt",
        input: s.to_string(),
    };
    if s.is_empty() || !underscores_ok(s) {
        return Err(syntax());
    }
    let (neg, radix, digits) = split_radix(s);
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return Err(syntax());
    }
    let magnitude = u128::from_str_radix(&digits, radix).map_err(|e| {
        if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) {
            range()
        } else {
            syntax()
        }
    })?;
    let limit = 1u128 << (bits - 1);
    if neg {
        if magnitude > limit {
            return Err(range());
        }
        Ok((magnitude as i128).wrapping_neg() as i64)
    } else {
        if magnitude >= limit {
            return Err(range());
        }
        Ok(magnitude as i64)
    }
}

/// Go's `strconv.ParseUint(s, 0, 64)`.
pub fn parse_go_uint(s: &str) -> Result<u64, ValueError> {
    let syntax = || ValueError::Syntax {
        func: "ParseUint",
        input: s.to_string(),
    };
    if s.is_empty() || s.starts_with(['+', '-']) || !underscores_ok(s) {
        return Err(syntax());
    }
    let (_, radix, digits) = split_radix(s);
    u64::from_str_radix(&digits, radix).map_err(|e| {
        if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) {
            ValueError::Range {
                func: "ParseUint",
                input: s.to_string(),
            }
        } else {
            syntax()
        }
    })
}

const QUOTE_PROBLEM: &str = "extraneous or missing \" in quoted-field";

/// One line of CSV, as pflag reads list flags (`a,"b,c"` → `a`, `b,c`).
pub fn read_csv(s: &str) -> Result<Vec<String>, ValueError> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    let mut column = 0usize;
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            column += 1;
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => {
                        return Err(ValueError::Csv {
                            column: s.len() + 1,
                            problem: QUOTE_PROBLEM,
                        });
                    }
                }
                column += 1;
            }
            match chars.next() {
                None => {
                    out.push(field);
                    return Ok(out);
                }
                Some(',') => {}
                Some(_) => {
                    return Err(ValueError::Csv {
                        column,
                        problem: QUOTE_PROBLEM,
                    });
                }
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field);
                        return Ok(out);
                    }
                    Some(',') => break,
                    Some('"') => {
                        return Err(ValueError::Csv {
                            column: column + 1,
                            problem: "bare \" in non-quoted-field",
                        });
                    }
                    Some(c) => field.push(c),
                }
                column += 1;
            }
        }
        column += 1;
        out.push(field);
    }
}

fn write_csv(items: &[String]) -> String {
    items
        .iter()
        .map(|s| {
            if s.contains([',', '"', '\n']) || s.starts_with(' ') {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Go's `net.ParseIP`, lenient about leading zeros in IPv4 as Kubernetes'
/// sloppy parser is.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|c| c.is_ascii_digit()))
    {
        let octets: Option<Vec<u8>> = parts.iter().map(|p| p.parse::<u8>().ok()).collect();
        if let Some(o) = octets {
            return Some(IpAddr::from([o[0], o[1], o[2], o[3]]));
        }
    }
    None
}

/// Generates the marker types below.
macro_rules! marker {
    ($($name:ident),* $(,)?) => { $( #[derive(Debug)] pub struct $name; )* };
}

marker!(
    Bool,
    Int32,
    Int,
    Uint,
    Str,
    Ip,
    Dur,
    Strings,
    MapSS,
    MapSSNoSplit,
    LangleMap,
    MapSB,
    ColonMultimap,
    ConfigMap,
    Taints,
    ReservedMemory,
    QuantityValue,
    Level,
    VModule,
    Version,
    Severity,
    TraceLocation,
);

impl FlagValue for Bool {
    type Target = bool;
    const TYPE: &'static str = "bool";
    const NO_OPT: Option<&'static str> = Some("true");
    fn set(t: &mut bool, v: &str, _: bool) -> Result<(), ValueError> {
        *t = parse_go_bool(v)?;
        Ok(())
    }
    fn get(t: &bool) -> String {
        t.to_string()
    }
}

impl FlagValue for Int32 {
    type Target = i32;
    const TYPE: &'static str = "int32";
    fn set(t: &mut i32, v: &str, _: bool) -> Result<(), ValueError> {
        *t = parse_go_int(v, 32)? as i32;
        Ok(())
    }
    fn get(t: &i32) -> String {
        t.to_string()
    }
}

impl FlagValue for Int {
    type Target = i64;
    const TYPE: &'static str = "int";
    fn set(t: &mut i64, v: &str, _: bool) -> Result<(), ValueError> {
        *t = parse_go_int(v, 64)?;
        Ok(())
    }
    fn get(t: &i64) -> String {
        t.to_string()
    }
}

impl FlagValue for Uint {
    type Target = u64;
    const TYPE: &'static str = "uint";
    fn set(t: &mut u64, v: &str, _: bool) -> Result<(), ValueError> {
        *t = parse_go_uint(v)?;
        Ok(())
    }
    fn get(t: &u64) -> String {
        t.to_string()
    }
}

impl FlagValue for Str {
    type Target = String;
    const TYPE: &'static str = "string";
    fn set(t: &mut String, v: &str, _: bool) -> Result<(), ValueError> {
        *t = v.to_string();
        Ok(())
    }
    fn get(t: &String) -> String {
        t.clone()
    }
}

impl FlagValue for Ip {
    type Target = String;
    const TYPE: &'static str = "ip";
    fn set(t: &mut String, v: &str, _: bool) -> Result<(), ValueError> {
        if v.is_empty() {
            t.clear();
            return Ok(());
        }
        if parse_ip_sloppy(v).is_none() {
            return Err(ValueError::Ip(v.to_string()));
        }
        *t = v.to_string();
        Ok(())
    }
    fn get(t: &String) -> String {
        t.clone()
    }
}

impl FlagValue for Dur {
    type Target = Duration;
    const TYPE: &'static str = "duration";
    fn set(t: &mut Duration, v: &str, _: bool) -> Result<(), ValueError> {
        *t = Duration::parse(v)?;
        Ok(())
    }
    fn get(t: &Duration) -> String {
        t.to_string()
    }
}

impl FlagValue for Strings {
    type Target = Vec<String>;
    const TYPE: &'static str = "strings";
    fn set(t: &mut Vec<String>, v: &str, first: bool) -> Result<(), ValueError> {
        let items = read_csv(v)?;
        if first {
            *t = items;
        } else {
            t.extend(items);
        }
        Ok(())
    }
    fn get(t: &Vec<String>) -> String {
        format!("[{}]", write_csv(t))
    }
}

fn set_pairs(
    t: &mut BTreeMap<String, String>,
    v: &str,
    first: bool,
    sep: char,
    split: bool,
) -> Result<(), ValueError> {
    if first {
        t.clear();
    }
    let items: Vec<&str> = if split {
        v.split(',').collect()
    } else {
        vec![v]
    };
    for item in items {
        if split && item.is_empty() {
            continue;
        }
        let (k, val) = item.split_once(sep).ok_or(ValueError::MalformedPair {
            expect: if sep == '<' {
                "string<string"
            } else {
                "string=string"
            },
        })?;
        t.insert(k.trim().to_string(), val.trim().to_string());
    }
    Ok(())
}

fn join_pairs(t: &BTreeMap<String, String>, sep: char) -> String {
    t.iter()
        .map(|(k, v)| format!("{k}{sep}{v}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl FlagValue for MapSS {
    type Target = BTreeMap<String, String>;
    const TYPE: &'static str = "mapStringString";
    fn set(t: &mut Self::Target, v: &str, first: bool) -> Result<(), ValueError> {
        set_pairs(t, v, first, '=', true)
    }
    fn get(t: &Self::Target) -> String {
        join_pairs(t, '=')
    }
}

impl FlagValue for MapSSNoSplit {
    type Target = BTreeMap<String, String>;
    const TYPE: &'static str = "mapStringString";
    fn set(t: &mut Self::Target, v: &str, first: bool) -> Result<(), ValueError> {
        set_pairs(t, v, first, '=', false)
    }
    fn get(t: &Self::Target) -> String {
        join_pairs(t, '=')
    }
}

impl FlagValue for LangleMap {
    type Target = BTreeMap<String, String>;
    const TYPE: &'static str = "mapStringString";
    fn set(t: &mut Self::Target, v: &str, first: bool) -> Result<(), ValueError> {
        set_pairs(t, v, first, '<', true)
    }
    fn get(t: &Self::Target) -> String {
        join_pairs(t, '<')
    }
}

impl FlagValue for MapSB {
    type Target = BTreeMap<String, bool>;
    const TYPE: &'static str = "mapStringBool";
    fn set(t: &mut Self::Target, v: &str, first: bool) -> Result<(), ValueError> {
        if first {
            t.clear();
        }
        for item in v.split(',').filter(|s| !s.is_empty()) {
            let (k, val) = item.split_once('=').ok_or(ValueError::MalformedPair {
                expect: "string=bool",
            })?;
            let (k, val) = (k.trim(), val.trim());
            let b = parse_go_bool(val).map_err(|e| ValueError::PairValue {
                key: k.to_string(),
                value: val.to_string(),
                source: Box::new(e),
            })?;
            t.insert(k.to_string(), b);
        }
        Ok(())
    }
    fn get(t: &Self::Target) -> String {
        t.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl FlagValue for ColonMultimap {
    type Target = BTreeMap<String, Vec<String>>;
    const TYPE: &'static str = "colonSeparatedMultimapStringString";
    fn set(t: &mut Self::Target, v: &str, first: bool) -> Result<(), ValueError> {
        if first {
            t.clear();
        }
        for pair in v.split(',').filter(|s| !s.is_empty()) {
            let (k, val) = pair.split_once(':').ok_or(ValueError::MalformedPair {
                expect: "string:string",
            })?;
            t.entry(k.trim().to_string())
                .or_default()
                .push(val.trim().to_string());
        }
        Ok(())
    }
    fn get(t: &Self::Target) -> String {
        t.iter()
            .flat_map(|(k, vs)| vs.iter().map(move |v| format!("{k}:{v}")))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl FlagValue for ConfigMap {
    type Target = BTreeMap<String, String>;
    const TYPE: &'static str = "mapStringString";
    /// `--node-labels`: pairs accumulate across occurrences; a key without
    /// `=` gets an empty value.
    fn set(t: &mut Self::Target, v: &str, _: bool) -> Result<(), ValueError> {
        for item in v.split(',').filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some((k, val)) => t.insert(k.trim().to_string(), val.trim().to_string()),
                None => t.insert(item.trim().to_string(), String::new()),
            };
        }
        Ok(())
    }
    fn get(t: &Self::Target) -> String {
        join_pairs(t, '=')
    }
}

/// Parses `key[=value]:Effect` taint specs (the `--register-with-taints` form).
pub fn parse_taints(specs: &[&str]) -> Result<Vec<Taint>, ValueError> {
    let mut taints: Vec<Taint> = Vec::new();
    for spec in specs {
        if spec.ends_with('-') {
            // A removal spec; meaningless at registration and skipped, but it
            // must still be well formed.
            parse_taint(spec.trim_end_matches('-'))?;
            continue;
        }
        let taint = parse_taint(spec)?;
        if taint.effect.is_empty() {
            return Err(ValueError::TaintSpec {
                spec: spec.to_string(),
            });
        }
        if taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect)
        {
            return Err(ValueError::DuplicateTaint {
                key: taint.key,
                effect: taint.effect,
            });
        }
        taints.push(taint);
    }
    Ok(taints)
}

fn parse_taint(spec: &str) -> Result<Taint, ValueError> {
    let taint_spec = || ValueError::TaintSpec {
        spec: spec.to_string(),
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key] => (key.to_string(), None, String::new()),
        [kv, effect] => {
            if !matches!(*effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(ValueError::TaintEffect {
                    effect: effect.to_string(),
                });
            }
            let kv_parts: Vec<&str> = kv.split('=').collect();
            match kv_parts.as_slice() {
                [k] => (k.to_string(), None, effect.to_string()),
                [k, v] => {
                    if let Err(source) = labels::is_valid_label_value(v) {
                        return Err(ValueError::TaintName {
                            spec: spec.to_string(),
                            source,
                        });
                    }
                    (k.to_string(), Some(v.to_string()), effect.to_string())
                }
                _ => return Err(taint_spec()),
            }
        }
        _ => return Err(taint_spec()),
    };
    if let Err(source) = labels::is_qualified_name(&key) {
        return Err(ValueError::TaintName {
            spec: spec.to_string(),
            source,
        });
    }
    Ok(Taint {
        key,
        value: value.filter(|v| !v.is_empty()),
        effect,
        time_added: None,
    })
}

impl FlagValue for Taints {
    type Target = Vec<Taint>;
    const TYPE: &'static str = "[]v1.Taint";
    fn set(t: &mut Self::Target, v: &str, _: bool) -> Result<(), ValueError> {
        if v.trim().is_empty() {
            t.clear();
            return Ok(());
        }
        let specs: Vec<&str> = v.split(',').collect();
        *t = parse_taints(&specs)?;
        Ok(())
    }
    fn get(t: &Self::Target) -> String {
        t.iter()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.as_deref().unwrap_or(""),
                    t.effect
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl FlagValue for ReservedMemory {
    type Target = Vec<MemoryReservation>;
    const TYPE: &'static str = "[]MemoryReservation";
    /// `--reserved-memory 0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=2Gi`;
    /// occurrences accumulate.
    fn set(t: &mut Self::Target, v: &str, first: bool) -> Result<(), ValueError> {
        if first {
            t.clear();
        }
        if v.is_empty() {
            return Ok(());
        }
        for reservation in v.split(';') {
            let (node, limits) = reservation
                .split_once(':')
                .ok_or_else(|| ValueError::ReservationFormat(reservation.to_string()))?;
            let numa_node: i32 = node
                .parse()
                .map_err(|_| ValueError::NumaNode(node.to_string()))?;
            let mut parsed = BTreeMap::new();
            for limit in limits.split(',') {
                let (name, q) = limit
                    .split_once('=')
                    .ok_or_else(|| ValueError::ReservedLimit(limit.to_string()))?;
                if name != "memory" && !name.starts_with("hugepages-") {
                    return Err(ValueError::MemoryType(name.to_string()));
                }
                let q: Quantity =
                    quantity::parse(q).map_err(|_| ValueError::ReservedQuantity(q.to_string()))?;
                parsed.insert(name.to_string(), q);
            }
            t.push(MemoryReservation {
                numa_node,
                limits: parsed,
            });
        }
        Ok(())
    }
    fn get(t: &Self::Target) -> String {
        t.iter()
            .map(|r| {
                let limits: Vec<String> =
                    r.limits.iter().map(|(k, q)| format!("{k}={q}")).collect();
                format!("{}:{}", r.numa_node, limits.join(","))
            })
            .collect::<Vec<_>>()
            .join(";")
    }
}

impl FlagValue for QuantityValue {
    type Target = Quantity;
    const TYPE: &'static str = "quantity";
    fn set(t: &mut Quantity, v: &str, _: bool) -> Result<(), ValueError> {
        *t = quantity::parse(v)?;
        Ok(())
    }
    fn get(t: &Quantity) -> String {
        t.to_canonical_string()
    }
}

impl FlagValue for Level {
    type Target = u32;
    const TYPE: &'static str = "Level";
    /// A decimal level that fits in 31 bits.
    fn set(t: &mut u32, v: &str, _: bool) -> Result<(), ValueError> {
        if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
            return Err(ValueError::Syntax {
                func: "ParseUint",
                input: v.to_string(),
            });
        }
        *t = v
            .parse::<u32>()
            .ok()
            .filter(|l| *l <= i32::MAX as u32)
            .ok_or_else(|| ValueError::Range {
                func: "ParseUint",
                input: v.to_string(),
            })?;
        Ok(())
    }
    fn get(t: &u32) -> String {
        t.to_string()
    }
}

impl FlagValue for VModule {
    type Target = Vec<VModuleItem>;
    const TYPE: &'static str = "pattern=N,...";
    /// Patterns append to what is there, even over the file's list.
    fn set(t: &mut Self::Target, v: &str, _: bool) -> Result<(), ValueError> {
        t.extend(parse_vmodule(v)?);
        Ok(())
    }
    fn get(t: &Self::Target) -> String {
        t.iter()
            .map(|i| format!("{}={}", i.file_pattern, i.verbosity))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `--version`, `--version=raw`, `--version=false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VersionRequest {
    #[default]
    No,
    Yes,
    Raw,
}

impl FlagValue for Version {
    type Target = VersionRequest;
    const TYPE: &'static str = "version";
    const NO_OPT: Option<&'static str> = Some("true");
    fn set(t: &mut VersionRequest, v: &str, _: bool) -> Result<(), ValueError> {
        *t = if v == "raw" {
            VersionRequest::Raw
        } else if parse_go_bool(v)? {
            VersionRequest::Yes
        } else {
            VersionRequest::No
        };
        Ok(())
    }
    fn get(t: &VersionRequest) -> String {
        match t {
            VersionRequest::No => "false",
            VersionRequest::Yes => "true",
            VersionRequest::Raw => "raw",
        }
        .to_string()
    }
}

impl FlagValue for Severity {
    type Target = String;
    const TYPE: &'static str = "severity";
    /// klog's threshold: a name (`INFO`, `WARNING`, `ERROR`, `FATAL`) or 0–3.
    fn set(t: &mut String, v: &str, _: bool) -> Result<(), ValueError> {
        let level = match v.to_ascii_uppercase().as_str() {
            "INFO" | "0" => "0",
            "WARNING" | "1" => "1",
            "ERROR" | "2" => "2",
            "FATAL" | "3" => "3",
            _ => return Err(ValueError::Severity(v.to_string())),
        };
        *t = level.to_string();
        Ok(())
    }
    fn get(t: &String) -> String {
        t.clone()
    }
}

impl FlagValue for TraceLocation {
    type Target = String;
    const TYPE: &'static str = "traceLocation";
    /// klog's `file.go:line` backtrace point; empty clears it.
    fn set(t: &mut String, v: &str, _: bool) -> Result<(), ValueError> {
        if v.is_empty() || v == ":0" {
            *t = ":0".to_string();
            return Ok(());
        }
        let ok = v
            .rsplit_once(':')
            .is_some_and(|(file, line)| !file.is_empty() && line.parse::<u32>().is_ok());
        if !ok {
            return Err(ValueError::TraceLocation);
        }
        *t = v.to_string();
        Ok(())
    }
    fn get(t: &String) -> String {
        t.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_ints() {
        let ok: &[(&str, u32, i64)] = &[
            ("10", 32, 10),
            ("-5", 32, -5),
            ("+7", 32, 7),
            ("0x10", 32, 16),
            ("010", 32, 8),
            ("0o17", 32, 15),
            ("0b11", 32, 3),
            ("1_000", 32, 1000),
            ("2147483647", 32, i32::MAX as i64),
            ("-2147483648", 32, i32::MIN as i64),
            ("9223372036854775807", 64, i64::MAX),
        ];
        for (s, bits, want) in ok {
            assert_eq!(parse_go_int(s, *bits), Ok(*want), "{s}");
        }
        let bad: &[(&str, &str)] = &[
            ("", "invalid syntax"),
            ("abc", "invalid syntax"),
            ("1.5", "invalid syntax"),
            ("_1", "invalid syntax"),
            ("1__0", "invalid syntax"),
            ("08", "invalid syntax"),
            ("2147483648", "value out of range"),
            ("-2147483649", "value out of range"),
        ];
        for (s, want) in bad {
            let err = parse_go_int(s, 32).unwrap_err().to_string();
            assert!(err.ends_with(want), "{s}: {err}");
            assert!(err.starts_with("strconv.ParseInt: parsing"), "{err}");
        }
        assert_eq!(parse_go_uint("1800"), Ok(1800));
        assert!(parse_go_uint("-1").is_err());
    }

    #[test]
    fn go_bools() {
        for s in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(parse_go_bool(s), Ok(true));
        }
        for s in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(parse_go_bool(s), Ok(false));
        }
        for s in ["yes", "on", "", "tRuE"] {
            assert!(parse_go_bool(s).is_err(), "{s}");
        }
    }

    #[test]
    fn csv_lists() {
        assert_eq!(read_csv("").unwrap(), Vec::<String>::new());
        assert_eq!(read_csv("a,b").unwrap(), vec!["a", "b"]);
        assert_eq!(read_csv("a,\"b,c\",d").unwrap(), vec!["a", "b,c", "d"]);
        assert_eq!(read_csv("a,").unwrap(), vec!["a", ""]);
        assert!(read_csv("a\"b").is_err());
        let mut v = vec!["old".to_string()];
        Strings::set(&mut v, "a,b", true).unwrap();
        Strings::set(&mut v, "c", false).unwrap();
        assert_eq!(Strings::get(&v), "[a,b,c]");
    }

    #[test]
    fn maps_replace_then_accumulate() {
        let mut m: BTreeMap<String, String> = [("old".into(), "1".into())].into();
        LangleMap::set(&mut m, "memory.available<100Mi, nodefs.available<10%", true).unwrap();
        LangleMap::set(&mut m, "imagefs.available<15%", false).unwrap();
        assert_eq!(
            LangleMap::get(&m),
            "imagefs.available<15%,memory.available<100Mi,nodefs.available<10%"
        );
        assert_eq!(
            MapSS::set(&mut m, "novalue", true).unwrap_err().to_string(),
            "malformed pair, expect string=string"
        );
        let mut nosplit = BTreeMap::new();
        MapSSNoSplit::set(&mut nosplit, "full-pcpus-only=true,x", true).unwrap();
        assert_eq!(
            nosplit.get("full-pcpus-only").map(String::as_str),
            Some("true,x")
        );
        let mut gates = BTreeMap::new();
        MapSB::set(&mut gates, "A=true,B=false", true).unwrap();
        MapSB::set(&mut gates, "C=1", false).unwrap();
        assert_eq!(MapSB::get(&gates), "A=true,B=false,C=true");
        assert!(
            MapSB::set(&mut gates, "A=yes", false)
                .unwrap_err()
                .to_string()
                .contains("invalid value of A")
        );
        let mut headers = BTreeMap::new();
        ColonMultimap::set(&mut headers, "a:hello,b:again,c:world", true).unwrap();
        ColonMultimap::set(&mut headers, "b:beautiful", false).unwrap();
        assert_eq!(
            headers.get("b").unwrap(),
            &vec!["again".to_string(), "beautiful".to_string()]
        );
        let mut labels = BTreeMap::new();
        ConfigMap::set(&mut labels, "a=b,c", true).unwrap();
        ConfigMap::set(&mut labels, "d=e", true).unwrap();
        assert_eq!(ConfigMap::get(&labels), "a=b,c=,d=e");
    }

    #[test]
    fn taints() {
        let mut t = Vec::new();
        Taints::set(&mut t, "k=v:NoSchedule,dedicated:NoExecute", true).unwrap();
        assert_eq!(Taints::get(&t), "k=v:NoSchedule,dedicated=:NoExecute");
        let bad = [
            ("k=v", "invalid taint spec"),
            ("k=v:Sometimes", "invalid taint effect"),
            ("k=v:NoSchedule,k=w:NoSchedule", "duplicated taints"),
            ("bad key:NoSchedule", "invalid taint spec"),
            ("a=b=c:NoSchedule", "invalid taint spec"),
        ];
        for (spec, want) in bad {
            let err = Taints::set(&mut t, spec, true).unwrap_err().to_string();
            assert!(err.contains(want), "{spec}: {err}");
        }
    }

    #[test]
    fn reserved_memory() {
        let mut r = Vec::new();
        ReservedMemory::set(&mut r, "0:memory=1Gi,hugepages-1Gi=2Gi", true).unwrap();
        ReservedMemory::set(&mut r, "1:memory=2Gi", false).unwrap();
        assert_eq!(
            ReservedMemory::get(&r),
            "0:hugepages-1Gi=2Gi,memory=1Gi;1:memory=2Gi"
        );
        assert!(ReservedMemory::set(&mut r, "0:cpu=1", true).is_err());
        assert!(ReservedMemory::set(&mut r, "x:memory=1Gi", true).is_err());
    }

    #[test]
    fn ips_and_versions() {
        let mut ip = String::new();
        Ip::set(&mut ip, "010.0.0.1", true).unwrap();
        Ip::set(&mut ip, "::1", true).unwrap();
        assert!(Ip::set(&mut ip, "localhost", true).is_err());
        let mut v = VersionRequest::No;
        Version::set(&mut v, "raw", true).unwrap();
        assert_eq!(v, VersionRequest::Raw);
        Version::set(&mut v, "false", true).unwrap();
        assert_eq!(v, VersionRequest::No);
        assert!(Version::set(&mut v, "maybe", true).is_err());
    }
}
