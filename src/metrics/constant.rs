//! Families built fresh for each scrape from numbers gathered elsewhere
//! (the Go client's const metrics): samples with optional timestamps,
//! written as the Go gatherer does — families sorted by name, label names
//! sorted, samples sorted by label values, empty families left out.

use std::fmt::Write as _;

use super::text::{escape_help, format_float, write_labels};

/// One sample: label pairs, value, timestamp in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstSample {
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

/// A family of samples of one name and type.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstFamily {
    pub name: &'static str,
    /// The help text as served (stability prefix included).
    pub help: String,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    pub samples: Vec<ConstSample>,
}

impl ConstFamily {
    pub fn new(name: &'static str, kind: &'static str, help: impl Into<String>) -> Self {
        ConstFamily {
            name,
            help: help.into(),
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds a sample; label pairs are put in name order.
    pub fn push(
        &mut self,
        mut labels: Vec<(String, String)>,
        value: f64,
        timestamp_ms: Option<i64>,
    ) {
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        self.samples.push(ConstSample {
            labels,
            value,
            timestamp_ms,
        });
    }
}

/// Writes the families in the text format.
pub fn render_const(mut families: Vec<ConstFamily>) -> String {
    families.sort_by(|a, b| a.name.cmp(b.name));
    let mut out = String::new();
    for f in &mut families {
        if f.samples.is_empty() {
            continue;
        }
        f.samples.sort_by(|a, b| {
            a.labels
                .cmp(&b.labels)
                .then(a.timestamp_ms.cmp(&b.timestamp_ms))
        });
        let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for s in &f.samples {
            out.push_str(f.name);
            let pairs: Vec<(&str, &str)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            write_labels(&mut out, &pairs);
            match s.timestamp_ms {
                Some(ms) => {
                    let _ = writeln!(out, " {} {ms}", format_float(s.value));
                }
                None => {
                    let _ = writeln!(out, " {}", format_float(s.value));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sorted_families_labels_and_samples() {
        let mut b = ConstFamily::new("b_total", "counter", "B things");
        b.push(l(&[("pod", "z"), ("container", "a")]), 2.0, Some(5));
        b.push(l(&[("pod", "a"), ("container", "b")]), 1.5, None);
        let a = ConstFamily::new("a_empty", "gauge", "never shown");
        let mut c = ConstFamily::new("a_gauge", "gauge", "line\nbreak");
        c.push(vec![], 1e6, None);
        assert_eq!(
            render_const(vec![b, a, c]),
            "# HELP a_gauge line\\nbreak\n# TYPE a_gauge gauge\na_gauge 1e+06\n\
             # HELP b_total B things\n# TYPE b_total counter\n\
             b_total{container=\"a\",pod=\"z\"} 2 5\n\
             b_total{container=\"b\",pod=\"a\"} 1.5\n"
        );
    }
}
