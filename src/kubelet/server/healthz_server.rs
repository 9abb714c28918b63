//! The standalone healthz server on healthzBindAddress:healthzPort (default
//! 127.0.0.1:10248), plain HTTP, serving only `/healthz`. Port 0 disables
//! it. Binding failures do not stop the kubelet: as in Go, the server logs
//! and tries again every 5 seconds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{HttpServer, Router, ServerError};
use crate::healthz::Healthz;
use crate::util::clock::RealClock;
use crate::util::lifecycle::{Period, TaskSet};

/// Pause between attempts to bind.
pub const RETRY_PERIOD: Duration = Duration::from_secs(5);

/// healthzBindAddress and healthzPort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthzServerParams {
    pub bind_address: String,
    pub port: u16,
}

impl Default for HealthzServerParams {
    fn default() -> Self {
        Self {
            bind_address: "127.0.0.1".to_string(),
            port: 10248,
        }
    }
}

/// The healthz server, built and not started.
#[derive(Debug)]
pub struct HealthzServer {
    params: HealthzServerParams,
    router: Router,
}

/// Reports the bound address once the server listens.
#[derive(Clone, Debug)]
pub struct HealthzListening(watch::Receiver<Option<SocketAddr>>);

impl HealthzListening {
    /// Waits until the server has bound its socket.
    pub async fn wait(&mut self) -> Option<SocketAddr> {
        self.0.wait_for(Option::is_some).await.ok().and_then(|v| *v)
    }
}

impl HealthzServer {
    /// Builds the server; `None` when the port is 0 (disabled).
    pub fn new(
        params: HealthzServerParams,
        healthz: &Arc<Healthz>,
    ) -> Result<Option<Self>, ServerError> {
        if params.port == 0 {
            return Ok(None);
        }
        let mut router = Router::new();
        healthz.install(&mut router)?;
        Ok(Some(Self { params, router }))
    }

    /// Start phase: spawns the server (bind, retrying every
    /// [`RETRY_PERIOD`], then serve) on `tasks`.
    pub fn start(self, tasks: &TaskSet) -> HealthzListening {
        let (tx, rx) = watch::channel(None);
        let tx = Arc::new(tx);
        let child = tasks.clone();
        let period = Period::sliding(RETRY_PERIOD);
        tasks.spawn_periodic("healthz-server", period, Arc::new(RealClock), move || {
            let server = HttpServer::new(
                "healthz",
                self.params.bind_address.clone(),
                self.params.port,
                self.router.clone(),
            );
            let (tx, child) = (tx.clone(), child.clone());
            async move {
                match server.bind().await {
                    Ok(bound) => {
                        let _ = tx.send(Some(bound.local_addr()));
                        bound.serve(child).await;
                    }
                    Err(err) => tracing::error!(error = %err, "Failed to start healthz server"),
                }
            }
        });
        HealthzListening(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_disables() {
        let hz = Healthz::new();
        let off = HealthzServer::new(
            HealthzServerParams {
                bind_address: "127.0.0.1".into(),
                port: 0,
            },
            &hz,
        )
        .unwrap();
        assert!(off.is_none());
        assert!(
            HealthzServer::new(HealthzServerParams::default(), &hz)
                .unwrap()
                .is_some()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bind_failure_is_retried_until_cancelled() {
        // Occupy a port so the server cannot bind it.
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = busy.local_addr().unwrap().port();
        let hz = Healthz::new();
        let server = HealthzServer::new(
            HealthzServerParams {
                bind_address: "127.0.0.1".into(),
                port,
            },
            &hz,
        )
        .unwrap()
        .unwrap();
        let tasks = TaskSet::new();
        let mut listening = server.start(&tasks);
        tokio::time::sleep(RETRY_PERIOD * 2).await;
        drop(busy);
        tokio::time::sleep(RETRY_PERIOD + Duration::from_millis(10)).await;
        let addr = tokio::time::timeout(Duration::from_secs(5), listening.wait())
            .await
            .expect("bound after the port was freed");
        assert_eq!(addr.map(|a| a.port()), Some(port));
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(1))
            .await
            .unwrap();
    }
}
