use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

use super::health::health_server::{Health, HealthServer};
use super::health::{HealthCheckRequest, HealthCheckResponse};
use super::*;

/// A health service answering from a table; `slow` sleeps, `unimpl`
/// answers Unimplemented, names not in the table are NotFound.
#[derive(Default, Clone)]
struct Table(Arc<Mutex<HashMap<String, ServingStatus>>>);

#[tonic::async_trait]
impl Health for Table {
    async fn check(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let service = req.into_inner().service;
        match service.as_str() {
            "slow" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Err(Status::internal("too late"))
            }
            "unimpl" => Err(Status::unimplemented("no health here")),
            _ => {
                let status = self.0.lock().expect("lock").get(&service).copied();
                match status {
                    Some(s) => Ok(Response::new(HealthCheckResponse { status: s as i32 })),
                    None => Err(Status::not_found("unknown service")),
                }
            }
        }
    }

    type WatchStream =
        Pin<Box<dyn futures::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

    async fn watch(
        &self,
        _req: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented("watch"))
    }
}

async fn serve(table: Table) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming(HealthServer::new(table), TcpListenerStream::new(listener))
            .await;
    });
    addr
}

#[tokio::test]
async fn health_check_outcomes() {
    let table = Table::default();
    table.0.lock().expect("lock").extend([
        (String::new(), ServingStatus::Serving),
        ("db".to_string(), ServingStatus::NotServing),
        ("cache".to_string(), ServingStatus::Unknown),
    ]);
    let addr = serve(table.clone()).await;
    let port = i32::from(addr.port());
    let p = GrpcProber::new();
    let s = Duration::from_secs(1);
    let cases: Vec<(&str, Outcome, String)> = vec![
        ("", Outcome::Success, "service healthy".into()),
        (
            "db",
            Outcome::Failure,
            "service unhealthy (responded with \"NOT_SERVING\")".into(),
        ),
        (
            "cache",
            Outcome::Failure,
            "service unhealthy (responded with \"UNKNOWN\")".into(),
        ),
        (
            "nobody",
            Outcome::Failure,
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"
                .into(),
        ),
        (
            "unimpl",
            Outcome::Failure,
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): no health here".into(),
        ),
        (
            "slow",
            Outcome::Failure,
            "timeout: health rpc did not complete within 1s".into(),
        ),
    ];
    for (service, outcome, msg) in cases {
        let got = p.probe("127.0.0.1", service, port, s).await;
        assert_eq!(got, (outcome, msg), "service {service:?}");
    }
    // The answer follows the server's state.
    table
        .0
        .lock()
        .expect("lock")
        .insert("db".into(), ServingStatus::Serving);
    assert_eq!(
        p.probe("127.0.0.1", "db", port, s).await.0,
        Outcome::Success
    );
}

#[tokio::test]
async fn unreachable_server_waits_out_the_timeout() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let started = std::time::Instant::now();
    let got = GrpcProber::new()
        .probe("127.0.0.1", "", i32::from(port), Duration::from_secs(1))
        .await;
    let took = started.elapsed();
    assert_eq!(
        got,
        (
            Outcome::Failure,
            format!(
                "timeout: failed to connect service \"127.0.0.1:{port}\" within 1s: context deadline exceeded"
            )
        )
    );
    // Like a blocking gRPC dial: retried until the deadline, not given up at once.
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[test]
fn backoff_grows_with_jitter_and_a_cap() {
    for attempt in 0..3 {
        let base = 1.6f64.powi(attempt);
        let d = backoff(u32::try_from(attempt).expect("small")).as_secs_f64();
        assert!(
            d >= base * 0.8 - 1e-9 && d <= base * 1.2 + 1e-9,
            "{attempt}: {d}"
        );
    }
    assert!(backoff(100) <= Duration::from_secs_f64(120.0 * 1.2 + 1e-6));
}
