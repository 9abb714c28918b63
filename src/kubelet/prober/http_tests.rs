use std::convert::Infallible;
use std::net::SocketAddr;

use http_body_util::Full;
use hyper::service::service_fn;

use super::*;

#[test]
fn probe_url_table() {
    let cases = [
        (
            "http",
            "10.0.0.1",
            80,
            "/healthz",
            "http://10.0.0.1:80/healthz",
            "/healthz",
        ),
        ("http", "10.0.0.1", 80, "", "http://10.0.0.1:80", "/"),
        (
            "http",
            "h",
            80,
            "healthz",
            "http://h:80/healthz",
            "/healthz",
        ),
        (
            "http",
            "h",
            80,
            "/a b?x=1 2#frag",
            "http://h:80/a%20b?x=1%202#frag",
            "/a%20b?x=1%202",
        ),
        (
            "https",
            "fd00::1",
            8443,
            "/",
            "https://[fd00::1]:8443/",
            "/",
        ),
        ("http", "h", 81, "?x=1", "http://h:81?x=1", "/?x=1"),
        ("http", "", 80, "/x", "http://:80/x", "/x"),
    ];
    for (scheme, host, port, path, shown, target) in cases {
        let u = ProbeUrl::new(scheme, host, port, path);
        assert_eq!(u.to_string(), shown, "{path}");
        assert_eq!(u.request_target(), target, "{path}");
        assert_eq!(u.hostname(), host);
    }
}

#[test]
fn redirect_targets_resolve_against_the_url() {
    let base = ProbeUrl::new("http", "10.0.0.1", 8080, "/a/b");
    let cases = [
        ("/c", "http://10.0.0.1:8080/c", "10.0.0.1"),
        ("c", "http://10.0.0.1:8080/a/c", "10.0.0.1"),
        ("http://other:81/x?y=1", "http://other:81/x?y=1", "other"),
        ("https://10.0.0.1/", "https://10.0.0.1/", "10.0.0.1"),
    ];
    for (loc, want, host) in cases {
        let next = base.resolve(loc).expect("resolves");
        assert_eq!(next.to_string(), want, "{loc}");
        assert_eq!(next.hostname(), host, "{loc}");
    }
    let https = base.resolve("https://10.0.0.1/").expect("resolves");
    assert_eq!(https.port, 443);
}

#[test]
fn header_defaults_table() {
    let h = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    let (headers, host) = build_headers(&[]).expect("ok");
    assert_eq!(headers.get(USER_AGENT).expect("ua"), "kube-probe/1.25");
    assert_eq!(headers.get(ACCEPT).expect("accept"), "*/*");
    assert_eq!(host, None);

    let (headers, host) = build_headers(&h(&[
        ("User-Agent", "custom"),
        ("Accept", "application/json"),
        ("Host", "example.test"),
        ("X-Multi", "a"),
        ("X-Multi", "b"),
    ]))
    .expect("ok");
    assert_eq!(headers.get(USER_AGENT).expect("ua"), "custom");
    assert_eq!(headers.get(ACCEPT).expect("accept"), "application/json");
    assert_eq!(host.as_deref(), Some("example.test"));
    assert!(
        headers.get(HOST).is_none(),
        "Host is the request's host, not a header"
    );
    assert_eq!(headers.get_all("x-multi").iter().count(), 2);

    let (headers, _) = build_headers(&h(&[("Accept", ""), ("User-Agent", "")])).expect("ok");
    assert!(headers.get(ACCEPT).is_none(), "empty Accept removes it");
    assert!(
        headers.get(USER_AGENT).is_none(),
        "empty User-Agent sends none"
    );

    assert_eq!(
        build_headers(&h(&[("bad name", "v")]))
            .expect_err("invalid")
            .to_string(),
        "net/http: invalid header field name \"bad name\""
    );
    assert_eq!(
        build_headers(&h(&[("X-Bad", "a\nb")]))
            .expect_err("invalid")
            .to_string(),
        "net/http: invalid header field value for \"X-Bad\""
    );
}

type Resp = Response<Full<Bytes>>;

fn reply(status: u16, headers: &[(&str, String)], body: impl Into<Bytes>) -> Resp {
    let mut b = Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    b.body(Full::new(body.into())).expect("response")
}

/// Answers by path; `other` is a second server's address for redirects.
async fn route(req: Request<Incoming>, me: SocketAddr) -> Result<Resp, Infallible> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    Ok(match path.as_str() {
        "/" => reply(200, &[], "ok body"),
        "/missing" => reply(404, &[], "secret body"),
        "/headers" => {
            let h = req.headers();
            let get = |n: &str| {
                h.get(n)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_else(|| "-".into())
            };
            reply(
                200,
                &[],
                format!(
                    "host={} ua={} accept={} custom={} conn={} enc={}",
                    get("host"),
                    get("user-agent"),
                    get("accept"),
                    get("x-custom"),
                    get("connection"),
                    get("accept-encoding"),
                ),
            )
        }
        "/redirect" => {
            let loc = query
                .strip_prefix("loc=")
                .unwrap_or("/")
                .replace("%3A", ":")
                .replace("%2F", "/");
            reply(302, &[("location", loc)], "<a>Found</a>")
        }
        "/moved" => reply(301, &[("location", format!("http://{me}/"))], ""),
        "/loop" => reply(302, &[("location", "/loop".into())], ""),
        "/noloc" => reply(301, &[], "where?"),
        "/big" => reply(200, &[], "y".repeat(20_000)),
        "/created" => reply(201, &[], "made"),
        "/version" => reply(200, &[], format!("{:?}", req.version())),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            reply(200, &[], "late")
        }
        _ => reply(500, &[], "unexpected"),
    })
}

/// An HTTP/1.1 server on loopback for the test's lifetime.
async fn serve() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = service_fn(move |req| route(req, addr));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// The same routes over TLS with a self-signed certificate, HTTP/2 or 1.1.
async fn serve_tls() -> SocketAddr {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let mut config =
        rustls::ServerConfig::builder_with_provider(crate::kubelet::server::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let svc = service_fn(move |req| route(req, addr));
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

async fn get(
    scheme: &str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<(Outcome, String), ProberError> {
    let url = ProbeUrl::new(scheme, &addr.ip().to_string(), addr.port(), path);
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    HttpProber::new(false).probe(&url, &headers, timeout).await
}

#[tokio::test]
async fn status_codes_redirects_and_bodies() {
    let addr = serve().await;
    let other = serve().await;
    let s = Duration::from_secs(5);
    let elsewhere = format!("/redirect?loc=http://localhost:{}/", addr.port());
    let same_host_other_port = format!("/redirect?loc=http://127.0.0.1:{}/created", other.port());
    let cases: Vec<(&str, &str, Outcome, String)> = vec![
        ("ok", "/", Outcome::Success, "ok body".into()),
        ("2xx", "/created", Outcome::Success, "made".into()),
        (
            "404 hides the body",
            "/missing",
            Outcome::Failure,
            "HTTP probe failed with statuscode: 404".into(),
        ),
        (
            "same-host redirect is followed",
            "/moved",
            Outcome::Success,
            "ok body".into(),
        ),
        (
            "same host on another port is followed",
            &same_host_other_port,
            Outcome::Success,
            "made".into(),
        ),
        (
            "redirect to another host is a warning",
            &elsewhere,
            Outcome::Warning,
            "Probe terminated redirects, Response body: <a>Found</a>".into(),
        ),
        (
            "redirect without Location is the answer",
            "/noloc",
            Outcome::Warning,
            "Probe terminated redirects, Response body: where?".into(),
        ),
        (
            "redirect loop stops after 10 requests",
            "/loop",
            Outcome::Failure,
            "Get \"/loop\": stopped after 10 redirects".into(),
        ),
    ];
    for (name, path, outcome, output) in cases {
        let got = get("http", addr, path, &[], s).await.expect(name);
        assert_eq!(got, (outcome, output), "{name}");
    }
    let (outcome, body) = get("http", addr, "/big", &[], s).await.expect("big");
    assert_eq!(outcome, Outcome::Success);
    assert_eq!(body.len(), MAX_RESP_BODY_LENGTH, "body is cut at 10 KiB");
}

#[tokio::test]
async fn request_headers_as_the_go_prober_sends_them() {
    let addr = serve().await;
    let s = Duration::from_secs(5);
    let (_, body) = get("http", addr, "/headers", &[], s)
        .await
        .expect("default");
    assert_eq!(
        body,
        format!("host={addr} ua=kube-probe/1.25 accept=*/* custom=- conn=close enc=-")
    );
    let (_, body) = get(
        "http",
        addr,
        "/headers",
        &[
            ("Host", "svc.example"),
            ("X-Custom", "1"),
            ("User-Agent", "me"),
            ("Accept", ""),
        ],
        s,
    )
    .await
    .expect("custom");
    assert_eq!(
        body,
        "host=svc.example ua=me accept=- custom=1 conn=close enc=-"
    );
    let (outcome, msg) = get("http", addr, "/headers", &[("bad name", "v")], s)
        .await
        .expect("bad header fails");
    assert_eq!(outcome, Outcome::Failure);
    assert_eq!(
        msg,
        format!("Get \"http://{addr}/headers\": net/http: invalid header field name \"bad name\"")
    );
}

#[tokio::test]
async fn timeouts_and_refused_connections_read_like_go() {
    let addr = serve().await;
    let started = std::time::Instant::now();
    let got = get("http", addr, "/slow", &[], Duration::from_millis(300))
        .await
        .expect("timeout is a failure");
    assert_eq!(
        got,
        (
            Outcome::Failure,
            format!(
                "Get \"http://{addr}/slow\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )
        )
    );
    assert!(started.elapsed() < Duration::from_secs(3));

    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let got = get("http", closed, "/", &[], Duration::from_secs(1))
        .await
        .expect("refused is a failure");
    assert_eq!(
        got,
        (
            Outcome::Failure,
            format!("Get \"http://{closed}/\": dial tcp {closed}: connect: connection refused")
        )
    );
    let url = ProbeUrl::new("ftp", "127.0.0.1", 21, "/");
    let got = HttpProber::new(false)
        .probe(&url, &[], Duration::from_secs(1))
        .await
        .expect("bad scheme is a failure");
    assert_eq!(
        got,
        (
            Outcome::Failure,
            "Get \"ftp://127.0.0.1:21/\": unsupported protocol scheme \"ftp\"".into()
        )
    );
}

#[tokio::test]
async fn https_skips_certificate_checks_and_speaks_h2() {
    let _ = crate::kubelet::server::tls::crypto_provider();
    let addr = serve_tls().await;
    let s = Duration::from_secs(5);
    assert_eq!(
        get("https", addr, "/", &[], s).await.expect("https"),
        (Outcome::Success, "ok body".into())
    );
    assert_eq!(
        get("https", addr, "/missing", &[], s)
            .await
            .expect("https 404"),
        (
            Outcome::Failure,
            "HTTP probe failed with statuscode: 404".into()
        )
    );
    let (_, body) = get("https", addr, "/headers", &[("X-Custom", "2")], s)
        .await
        .expect("headers over h2");
    assert!(body.contains("ua=kube-probe/1.25"), "{body}");
    assert!(body.contains("custom=2"), "{body}");
    assert_eq!(
        get("https", addr, "/version", &[], s)
            .await
            .expect("version"),
        (Outcome::Success, "HTTP/2.0".into()),
        "ALPN picks HTTP/2 where the server offers it"
    );
    assert_eq!(
        get("http", serve().await, "/version", &[], s)
            .await
            .expect("version"),
        (Outcome::Success, "HTTP/1.1".into())
    );
    // Plain HTTP against the TLS port fails as a transport error.
    let (outcome, _) = get("http", addr, "/", &[], s).await.expect("mismatch");
    assert_eq!(outcome, Outcome::Failure);
}

#[tokio::test]
async fn prober_reports_redirect_warnings_as_events() {
    use crate::kubelet::prober::testutil::{CapturingRecorder, ScriptedRunner, pod_with};
    let addr = serve().await;
    let runner = ScriptedRunner::new(Ok(Vec::new()));
    let recorder = Arc::new(CapturingRecorder::default());
    let prober = super::super::Prober::new(runner, recorder.clone(), Default::default());
    let pod = pod_with(
        serde_json::json!([{
            "name": "web",
            "ports": [{"name": "http", "containerPort": addr.port()}],
            "readinessProbe": {"httpGet": {
                "path": format!("/redirect?loc=http://localhost:{}/", addr.port()),
                "port": "http",
            }},
            "livenessProbe": {"httpGet": {"path": "/missing", "port": addr.port(), "scheme": "HTTP"}},
        }]),
        serde_json::json!({}),
    );
    let c = pod.spec.as_ref().expect("spec").containers[0].clone();
    let status: k8s_openapi::api::core::v1::PodStatus =
        serde_json::from_value(serde_json::json!({"podIP": "127.0.0.1"})).expect("status");
    let id = crate::kubelet::container::ContainerId::new("containerd", "x");
    use crate::kubelet::prober::{ProbeResult, ProbeType};
    assert_eq!(
        prober
            .probe(ProbeType::Readiness, &pod, &status, &c, &id)
            .await,
        Ok(ProbeResult::Success)
    );
    assert_eq!(
        prober
            .probe(ProbeType::Liveness, &pod, &status, &c, &id)
            .await,
        Ok(ProbeResult::Failure)
    );
    let events = recorder.take();
    let got: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "ProbeWarning",
                "Readiness probe warning: Probe terminated redirects, Response body: <a>Found</a>"
            ),
            (
                "Unhealthy",
                "Liveness probe failed: HTTP probe failed with statuscode: 404"
            ),
        ]
    );
}
