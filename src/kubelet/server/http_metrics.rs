//! The kubelet server's request metrics, as Go's server labels them:
//! `kubelet_http_requests_total`, `kubelet_http_requests_duration_seconds`
//! and `kubelet_http_inflight_requests`, by method, path bucket (the first
//! path segment, `metrics/<x>` for the metrics tree, `other` for what the
//! server does not serve), server type (`readwrite` on the authenticated
//! port, `readonly`) and whether the request is long-running.

use std::sync::{Arc, OnceLock};

use crate::metrics::{
    CounterVec, Desc, GaugeVec, HistogramVec, Stability, default_buckets, global,
};

/// In the order the Go client prints them (sorted by name).
const LABELS: [&str; 4] = ["long_running", "method", "path", "server_type"];
/// The bucket of paths the server does not serve (and of odd methods).
pub const OTHER: &str = "other";
const METHODS: [&str; 8] = [
    "OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT",
];

fn requests() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    CELL.get_or_init(|| {
        let v = Arc::new(CounterVec::new(Desc::new(
            "kubelet_http_requests_total",
            "HTTP requests the kubelet's servers received, by method, path, server type and long-running.",
            &LABELS,
            Stability::Alpha,
        )));
        global().register(v.clone());
        v
    })
}

fn durations() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    CELL.get_or_init(|| {
        let v = Arc::new(HistogramVec::new(
            Desc::new(
                "kubelet_http_requests_duration_seconds",
                "Seconds the kubelet's servers took to answer HTTP requests.",
                &LABELS,
                Stability::Alpha,
            ),
            default_buckets(),
        ));
        global().register(v.clone());
        v
    })
}

fn inflight() -> &'static GaugeVec {
    static CELL: OnceLock<Arc<GaugeVec>> = OnceLock::new();
    CELL.get_or_init(|| {
        let v = Arc::new(GaugeVec::new(Desc::new(
            "kubelet_http_inflight_requests",
            "HTTP requests the kubelet's servers are answering now.",
            &LABELS,
            Stability::Alpha,
        )));
        global().register(v.clone());
        v
    })
}

/// The path's root as Go's server buckets it: the first segment, or
/// `metrics/<second>` under /metrics.
pub fn url_root(path: &str) -> String {
    let mut parts = path.trim_start_matches('/').splitn(3, '/');
    let first = parts.next().unwrap_or_default();
    match parts.next() {
        Some(second) if first == "metrics" => format!("{first}/{second}"),
        _ => first.to_string(),
    }
}

/// The method's label: itself when standard, else `other`.
pub fn method_bucket(method: &str) -> &str {
    if METHODS.contains(&method) {
        method
    } else {
        OTHER
    }
}

/// Whether a bucket is long-running (Go's map, whose `portforward` key
/// never matches the `portForward` bucket).
pub fn long_running(bucket: &str) -> bool {
    matches!(bucket, "exec" | "attach" | "portforward" | "debug")
}

/// One request being answered: counted now, its duration and the
/// in-flight gauge settled when dropped.
pub struct InFlight {
    labels: [String; 4],
    started: std::time::Instant,
}

impl InFlight {
    pub fn start(method: &str, bucket: &str, server_type: &str) -> Self {
        let labels = [
            long_running(bucket).to_string(),
            method_bucket(method).to_string(),
            bucket.to_string(),
            server_type.to_string(),
        ];
        let refs = labels.each_ref().map(String::as_str);
        requests().inc(&refs);
        inflight().add(&refs, 1.0);
        InFlight {
            labels,
            started: std::time::Instant::now(),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let refs = self.labels.each_ref().map(String::as_str);
        inflight().add(&refs, -1.0);
        durations().observe(&refs, self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_as_go_makes_them() {
        let cases = [
            ("/pods", "pods"),
            ("/pods/", "pods"),
            ("/metrics", "metrics"),
            ("/metrics/probes", "metrics/probes"),
            ("/metrics/cadvisor/x", "metrics/cadvisor"),
            ("/stats/summary", "stats"),
            ("/containerLogs/ns/pod/c", "containerLogs"),
            ("/", ""),
        ];
        for (path, want) in cases {
            assert_eq!(url_root(path), want, "{path}");
        }
        assert_eq!(method_bucket("GET"), "GET");
        assert_eq!(method_bucket("PATCHY"), "other");
        assert!(long_running("exec") && !long_running("portForward") && !long_running("pods"));
    }

    #[test]
    fn a_request_is_counted_timed_and_leaves_the_inflight_gauge() {
        let labels = ["false", "GET", "stats", "readonly-test"];
        {
            let _req = InFlight::start("GET", "stats", "readonly-test");
            assert_eq!(inflight().get(&labels), 1.0);
        }
        assert_eq!(inflight().get(&labels), 0.0);
        assert_eq!(requests().get(&labels), 1.0);
        assert_eq!(durations().snapshot(&labels).map(|s| s.count), Some(1));
    }
}
