//! gRPC probes: `grpc.health.v1.Health/Check` on the pod IP, plain text,
//! `SERVING` is healthy. As with the Go prober's blocking dial, a connection
//! that cannot be made is retried with back-off until the timeout, and the
//! failure then reads as a connect timeout.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tonic::Code;
use tonic::transport::Endpoint;

use super::net::{go_duration, join_host_port};
use super::probe::{Outcome, go_quote};
use crate::cri::error::go_code_name;
use crate::vlog;

/// The generated grpc.health.v1 messages, client and server.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod health {
    tonic::include_proto!("grpc.health.v1");
}

use health::HealthCheckRequest;
use health::health_check_response::ServingStatus;
use health::health_client::HealthClient;

/// First wait between connection attempts, growth factor and jitter, as
/// gRPC's connection back-off.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_FACTOR: f64 = 1.6;
const BACKOFF_JITTER: f64 = 0.2;
const BACKOFF_MAX: Duration = Duration::from_secs(120);
/// How close to the deadline a cancelled call counts as timed out (the
/// server measures the deadline from when the request reached it).
const DEADLINE_SLACK: Duration = Duration::from_millis(100);

/// Runs gRPC probes.
#[derive(Debug, Clone, Default)]
pub struct GrpcProber;

impl GrpcProber {
    pub fn new() -> Self {
        Self
    }

    /// Asks `host:port` about `service` within `timeout`.
    pub async fn probe(
        &self,
        host: &str,
        service: &str,
        port: i32,
        timeout: Duration,
    ) -> (Outcome, String) {
        let addr = join_host_port(host, port);
        let deadline = Instant::now() + timeout;
        let connect_timeout = || {
            (
                Outcome::Failure,
                format!(
                    "timeout: failed to connect service {} within {}: context deadline exceeded",
                    go_quote(&addr),
                    go_duration(timeout)
                ),
            )
        };
        let endpoint = match Endpoint::from_shared(format!("http://{addr}"))
            .and_then(|e| e.user_agent(super::user_agent()))
        {
            Ok(e) => e,
            Err(e) => {
                return (
                    Outcome::Failure,
                    format!(
                        "error: failed to connect service at {}: {e}",
                        go_quote(&addr)
                    ),
                );
            }
        };
        let mut attempt = 0u32;
        let channel = loop {
            let now = Instant::now();
            if now >= deadline {
                return connect_timeout();
            }
            let attempt_endpoint = endpoint.clone().connect_timeout(deadline - now);
            match tokio::time::timeout_at(deadline, attempt_endpoint.connect()).await {
                Err(_) => return connect_timeout(),
                Ok(Ok(channel)) => break channel,
                Ok(Err(e)) => {
                    vlog!(4, addr = %addr, error = %e, "gRPC probe connection attempt failed");
                    let wait = backoff(attempt);
                    attempt += 1;
                    if Instant::now() + wait >= deadline {
                        tokio::time::sleep_until(deadline).await;
                        return connect_timeout();
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        };
        let mut client = HealthClient::new(channel);
        let mut request = tonic::Request::new(HealthCheckRequest {
            service: service.to_string(),
        });
        request.set_timeout(deadline.saturating_duration_since(Instant::now()));
        let rpc_timeout = || {
            (
                Outcome::Failure,
                format!(
                    "timeout: health rpc did not complete within {}",
                    go_duration(timeout)
                ),
            )
        };
        let resp = match tokio::time::timeout_at(deadline, client.check(request)).await {
            Err(_) => return rpc_timeout(),
            Ok(Ok(resp)) => resp.into_inner(),
            Ok(Err(status)) => {
                vlog!(4, addr = %addr, service, code = ?status.code(), message = status.message(), "gRPC health check failed");
                return match status.code() {
                    Code::Unimplemented => (
                        Outcome::Failure,
                        format!(
                            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                            status.message()
                        ),
                    ),
                    // Servers that enforce the request's deadline answer
                    // Canceled (tonic) or DeadlineExceeded (grpc-go); either
                    // way the deadline ran out.
                    Code::DeadlineExceeded => rpc_timeout(),
                    Code::Cancelled if Instant::now() + DEADLINE_SLACK >= deadline => rpc_timeout(),
                    code => (
                        Outcome::Failure,
                        format!(
                            "error: health rpc probe failed: rpc error: code = {} desc = {}",
                            go_code_name(code),
                            status.message()
                        ),
                    ),
                };
            }
        };
        let status = ServingStatus::try_from(resp.status).unwrap_or(ServingStatus::Unknown);
        if status != ServingStatus::Serving {
            return (
                Outcome::Failure,
                format!(
                    "service unhealthy (responded with {})",
                    go_quote(status.as_str_name())
                ),
            );
        }
        (Outcome::Success, "service healthy".to_string())
    }
}

fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF_BASE.as_secs_f64()
        * BACKOFF_FACTOR.powi(i32::try_from(attempt).unwrap_or(i32::MAX));
    let capped = base.min(BACKOFF_MAX.as_secs_f64());
    let jitter = rand::rng().random_range(-BACKOFF_JITTER..=BACKOFF_JITTER);
    Duration::from_secs_f64((capped * (1.0 + jitter)).max(0.0))
}

#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;
