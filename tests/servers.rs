//! The kubelet's servers on real sockets: healthz (10248-style), read-only
//! (10255-style) and main (10250-style HTTPS with authentication), each on an
//! ephemeral port on 127.0.0.1, driven by real HTTP/1.1, HTTP/2 and TLS
//! clients.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kubelet::configz::Configz;
use kubelet::healthz::{Healthz, named_check};
use kubelet::kubelet::server::auth::{
    AlwaysAllowAuthorizer, AlwaysDenyAuthorizer, AuthnParams, Authorizer, ClientCaBundle,
    KubeletAuth, UserInfo, build_authenticator,
};
use kubelet::kubelet::server::handlers::{ServerHandlers, main_router, read_only_router};
use kubelet::kubelet::server::healthz_server::{HealthzServer, HealthzServerParams};
use kubelet::kubelet::server::router::{Router, text};
use kubelet::kubelet::server::tls::{TlsParams, initialize_tls};
use kubelet::kubelet::server::{HttpServer, handler_fn, main_server, read_only_server};
use kubelet::util::lifecycle::TaskSet;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const HOST: &str = "kubelet-test-node";

fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Answer {
    status: StatusCode,
    content_type: String,
    body: String,
}

async fn send<S>(io: S, path: &str, h2: bool) -> Answer
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let uri = if h2 {
        format!("https://{HOST}{path}")
    } else {
        path.to_string()
    };
    let req = Request::get(uri)
        .header("host", HOST)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = if h2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
                .await
                .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    };
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        content_type,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

async fn http_get(addr: SocketAddr, path: &str) -> Answer {
    send(TcpStream::connect(addr).await.unwrap(), path, false).await
}

/// A TLS client trusting `roots`, optionally presenting a client
/// certificate, limited to `versions`, offering h2 when asked.
fn client_config(
    roots: &RootCertStore,
    client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    versions: &[&'static rustls::SupportedProtocolVersion],
    h2: bool,
) -> Arc<ClientConfig> {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots.clone());
    let mut cfg = match client {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    if h2 {
        cfg.alpn_protocols = vec![b"h2".to_vec()];
    }
    Arc::new(cfg)
}

async fn tls_connect(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(cfg)
        .connect(ServerName::try_from(HOST).unwrap(), tcp)
        .await
}

async fn https_get(addr: SocketAddr, cfg: Arc<ClientConfig>, path: &str) -> Answer {
    let h2 = cfg.alpn_protocols == vec![b"h2".to_vec()];
    let stream = tls_connect(addr, cfg).await.unwrap();
    if h2 {
        assert_eq!(
            stream.get_ref().1.alpn_protocol(),
            Some(&b"h2"[..]),
            "h2 negotiated"
        );
    }
    send(stream, path, h2).await
}

fn pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A CA that signs client certificates.
struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    fn new(cn: &str) -> Self {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let pem = p.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: Issuer::new(p, key),
        }
    }

    fn client(
        &self,
        cn: &str,
        org: &str,
    ) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.distinguished_name.push(DnType::OrganizationName, org);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let key_der = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        (vec![cert.der().clone()], key_der)
    }
}

fn handlers() -> ServerHandlers {
    let configz = Configz::new();
    configz
        .register("kubeletconfig")
        .unwrap()
        .set(&serde_json::json!({"kind": "KubeletConfiguration", "port": 10250, "readOnlyPort": 0}))
        .unwrap();
    ServerHandlers {
        healthz: Healthz::new(),
        configz,
        metrics: Some(Arc::new(|| "kubelet_test_metric 1\n".to_string())),
        probe_metrics: None,
        kubelet: None,
        profiling: false,
    }
}

/// The main router plus /whoami, which echoes the authenticated user.
fn main_router_with_whoami(h: &ServerHandlers) -> Router {
    let mut router = main_router(h, true).unwrap();
    router
        .handle(
            "/whoami",
            handler_fn(|req| async move {
                let user = req
                    .extensions()
                    .get::<UserInfo>()
                    .cloned()
                    .unwrap_or_default();
                text(
                    StatusCode::OK,
                    format!("{} {}", user.name, user.groups.join(",")),
                )
            }),
        )
        .unwrap();
    router
}

struct MainSetup {
    anonymous: bool,
    client_ca: Option<String>,
    min_version: &'static str,
    authorizer: Arc<dyn Authorizer>,
    handshake_timeout: Option<Duration>,
}

impl Default for MainSetup {
    fn default() -> Self {
        Self {
            anonymous: true,
            client_ca: None,
            min_version: "",
            authorizer: Arc::new(AlwaysAllowAuthorizer),
            handshake_timeout: None,
        }
    }
}

struct RunningMain {
    addr: SocketAddr,
    roots: RootCertStore,
    tasks: TaskSet,
    _dir: tempfile::TempDir,
}

async fn start_main(setup: MainSetup) -> RunningMain {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let client_ca_file = setup.client_ca.as_ref().map(|pem| {
        let p = dir.path().join("client-ca.pem");
        std::fs::write(&p, pem).unwrap();
        p
    });
    let params = TlsParams {
        cert_dir: dir.path().join("pki"),
        hostname: HOST.to_string(),
        min_version: setup.min_version.to_string(),
        client_ca_file: client_ca_file.clone(),
        ..Default::default()
    };
    let options = initialize_tls(&params).unwrap();
    let tls = options.server_config().unwrap();
    let client_ca = client_ca_file.map(|p| ClientCaBundle::load(p).unwrap());
    let authn = build_authenticator(
        &AuthnParams {
            anonymous: setup.anonymous,
            client_ca,
            webhook_enabled: false,
        },
        None,
    )
    .unwrap();
    let auth = KubeletAuth::new(authn, setup.authorizer, HOST);
    let h = handlers();
    let mut server = main_server("127.0.0.1", 0, main_router_with_whoami(&h), tls, auth);
    if let Some(d) = setup.handshake_timeout {
        server = server.with_handshake_timeout(d);
    }
    let bound = server.bind().await.unwrap();
    let addr = bound.local_addr();
    let tasks = TaskSet::new();
    bound.start(&tasks);
    let served = pem_certs(options.cert_file().unwrap());
    let mut roots = RootCertStore::empty();
    roots.add(served[1].clone()).unwrap();
    RunningMain {
        addr,
        roots,
        tasks,
        _dir: dir,
    }
}

async fn stop(tasks: TaskSet) {
    let started = Instant::now();
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .expect("every server task stops within 1 s");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn healthz_server_ok_then_500_with_a_failing_check() {
    let hz = Healthz::new();
    let healthy = Arc::new(AtomicBool::new(true));
    let flag = healthy.clone();
    hz.register(named_check("syncloop", move || {
        if flag.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("sync Loop took longer than expected".into())
        }
    }))
    .unwrap();
    let port = free_port();
    let server = HealthzServer::new(
        HealthzServerParams {
            bind_address: "127.0.0.1".into(),
            port,
        },
        &hz,
    )
    .unwrap()
    .expect("enabled");
    let tasks = TaskSet::new();
    let addr = server.start(&tasks).wait().await.unwrap();
    assert_eq!(addr.port(), port);

    let a = http_get(addr, "/healthz").await;
    assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "ok"));
    assert_eq!(a.content_type, "text/plain; charset=utf-8");
    let a = http_get(addr, "/healthz?verbose").await;
    assert_eq!(a.body, "[+]ping ok\n[+]syncloop ok\nhealthz check passed\n");

    healthy.store(false, Ordering::SeqCst);
    let a = http_get(addr, "/healthz").await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        a.body,
        "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"
    );
    let a = http_get(addr, "/healthz/syncloop").await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        a.body,
        "internal server error: sync Loop took longer than expected\n"
    );
    let a = http_get(addr, "/healthz/ping").await;
    assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "ok"));
    // Only /healthz lives on this server.
    assert_eq!(
        http_get(addr, "/configz").await.status,
        StatusCode::NOT_FOUND
    );

    stop(tasks).await;
    assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
}

#[tokio::test]
async fn port_zero_disables_healthz_and_read_only() {
    let hz = Healthz::new();
    let params = HealthzServerParams {
        bind_address: "127.0.0.1".into(),
        port: 0,
    };
    assert!(HealthzServer::new(params, &hz).unwrap().is_none());
    let h = handlers();
    assert!(read_only_server("127.0.0.1", 0, read_only_router(&h).unwrap()).is_none());
}

#[tokio::test]
async fn read_only_server_is_plain_http_without_debug_endpoints() {
    let h = handlers();
    let port = free_port();
    let server =
        read_only_server("127.0.0.1", port, read_only_router(&h).unwrap()).expect("enabled");
    let bound = server.bind().await.unwrap();
    let addr = bound.local_addr();
    let tasks = TaskSet::new();
    bound.start(&tasks);

    let cases = [
        ("/healthz", 200, "ok"),
        ("/metrics", 200, "kubelet_test_metric 1\n"),
        ("/configz", 404, "404 page not found\n"),
        ("/exec/ns/pod/c", 405, "Debug endpoints are disabled.\n"),
        ("/nothing", 404, "404 page not found\n"),
    ];
    for (path, status, body) in cases {
        let a = http_get(addr, path).await;
        assert_eq!(
            (a.status.as_u16(), a.body.as_str()),
            (status, body),
            "{path}"
        );
    }
    stop(tasks).await;
}

#[tokio::test]
async fn main_server_self_signed_cert_is_written_and_reused() {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let params = TlsParams {
        cert_dir: dir.path().join("pki"),
        hostname: HOST.to_string(),
        ..Default::default()
    };
    let first = initialize_tls(&params).unwrap();
    let cert_path = dir.path().join("pki/kubelet.crt");
    let key_path = dir.path().join("pki/kubelet.key");
    assert_eq!(first.cert_file(), Some(cert_path.as_path()));
    assert_eq!(first.key_file(), Some(key_path.as_path()));
    let cert_bytes = std::fs::read(&cert_path).unwrap();
    let key_bytes = std::fs::read(&key_path).unwrap();

    // A second start reuses the pair.
    let second = initialize_tls(&params).unwrap();
    assert_eq!(std::fs::read(&cert_path).unwrap(), cert_bytes);
    assert_eq!(std::fs::read(&key_path).unwrap(), key_bytes);

    let served = pem_certs(&cert_path);
    let mut roots = RootCertStore::empty();
    roots.add(served[1].clone()).unwrap();

    let auth = KubeletAuth::new(
        build_authenticator(
            &AuthnParams {
                anonymous: true,
                ..Default::default()
            },
            None,
        )
        .unwrap(),
        Arc::new(AlwaysAllowAuthorizer),
        HOST,
    );
    let h = handlers();
    let bound = main_server(
        "127.0.0.1",
        0,
        main_router(&h, true).unwrap(),
        second.server_config().unwrap(),
        auth,
    )
    .bind()
    .await
    .unwrap();
    let addr = bound.local_addr();
    let tasks = TaskSet::new();
    bound.start(&tasks);

    // The handshake verifies against the CA in kubelet.crt for the hostname,
    // and the server presents the leaf from the file.
    let cfg = client_config(
        &roots,
        None,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
        false,
    );
    let stream = tls_connect(addr, cfg.clone()).await.unwrap();
    let presented = stream.get_ref().1.peer_certificates().unwrap()[0].clone();
    assert_eq!(presented, served[0]);
    drop(stream);

    let a = https_get(addr, cfg.clone(), "/configz").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.content_type, "application/json");
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["kubeletconfig"]["kind"], "KubeletConfiguration");
    assert_eq!(v["kubeletconfig"]["readOnlyPort"], 0);

    // HTTP/2 through ALPN, as Go's TLS servers offer it.
    let h2 = client_config(&roots, None, &[&rustls::version::TLS13], true);
    let a = https_get(addr, h2, "/healthz").await;
    assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "ok"));

    // A client that does not trust the kubelet's CA fails the handshake.
    let stranger = TestCa::new("stranger");
    let mut other_roots = RootCertStore::empty();
    other_roots
        .add(CertificateDer::from_pem_slice(stranger.pem.as_bytes()).unwrap())
        .unwrap();
    let untrusting = client_config(&other_roots, None, &[&rustls::version::TLS13], false);
    assert!(tls_connect(addr, untrusting).await.is_err());

    stop(tasks).await;
}

#[tokio::test]
async fn tls_min_version_13_refuses_tls12_clients() {
    let m = start_main(MainSetup {
        min_version: "VersionTLS13",
        ..Default::default()
    })
    .await;
    let tls12 = client_config(&m.roots, None, &[&rustls::version::TLS12], false);
    assert!(tls_connect(m.addr, tls12).await.is_err());
    let tls13 = client_config(&m.roots, None, &[&rustls::version::TLS13], false);
    assert_eq!(
        https_get(m.addr, tls13, "/healthz").await.status,
        StatusCode::OK
    );
    stop(m.tasks).await;
}

#[tokio::test]
async fn anonymous_allowed_and_denied() {
    // Anonymous on, no client CA: every request is system:anonymous.
    let m = start_main(MainSetup::default()).await;
    let cfg = client_config(&m.roots, None, &[&rustls::version::TLS12], false);
    let a = https_get(m.addr, cfg.clone(), "/whoami").await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (StatusCode::OK, "system:anonymous system:unauthenticated")
    );
    assert_eq!(https_get(m.addr, cfg.clone(), "/healthz").await.body, "ok");
    // Unknown paths are 404 before authentication.
    assert_eq!(
        https_get(m.addr, cfg, "/nothing").await.status,
        StatusCode::NOT_FOUND
    );
    stop(m.tasks).await;

    // Anonymous off: a request without credentials is refused.
    let ca = TestCa::new("cluster-ca");
    let m = start_main(MainSetup {
        anonymous: false,
        client_ca: Some(ca.pem.clone()),
        ..Default::default()
    })
    .await;
    let cfg = client_config(&m.roots, None, &[&rustls::version::TLS13], false);
    for path in ["/healthz", "/configz", "/metrics", "/whoami"] {
        let a = https_get(m.addr, cfg.clone(), path).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::UNAUTHORIZED, "Unauthorized"),
            "{path}"
        );
    }
    stop(m.tasks).await;

    // No method at all (anonymous and webhook off, no client CA): the
    // server still starts, as Go's does, and refuses everyone.
    let m = start_main(MainSetup {
        anonymous: false,
        client_ca: None,
        ..Default::default()
    })
    .await;
    let cfg = client_config(&m.roots, None, &[&rustls::version::TLS13], false);
    for path in ["/healthz", "/configz", "/metrics"] {
        let a = https_get(m.addr, cfg.clone(), path).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::UNAUTHORIZED, "Unauthorized"),
            "no method: {path}"
        );
    }
    stop(m.tasks).await;
}

#[tokio::test]
async fn client_certificates_from_the_configured_ca_only() {
    let ca = TestCa::new("cluster-ca");
    let other = TestCa::new("other-ca");
    for anonymous in [false, true] {
        let m = start_main(MainSetup {
            anonymous,
            client_ca: Some(ca.pem.clone()),
            ..Default::default()
        })
        .await;
        for versions in [
            &[&rustls::version::TLS13][..],
            &[&rustls::version::TLS12][..],
        ] {
            let good = client_config(
                &m.roots,
                Some(ca.client("system:node:n1", "system:nodes")),
                versions,
                false,
            );
            let a = https_get(m.addr, good, "/whoami").await;
            assert_eq!(
                (a.status, a.body.as_str()),
                (
                    StatusCode::OK,
                    "system:node:n1 system:nodes,system:authenticated"
                ),
                "anonymous={anonymous}"
            );

            // Signed by another CA: the handshake completes but the request
            // is unauthenticated, even with anonymous access on.
            let bad = client_config(
                &m.roots,
                Some(other.client("mallory", "system:masters")),
                versions,
                false,
            );
            let a = https_get(m.addr, bad, "/whoami").await;
            assert_eq!(
                (a.status, a.body.as_str()),
                (StatusCode::UNAUTHORIZED, "Unauthorized")
            );
        }
        stop(m.tasks).await;
    }
}

#[tokio::test]
async fn authorizer_denial_is_403_with_the_attributes() {
    let m = start_main(MainSetup {
        authorizer: Arc::new(AlwaysDenyAuthorizer),
        ..Default::default()
    })
    .await;
    let cfg = client_config(&m.roots, None, &[&rustls::version::TLS13], false);
    let cases = [
        ("/configz", "proxy"),
        ("/metrics", "metrics"),
        ("/healthz", "proxy"),
    ];
    for (path, sub) in cases {
        let a = https_get(m.addr, cfg.clone(), path).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(
            a.body,
            format!(
                "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource={sub})"
            )
        );
    }
    stop(m.tasks).await;
}

#[tokio::test]
async fn shutdown_through_the_task_set_within_one_second() {
    let tasks = TaskSet::new();

    let hz = Healthz::new();
    let hz_server = HealthzServer::new(
        HealthzServerParams {
            bind_address: "127.0.0.1".into(),
            port: free_port(),
        },
        &hz,
    )
    .unwrap()
    .unwrap();
    let hz_addr = hz_server.start(&tasks).wait().await.unwrap();

    // A read-only server with a request that never finishes.
    let h = handlers();
    let mut router = read_only_router(&h).unwrap();
    router
        .handle(
            "/slow",
            handler_fn(|_req| async move {
                std::future::pending::<()>().await;
                text(StatusCode::OK, "never")
            }),
        )
        .unwrap();
    let ro = HttpServer::new("read-only", "127.0.0.1", 0, router)
        .bind()
        .await
        .unwrap();
    let ro_addr = ro.local_addr();
    ro.start(&tasks);

    let m = start_main(MainSetup::default()).await;

    // An idle keep-alive connection on each plain server, and one stuck request.
    let mut idle = Vec::new();
    for addr in [hz_addr, ro_addr] {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let conn_task = tokio::spawn(conn);
        let resp = sender
            .send_request(
                Request::get("/healthz")
                    .body(Empty::<Bytes>::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        idle.push((sender, conn_task));
    }
    let stuck = tokio::spawn(async move {
        let stream = TcpStream::connect(ro_addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        sender
            .send_request(Request::get("/slow").body(Empty::<Bytes>::new()).unwrap())
            .await
            .is_err()
    });
    let cfg = client_config(&m.roots, None, &[&rustls::version::TLS13], false);
    assert_eq!(
        https_get(m.addr, cfg, "/healthz").await.status,
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(50)).await;

    // One shutdown for the healthz and read-only servers, one for main.
    let (a, b) = tokio::join!(stop(tasks), stop(m.tasks));
    let _ = (a, b);
    for addr in [hz_addr, ro_addr, m.addr] {
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "{addr} still accepting"
        );
    }
    // Idle connections were closed by the server.
    for (_sender, conn_task) in idle {
        tokio::time::timeout(Duration::from_secs(1), conn_task)
            .await
            .expect("idle connection closed")
            .unwrap()
            .ok();
    }
    // The stuck request was cut off rather than answered.
    let cut = tokio::time::timeout(Duration::from_secs(1), stuck)
        .await
        .unwrap()
        .unwrap();
    assert!(cut, "the never-ending request ends with the connection");
}

/// Clients that connect to 10250 and never finish a TLS handshake (silent,
/// or a record header and then nothing) are dropped once the handshake
/// bound passes, and never keep anyone else out: healthz over TLS answers
/// while hundreds of them wait. The figures are printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_tls_handshakes_are_dropped_after_the_bound() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const STALLED: usize = 600;
    let bound = Duration::from_secs(2);
    let m = start_main(MainSetup {
        handshake_timeout: Some(bound),
        ..Default::default()
    })
    .await;
    let mut stalled = Vec::with_capacity(STALLED);
    for i in 0..STALLED {
        let mut s = TcpStream::connect(m.addr).await.expect("connect");
        if i % 6 == 0 {
            // A handshake record header announcing 512 bytes, and one byte.
            s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
                .await
                .expect("write");
        }
        stalled.push((Instant::now(), s));
    }

    let cfg = client_config(&m.roots, None, &[&rustls::version::TLS13], false);
    let t = Instant::now();
    let answer = https_get(m.addr, cfg.clone(), "/healthz").await;
    let healthz = t.elapsed();
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert!(
        healthz < bound,
        "healthz took {healthz:?} behind stalled handshakes"
    );

    // Each stalled connection is closed by the server (EOF or reset), not
    // before the bound, and soon after it.
    let mut held = Vec::with_capacity(STALLED);
    for (opened, s) in &mut stalled {
        let deadline = *opened + bound + Duration::from_secs(5);
        let mut buf = [0u8; 256];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => continue,
                Err(_) => panic!(
                    "a stalled handshake was still open {:?} after it connected",
                    opened.elapsed()
                ),
            }
        }
        held.push(opened.elapsed());
    }
    held.sort();
    let (first, last) = (held[0], held[STALLED - 1]);
    eprintln!(
        "{STALLED} stalled TLS handshakes (bound {bound:?}): healthz over TLS in {healthz:?}; closed after {first:?} .. {last:?}"
    );
    assert!(
        first >= bound - Duration::from_millis(100),
        "closed early: {first:?}"
    );
    // And the server still serves.
    assert_eq!(
        https_get(m.addr, cfg, "/healthz").await.status,
        StatusCode::OK
    );
    stop(m.tasks).await;
}
