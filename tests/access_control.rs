//! Access control of the main port (issue 18): the whole kubelet in API
//! mode over a private containerd, anonymous access off, Webhook
//! authentication (TokenReview) and authorization (SubjectAccessReview)
//! against the API server double with RBAC (or the real kube-apiserver
//! KUBELET_RS_TEST_KUBECONFIG names), and x509 client certificates from a
//! test CA.
//!
//! One table: every path group the kubelet serves × every kind of caller
//! (none, a bad token, a valid token without RBAC, a valid token allowed
//! nodes/proxy only, a client certificate from the client CA with the
//! kubelet API admin's rights, one from another CA). The codes are Go's:
//! 401 without a valid identity, 403 when RBAC says no, and the endpoint's
//! own answer otherwise. The SubjectAccessReviews carry Go's attributes
//! (verb from the method, resource nodes, the node's name, the subresource
//! from the path), and the authorization cache keeps an answer for its TTL
//! (allowed and denied separately).

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

use std::sync::Arc;
use std::time::Duration;

use harness::*;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::Api;
use serde_json::{Value, json};
use support::apiserver::{Pki, SarPolicy, TestApi};
use support::containerd::{Containerd, images};

const WAIT: Duration = Duration::from_secs(60);

/// This machine's outbound IPv4 address (what `--node-ip` names; Go
/// refuses a loopback one).
fn host_ip() -> String {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    s.connect("10.255.255.255:9").expect("udp connect");
    s.local_addr().expect("local addr").ip().to_string()
}
const PORTS: Ports = Ports {
    main: 22344,
    read_only: 0,
    healthz: 22345,
};

/// Who calls.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Caller {
    Nobody,
    BadToken,
    TokenWithoutRbac,
    TokenWithNodesProxy,
    CertFromClientCa,
    CertFromOtherCa,
}

const CALLERS: [Caller; 6] = [
    Caller::Nobody,
    Caller::BadToken,
    Caller::TokenWithoutRbac,
    Caller::TokenWithNodesProxy,
    Caller::CertFromClientCa,
    Caller::CertFromOtherCa,
];

/// One path group: a request and the answer an authorized caller gets.
struct Group {
    name: &'static str,
    method: &'static str,
    path: String,
    /// The authorizer's subresource for this path.
    subresource: &'static str,
    /// The endpoint's own answer once authorized (Go's: the streaming
    /// endpoints proxy to the runtime's streaming server and answer a
    /// request that is not an upgrade 500 "Upgrade request required").
    authorized: u16,
}

fn groups(ns: &str) -> Vec<Group> {
    let g = |name, method, path: String, subresource, authorized| Group {
        name,
        method,
        path,
        subresource,
        authorized,
    };
    let c = format!("{ns}/target/c");
    vec![
        g("pods", "GET", "/pods".into(), "proxy", 200),
        g("stats", "GET", "/stats/summary".into(), "stats", 200),
        g("metrics", "GET", "/metrics".into(), "metrics", 200),
        g(
            "metrics/cadvisor",
            "GET",
            "/metrics/cadvisor".into(),
            "metrics",
            200,
        ),
        g("logs", "GET", "/logs/".into(), "log", 200),
        g(
            "containerLogs",
            "GET",
            format!("/containerLogs/{c}"),
            "proxy",
            200,
        ),
        g(
            "exec",
            "POST",
            format!("/exec/{c}?command=true&output=1"),
            "proxy",
            500,
        ),
        g(
            "attach",
            "POST",
            format!("/attach/{c}?output=1"),
            "proxy",
            500,
        ),
        g(
            "portForward",
            "POST",
            format!("/portForward/{ns}/target"),
            "proxy",
            500,
        ),
        g("run", "POST", format!("/run/{c}?cmd=true"), "proxy", 200),
        g("configz", "GET", "/configz".into(), "proxy", 200),
        g("debug", "GET", "/debug/pprof/".into(), "proxy", 200),
    ]
}

/// What Go answers `caller` on `group`.
fn expected(caller: Caller, group: &Group) -> u16 {
    match caller {
        Caller::Nobody | Caller::BadToken | Caller::CertFromOtherCa => 401,
        Caller::TokenWithoutRbac => 403,
        Caller::TokenWithNodesProxy if group.subresource != "proxy" => 403,
        Caller::TokenWithNodesProxy | Caller::CertFromClientCa => group.authorized,
    }
}

fn verb(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "get",
    }
}

/// The credentials a caller presents.
#[derive(Clone)]
struct Credentials {
    token: Option<String>,
    cert: Option<(String, String)>,
}

struct Client {
    roots: rustls::RootCertStore,
    node: String,
}

impl Client {
    fn new(dirs: &NodeDirs, node: &str) -> Client {
        Client {
            roots: kubelet_roots(dirs),
            node: node.to_string(),
        }
    }

    /// `method path` as `creds`: the status and the body.
    async fn send(&self, method: &str, path: &str, creds: &Credentials) -> (u16, String) {
        use http_body_util::BodyExt;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(self.roots.clone());
        let cfg = match &creds.cert {
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    CertificateDer::pem_slice_iter(cert.as_bytes())
                        .collect::<Result<_, _>>()
                        .expect("client cert"),
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("client key"),
                )
                .expect("client auth"),
            None => builder.with_no_client_auth(),
        };
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", PORTS.main))
            .await
            .expect("connect to the main port");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from(self.node.clone()).expect("name"), tcp)
            .await
            .expect("TLS handshake");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("HTTP handshake");
        tokio::spawn(conn);
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.node);
        if let Some(t) = &creds.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let resp = sender
            .send_request(
                req.body(http_body_util::Empty::<bytes::Bytes>::new())
                    .expect("request"),
            )
            .await
            .expect("response");
        let status = resp.status().as_u16();
        // Bounded: /logs/ and the metrics are small, a stream is cut.
        let body = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        (status, body)
    }
}

/// A token for service account `name` in `ns` (created here).
async fn token_for(api: &TestApi, ns: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}})).expect("sa");
    api.put(&sa).await;
    let sas: Api<ServiceAccount> = Api::namespaced(api.admin_client().await, ns);
    let req: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}
    }))
    .expect("token request");
    let tr: TokenRequest = sas
        .create_subresource("token", name, &Default::default(), &req)
        .await
        .expect("token request");
    tr.status.expect("token").token
}

/// A ClusterRole over `resources` of nodes bound to `subject`.
async fn grant(api: &TestApi, subject: Value, resources: &[&str]) {
    let name = api.unique_name("kubelet-api-test");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": resources, "verbs": ["get", "create"]}]
    }))
    .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [subject]
    }))
    .expect("binding");
    api.put(&role).await;
    api.put(&binding).await;
}

fn target_pod(ns: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "target", "namespace": ns},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": images().busybox,
                "command": ["sh", "-c", "echo hello from target; exec sleep 3600"]}],
        },
    }))
    .expect("pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_path_group_by_every_kind_of_caller() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("access_control") else {
        return;
    };
    let api = TestApi::start().await;
    if let Ok(d) = api.double() {
        d.set_subject_access_policy(SarPolicy::Rbac);
    }
    let ns = api.create_namespace("access").await;
    let node = api.unique_name("access");
    let root = make_cgroup_root(&rig, "access");
    let client_ca = Pki::new().expect("client CA");
    let other_ca = Pki::new().expect("other CA");
    let ca_file = dirs.path("client-ca.crt");
    std::fs::write(&ca_file, &client_ca.ca_pem).expect("client CA file");
    let cfg = config(&dirs, &root, PORTS, "");
    let text = std::fs::read_to_string(&cfg).expect("config").replace(
        "authentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\nauthorization:\n  mode: AlwaysAllow\n",
        &format!(
            "authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: true\n    cacheTTL: 4s\n  x509:\n    clientCAFile: {}\nauthorization:\n  mode: Webhook\n  webhook:\n    cacheAuthorizedTTL: 4s\n    cacheUnauthorizedTTL: 2s\n",
            ca_file.display()
        ),
    );
    std::fs::write(&cfg, text).expect("config");
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    api.wait_for::<Node>(None, &node, WAIT, |_| true).await;
    api.put(&target_pod(&ns, &node)).await;
    api.wait_for::<Pod>(Some(&ns), "target", WAIT, |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;

    // The callers' credentials.
    let no_rbac = token_for(&api, &ns, "no-rbac").await;
    let proxy_only = token_for(&api, &ns, "proxy-only").await;
    grant(
        &api,
        json!({"kind": "ServiceAccount", "name": "proxy-only", "namespace": ns}),
        &["nodes/proxy"],
    )
    .await;
    let admin_cn = api.unique_name("kubelet-api-admin");
    grant(
        &api,
        json!({"kind": "User", "name": admin_cn, "apiGroup": "rbac.authorization.k8s.io"}),
        &[
            "nodes/proxy",
            "nodes/stats",
            "nodes/metrics",
            "nodes/log",
            "nodes/spec",
        ],
    )
    .await;
    let admin = client_ca
        .issue_client(&admin_cn, &["kubelet-api-admins"])
        .expect("client cert");
    let stranger = other_ca
        .issue_client(&admin_cn, &["system:masters"])
        .expect("other cert");
    let creds = |c: Caller| match c {
        Caller::Nobody => Credentials {
            token: None,
            cert: None,
        },
        Caller::BadToken => Credentials {
            token: Some("not-a-token".into()),
            cert: None,
        },
        Caller::TokenWithoutRbac => Credentials {
            token: Some(no_rbac.clone()),
            cert: None,
        },
        Caller::TokenWithNodesProxy => Credentials {
            token: Some(proxy_only.clone()),
            cert: None,
        },
        Caller::CertFromClientCa => Credentials {
            token: None,
            cert: Some((admin.cert_pem.clone(), admin.key_pem.clone())),
        },
        Caller::CertFromOtherCa => Credentials {
            token: None,
            cert: Some((stranger.cert_pem.clone(), stranger.key_pem.clone())),
        },
    };
    let client = Client::new(&dirs, &node);

    // A real cluster's RBAC needs a moment to see new bindings.
    let proxy_creds = creds(Caller::TokenWithNodesProxy);
    for _ in 0..60 {
        if client.send("GET", "/pods", &proxy_creds).await.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let table = groups(&ns);
    let mut wrong = Vec::new();
    let mut rows = Vec::new();
    for group in &table {
        let mut row = format!("{:<17}", group.name);
        for caller in CALLERS {
            let (got, body) = client.send(group.method, &group.path, &creds(caller)).await;
            row.push_str(&format!(" {got}"));
            let want = expected(caller, group);
            if got != want {
                wrong.push(format!(
                    "{} {} as {caller:?}: {got}, Go's is {want} ({})",
                    group.method,
                    group.path,
                    body.chars().take(200).collect::<String>()
                ));
            }
            if want == 403 {
                let user = match caller {
                    Caller::TokenWithoutRbac => format!("system:serviceaccount:{ns}:no-rbac"),
                    _ => format!("system:serviceaccount:{ns}:proxy-only"),
                };
                let text = format!(
                    "Forbidden (user={user}, verb={}, resource=nodes, subresource={})",
                    verb(group.method),
                    group.subresource
                );
                if body != text {
                    wrong.push(format!("{} as {caller:?}: body {body:?}", group.path));
                }
            }
            if want == 401 && body != "Unauthorized" {
                wrong.push(format!("{} as {caller:?}: body {body:?}", group.path));
            }
        }
        rows.push(row);
    }
    eprintln!("access table ({:?}):\n{}", CALLERS, rows.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The reviews the kubelet asked: Go's attributes, for every path group.
    if let Ok(d) = api.double() {
        let reviews = d.subject_access_reviews();
        let proxy_user = format!("system:serviceaccount:{ns}:proxy-only");
        for group in &table {
            let want = json!({
                "verb": verb(group.method),
                "resource": "nodes",
                "subresource": group.subresource,
                "name": node,
            });
            let asked = reviews.iter().any(|r| {
                r["user"] == json!(proxy_user)
                    && ["verb", "resource", "subresource", "name"]
                        .iter()
                        .all(|k| r["resourceAttributes"][k] == want[k])
            });
            assert!(
                asked,
                "{}: no review with {want} among {reviews:#?}",
                group.path
            );
        }
        let admin_reviews: Vec<&Value> = reviews
            .iter()
            .filter(|r| r["user"] == json!(admin_cn))
            .collect();
        assert!(
            admin_reviews
                .iter()
                .all(|r| r["groups"] == json!(["kubelet-api-admins", "system:authenticated"])),
            "the certificate's organizations are the groups: {admin_reviews:#?}"
        );

        // The authorization cache: an allowed answer kept 4 s, a denied one 2 s.
        let count = || {
            d.subject_access_reviews()
                .iter()
                .filter(|r| r["user"] == json!(proxy_user))
                .count()
        };
        let probe = Credentials {
            token: Some(proxy_only.clone()),
            cert: None,
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        let before = count();
        assert_eq!(client.send("GET", "/configz", &probe).await.0, 200);
        assert_eq!(client.send("GET", "/stats/summary", &probe).await.0, 403);
        assert_eq!(count(), before + 2, "both asked once the TTLs passed");
        assert_eq!(client.send("GET", "/configz", &probe).await.0, 200);
        assert_eq!(client.send("GET", "/stats/summary", &probe).await.0, 403);
        assert_eq!(count(), before + 2, "both answered from the cache");
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(client.send("GET", "/configz", &probe).await.0, 200);
        assert_eq!(client.send("GET", "/stats/summary", &probe).await.0, 403);
        assert_eq!(
            count(),
            before + 3,
            "the denial expired after cacheUnauthorizedTTL, the allowance did not"
        );
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert_eq!(client.send("GET", "/configz", &probe).await.0, 200);
        assert_eq!(
            count(),
            before + 4,
            "the allowance expired after cacheAuthorizedTTL"
        );
    }
    kubelet.stop().await.expect("kubelet stops cleanly");
    api.cleanup().await;
}

/// serverTLSBootstrap: no serving certificate until a kubelet-serving CSR
/// naming the Node's addresses is approved and issued, then the main port
/// serves it (trusted through the cluster CA, for the node's host name
/// and IP), kept in the cert dir as kubelet-server-current.pem.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serving_certificate_from_a_kubelet_serving_csr() {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest as Csr;
    use rustls::pki_types::pem::PemObject;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("serving_cert") else {
        return;
    };
    let api = TestApi::start().await;
    let node = api.unique_name("serving");
    let root = make_cgroup_root(&rig, "serving");
    let ports = Ports {
        main: 22346,
        read_only: 0,
        healthz: 22347,
    };
    let cfg = config(&dirs, &root, ports, "serverTLSBootstrap: true\n");
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    let ip = host_ip();
    argv.push(format!("--node-ip={ip}"));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    api.wait_for::<Node>(None, &node, WAIT, |_| true).await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(
        rustls::pki_types::CertificateDer::pem_slice_iter(api.ca_pem().as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("cluster CA"),
    );
    let handshake = |name: String| {
        let roots = roots.clone();
        async move {
            let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", ports.main)).await?;
            tokio_rustls::TlsConnector::from(Arc::new(cfg))
                .connect(
                    rustls::pki_types::ServerName::try_from(name).expect("name"),
                    tcp,
                )
                .await
                .map(|_| ())
        }
    };

    // The request: for the node's names, with Go's usages (made with the
    // node's credentials on the double; a real run's kubeconfig is the
    // admin's, so the request is found by its subject).
    let node_cn = format!("system:node:{node}");
    let mut csr = None;
    for _ in 0..120 {
        csr = api.list::<Csr>(None).await.into_iter().find(|c| {
            c.spec.signer_name == "kubernetes.io/kubelet-serving"
                && String::from_utf8(c.spec.request.0.clone())
                    .ok()
                    .and_then(|pem| support::apiserver::csr_subject(&pem).ok())
                    .is_some_and(|s| s.common_name == node_cn)
        });
        if csr.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let csr = csr.expect("a kubelet-serving CSR from the node");
    api.track_for_cleanup(&csr).await;
    if !api.is_real() {
        assert_eq!(csr.spec.username.as_deref(), Some(node_cn.as_str()));
    }
    assert_eq!(
        csr.spec.usages.clone().unwrap_or_default(),
        vec!["digital signature", "key encipherment", "server auth"]
    );
    let request = String::from_utf8(csr.spec.request.0.clone()).expect("PEM request");
    let subject = support::apiserver::csr_subject(&request).expect("CSR subject");
    assert_eq!(subject.common_name, format!("system:node:{node}"));
    assert_eq!(subject.organizations, vec!["system:nodes"]);
    assert!(subject.dns_names.contains(&node), "{subject:?}");
    assert!(subject.ip_addresses.contains(&ip), "{subject:?}");
    // Not approved yet: no certificate to serve, and the metrics say so.
    assert!(
        handshake(node.clone()).await.is_err(),
        "no serving certificate before the CSR is issued"
    );
    let metric = |name: &str| {
        kubelet::metrics::render_text()
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string))
    };
    assert_eq!(
        metric("kubelet_certificate_manager_server_ttl_seconds").as_deref(),
        Some("+Inf")
    );
    assert_eq!(
        metric("kubelet_server_expiration_renew_errors").as_deref(),
        Some("0")
    );

    api.approve_csr(csr.metadata.name.as_deref().unwrap_or_default())
        .await;
    let mut served = false;
    for _ in 0..120 {
        if handshake(node.clone()).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(served, "the issued certificate is served");
    assert!(
        handshake(ip.clone()).await.is_ok(),
        "the certificate names the node IP"
    );
    let current = dirs.path("pki/kubelet-server-current.pem");
    let pem = std::fs::read(&current).expect("kubelet-server-current.pem");
    let leaf = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .next()
        .expect("a certificate")
        .expect("PEM");
    let subject = support::apiserver::cert_subject(leaf.as_ref()).expect("subject");
    assert_eq!(subject.common_name, format!("system:node:{node}"));
    assert!(
        !dirs.path("pki/kubelet.crt").exists(),
        "no self-signed pair under serverTLSBootstrap"
    );
    // The serving certificate's time to live, in seconds, read at scrape time.
    let ttl: f64 = metric("kubelet_certificate_manager_server_ttl_seconds")
        .and_then(|v| v.parse().ok())
        .expect("server TTL gauge");
    assert!(ttl.is_finite() && ttl > 0.0, "{ttl}");
    kubelet.stop().await.expect("kubelet stops cleanly");
    api.cleanup().await;
}
