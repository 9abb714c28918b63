//! Process-wide metrics for /metrics: a small registry of labelled counters
//! and histograms rendered in the Prometheus text format, and the kubelet's
//! own metric families (`kubelet_*`).
//!
//! Families are registered on first use; one with no samples renders nothing,
//! as with the Go client, so lazy registration changes no output.

pub mod constant;
pub mod gauge;
pub mod kubelet;
pub mod kubelet_admission;
pub mod kubelet_certificates;
pub mod library_families;
pub mod process;
pub mod text;
pub mod vec;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub use gauge::GaugeVec;
pub use process::ProcessCollector;
pub use text::CONTENT_TYPE;
pub use vec::{
    Collector, CounterVec, Desc, HistogramSnapshot, HistogramVec, Stability, default_buckets,
    exponential_buckets,
};

/// A set of metric families, rendered sorted by name.
#[derive(Default)]
pub struct Registry {
    families: Mutex<BTreeMap<String, Arc<dyn Collector>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .families
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        f.debug_struct("Registry")
            .field("families", &names)
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a family; a family of the same name already present wins and is
    /// returned instead, so registering twice is harmless.
    pub fn register<C: Collector + 'static>(&self, collector: Arc<C>) -> Arc<dyn Collector> {
        let mut families = self.families.lock().unwrap_or_else(PoisonError::into_inner);
        families
            .entry(collector.name().to_string())
            .or_insert(collector)
            .clone()
    }

    /// Every family in text format 0.0.4.
    pub fn render_text(&self) -> String {
        let families: Vec<Arc<dyn Collector>> = self
            .families
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let mut out = String::new();
        for family in families {
            family.encode(&mut out);
        }
        out
    }
}

/// The process-wide registry (/metrics), with the process families.
pub fn global() -> &'static Registry {
    static GLOBAL: OnceLock<Registry> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let registry = Registry::new();
        registry.register(Arc::new(ProcessCollector::all()));
        library_families::register(&registry);
        registry
    })
}

/// The prober's registry (/metrics/probes): the probe families and the
/// process start time, as the Go kubelet serves them there.
pub fn probes() -> &'static Registry {
    static PROBES: OnceLock<Registry> = OnceLock::new();
    PROBES.get_or_init(|| {
        let registry = Registry::new();
        registry.register(Arc::new(ProcessCollector::start_time_only()));
        registry
    })
}

/// The prober's registry in text format, for /metrics/probes.
pub fn render_probes_text() -> String {
    probes().render_text()
}

/// The process-wide registry in text format, for the /metrics handler
/// (serve it with [`CONTENT_TYPE`]).
pub fn render_text() -> String {
    global().render_text()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_sorts_families_and_skips_empty_ones() {
        let reg = Registry::new();
        let b = Arc::new(CounterVec::new(Desc::new(
            "b_total",
            "B.",
            &[],
            Stability::Alpha,
        )));
        let a = Arc::new(CounterVec::new(Desc::new(
            "a_total",
            "A.",
            &[],
            Stability::Alpha,
        )));
        let empty = Arc::new(CounterVec::new(Desc::new(
            "c_total",
            "C.",
            &[],
            Stability::Alpha,
        )));
        reg.register(b.clone());
        reg.register(a.clone());
        reg.register(empty);
        b.inc(&[]);
        a.inc(&[]);
        let out = reg.render_text();
        assert_eq!(
            out,
            "# HELP a_total [ALPHA] A.\n# TYPE a_total counter\na_total 1\n\
             # HELP b_total [ALPHA] B.\n# TYPE b_total counter\nb_total 1\n"
        );
    }
}
