//! Building the three API clients and their shared transport.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use rustls_pki_types::ServerName;
use tower::{Layer, ServiceBuilder};

use super::ClientError;
use super::connector::{ConnTracker, Connector};
use super::kubeconfig;
use super::ratelimit::{RateLimitLayer, TokenBucket, limiter_for};
use super::timeout::RequestTimeoutLayer;
use crate::apis::config::server::KubeletServer;
use crate::kubelet::certificate::bootstrap::{self, BootstrapParams, CLIENT_PAIR_PREFIX};
use crate::kubelet::certificate::csr::{CsrSubject, KUBELET_CLIENT_SIGNER, kubelet_client_usages};
use crate::kubelet::certificate::{
    CertificateManager, CsrClients, Exported, FileStore, ManagerConfig, Template,
};
use crate::util::clock::{Clock, RealClock};
use crate::util::lifecycle::{Period, TaskSet};

/// The only content type kube speaks.
pub const CONTENT_TYPE_JSON: &str = "application/json";

/// What to call when heartbeats keep failing.
pub type HeartbeatFailureFn = Arc<dyn Fn() + Send + Sync>;

/// How often the transport checks the client certificate (Go: 10 s).
const TRANSPORT_CHECK_PERIOD: Duration = Duration::from_secs(10);
/// How long the kubelet runs without a valid client certificate against a
/// responsive server before it exits (Go: 5 min).
const EXIT_AFTER_NO_CERT: Duration = Duration::from_secs(300);

/// The settings the clients are built from.
#[derive(Debug, Clone)]
pub struct ClientParams {
    pub kubeconfig: PathBuf,
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub cert_dir: PathBuf,
    pub node_name: String,
    pub rotate_certificates: bool,
    pub content_type: String,
    pub kube_api_qps: i32,
    pub kube_api_burst: i32,
    pub event_record_qps: i32,
    pub event_burst: i32,
    /// min(nodeLeaseDurationSeconds, nodeStatusUpdateFrequency).
    pub heartbeat_timeout: Duration,
}

impl ClientParams {
    /// The settings of a kubelet started with `server`.
    pub fn from_server(server: &KubeletServer, node_name: &str) -> Self {
        let c = &server.config;
        let f = &server.flags;
        let lease = Duration::from_secs(c.node_lease_duration_seconds.max(0) as u64);
        let status = c.node_status_update_frequency.to_std();
        ClientParams {
            kubeconfig: PathBuf::from(&f.kubeconfig),
            bootstrap_kubeconfig: (!f.bootstrap_kubeconfig.is_empty())
                .then(|| PathBuf::from(&f.bootstrap_kubeconfig)),
            cert_dir: PathBuf::from(&f.cert_directory),
            node_name: node_name.to_string(),
            rotate_certificates: c.rotate_certificates,
            content_type: c.content_type.clone(),
            kube_api_qps: c.kube_api_qps,
            kube_api_burst: c.kube_api_burst,
            event_record_qps: c.event_record_qps,
            event_burst: c.event_burst,
            heartbeat_timeout: status.min(lease),
        }
    }
}

type HyperClient = hyper_util::client::legacy::Client<Connector, kube::client::Body>;

/// The kubelet's API clients.
#[derive(Clone)]
pub struct KubeClients {
    /// Pods, nodes, leases' reads, CSRs, reviews: throttled by kubeAPIQPS.
    pub main: kube::Client,
    /// Events: throttled by eventRecordQPS.
    pub events: kube::Client,
    /// Node status and lease renewals: unthrottled, with a request timeout.
    pub heartbeat: kube::Client,
    /// The token bucket of `main` (None when unthrottled): writers that
    /// can still improve what they send wait on it before building their
    /// request (the pod status sync).
    pub main_limiter: Option<Arc<TokenBucket>>,
    tracker: ConnTracker,
    rotation: Option<Rotation>,
    on_fatal: Arc<dyn Fn(&str) + Send + Sync>,
    clock: Arc<dyn Clock>,
}

/// Client certificate rotation: the manager and the clients its rotations
/// request certificates with (built after it, as they present its pair).
#[derive(Clone)]
struct Rotation {
    manager: Arc<CertificateManager>,
    clients: CsrClients,
}

impl std::fmt::Debug for KubeClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClients")
            .field("rotating", &self.rotation.is_some())
            .finish_non_exhaustive()
    }
}

fn user_agent() -> String {
    format!(
        "kubelet/{} ({}/{}) kubernetes/kubelet-rs",
        crate::version::git_version(),
        std::env::consts::OS,
        crate::kubelet::nodestatus::go_arch()
    )
}

fn build_err(e: impl std::fmt::Display) -> ClientError {
    ClientError::Build(e.to_string())
}

/// A kube client over `hyper` with `config`'s base URI, auth and headers,
/// throttled by `limiter`, each request bounded by `timeout`.
fn make_client(
    config: &kube::Config,
    hyper: HyperClient,
    limiter: Option<Arc<TokenBucket>>,
    timeout: Option<Duration>,
) -> Result<kube::Client, ClientError> {
    let limited = match limiter {
        Some(b) => tower::util::Either::Left(RateLimitLayer::new(b).layer(hyper)),
        None => tower::util::Either::Right(hyper),
    };
    let svc = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(build_err)?)
        .layer(config.extra_headers_layer().map_err(build_err)?)
        .map_err(tower::BoxError::from)
        .service(limited);
    let ns = config.default_namespace.clone();
    Ok(match timeout {
        Some(t) => kube::Client::new(RequestTimeoutLayer::new(t).layer(svc), ns),
        None => kube::Client::new(svc, ns),
    })
}

/// The transport: rustls from `config` (with `resolver` presenting the
/// rotating identity, when given) over the tracked connector.
fn make_transport(
    config: &kube::Config,
    resolver: Option<Arc<dyn rustls::client::ResolvesClientCert>>,
    tracker: &ConnTracker,
) -> Result<HyperClient, ClientError> {
    let tls = if config.cluster_url.scheme_str() == Some("https") {
        let mut tls = config.rustls_client_config().map_err(build_err)?;
        if let Some(r) = resolver {
            tls.client_auth_cert_resolver = r;
        }
        Some(Arc::new(tls))
    } else {
        None
    };
    let server_name = match &config.tls_server_name {
        Some(n) => Some(
            ServerName::try_from(n.clone())
                .map_err(|e| ClientError::Build(format!("tls-server-name {n:?}: {e}")))?,
        ),
        None => None,
    };
    let connector = Connector::new(tls, server_name, tracker.clone());
    Ok(
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector),
    )
}

/// Builds the clients (Go's buildKubeletClientConfig and the clients of
/// run()). Without certificate rotation a bootstrap kubeconfig is used
/// first, waiting for the certificate; with rotation the manager requests
/// it in the background once started.
pub async fn build_clients(params: &ClientParams) -> Result<KubeClients, ClientError> {
    build_clients_with_clock(params, Arc::new(RealClock)).await
}

/// [`build_clients`] with an explicit clock.
pub async fn build_clients_with_clock(
    params: &ClientParams,
    clock: Arc<dyn Clock>,
) -> Result<KubeClients, ClientError> {
    if !params.content_type.is_empty() && params.content_type != CONTENT_TYPE_JSON {
        tracing::info!(
            content_type = %params.content_type,
            "The API clients send and accept JSON only; the configured content type is not used"
        );
    }
    let tracker = ConnTracker::new();
    let (mut config, cert_manager, bootstrap_client) = if params.rotate_certificates {
        tracing::info!("Client rotation is on, will bootstrap in background");
        let rc = bootstrap::load_client_config(
            &params.kubeconfig,
            params.bootstrap_kubeconfig.as_deref(),
            &params.cert_dir,
        )
        .await?;
        let (dir, cf, kf) = (
            params.cert_dir.clone(),
            rc.cert_file.clone(),
            rc.key_file.clone(),
        );
        let store = crate::kubelet::certificate::blocking(move || {
            FileStore::open(CLIENT_PAIR_PREFIX, &dir, &dir, cf, kf)
        })
        .await?;
        let manager = CertificateManager::new(ManagerConfig {
            template: Template::Fixed(CsrSubject::node(&params.node_name)),
            signer_name: KUBELET_CLIENT_SIGNER.to_string(),
            usages: kubelet_client_usages(),
            store,
            bootstrap_pair: rc.initial_pair.clone(),
            clock: clock.clone(),
            exported: Some(Exported::Client),
        })
        .await?;
        let bootstrap_client = kube::Client::try_from(rc.cert_config.clone()).map_err(build_err)?;
        (
            rc.user.anonymous_config(),
            Some(manager),
            Some(bootstrap_client),
        )
    } else {
        if let Some(b) = &params.bootstrap_kubeconfig {
            bootstrap::load_client_cert(&BootstrapParams {
                kubeconfig: params.kubeconfig.clone(),
                bootstrap_kubeconfig: b.clone(),
                cert_dir: params.cert_dir.clone(),
                node_name: params.node_name.clone(),
            })
            .await?;
        }
        (
            kubeconfig::load(&params.kubeconfig).await?.config,
            None,
            None,
        )
    };
    let ua = HeaderValue::from_str(&user_agent()).map_err(build_err)?;
    config
        .headers
        .push((HeaderName::from_static("user-agent"), ua));

    let resolver = cert_manager.as_ref().map(|m| m.resolver());
    let hyper = make_transport(&config, resolver, &tracker)?;
    let main_limiter = limiter_for(params.kube_api_qps as f32, params.kube_api_burst);
    let main = make_client(&config, hyper.clone(), main_limiter.clone(), None)?;
    let events = make_client(
        &config,
        hyper.clone(),
        limiter_for(params.event_record_qps as f32, params.event_burst),
        None,
    )?;
    let heartbeat = make_client(&config, hyper, None, Some(params.heartbeat_timeout))?;
    let rotation = cert_manager.map(|manager| Rotation {
        manager,
        clients: CsrClients {
            with_current: main.clone(),
            bootstrap: bootstrap_client,
        },
    });
    Ok(KubeClients {
        main,
        events,
        heartbeat,
        main_limiter,
        tracker,
        rotation,
        on_fatal: Arc::new(|msg| {
            tracing::error!(reason = msg, "Exiting");
            std::process::exit(1);
        }),
        clock,
    })
}

/// One transport (connection pool, TLS, credentials) for many kubelets of
/// one process (hollow nodes): each gets its own clients and token buckets
/// over the shared connections. Closing connections after heartbeat
/// failures closes them for every kubelet on the transport.
#[derive(Clone)]
pub struct SharedTransport {
    config: kube::Config,
    hyper: HyperClient,
    tracker: ConnTracker,
}

impl std::fmt::Debug for SharedTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTransport").finish_non_exhaustive()
    }
}

impl SharedTransport {
    /// The transport of `kubeconfig`'s current context (no bootstrap, no
    /// certificate rotation).
    pub async fn from_kubeconfig(kubeconfig: &std::path::Path) -> Result<Self, ClientError> {
        let mut config = kubeconfig::load(kubeconfig).await?.config;
        let ua = HeaderValue::from_str(&user_agent()).map_err(build_err)?;
        config
            .headers
            .push((HeaderName::from_static("user-agent"), ua));
        let tracker = ConnTracker::new();
        let hyper = make_transport(&config, None, &tracker)?;
        Ok(SharedTransport {
            config,
            hyper,
            tracker,
        })
    }

    /// One kubelet's three clients over the shared connections, throttled
    /// by its own limits (`params`: QPS, bursts, heartbeat timeout).
    pub fn clients(
        &self,
        params: &ClientParams,
        clock: Arc<dyn Clock>,
    ) -> Result<KubeClients, ClientError> {
        let main_limiter = limiter_for(params.kube_api_qps as f32, params.kube_api_burst);
        let main = make_client(&self.config, self.hyper.clone(), main_limiter.clone(), None)?;
        let events = make_client(
            &self.config,
            self.hyper.clone(),
            limiter_for(params.event_record_qps as f32, params.event_burst),
            None,
        )?;
        let heartbeat = make_client(
            &self.config,
            self.hyper.clone(),
            None,
            Some(params.heartbeat_timeout),
        )?;
        Ok(KubeClients {
            main,
            events,
            heartbeat,
            main_limiter,
            tracker: self.tracker.clone(),
            rotation: None,
            on_fatal: Arc::new(|msg| {
                tracing::error!(reason = msg, "Exiting");
                std::process::exit(1);
            }),
            clock,
        })
    }
}

impl KubeClients {
    /// Drops every open connection of the three clients.
    pub fn close_all_connections(&self) {
        self.tracker.close_all();
    }

    /// How many times the connections were dropped (heartbeat failures,
    /// certificate rotations).
    pub fn connection_drops(&self) -> u64 {
        self.tracker.close_count()
    }

    /// The hook node status and the lease call on repeated heartbeat
    /// failures: drop every connection.
    pub fn heartbeat_failure_hook(&self) -> HeartbeatFailureFn {
        let tracker = self.tracker.clone();
        Arc::new(move || {
            tracing::info!("Heartbeat failures: closing all connections to the API server");
            tracker.close_all();
        })
    }

    /// The certificate manager, when certificates rotate.
    pub fn certificate_manager(&self) -> Option<Arc<CertificateManager>> {
        self.rotation.as_ref().map(|r| r.manager.clone())
    }

    /// Replaces what happens when the kubelet must exit for lack of a valid
    /// client certificate (default: log and exit the process with 1, as Go).
    pub fn with_fatal_hook(mut self, f: Arc<dyn Fn(&str) + Send + Sync>) -> Self {
        self.on_fatal = f;
        self
    }

    /// Starts certificate rotation and the transport's certificate watch
    /// (nothing without rotation).
    pub fn start(&self, tasks: &TaskSet) {
        let Some(Rotation { manager, clients }) = self.rotation.clone() else {
            return;
        };
        crate::vlog!(2, "Starting client certificate rotation");
        manager.start(tasks, clients);
        let watch = Arc::new(TransportWatch {
            last_available: Mutex::new(self.clock.monotonic()),
            last: Mutex::new(manager.current()),
            manager,
            tracker: self.tracker.clone(),
            on_fatal: self.on_fatal.clone(),
            clock: self.clock.clone(),
        });
        let period = Period::sliding(TRANSPORT_CHECK_PERIOD).waiting_first();
        tasks.spawn_periodic(
            "client-certificate-transport",
            period,
            self.clock.clone(),
            move || {
                let watch = watch.clone();
                async move { watch.check() }
            },
        );
    }
}

/// The transport's certificate watch: connections are closed when the
/// certificate rotates; the kubelet exits when none has been valid for a
/// while and the server answers.
struct TransportWatch {
    manager: Arc<CertificateManager>,
    tracker: ConnTracker,
    on_fatal: Arc<dyn Fn(&str) + Send + Sync>,
    clock: Arc<dyn Clock>,
    /// When a valid certificate was last seen, on the monotonic clock (Go's
    /// `time.Now()` readings): a wall-clock step does not end the process.
    last_available: Mutex<tokio::time::Instant>,
    last: Mutex<Option<Arc<crate::kubelet::certificate::KeyPair>>>,
}

impl TransportWatch {
    fn check(&self) -> ControlFlow<()> {
        let now = self.clock.monotonic();
        let cur = self.manager.current();
        let mut last_available = self
            .last_available
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match &cur {
            None if now > *last_available + EXIT_AFTER_NO_CERT => {
                if self.manager.server_healthy() {
                    tracing::error!(
                        "No valid client certificate is found and the server is responsive, exiting."
                    );
                    (self.on_fatal)("no valid client certificate");
                    return ControlFlow::Break(());
                }
                tracing::error!(
                    "No valid client certificate is found but the server is not responsive. A restart may be necessary to retrieve new initial credentials."
                );
            }
            None => {}
            Some(_) => *last_available = now,
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let rotated = match (&cur, &*last) {
            (Some(c), Some(l)) => !Arc::ptr_eq(c, l),
            (Some(_), None) => true,
            _ => false,
        };
        if rotated {
            *last = cur;
            tracing::info!(
                "Certificate rotation detected, shutting down client connections to start using new credentials"
            );
            self.tracker.close_all();
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::config::duration::Duration as ConfigDuration;
    use crate::apis::config::flags::KubeletFlags;
    use crate::apis::config::types::KubeletConfiguration;
    use crate::features::FeatureGate;

    #[test]
    fn params_from_server_table() {
        // (lease seconds, status frequency s, bootstrap, want heartbeat timeout s)
        let cases = [
            (40, 10, "", 10),
            (5, 10, "/etc/kubernetes/bootstrap.conf", 5),
            (40, 60, "", 40),
        ];
        for (lease, freq, bootstrap, want) in cases {
            let flags = KubeletFlags {
                kubeconfig: "/etc/kubernetes/kubelet.conf".into(),
                bootstrap_kubeconfig: bootstrap.into(),
                ..Default::default()
            };
            let mut config = KubeletConfiguration::v1beta1_defaults();
            config.node_lease_duration_seconds = lease;
            config.node_status_update_frequency = ConfigDuration::from_secs(freq);
            let server = KubeletServer::new(flags, config, FeatureGate::new());
            let p = ClientParams::from_server(&server, "n1");
            assert_eq!(p.heartbeat_timeout, Duration::from_secs(want));
            assert_eq!(p.bootstrap_kubeconfig.is_some(), !bootstrap.is_empty());
            assert_eq!((p.kube_api_qps, p.kube_api_burst), (5, 10));
            assert_eq!((p.event_record_qps, p.event_burst), (5, 10));
            assert_eq!(p.cert_dir, PathBuf::from("/var/lib/kubelet/pki"));
            assert_eq!(p.node_name, "n1");
        }
    }
}
