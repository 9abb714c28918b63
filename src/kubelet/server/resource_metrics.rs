//! `/metrics/resource`: the node's, pods' and containers' cumulative CPU
//! time and memory working set in the Prometheus text format, with sample
//! timestamps — what metrics-server scrapes for `kubectl top` and the
//! autoscalers. Metric and label names are the Go kubelet's; families come
//! sorted by name and samples by label values, as Go's gatherer writes them.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use http::{Request, StatusCode};

use super::router::{Handler, HandlerFuture, RequestBody, respond};
use crate::kubelet::stats::{CpuMemory, ResourceUsage};
use crate::metrics::constant::{ConstFamily, render_const};
use crate::metrics::text::CONTENT_TYPE;

/// Where the handler is registered.
pub const RESOURCE_METRICS_PATH: &str = "/metrics/resource";

/// Where the numbers come from.
#[async_trait]
pub trait ResourceUsageSource: Send + Sync + 'static {
    async fn resource_usage(&self) -> Result<ResourceUsage, String>;
}

fn millis(t: SystemTime) -> Option<i64> {
    Some(
        t.duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

fn cpu_seconds(u: &CpuMemory) -> Option<f64> {
    u.cpu_usage_ns.map(|ns| ns as f64 / 1e9)
}

fn memory(u: &CpuMemory) -> Option<f64> {
    u.memory_working_set_bytes.map(|b| b as f64)
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Renders the families; `scrape_error` says whether gathering failed.
pub fn render(usage: Option<&ResourceUsage>) -> String {
    let family = |name, kind, help: &str| ConstFamily::new(name, kind, format!("[ALPHA] {help}"));
    let mut container_cpu = family(
        "container_cpu_usage_seconds_total",
        "counter",
        "CPU time a container has used, in core-seconds",
    );
    let mut container_mem = family(
        "container_memory_working_set_bytes",
        "gauge",
        "A container's memory working set, in bytes",
    );
    let mut container_start = family(
        "container_start_time_seconds",
        "gauge",
        "When a container started, in seconds since the Unix epoch",
    );
    let mut node_cpu = family(
        "node_cpu_usage_seconds_total",
        "counter",
        "CPU time the node has used, in core-seconds",
    );
    let mut node_mem = family(
        "node_memory_working_set_bytes",
        "gauge",
        "The node's memory working set, in bytes",
    );
    let mut pod_cpu = family(
        "pod_cpu_usage_seconds_total",
        "counter",
        "CPU time a pod has used, in core-seconds",
    );
    let mut pod_mem = family(
        "pod_memory_working_set_bytes",
        "gauge",
        "A pod's memory working set, in bytes",
    );
    let mut scrape_error = family(
        "scrape_error",
        "gauge",
        "1 when gathering the resource metrics failed, else 0",
    );
    if let Some(u) = usage {
        for c in &u.containers {
            let l = labels(&[
                ("container", &c.name),
                ("namespace", &c.namespace),
                ("pod", &c.pod),
            ]);
            if let Some(v) = cpu_seconds(&c.usage) {
                container_cpu.push(l.clone(), v, millis(c.usage.time));
            }
            if let Some(v) = memory(&c.usage) {
                container_mem.push(l.clone(), v, millis(c.usage.time));
            }
            if let Some(start) = c.start_time {
                let secs = start
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                container_start.push(l, secs, millis(start));
            }
        }
        if let Some(n) = &u.node {
            if let Some(v) = cpu_seconds(n) {
                node_cpu.push(vec![], v, millis(n.time));
            }
            if let Some(v) = memory(n) {
                node_mem.push(vec![], v, millis(n.time));
            }
        }
        for p in &u.pods {
            let l = labels(&[("namespace", &p.namespace), ("pod", &p.name)]);
            if let Some(v) = cpu_seconds(&p.usage) {
                pod_cpu.push(l.clone(), v, millis(p.usage.time));
            }
            if let Some(v) = memory(&p.usage) {
                pod_mem.push(l, v, millis(p.usage.time));
            }
        }
    }
    // scrape_error carries no timestamp, the others their sample time.
    scrape_error.push(vec![], if usage.is_some() { 0.0 } else { 1.0 }, None);
    render_const(vec![
        container_cpu,
        container_mem,
        container_start,
        node_cpu,
        node_mem,
        pod_cpu,
        pod_mem,
        scrape_error,
    ])
}

struct ResourceMetrics(Arc<dyn ResourceUsageSource>);

impl Handler for ResourceMetrics {
    fn call(&self, _req: Request<RequestBody>) -> HandlerFuture {
        let source = self.0.clone();
        Box::pin(async move {
            let usage = match source.resource_usage().await {
                Ok(u) => Some(u),
                Err(e) => {
                    tracing::error!(error = %e, "Error getting the resource metrics");
                    None
                }
            };
            respond(StatusCode::OK, CONTENT_TYPE, render(usage.as_ref()))
        })
    }
}

/// The `/metrics/resource` handler.
pub fn resource_metrics_handler(source: Arc<dyn ResourceUsageSource>) -> Arc<dyn Handler> {
    Arc::new(ResourceMetrics(source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::stats::{ContainerUsage, PodUsage};
    use std::time::Duration;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn exposition() {
        let u = |ms, cpu, mem| CpuMemory {
            time: at(ms),
            cpu_usage_ns: cpu,
            memory_working_set_bytes: mem,
        };
        let usage = ResourceUsage {
            node: Some(u(1_000, Some(12_500_000_000), Some(1_073_741_824))),
            pods: vec![PodUsage {
                name: "web".into(),
                namespace: "default".into(),
                usage: u(2_000, Some(1_500_000), Some(4096)),
            }],
            containers: vec![
                ContainerUsage {
                    name: "z".into(),
                    pod: "web".into(),
                    namespace: "default".into(),
                    start_time: Some(at(500_000)),
                    usage: u(3_000, Some(2_000_000_000), None),
                },
                ContainerUsage {
                    name: "a".into(),
                    pod: "web".into(),
                    namespace: "default".into(),
                    start_time: None,
                    usage: u(3_000, None, Some(2048)),
                },
            ],
            allocatable: None,
        };
        let want = "\
# HELP container_cpu_usage_seconds_total [ALPHA] CPU time a container has used, in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container=\"z\",namespace=\"default\",pod=\"web\"} 2 3000
# HELP container_memory_working_set_bytes [ALPHA] A container's memory working set, in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container=\"a\",namespace=\"default\",pod=\"web\"} 2048 3000
# HELP container_start_time_seconds [ALPHA] When a container started, in seconds since the Unix epoch
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container=\"z\",namespace=\"default\",pod=\"web\"} 500 500000
# HELP node_cpu_usage_seconds_total [ALPHA] CPU time the node has used, in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 12.5 1000
# HELP node_memory_working_set_bytes [ALPHA] The node's memory working set, in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.073741824e+09 1000
# HELP pod_cpu_usage_seconds_total [ALPHA] CPU time a pod has used, in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 0.0015 2000
# HELP pod_memory_working_set_bytes [ALPHA] A pod's memory working set, in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 4096 2000
# HELP scrape_error [ALPHA] 1 when gathering the resource metrics failed, else 0
# TYPE scrape_error gauge
scrape_error 0
";
        assert_eq!(render(Some(&usage)), want);
        assert!(render(None).ends_with("scrape_error 1\n"));
    }
}
