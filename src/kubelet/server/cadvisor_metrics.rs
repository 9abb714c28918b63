//! `/metrics/cadvisor`: the containers' and machine's families, rendered
//! from the stats' latest snapshot.

use std::sync::Arc;

use http::{Request, StatusCode};

use super::router::{Handler, HandlerFuture, RequestBody, respond};
use crate::cadvisor::prometheus::render;
use crate::kubelet::stats::CadvisorSource;
use crate::metrics::text::CONTENT_TYPE;
use crate::util::clock::Clock;

/// Where the handler is registered.
pub const CADVISOR_METRICS_PATH: &str = "/metrics/cadvisor";

struct CadvisorMetrics {
    source: Arc<dyn CadvisorSource>,
    clock: Arc<dyn Clock>,
}

impl Handler for CadvisorMetrics {
    fn call(&self, _req: Request<RequestBody>) -> HandlerFuture {
        let (source, clock) = (self.source.clone(), self.clock.clone());
        Box::pin(async move {
            let snapshot = source.snapshot().await;
            let now = clock.now();
            respond(StatusCode::OK, CONTENT_TYPE, render(&snapshot, now))
        })
    }
}

/// The `/metrics/cadvisor` handler.
pub fn cadvisor_metrics_handler(
    source: Arc<dyn CadvisorSource>,
    clock: Arc<dyn Clock>,
) -> Arc<dyn Handler> {
    Arc::new(CadvisorMetrics { source, clock })
}
