//! Labelled metric families: counters and histograms keyed by label values.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::text::{escape_help, format_float, write_labels};

/// Stability level printed in front of the help text, as Kubernetes' metrics
/// framework does (`[ALPHA] ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stability {
    /// Subject to change without notice.
    Alpha,
    /// Covered by the metric stability guarantees.
    Stable,
}

impl Stability {
    fn prefix(self) -> &'static str {
        match self {
            Stability::Alpha => "[ALPHA] ",
            Stability::Stable => "[STABLE] ",
        }
    }
}

/// Name, help and label names of one family.
#[derive(Debug, Clone)]
pub struct Desc {
    /// Full metric name (subsystem included), e.g. `kubelet_runtime_operations_total`.
    pub name: String,
    /// Help text, without the stability prefix.
    pub help: String,
    /// Label names, in the order values are given.
    pub labels: Vec<String>,
    /// Stability level.
    pub stability: Stability,
}

impl Desc {
    /// A family description.
    pub fn new(name: &str, help: &str, labels: &[&str], stability: Stability) -> Self {
        Desc {
            name: name.to_string(),
            help: help.to_string(),
            labels: labels.iter().map(|l| (*l).to_string()).collect(),
            stability,
        }
    }

    pub(super) fn write_header(&self, out: &mut String, kind: &str) {
        let _ = writeln!(
            out,
            "# HELP {} {}",
            self.name,
            escape_help(&format!("{}{}", self.stability.prefix(), self.help))
        );
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
    }

    pub(super) fn pairs<'a>(&'a self, values: &'a [String]) -> Vec<(&'a str, &'a str)> {
        self.labels
            .iter()
            .map(String::as_str)
            .zip(values.iter().map(String::as_str))
            .collect()
    }

    /// Label values padded or cut to the family's label count, so a caller's
    /// mistake never panics and never produces a malformed line.
    pub(super) fn key(&self, values: &[&str]) -> Vec<String> {
        (0..self.labels.len())
            .map(|i| values.get(i).map(|v| (*v).to_string()).unwrap_or_default())
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Something the registry can render.
pub trait Collector: Send + Sync {
    /// The family name (the registry sorts by it).
    fn name(&self) -> &str;
    /// Appends the family in text format; nothing when it has no samples.
    fn encode(&self, out: &mut String);
}

/// A counter per label-value combination.
#[derive(Debug)]
pub struct CounterVec {
    desc: Desc,
    children: Mutex<BTreeMap<Vec<String>, f64>>,
}

impl CounterVec {
    /// An empty family.
    pub fn new(desc: Desc) -> Self {
        CounterVec {
            desc,
            children: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds one to the child with these label values.
    pub fn inc(&self, values: &[&str]) {
        self.add(values, 1.0);
    }

    /// Adds `delta` (ignored unless positive: counters never go down).
    pub fn add(&self, values: &[&str], delta: f64) {
        if delta.is_nan() || delta < 0.0 {
            return;
        }
        let key = self.desc.key(values);
        *lock(&self.children).entry(key).or_insert(0.0) += delta;
    }

    /// The current value of one child (0 when it was never touched).
    pub fn get(&self, values: &[&str]) -> f64 {
        let key = self.desc.key(values);
        lock(&self.children).get(&key).copied().unwrap_or(0.0)
    }

    /// Drops the child with these label values (the series disappears from
    /// the output); whether there was one.
    pub fn remove(&self, values: &[&str]) -> bool {
        let key = self.desc.key(values);
        lock(&self.children).remove(&key).is_some()
    }
}

impl Collector for CounterVec {
    fn name(&self) -> &str {
        &self.desc.name
    }

    fn encode(&self, out: &mut String) {
        let children = lock(&self.children);
        if children.is_empty() {
            return;
        }
        self.desc.write_header(out, "counter");
        for (values, value) in children.iter() {
            out.push_str(&self.desc.name);
            write_labels(out, &self.desc.pairs(values));
            let _ = writeln!(out, " {}", format_float(*value));
        }
    }
}

#[derive(Debug, Clone)]
struct HistogramData {
    /// Non-cumulative count per bucket (the +Inf bucket is `count`).
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Snapshot of one histogram child.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Cumulative counts, one per upper bound (without +Inf).
    pub cumulative: Vec<u64>,
    /// Sum of observed values.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

/// A histogram per label-value combination.
#[derive(Debug)]
pub struct HistogramVec {
    desc: Desc,
    buckets: Vec<f64>,
    children: Mutex<BTreeMap<Vec<String>, HistogramData>>,
}

impl HistogramVec {
    /// An empty family with these upper bounds (sorted, +Inf implied).
    pub fn new(desc: Desc, mut buckets: Vec<f64>) -> Self {
        buckets.retain(|b| b.is_finite());
        buckets.sort_by(f64::total_cmp);
        buckets.dedup();
        HistogramVec {
            desc,
            buckets,
            children: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records one observation for the child with these label values.
    pub fn observe(&self, values: &[&str], value: f64) {
        let key = self.desc.key(values);
        let mut children = lock(&self.children);
        let data = children.entry(key).or_insert_with(|| HistogramData {
            counts: vec![0; self.buckets.len()],
            sum: 0.0,
            count: 0,
        });
        if let Some(i) = self.buckets.iter().position(|b| value <= *b) {
            data.counts[i] += 1;
        }
        data.sum += value;
        data.count += 1;
    }

    /// Creates the child with these label values, empty, so it renders
    /// before its first observation (as an unlabeled Go histogram does).
    pub fn touch(&self, values: &[&str]) {
        let key = self.desc.key(values);
        lock(&self.children)
            .entry(key)
            .or_insert_with(|| HistogramData {
                counts: vec![0; self.buckets.len()],
                sum: 0.0,
                count: 0,
            });
    }

    /// Drops the child with these label values; whether there was one.
    pub fn remove(&self, values: &[&str]) -> bool {
        let key = self.desc.key(values);
        lock(&self.children).remove(&key).is_some()
    }

    /// The upper bounds.
    pub fn buckets(&self) -> &[f64] {
        &self.buckets
    }

    /// A snapshot of one child, if it has observations.
    pub fn snapshot(&self, values: &[&str]) -> Option<HistogramSnapshot> {
        let key = self.desc.key(values);
        let children = lock(&self.children);
        children.get(&key).map(|d| HistogramSnapshot {
            cumulative: d
                .counts
                .iter()
                .scan(0u64, |acc, c| {
                    *acc += c;
                    Some(*acc)
                })
                .collect(),
            sum: d.sum,
            count: d.count,
        })
    }
}

impl Collector for HistogramVec {
    fn name(&self) -> &str {
        &self.desc.name
    }

    fn encode(&self, out: &mut String) {
        let children = lock(&self.children);
        if children.is_empty() {
            return;
        }
        self.desc.write_header(out, "histogram");
        for (values, data) in children.iter() {
            let pairs = self.desc.pairs(values);
            let mut cumulative = 0u64;
            for (bound, count) in self.buckets.iter().zip(&data.counts) {
                cumulative += count;
                let le = format_float(*bound);
                let mut with_le = pairs.clone();
                with_le.push(("le", &le));
                let _ = write!(out, "{}_bucket", self.desc.name);
                write_labels(out, &with_le);
                let _ = writeln!(out, " {cumulative}");
            }
            let mut with_inf = pairs.clone();
            with_inf.push(("le", "+Inf"));
            let _ = write!(out, "{}_bucket", self.desc.name);
            write_labels(out, &with_inf);
            let _ = writeln!(out, " {}", data.count);
            let _ = write!(out, "{}_sum", self.desc.name);
            write_labels(out, &pairs);
            let _ = writeln!(out, " {}", format_float(data.sum));
            let _ = write!(out, "{}_count", self.desc.name);
            write_labels(out, &pairs);
            let _ = writeln!(out, " {}", data.count);
        }
    }
}

/// Bounds `start, start*factor, ...` (`count` of them), computed by repeated
/// multiplication so they equal the Go helper's values bit for bit.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(count);
    let mut next = start;
    for _ in 0..count {
        out.push(next);
        next *= factor;
    }
    out
}

/// The default bounds of the Prometheus clients.
pub fn default_buckets() -> Vec<f64> {
    vec![
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_renders_sorted_children() {
        let c = CounterVec::new(Desc::new(
            "test_ops_total",
            "Operations.",
            &["operation_type"],
            Stability::Alpha,
        ));
        let mut empty = String::new();
        c.encode(&mut empty);
        assert_eq!(empty, "", "a family without children renders nothing");
        c.inc(&["version"]);
        c.inc(&["status"]);
        c.inc(&["version"]);
        c.add(&["status"], -3.0);
        let mut out = String::new();
        c.encode(&mut out);
        assert_eq!(
            out,
            "# HELP test_ops_total [ALPHA] Operations.\n\
             # TYPE test_ops_total counter\n\
             test_ops_total{operation_type=\"status\"} 1\n\
             test_ops_total{operation_type=\"version\"} 2\n"
        );
        assert_eq!(c.get(&["version"]), 2.0);
        assert_eq!(c.get(&["never"]), 0.0);
        assert!(c.remove(&["status"]));
        assert!(!c.remove(&["status"]), "already gone");
        let mut out = String::new();
        c.encode(&mut out);
        assert!(!out.contains("status"), "{out}");
    }

    #[test]
    fn histogram_renders_cumulative_buckets() {
        let h = HistogramVec::new(
            Desc::new("test_seconds", "Latency.", &["op"], Stability::Alpha),
            vec![0.1, 1.0],
        );
        for v in [0.05, 0.1, 0.5, 7.0] {
            h.observe(&["x"], v);
        }
        let mut out = String::new();
        h.encode(&mut out);
        assert_eq!(
            out,
            "# HELP test_seconds [ALPHA] Latency.\n\
             # TYPE test_seconds histogram\n\
             test_seconds_bucket{op=\"x\",le=\"0.1\"} 2\n\
             test_seconds_bucket{op=\"x\",le=\"1\"} 3\n\
             test_seconds_bucket{op=\"x\",le=\"+Inf\"} 4\n\
             test_seconds_sum{op=\"x\"} 7.65\n\
             test_seconds_count{op=\"x\"} 4\n"
        );
        let snap = h.snapshot(&["x"]).expect("observed");
        assert_eq!(snap.cumulative, vec![2, 3]);
        assert_eq!(snap.count, 4);
        assert!(h.remove(&["x"]));
        assert_eq!(h.snapshot(&["x"]), None);
    }

    #[test]
    fn exponential_buckets_match_the_runtime_operation_bounds() {
        let b = exponential_buckets(0.005, 2.5, 14);
        assert_eq!(b.len(), 14);
        let spelled: Vec<String> = b.iter().map(|v| format_float(*v)).collect();
        assert_eq!(spelled[0], "0.005");
        assert_eq!(spelled[1], "0.0125");
        assert_eq!(spelled[13], "745.0580596923828");
        for w in b.windows(2) {
            assert!((w[1] / w[0] - 2.5).abs() < 1e-12);
        }
    }

    #[test]
    fn wrong_label_count_never_panics() {
        let c = CounterVec::new(Desc::new("t", "h", &["a", "b"], Stability::Alpha));
        c.inc(&["only"]);
        c.inc(&["x", "y", "z"]);
        let mut out = String::new();
        c.encode(&mut out);
        assert!(out.contains("t{a=\"only\",b=\"\"} 1"));
        assert!(out.contains("t{a=\"x\",b=\"y\"} 1"));
    }
}
