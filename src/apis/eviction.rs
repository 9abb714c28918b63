//! Eviction thresholds from `evictionHard`, `evictionSoft`,
//! `evictionSoftGracePeriod` and `evictionMinimumReclaim`, parsed as the Go
//! kubelet parses them: quantities or percentages per signal, 0% and 100%
//! ignored, soft thresholds requiring a grace period.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::util::quantity::{Quantity, parse as parse_quantity};

/// The enforcement key that adds allocatable thresholds (`pods`).
pub const NODE_ALLOCATABLE_ENFORCEMENT_KEY: &str = "pods";

/// A resource the kubelet watches for eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    MemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    AllocatableMemoryAvailable,
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 7] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::AllocatableMemoryAvailable,
        Signal::PidAvailable,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::PidAvailable => "pid.available",
        }
    }

    /// The node condition reported while the signal is past its threshold.
    pub fn node_condition(&self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "MemoryPressure",
            Signal::PidAvailable => "PIDPressure",
            _ => "DiskPressure",
        }
    }

    /// The resource the signal measures.
    pub fn resource(&self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Signal {
    type Err = ThresholdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Signal::ALL
            .into_iter()
            .find(|sig| sig.as_str() == s)
            .ok_or_else(|| ThresholdError::UnsupportedSignal(s.to_string()))
    }
}

/// How an observation is compared with a threshold (every signal uses `<`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdOperator {
    LessThan,
}

/// A threshold value: an absolute quantity or a fraction of capacity
/// (kept as the float32 Go keeps, so rounding matches).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Quantity(Quantity),
    Percentage(f32),
}

/// One eviction threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub operator: ThresholdOperator,
    pub value: ThresholdValue,
    /// Zero for hard thresholds.
    pub grace_period: Duration,
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// Hard thresholds act immediately (no grace period).
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }
}

/// Bad eviction configuration, naming the signal and value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    #[error("unsupported eviction signal {0}")]
    UnsupportedSignal(String),
    #[error("eviction percentage threshold {signal} must be >= 0%: {value}")]
    PercentageBelowZero { signal: Signal, value: String },
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    PercentageAbove100 { signal: Signal, value: String },
    #[error("eviction threshold {signal} must be positive: {value}")]
    NotPositive { signal: Signal, value: String },
    #[error("eviction percentage minimum reclaim {signal} must be positive: {value}")]
    ReclaimPercentageNotPositive { signal: Signal, value: String },
    #[error("negative reclaim specified for signal {0}")]
    NegativeReclaim(Signal),
    #[error("grace period must be specified for the soft eviction threshold {0}")]
    MissingGracePeriod(Signal),
    #[error("invalid eviction grace period specified: {0}, must be a positive value")]
    NegativeGracePeriod(String),
    #[error("{signal}: {value:?} is not a valid percentage")]
    BadPercentage { signal: Signal, value: String },
    #[error("{signal}: {detail}")]
    BadQuantity { signal: Signal, detail: String },
    #[error("{signal}: time: invalid duration {value:?}")]
    BadDuration { signal: Signal, value: String },
}

/// Parses the eviction settings into thresholds: hard ones first, then soft
/// ones with their grace periods, minimum reclaims attached, and — when node
/// allocatable is enforced on pods — an `allocatableMemory.available` copy of
/// every hard `memory.available` threshold.
pub fn parse_threshold_config(
    enforce_node_allocatable: &[String],
    eviction_hard: &BTreeMap<String, String>,
    eviction_soft: &BTreeMap<String, String>,
    eviction_soft_grace_period: &BTreeMap<String, String>,
    eviction_minimum_reclaim: &BTreeMap<String, String>,
) -> Result<Vec<Threshold>, ThresholdError> {
    let mut results = parse_statements(eviction_hard)?;
    let mut soft = parse_statements(eviction_soft)?;
    let grace = parse_grace_periods(eviction_soft_grace_period)?;
    let reclaims = parse_minimum_reclaims(eviction_minimum_reclaim)?;
    for t in &mut soft {
        t.grace_period = *grace
            .get(&t.signal)
            .ok_or(ThresholdError::MissingGracePeriod(t.signal))?;
    }
    results.extend(soft);
    for t in &mut results {
        if let Some(r) = reclaims.get(&t.signal) {
            t.min_reclaim = Some(*r);
        }
    }
    if enforce_node_allocatable
        .iter()
        .any(|k| k == NODE_ALLOCATABLE_ENFORCEMENT_KEY)
    {
        let extra: Vec<Threshold> = results
            .iter()
            .filter(|t| t.signal == Signal::MemoryAvailable && t.is_hard())
            .map(|t| Threshold {
                signal: Signal::AllocatableMemoryAvailable,
                operator: t.operator,
                value: t.value,
                grace_period: Duration::ZERO,
                min_reclaim: t.min_reclaim,
            })
            .collect();
        results.extend(extra);
    }
    Ok(results)
}

fn parse_statements(
    statements: &BTreeMap<String, String>,
) -> Result<Vec<Threshold>, ThresholdError> {
    let mut out = Vec::new();
    for (signal, value) in statements {
        if let Some(t) = parse_threshold_statement(signal.parse()?, value)? {
            out.push(t);
        }
    }
    Ok(out)
}

/// One `signal: value` statement; `None` for the ignored 0% and 100%.
pub fn parse_threshold_statement(
    signal: Signal,
    value: &str,
) -> Result<Option<Threshold>, ThresholdError> {
    let operator = ThresholdOperator::LessThan;
    if value.ends_with('%') {
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        let pct = parse_percentage(signal, value)?;
        if pct < 0.0 {
            return Err(ThresholdError::PercentageBelowZero {
                signal,
                value: value.to_string(),
            });
        }
        if pct > 1.0 {
            return Err(ThresholdError::PercentageAbove100 {
                signal,
                value: value.to_string(),
            });
        }
        return Ok(Some(Threshold {
            signal,
            operator,
            value: ThresholdValue::Percentage(pct),
            grace_period: Duration::ZERO,
            min_reclaim: None,
        }));
    }
    let q = parse_quantity(value).map_err(|e| ThresholdError::BadQuantity {
        signal,
        detail: e.to_string(),
    })?;
    if !q.cmp_value(&Quantity::from_decimal(0)).is_gt() {
        return Err(ThresholdError::NotPositive {
            signal,
            value: q.to_string(),
        });
    }
    Ok(Some(Threshold {
        signal,
        operator,
        value: ThresholdValue::Quantity(q),
        grace_period: Duration::ZERO,
        min_reclaim: None,
    }))
}

/// `10%` → 0.1, computed in float32 as Go does.
fn parse_percentage(signal: Signal, value: &str) -> Result<f32, ThresholdError> {
    let number = value.trim_end_matches('%');
    let v: f32 = number.parse().map_err(|_| ThresholdError::BadPercentage {
        signal,
        value: value.to_string(),
    })?;
    Ok(v / 100.0)
}

fn parse_grace_periods(
    statements: &BTreeMap<String, String>,
) -> Result<BTreeMap<Signal, Duration>, ThresholdError> {
    let mut out = BTreeMap::new();
    for (signal, value) in statements {
        let signal: Signal = signal.parse()?;
        let nanos = parse_go_duration(value).ok_or_else(|| ThresholdError::BadDuration {
            signal,
            value: value.clone(),
        })?;
        if nanos < 0 {
            return Err(ThresholdError::NegativeGracePeriod(value.clone()));
        }
        out.insert(signal, Duration::from_nanos(nanos as u64));
    }
    Ok(out)
}

fn parse_minimum_reclaims(
    statements: &BTreeMap<String, String>,
) -> Result<BTreeMap<Signal, ThresholdValue>, ThresholdError> {
    let mut out = BTreeMap::new();
    for (signal, value) in statements {
        let signal: Signal = signal.parse()?;
        if value.ends_with('%') {
            let pct = parse_percentage(signal, value)?;
            if pct <= 0.0 {
                return Err(ThresholdError::ReclaimPercentageNotPositive {
                    signal,
                    value: value.clone(),
                });
            }
            out.insert(signal, ThresholdValue::Percentage(pct));
            continue;
        }
        let q = parse_quantity(value).map_err(|e| ThresholdError::BadQuantity {
            signal,
            detail: e.to_string(),
        })?;
        if q.cmp_value(&Quantity::from_decimal(0)).is_lt() {
            return Err(ThresholdError::NegativeReclaim(signal));
        }
        out.insert(signal, ThresholdValue::Quantity(q));
    }
    Ok(out)
}

/// The absolute amount a threshold value stands for against `capacity`:
/// the quantity itself, or `int64(float64(capacity) * float64(percentage))`
/// in binary format.
pub fn get_threshold_quantity(value: &ThresholdValue, capacity: &Quantity) -> Quantity {
    match value {
        ThresholdValue::Quantity(q) => *q,
        ThresholdValue::Percentage(p) => {
            Quantity::from_binary((capacity.value() as f64 * f64::from(*p)) as i64)
        }
    }
}

/// Go's `time.ParseDuration`, in nanoseconds (`1m30s`, `1.5h`, `300ms`, `0`).
pub fn parse_go_duration(text: &str) -> Option<i128> {
    let (neg, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    let mut exact: i128 = 0;
    let mut all_exact = true;
    while !s.is_empty() {
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let number = &s[..num_end];
        if number.is_empty() || number == "." {
            return None;
        }
        s = &s[num_end..];
        let unit_end = s
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(s.len());
        let unit: i128 = match &s[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        s = &s[unit_end..];
        match number.parse::<i128>() {
            Ok(n) if all_exact => exact = exact.checked_add(n.checked_mul(unit)?)?,
            _ => {
                let v: f64 = number.parse().ok()?;
                if all_exact {
                    total = exact as f64;
                    all_exact = false;
                }
                total += v * unit as f64;
            }
        }
    }
    let nanos = if all_exact { exact } else { total as i128 };
    Some(if neg { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn default_hard_thresholds() {
        let hard = map(&[
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%"),
            ("imagefs.available", "15%"),
        ]);
        let none = BTreeMap::new();
        let got = parse_threshold_config(&["pods".into()], &hard, &none, &none, &none).unwrap();
        let summary: Vec<(Signal, String)> = got
            .iter()
            .map(|t| {
                let v = match t.value {
                    ThresholdValue::Quantity(q) => q.to_string(),
                    ThresholdValue::Percentage(p) => format!("{p}"),
                };
                (t.signal, v)
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Signal::ImageFsAvailable, "0.15".to_string()),
                (Signal::MemoryAvailable, "100Mi".to_string()),
                (Signal::NodeFsAvailable, "0.1".to_string()),
                (Signal::NodeFsInodesFree, "0.05".to_string()),
                (Signal::AllocatableMemoryAvailable, "100Mi".to_string()),
            ]
        );
        assert!(got.iter().all(Threshold::is_hard));
        let without = parse_threshold_config(&[], &hard, &none, &none, &none).unwrap();
        assert_eq!(without.len(), 4);
    }

    #[test]
    fn statement_table() {
        type Case<'a> = (&'a str, &'a str, Result<Option<&'a str>, &'a str>);
        let cases: &[Case] = &[
            ("memory.available", "0%", Ok(None)),
            ("memory.available", "100%", Ok(None)),
            ("memory.available", "5.5%", Ok(Some("0.055"))),
            ("memory.available", "101%", Err("must be <= 100%")),
            ("memory.available", "-1%", Err("must be >= 0%")),
            ("memory.available", "x%", Err("not a valid percentage")),
            ("memory.available", "0", Err("must be positive: 0")),
            ("memory.available", "-1Gi", Err("must be positive")),
            ("memory.available", "1Gi", Ok(Some("1Gi"))),
            ("pid.available", "1k", Ok(Some("1k"))),
            ("memory.available", "abc", Err("quantities must match")),
        ];
        for (signal, value, want) in cases {
            let got = parse_threshold_statement(signal.parse().unwrap(), value);
            match (got, want) {
                (Ok(None), Ok(None)) => {}
                (Ok(Some(t)), Ok(Some(w))) => {
                    let v = match t.value {
                        ThresholdValue::Quantity(q) => q.to_string(),
                        ThresholdValue::Percentage(p) => format!("{p}"),
                    };
                    assert_eq!(&v, w, "{signal}={value}");
                }
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{signal}={value}: {e}"),
                (got, want) => panic!("{signal}={value}: got {got:?}, want {want:?}"),
            }
        }
        assert_eq!(
            "memory.free".parse::<Signal>().unwrap_err().to_string(),
            "unsupported eviction signal memory.free"
        );
    }

    #[test]
    fn soft_thresholds_need_grace_periods() {
        let none = BTreeMap::new();
        let soft = map(&[("memory.available", "1Gi")]);
        let err = parse_threshold_config(&[], &none, &soft, &none, &none).unwrap_err();
        assert_eq!(
            err,
            ThresholdError::MissingGracePeriod(Signal::MemoryAvailable)
        );
        let grace = map(&[("memory.available", "1m30s")]);
        let reclaim = map(&[("memory.available", "500Mi")]);
        let got = parse_threshold_config(&["pods".into()], &none, &soft, &grace, &reclaim).unwrap();
        assert_eq!(got.len(), 1, "soft thresholds get no allocatable copy");
        assert_eq!(got[0].grace_period, Duration::from_secs(90));
        assert_eq!(
            got[0].min_reclaim,
            Some(ThresholdValue::Quantity("500Mi".parse().unwrap()))
        );
        let negative = map(&[("memory.available", "-1s")]);
        assert!(matches!(
            parse_threshold_config(&[], &none, &soft, &negative, &none),
            Err(ThresholdError::NegativeGracePeriod(_))
        ));
        let bad_reclaim = map(&[("memory.available", "0%")]);
        assert!(parse_threshold_config(&[], &none, &none, &none, &bad_reclaim).is_err());
    }

    #[test]
    fn threshold_quantities_match_go_rounding() {
        // The reference node: 264212084Ki of disk, nodefs.available 10%.
        let capacity = Quantity::from_binary(264212084 * 1024);
        let t = parse_threshold_statement(Signal::NodeFsAvailable, "10%")
            .unwrap()
            .unwrap();
        let q = get_threshold_quantity(&t.value, &capacity);
        assert_eq!(capacity.value() - q.value(), 243497856212);
        let m = parse_threshold_statement(Signal::MemoryAvailable, "100Mi")
            .unwrap()
            .unwrap();
        assert_eq!(
            get_threshold_quantity(&m.value, &capacity).value(),
            104857600
        );
    }

    #[test]
    fn go_durations() {
        let cases: &[(&str, Option<i128>)] = &[
            ("0", Some(0)),
            ("1s", Some(1_000_000_000)),
            ("1m30s", Some(90_000_000_000)),
            ("1.5h", Some(5_400_000_000_000)),
            ("300ms", Some(300_000_000)),
            ("-2s", Some(-2_000_000_000)),
            ("2", None),
            ("", None),
            ("1d", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), *want, "{text:?}");
        }
    }
}
