//! The prober's metric families (subsystem `prober`), named as the Go
//! kubelet's: `prober_probe_total` and `prober_probe_duration_seconds`.
//! A worker's series are dropped when the worker stops.

use std::sync::{Arc, OnceLock};

use crate::metrics::{CounterVec, Desc, HistogramVec, Stability, default_buckets, probes};

/// `prober_probe_total{container,namespace,pod,pod_uid,probe_type,result}`.
pub const PROBE_TOTAL: &str = "prober_probe_total";
/// `prober_probe_duration_seconds{container,namespace,pod,probe_type}`.
pub const PROBE_DURATION: &str = "prober_probe_duration_seconds";

/// `result` label values.
pub const RESULT_SUCCESSFUL: &str = "successful";
pub const RESULT_FAILED: &str = "failed";
pub const RESULT_UNKNOWN: &str = "unknown";

/// Probes run, by type and result, per container.
pub fn probe_total() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    CELL.get_or_init(|| {
        let vec = Arc::new(CounterVec::new(Desc::new(
            PROBE_TOTAL,
            "How many liveness, readiness and startup probes ran per container, by result.",
            // In the order the Go client prints them (sorted by name).
            &[
                "container",
                "namespace",
                "pod",
                "pod_uid",
                "probe_type",
                "result",
            ],
            Stability::Alpha,
        )));
        probes().register(vec.clone());
        vec
    })
}

/// How long probes took, per container.
pub fn probe_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    CELL.get_or_init(|| {
        let vec = Arc::new(HistogramVec::new(
            Desc::new(
                PROBE_DURATION,
                "Seconds a probe took to answer.",
                &["container", "namespace", "pod", "probe_type"],
                Stability::Alpha,
            ),
            default_buckets(),
        ));
        probes().register(vec.clone());
        vec
    })
}

/// The label values of one worker's series.
#[derive(Debug, Clone)]
pub(crate) struct WorkerLabels {
    probe_type: String,
    container: String,
    pod: String,
    namespace: String,
    pod_uid: String,
}

impl WorkerLabels {
    pub(crate) fn new(probe_type: &str, container: &str, pod: &str, ns: &str, uid: &str) -> Self {
        Self {
            probe_type: probe_type.to_string(),
            container: container.to_string(),
            pod: pod.to_string(),
            namespace: ns.to_string(),
            pod_uid: uid.to_string(),
        }
    }

    fn total(&self, result: &'static str) -> [&str; 6] {
        [
            &self.container,
            &self.namespace,
            &self.pod,
            &self.pod_uid,
            &self.probe_type,
            result,
        ]
    }

    fn duration(&self) -> [&str; 4] {
        [
            &self.container,
            &self.namespace,
            &self.pod,
            &self.probe_type,
        ]
    }

    /// Counts one probe by result; durations are observed for successful
    /// and unknown results only, as the Go kubelet does.
    pub(crate) fn record(&self, result: &'static str, seconds: f64) {
        probe_total().inc(&self.total(result));
        if result != RESULT_FAILED {
            probe_duration().observe(&self.duration(), seconds);
        }
    }

    /// Drops this worker's series.
    pub(crate) fn delete(&self) {
        for r in [RESULT_SUCCESSFUL, RESULT_FAILED, RESULT_UNKNOWN] {
            probe_total().remove(&self.total(r));
        }
        probe_duration().remove(&self.duration());
    }

    #[cfg(test)]
    pub(crate) fn count(&self, result: &'static str) -> f64 {
        probe_total().get(&self.total(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_render_with_go_label_order_and_go_away_with_the_worker() {
        let l = WorkerLabels::new("Readiness", "web", "metrics-render", "ns", "uid-render");
        l.record(RESULT_SUCCESSFUL, 0.02);
        l.record(RESULT_FAILED, 0.5);
        let out = crate::metrics::render_probes_text();
        assert!(out.contains(
            "prober_probe_total{container=\"web\",namespace=\"ns\",pod=\"metrics-render\",pod_uid=\"uid-render\",probe_type=\"Readiness\",result=\"successful\"} 1\n"
        ), "{out}");
        assert!(out.contains(
            "prober_probe_duration_seconds_count{container=\"web\",namespace=\"ns\",pod=\"metrics-render\",probe_type=\"Readiness\"} 1\n"
        ), "failures are not timed: {out}");
        l.delete();
        assert!(!crate::metrics::render_probes_text().contains("metrics-render"));
        assert!(
            !crate::metrics::render_text().contains("prober_probe_total"),
            "only on /metrics/probes"
        );
    }
}
