//! `/stats/summary`: the node and pod statistics summary as JSON (GET or
//! POST; `only_cpu_and_memory=true` trims it to CPU and memory).

use std::sync::Arc;

use async_trait::async_trait;
use http::{Method, Request, StatusCode};

use super::pods::APPLICATION_JSON;
use super::router::{Handler, HandlerFuture, RequestBody, http_error, respond};

/// Where the handler is registered.
pub const STATS_SUMMARY_PATH: &str = "/stats/summary";

/// Where the summary comes from.
#[async_trait]
pub trait SummarySource: Send + Sync + 'static {
    async fn summary(&self, only_cpu_and_memory: bool) -> Result<serde_json::Value, String>;
}

struct StatsSummary(Arc<dyn SummarySource>);

impl Handler for StatsSummary {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        let source = self.0.clone();
        Box::pin(async move {
            if req.method() != Method::GET && req.method() != Method::POST {
                return http_error(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
            }
            let only = url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
                .any(|(k, v)| k == "only_cpu_and_memory" && v == "true");
            match source.summary(only).await {
                Ok(v) => respond(
                    StatusCode::OK,
                    APPLICATION_JSON,
                    serde_json::to_vec(&v).unwrap_or_default(),
                ),
                Err(e) => {
                    tracing::error!(error = %e, "Failed to get the stats summary");
                    http_error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &format!("Internal Error: failed to get the summary: {e}"),
                    )
                }
            }
        })
    }
}

/// The `/stats/summary` handler.
pub fn stats_summary_handler(source: Arc<dyn SummarySource>) -> Arc<dyn Handler> {
    Arc::new(StatsSummary(source))
}
