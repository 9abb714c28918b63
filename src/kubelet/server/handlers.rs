//! The handler sets the Go kubelet installs on its servers, as far as they
//! exist yet: the default set (healthz, /metrics; RunKubelet adds /pods),
//! the debugging set (/configz here; RunKubelet adds /runningpods/,
//! /containerLogs/ (see `logs`) and /exec/, /attach/, /portForward/, /run/
//! (see `streaming`); /stats/ does not exist yet), and the answers for
//! debugging endpoints when they are disabled.

use std::sync::Arc;

use http::{Request, StatusCode};

use super::ServerError;
use super::router::{Handler, HandlerFuture, RequestBody, Router, http_error, respond};
use crate::configz::Configz;
use crate::healthz::Healthz;

/// Renders the Prometheus text exposition of a registry.
pub type MetricsRenderer = Arc<dyn Fn() -> String + Send + Sync>;

/// The Prometheus text format's content type.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Where the kubelet's own metrics are served.
pub const METRICS_PATH: &str = "/metrics";

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
        let text = (self.0)();
        Box::pin(async move { respond(StatusCode::OK, PROMETHEUS_TEXT, text) })
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

/// What the default and debugging handlers serve.
#[derive(Clone)]
pub struct ServerHandlers {
    pub healthz: Arc<Healthz>,
    pub configz: Configz,
    /// Renders /metrics; `None` leaves /metrics unregistered.
    pub metrics: Option<MetricsRenderer>,
}

impl std::fmt::Debug for ServerHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandlers")
            .field("healthz", &self.healthz)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

/// Installs the default handlers: /healthz (and /healthz/<check>), /metrics.
pub fn install_default_handlers(
    router: &mut Router,
    handlers: &ServerHandlers,
) -> Result<(), ServerError> {
    handlers.healthz.install(router)?;
    if let Some(render) = &handlers.metrics {
        router.handle(METRICS_PATH, metrics_handler(render.clone()))?;
    }
    Ok(())
}

/// Installs the debugging handlers that exist so far: /configz.
pub fn install_debugging_handlers(
    router: &mut Router,
    configz: &Configz,
) -> Result<(), ServerError> {
    configz.install(router)?;
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
        install_debugging_handlers(&mut router, &handlers.configz)?;
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
