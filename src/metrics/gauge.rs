//! Gauges: a value per label-value combination that may go up and down.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use super::text::{format_float, write_labels};
use super::vec::{Collector, Desc};

/// A gauge per label-value combination.
#[derive(Debug)]
pub struct GaugeVec {
    desc: Desc,
    children: Mutex<BTreeMap<Vec<String>, f64>>,
}

impl GaugeVec {
    /// An empty family.
    pub fn new(desc: Desc) -> Self {
        GaugeVec {
            desc,
            children: Mutex::new(BTreeMap::new()),
        }
    }

    fn children(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<String>, f64>> {
        self.children.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the child with these label values.
    pub fn set(&self, values: &[&str], value: f64) {
        let key = self.desc.key(values);
        self.children().insert(key, value);
    }

    /// Adds `delta` (negative to lower it).
    pub fn add(&self, values: &[&str], delta: f64) {
        let key = self.desc.key(values);
        *self.children().entry(key).or_insert(0.0) += delta;
    }

    /// The current value of one child (0 when never set).
    pub fn get(&self, values: &[&str]) -> f64 {
        let key = self.desc.key(values);
        self.children().get(&key).copied().unwrap_or(0.0)
    }

    /// Drops the child with these label values; whether there was one.
    pub fn remove(&self, values: &[&str]) -> bool {
        let key = self.desc.key(values);
        self.children().remove(&key).is_some()
    }
}

impl Collector for GaugeVec {
    fn name(&self) -> &str {
        &self.desc.name
    }

    fn encode(&self, out: &mut String) {
        let children = self.children();
        if children.is_empty() {
            return;
        }
        self.desc.write_header(out, "gauge");
        for (values, value) in children.iter() {
            out.push_str(&self.desc.name);
            write_labels(out, &self.desc.pairs(values));
            let _ = writeln!(out, " {}", format_float(*value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Stability;

    #[test]
    fn gauges_go_both_ways_and_render_sorted() {
        let g = GaugeVec::new(Desc::new(
            "kubelet_running_containers",
            "Containers by state.",
            &["container_state"],
            Stability::Alpha,
        ));
        let mut empty = String::new();
        g.encode(&mut empty);
        assert_eq!(empty, "");
        g.set(&["running"], 3.0);
        g.add(&["running"], -1.0);
        g.set(&["exited"], 1.0);
        let mut out = String::new();
        g.encode(&mut out);
        assert_eq!(
            out,
            "# HELP kubelet_running_containers [ALPHA] Containers by state.\n\
             # TYPE kubelet_running_containers gauge\n\
             kubelet_running_containers{container_state=\"exited\"} 1\n\
             kubelet_running_containers{container_state=\"running\"} 2\n"
        );
        assert!(g.remove(&["exited"]));
        assert_eq!(g.get(&["running"]), 2.0);
    }
}
