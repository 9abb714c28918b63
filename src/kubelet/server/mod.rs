//! The kubelet's HTTP servers: the main server (HTTPS on address:port,
//! 10250, authenticated and authorized), the read-only server (plain HTTP on
//! address:readOnlyPort, 10255, no auth) and the plumbing the healthz server
//! (10248) shares.
//!
//! Build phase: assemble a [`Router`] (handlers from [`handlers`] and later
//! issues), settle TLS ([`tls::initialize_tls`]), build [`auth::KubeletAuth`],
//! and make an [`HttpServer`]. Start phase: [`HttpServer::bind`] then
//! [`BoundServer::start`] on the TaskSet; cancellation stops accepting and
//! ends connections within a bounded grace.

pub mod auth;
pub mod cadvisor_metrics;
pub mod cert;
pub mod handlers;
pub mod healthz_server;
pub mod http_metrics;
pub mod listen;
pub mod logs;
pub mod node_logs;
pub mod podresources;
pub mod pods;
pub mod pprof;
pub mod proxy;
pub mod resource_metrics;
pub use crate::util::router;
pub mod stats_summary;
pub mod streaming;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::util::lifecycle::TaskSet;
use auth::KubeletAuth;
pub use router::{Handler, RequestBody, ResponseBody, Route, Router, handler_fn};

/// What a handler knows about the connection a request came on (in the
/// request's extensions).
#[derive(Clone, Debug, Default)]
pub struct ConnectionInfo {
    pub remote_addr: Option<SocketAddr>,
    pub tls: bool,
    /// The client's certificate chain, end entity first (not yet verified).
    pub peer_certificates: Option<Arc<[CertificateDer<'static>]>>,
}

/// Errors of the servers.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{server}: failed to listen on {host}:{port}: {source}")]
    Bind {
        server: &'static str,
        host: String,
        port: u16,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Router(#[from] router::RouterError),
    #[error(transparent)]
    Auth(#[from] auth::AuthError),
    #[error(transparent)]
    Healthz(#[from] crate::healthz::HealthzError),
}

/// Routes a request, runs the auth filter when there is one, and calls the
/// handler. Unknown paths are answered 404 before any authentication, as
/// the Go kubelet's mux does.
pub struct KubeletService {
    router: Arc<Router>,
    auth: Option<Arc<KubeletAuth>>,
    /// `readwrite` or `readonly`: the request metrics' server type; `None`
    /// records no request metrics.
    server_type: Option<&'static str>,
}

impl KubeletService {
    pub fn new(router: Router, auth: Option<KubeletAuth>) -> Self {
        Self {
            router: Arc::new(router),
            auth: auth.map(Arc::new),
            server_type: None,
        }
    }

    /// Records request metrics under `server_type`.
    pub fn with_server_type(mut self, server_type: &'static str) -> Self {
        self.server_type = Some(server_type);
        self
    }

    /// The metrics bucket of a path: its root when this server serves it.
    fn metric_bucket(&self, path: &str) -> String {
        let root = http_metrics::url_root(path);
        let served = !root.is_empty()
            && [format!("/{root}"), format!("/{root}/")].iter().any(|p| {
                matches!(
                    self.router.route(p, None),
                    Route::Handler { .. } | Route::Redirect(_)
                )
            });
        if served {
            root
        } else {
            http_metrics::OTHER.to_string()
        }
    }

    /// Answers one request.
    pub async fn dispatch(&self, req: Request<RequestBody>) -> Response<ResponseBody> {
        let _in_flight = self.server_type.map(|server_type| {
            let bucket = self.metric_bucket(req.uri().path());
            http_metrics::InFlight::start(req.method().as_str(), &bucket, server_type)
        });
        let (mut parts, body) = req.into_parts();
        let Some(path) = router::decode_path(parts.uri.path()) else {
            return router::http_error(StatusCode::BAD_REQUEST, "400 Bad Request");
        };
        let handler = match self.router.route(&path, parts.uri.query()) {
            Route::Handler { handler, .. } => handler.clone(),
            Route::Redirect(location) => return router::redirect(&location, &parts.method),
            Route::NotFound => return router::not_found(),
        };
        if let Some(auth) = &self.auth {
            match auth.filter(&parts, &path).await {
                Ok(user) => {
                    parts.extensions.insert(user);
                }
                Err(resp) => return resp,
            }
        }
        handler.call(Request::from_parts(parts, body)).await
    }
}

/// A server ready to bind: name (for logs and task names), where to listen,
/// what to serve, and optionally TLS and auth.
pub struct HttpServer {
    name: &'static str,
    host: String,
    port: u16,
    router: Router,
    tls: Option<Arc<ServerConfig>>,
    handshake_timeout: Duration,
    auth: Option<KubeletAuth>,
    server_type: Option<&'static str>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("name", &self.name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls.is_some())
            .field("auth", &self.auth.is_some())
            .finish()
    }
}

impl HttpServer {
    /// A plain-HTTP server on `host:port` (an IP, empty for all, or a name).
    pub fn new(name: &'static str, host: impl Into<String>, port: u16, router: Router) -> Self {
        Self {
            name,
            host: host.into(),
            port,
            router,
            tls: None,
            handshake_timeout: listen::TLS_HANDSHAKE_TIMEOUT,
            auth: None,
            server_type: None,
        }
    }

    /// How long a TLS client may take to finish its handshake (default
    /// [`listen::TLS_HANDSHAKE_TIMEOUT`]).
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Records request metrics under `server_type` (`readwrite`, `readonly`).
    pub fn with_server_type(mut self, server_type: &'static str) -> Self {
        self.server_type = Some(server_type);
        self
    }

    /// Serves HTTPS with this configuration.
    pub fn with_tls(mut self, tls: Arc<ServerConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Authenticates and authorizes every routed request.
    pub fn with_auth(mut self, auth: KubeletAuth) -> Self {
        self.auth = Some(auth);
        self
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Opens the listening socket.
    pub async fn bind(self) -> Result<BoundServer, ServerError> {
        tracing::info!(server = self.name, address = %self.host, port = self.port, "Starting to listen");
        let listener = listen::bind_tcp(&self.host, self.port)
            .await
            .map_err(|source| ServerError::Bind {
                server: self.name,
                host: self.host.clone(),
                port: self.port,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
            server: self.name,
            host: self.host.clone(),
            port: self.port,
            source,
        })?;
        Ok(BoundServer {
            name: self.name,
            listener,
            local_addr,
            tls: self.tls.map(|config| {
                Arc::new(listen::TlsAccept {
                    acceptor: TlsAcceptor::from(config),
                    handshake_timeout: self.handshake_timeout,
                })
            }),
            service: Arc::new({
                let service = KubeletService::new(self.router, self.auth);
                match self.server_type {
                    Some(t) => service.with_server_type(t),
                    None => service,
                }
            }),
        })
    }
}

/// A server with its socket open, not yet accepting.
pub struct BoundServer {
    name: &'static str,
    listener: TcpListener,
    local_addr: SocketAddr,
    tls: Option<Arc<listen::TlsAccept>>,
    service: Arc<KubeletService>,
}

impl std::fmt::Debug for BoundServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundServer")
            .field("name", &self.name)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl BoundServer {
    /// The address actually bound (port 0 resolves here).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Start phase: spawns the accept loop on `tasks`.
    pub fn start(self, tasks: &TaskSet) {
        let name = self.name;
        tasks.spawn(name, self.serve(tasks.clone()));
    }

    /// Runs the accept loop in the current task until `tasks` is cancelled.
    pub async fn serve(self, tasks: TaskSet) {
        listen::accept_loop(self.name, self.listener, self.tls, self.service, tasks).await;
    }
}

/// The main server (10250): HTTPS with the kubelet's auth filter.
pub fn main_server(
    address: impl Into<String>,
    port: u16,
    router: Router,
    tls: Arc<ServerConfig>,
    auth: KubeletAuth,
) -> HttpServer {
    HttpServer::new("kubelet-server", address, port, router)
        .with_tls(tls)
        .with_auth(auth)
        .with_server_type("readwrite")
}

/// The read-only server (10255): plain HTTP, no auth; `None` when the port
/// is 0 (disabled).
pub fn read_only_server(
    address: impl Into<String>,
    port: u16,
    router: Router,
) -> Option<HttpServer> {
    (port != 0).then(|| {
        HttpServer::new("kubelet-read-only-server", address, port, router)
            .with_server_type("readonly")
    })
}
