//! The route table of the kubelet's servers, in one place: the default
//! set (healthz, /metrics, and with the kubelet's sources /pods,
//! /stats/summary, /metrics/resource), the debugging set (/configz, and
//! with the kubelet's sources /runningpods/, /containerLogs/ (see `logs`),
//! /logs/ and /exec/, /attach/, /portForward/, /run/ (see `streaming`)),
//! and the answers for debugging endpoints when they are disabled.

use std::sync::Arc;

use http::{Request, StatusCode};

use super::ServerError;
use super::cadvisor_metrics::{CADVISOR_METRICS_PATH, cadvisor_metrics_handler};
use super::logs::{CONTAINER_LOGS_PATH, container_logs_handler};
use super::node_logs::{NODE_LOG_DIR, NODE_LOGS_PATH, node_logs_handler};
use super::pods::{PodsProvider, pods_handler, running_pods_handler};
use super::pprof::{PPROF_PATH, pprof_handler};
use super::resource_metrics::{
    RESOURCE_METRICS_PATH, ResourceUsageSource, resource_metrics_handler,
};
use super::router::{Handler, HandlerFuture, RequestBody, Router, http_error, respond};
use super::stats_summary::{STATS_SUMMARY_PATH, SummarySource, stats_summary_handler};
use super::streaming::{Verb, streaming_handler};
use crate::configz::Configz;
use crate::healthz::Healthz;
use crate::kubelet::container_logs::ContainerLogs;
use crate::kubelet::streaming::StreamingHost;

/// Renders the Prometheus text exposition of a registry.
pub type MetricsRenderer = Arc<dyn Fn() -> String + Send + Sync>;

/// The Prometheus text format's content type.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Where the kubelet's own metrics are served.
pub const METRICS_PATH: &str = "/metrics";
/// Where the prober's metrics are served.
pub const PROBE_METRICS_PATH: &str = "/metrics/probes";

/// Path trees that need enableDebuggingHandlers.
pub const DEBUGGING_PATHS: [&str; 8] = [
    "/run/",
    "/exec/",
    "/attach/",
    "/portForward/",
    "/containerLogs/",
    "/runningpods/",
    "/debug/pprof/",
    "/logs/",
];

struct MetricsHandler(MetricsRenderer);

impl Handler for MetricsHandler {
    fn call(&self, _req: Request<RequestBody>) -> HandlerFuture {
        // Collectors read procfs and the pod logs: off the runtime threads.
        let render = self.0.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || render()).await {
                Ok(text) => respond(StatusCode::OK, PROMETHEUS_TEXT, text),
                Err(e) => http_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            }
        })
    }
}

/// A handler serving what `render` produces as Prometheus text.
pub fn metrics_handler(render: MetricsRenderer) -> Arc<dyn Handler> {
    Arc::new(MetricsHandler(render))
}

struct DebuggingDisabled;

impl Handler for DebuggingDisabled {
    fn call(&self, _req: Request<RequestBody>) -> HandlerFuture {
        Box::pin(async {
            http_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "Debug endpoints are disabled.",
            )
        })
    }
}

/// The kubelet's own sources behind its routes.
#[derive(Clone)]
pub struct KubeletSources {
    pub pods: Arc<dyn PodsProvider>,
    pub summary: Arc<dyn SummarySource>,
    pub resource_usage: Arc<dyn ResourceUsageSource>,
    pub cadvisor: Arc<dyn crate::kubelet::stats::CadvisorSource>,
    /// The clock the metrics' timestamps come from.
    pub clock: Arc<dyn crate::util::clock::Clock>,
    pub container_logs: Arc<dyn ContainerLogs>,
    pub streaming: Arc<dyn StreamingHost>,
}

/// What the default and debugging handlers serve.
#[derive(Clone)]
pub struct ServerHandlers {
    pub healthz: Arc<Healthz>,
    pub configz: Configz,
    /// Renders /metrics; `None` leaves /metrics unregistered.
    pub metrics: Option<MetricsRenderer>,
    /// Renders /metrics/probes; `None` leaves it unregistered.
    pub probe_metrics: Option<MetricsRenderer>,
    /// The kubelet's pods, stats, logs and streaming; `None` leaves their
    /// routes unregistered.
    pub kubelet: Option<KubeletSources>,
    /// enableProfilingHandler: /debug/pprof/ with the debugging handlers.
    pub profiling: bool,
}

impl std::fmt::Debug for ServerHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandlers")
            .field("healthz", &self.healthz)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

/// Installs the default handlers: /healthz (and /healthz/<check>),
/// /pods, /stats/summary, /metrics, /metrics/probes, /metrics/resource,
/// /metrics/cadvisor.
pub fn install_default_handlers(
    router: &mut Router,
    handlers: &ServerHandlers,
) -> Result<(), ServerError> {
    handlers.healthz.install(router)?;
    if let Some(k) = &handlers.kubelet {
        router.handle("/pods", pods_handler(k.pods.clone()))?;
        router.handle(STATS_SUMMARY_PATH, stats_summary_handler(k.summary.clone()))?;
    }
    if let Some(render) = &handlers.metrics {
        router.handle(METRICS_PATH, metrics_handler(render.clone()))?;
    }
    if let Some(render) = &handlers.probe_metrics {
        router.handle(PROBE_METRICS_PATH, metrics_handler(render.clone()))?;
    }
    if let Some(k) = &handlers.kubelet {
        router.handle(
            RESOURCE_METRICS_PATH,
            resource_metrics_handler(k.resource_usage.clone()),
        )?;
        router.handle(
            CADVISOR_METRICS_PATH,
            cadvisor_metrics_handler(k.cadvisor.clone(), k.clock.clone()),
        )?;
    }
    Ok(())
}

/// Installs the debugging handlers: /configz, and with the kubelet's
/// sources /runningpods/, /containerLogs/, /logs/ and the streaming verbs.
pub fn install_debugging_handlers(
    router: &mut Router,
    handlers: &ServerHandlers,
) -> Result<(), ServerError> {
    handlers.configz.install(router)?;
    if handlers.profiling {
        router.handle(PPROF_PATH, pprof_handler())?;
    }
    if let Some(k) = &handlers.kubelet {
        router.handle("/runningpods/", running_pods_handler(k.pods.clone()))?;
        router.handle(
            CONTAINER_LOGS_PATH,
            container_logs_handler(k.container_logs.clone()),
        )?;
        router.handle(NODE_LOGS_PATH, node_logs_handler(NODE_LOG_DIR))?;
        for verb in [Verb::Exec, Verb::Attach, Verb::PortForward, Verb::Run] {
            router.handle(verb.path(), streaming_handler(verb, k.streaming.clone()))?;
        }
    }
    Ok(())
}

/// Answers the debugging path trees with 405 "Debug endpoints are disabled.".
pub fn install_debugging_disabled_handlers(router: &mut Router) -> Result<(), ServerError> {
    let h: Arc<dyn Handler> = Arc::new(DebuggingDisabled);
    for p in DEBUGGING_PATHS {
        router.handle(p, h.clone())?;
    }
    Ok(())
}

/// The main server's router: default handlers, then the debugging set or
/// its disabled answers.
pub fn main_router(
    handlers: &ServerHandlers,
    enable_debugging_handlers: bool,
) -> Result<Router, ServerError> {
    let mut router = Router::new();
    install_default_handlers(&mut router, handlers)?;
    if enable_debugging_handlers {
        install_debugging_handlers(&mut router, handlers)?;
    } else {
        install_debugging_disabled_handlers(&mut router)?;
    }
    Ok(router)
}

/// The read-only server's router: default handlers, debugging disabled.
pub fn read_only_router(handlers: &ServerHandlers) -> Result<Router, ServerError> {
    let mut router = Router::new();
    install_default_handlers(&mut router, handlers)?;
    install_debugging_disabled_handlers(&mut router)?;
    Ok(router)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::server::KubeletService;
    use crate::kubelet::server::router::request_body;
    use http_body_util::BodyExt;

    fn handlers() -> ServerHandlers {
        let configz = Configz::new();
        configz
            .register("kubeletconfig")
            .unwrap()
            .set(&serde_json::json!({"port": 10250}))
            .unwrap();
        ServerHandlers {
            healthz: Healthz::new(),
            configz,
            metrics: Some(Arc::new(|| "# HELP up\nup 1\n".to_string())),
            probe_metrics: Some(Arc::new(|| "# HELP probes\n".to_string())),
            kubelet: None,
            profiling: true,
        }
    }

    async fn get(svc: &KubeletService, path: &str) -> (u16, String, String) {
        let resp = svc
            .dispatch(Request::get(path).body(request_body("")).unwrap())
            .await;
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn routers_table() {
        let h = handlers();
        let main_dbg = KubeletService::new(main_router(&h, true).unwrap(), None);
        let main_nodbg = KubeletService::new(main_router(&h, false).unwrap(), None);
        let ro = KubeletService::new(read_only_router(&h).unwrap(), None);
        let cases: Vec<(&KubeletService, &str, u16, &str)> = vec![
            (&main_dbg, "/healthz", 200, "ok"),
            (
                &main_dbg,
                "/configz",
                200,
                "{\"kubeletconfig\":{\"port\":10250}}",
            ),
            (&main_dbg, "/metrics", 200, "# HELP up\nup 1\n"),
            (&main_dbg, "/exec/ns/pod/c", 404, "404 page not found\n"),
            (&main_dbg, "/nothing", 404, "404 page not found\n"),
            (
                &main_dbg,
                "/debug/pprof/heap",
                501,
                "heap profiles need a profiling allocator (jemalloc with opt.prof), which this process does not run on\n",
            ),
            (
                &main_dbg,
                "/debug/pprof/goroutine",
                404,
                "Unknown profile\n",
            ),
            (&main_nodbg, "/configz", 404, "404 page not found\n"),
            (
                &main_nodbg,
                "/exec/ns/pod/c",
                405,
                "Debug endpoints are disabled.\n",
            ),
            (
                &main_nodbg,
                "/logs/",
                405,
                "Debug endpoints are disabled.\n",
            ),
            (&ro, "/healthz", 200, "ok"),
            (&ro, "/configz", 404, "404 page not found\n"),
            (
                &ro,
                "/debug/pprof/heap",
                405,
                "Debug endpoints are disabled.\n",
            ),
            (&ro, "/metrics", 200, "# HELP up\nup 1\n"),
            (&ro, "/metrics/probes", 200, "# HELP probes\n"),
            (&main_nodbg, "/metrics/probes", 200, "# HELP probes\n"),
            (
                &ro,
                "/run",
                301,
                "<a href=\"/run/\">Moved Permanently</a>.\n\n",
            ),
        ];
        for (svc, path, status, body) in cases {
            let (s, ct, b) = get(svc, path).await;
            assert_eq!((s, b.as_str()), (status, body), "{path}");
            if path == "/metrics" {
                assert_eq!(ct, PROMETHEUS_TEXT);
            }
        }
    }

    #[tokio::test]
    async fn metrics_are_optional() {
        let mut h = handlers();
        h.metrics = None;
        let svc = KubeletService::new(read_only_router(&h).unwrap(), None);
        assert_eq!(get(&svc, "/metrics").await.0, 404);
    }
}
