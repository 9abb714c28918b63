//! The double itself: start, stop and restart on the same port, the accept
//! loop and TLS, and the controls tests use (compaction, faults, request log,
//! tokens, direct store access).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::auth::UserInfo;
use super::delete::{self, DeleteOptions};
use super::errors::ApiError;
use super::faults::{Fault, Faults};
use super::kubeconfig::{self, KubeUser};
use super::meta;
use super::ops::{self, Caller};
use super::options::DoubleOptions;
use super::pki::{self, IssuedCert, Pki};
use super::rbac::SarPolicy;
use super::reqlog::{RequestLog, RequestRecord};
use super::resources::{self, ResourceDef};
use super::store::{ObjKey, Store};
use super::tokens::Tokens;

/// State shared by every connection.
pub struct Shared {
    pub store: Store,
    pub pki: Pki,
    pub opts: DoubleOptions,
    pub tokens: Tokens,
    pub faults: Faults,
    pub log: RequestLog,
    pub sar: std::sync::Mutex<SarPolicy>,
    /// Every SubjectAccessReview spec asked, in order.
    pub sar_log: std::sync::Mutex<Vec<serde_json::Value>>,
    pub addr: SocketAddr,
    pub tls: Arc<rustls::ServerConfig>,
    pub bootstrap_token: String,
    pub admin: IssuedCert,
}

struct Running {
    cancel: CancellationToken,
    accept: JoinHandle<()>,
}

/// An API server double on 127.0.0.1:<ephemeral>.
pub struct ApiServerDouble {
    shared: Arc<Shared>,
    running: tokio::sync::Mutex<Option<Running>>,
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = TcpSocket::new_v4()?;
    s.set_reuseaddr(true)?;
    s.bind(addr)?;
    s.listen(1024)
}

async fn serve_conn(shared: Arc<Shared>, tcp: TcpStream, cancel: CancellationToken) {
    let acceptor = TlsAcceptor::from(shared.tls.clone());
    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
    else {
        return;
    };
    let cert_user = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|der| pki::cert_subject(der))
        .map(|s| UserInfo::from_cert(&s));
    let conn_cancel = cancel.clone();
    let svc = service_fn(move |req| {
        super::http::handle(shared.clone(), cert_user.clone(), conn_cancel.clone(), req)
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), svc);
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = conn => {}
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            r = listener.accept() => {
                let Ok((tcp, _)) = r else { continue };
                let _ = tcp.set_nodelay(true);
                tokio::spawn(serve_conn(shared.clone(), tcp, cancel.clone()));
            }
        }
    }
}

fn seed(shared: &Shared) -> Result<(), ApiError> {
    let admin = UserInfo::admin();
    let c = Caller {
        user: &admin,
        dry_run: false,
    };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        ops::create(
            shared,
            resources::core("namespaces"),
            "",
            json!({"metadata": {"name": ns}}),
            &c,
        )?;
    }
    let svc = json!({
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": shared.addr.port()}]},
    });
    ops::create(shared, resources::core("services"), "default", svc, &c)?;
    let (id, secret) = shared.bootstrap_token.split_once('.').unwrap_or(("", ""));
    let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    let token_secret = json!({
        "metadata": {"name": format!("bootstrap-token-{id}")},
        "type": "bootstrap.kubernetes.io/token",
        "data": {
            "token-id": b64(id),
            "token-secret": b64(secret),
            "usage-bootstrap-authentication": b64("true"),
            "usage-bootstrap-signing": b64("true"),
            "auth-extra-groups": b64("system:bootstrappers:kubeadm:default-node-token"),
        },
    });
    ops::create(
        shared,
        resources::core("secrets"),
        "kube-system",
        token_secret,
        &c,
    )?;
    Ok(())
}

fn random_token() -> String {
    let alnum = |n: usize| -> String {
        const A: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..n)
            .map(|_| A[rand::random_range(0..A.len())] as char)
            .collect()
    };
    format!("{}.{}", alnum(6), alnum(16))
}

fn res_of<K: k8s_openapi::Resource>() -> &'static ResourceDef {
    resources::by_kind(K::API_VERSION, K::KIND)
        .unwrap_or_else(|| panic!("the double does not serve {} {}", K::API_VERSION, K::KIND))
}

fn to_typed<K: DeserializeOwned>(v: Value) -> Result<K, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
}

impl ApiServerDouble {
    /// Starts a double with default options.
    pub async fn start() -> Result<ApiServerDouble, String> {
        Self::start_with(DoubleOptions::default()).await
    }

    pub async fn start_with(opts: DoubleOptions) -> Result<ApiServerDouble, String> {
        let pki = Pki::new()?;
        let tls = pki.server_config()?;
        let admin = pki.issue_client("kubernetes-admin", &["system:masters"])?;
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            store: Store::default(),
            pki,
            opts,
            tokens: Tokens::default(),
            faults: Faults::default(),
            log: RequestLog::default(),
            sar: std::sync::Mutex::new(SarPolicy::AllowAll),
            sar_log: std::sync::Mutex::new(Vec::new()),
            addr,
            tls,
            bootstrap_token: random_token(),
            admin,
        });
        seed(&shared).map_err(|e| e.message)?;
        let cancel = CancellationToken::new();
        let accept = tokio::spawn(accept_loop(shared.clone(), listener, cancel.clone()));
        Ok(ApiServerDouble {
            shared,
            running: tokio::sync::Mutex::new(Some(Running { cancel, accept })),
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.shared.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    pub fn ca_pem(&self) -> &str {
        &self.shared.pki.ca_pem
    }

    /// The bootstrap token ("<id>.<secret>") the double accepts, backed by
    /// its Secret in kube-system.
    pub fn bootstrap_token(&self) -> &str {
        &self.shared.bootstrap_token
    }

    /// A new client certificate from the double's CA.
    pub fn issue_client_cert(&self, user: &str, groups: &[&str]) -> IssuedCert {
        self.shared
            .pki
            .issue_client(user, groups)
            .unwrap_or_else(|e| panic!("issuing a client certificate for {user}: {e}"))
    }

    /// Checks a PEM certificate chains to the double's CA for client auth.
    pub fn verify_client_cert(&self, cert_pem: &str) -> Result<(), String> {
        self.shared.pki.verify_client_cert(cert_pem)
    }

    /// Kubeconfig YAML naming this server and `user`'s credentials.
    pub fn kubeconfig_yaml(&self, user: &KubeUser) -> String {
        let creds = match user {
            KubeUser::Admin => kubeconfig::Creds::Cert(self.shared.admin.clone()),
            KubeUser::Node(n) => kubeconfig::Creds::Cert(
                self.issue_client_cert(&format!("system:node:{n}"), &["system:nodes"]),
            ),
            KubeUser::Bootstrap => kubeconfig::Creds::Token(self.shared.bootstrap_token.clone()),
            KubeUser::Token(t) => kubeconfig::Creds::Token(t.clone()),
            KubeUser::Cert { user, groups } => {
                let g: Vec<&str> = groups.iter().map(String::as_str).collect();
                kubeconfig::Creds::Cert(self.issue_client_cert(user, &g))
            }
            KubeUser::Anonymous => kubeconfig::Creds::None,
        };
        kubeconfig::render(
            &self.url(),
            &self.shared.pki.ca_pem,
            user.context_name(),
            &creds,
        )
    }

    /// A kube client authenticated as `user`.
    pub async fn client(&self, user: &KubeUser) -> kube::Client {
        kubeconfig::client_from_yaml(&self.kubeconfig_yaml(user)).await
    }

    // ---- controls -------------------------------------------------------

    /// Stops listening and drops every connection (watches end abruptly),
    /// as an API server that went away.
    pub async fn stop(&self) {
        let mut g = self.running.lock().await;
        if let Some(r) = g.take() {
            r.cancel.cancel();
            let _ = r.accept.await;
        }
    }

    /// Listens again on the same address, with the same state.
    pub async fn restart(&self) -> Result<(), String> {
        let mut g = self.running.lock().await;
        if g.is_some() {
            return Ok(());
        }
        let mut last = String::new();
        for _ in 0..50 {
            match bind(self.shared.addr) {
                Ok(listener) => {
                    let cancel = CancellationToken::new();
                    let accept =
                        tokio::spawn(accept_loop(self.shared.clone(), listener, cancel.clone()));
                    *g = Some(Running { cancel, accept });
                    return Ok(());
                }
                Err(e) => {
                    last = e.to_string();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        Err(format!("rebinding {}: {last}", self.shared.addr))
    }

    pub async fn is_running(&self) -> bool {
        self.running.lock().await.is_some()
    }

    /// Forgets the change history: open watches get ERROR 410 and end;
    /// lists and watches from any earlier resourceVersion get 410 Gone.
    /// Returns the compaction point.
    pub fn compact(&self) -> u64 {
        self.shared.store.tx(|tx| {
            tx.compact();
            tx.compacted_rv()
        })
    }

    /// Ends every open watch cleanly, as a server closing them at timeout.
    pub fn close_watches(&self) {
        self.shared.store.tx(|tx| tx.close_watches());
    }

    pub fn inject(&self, fault: Fault) {
        self.shared.faults.add(fault);
    }

    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.all()
    }

    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Accepts `token` as a bearer token for `user`.
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.shared.tokens.add_static(token, user);
    }

    /// What SubjectAccessReviews answer (allowed by default).
    pub fn set_subject_access_allowed(&self, allowed: bool) {
        self.set_subject_access_policy(if allowed {
            SarPolicy::AllowAll
        } else {
            SarPolicy::DenyAll
        });
    }

    /// How SubjectAccessReviews are decided (RBAC over the stored
    /// ClusterRoles and ClusterRoleBindings, as a real server).
    pub fn set_subject_access_policy(&self, policy: SarPolicy) {
        *self.shared.sar.lock().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// The specs of the SubjectAccessReviews asked so far.
    pub fn subject_access_reviews(&self) -> Vec<serde_json::Value> {
        self.shared
            .sar_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn current_resource_version(&self) -> u64 {
        self.shared.store.tx(|tx| tx.current_rv())
    }

    // ---- direct store access ----------------------------------------------

    /// The stored object, as JSON.
    pub fn get_json(&self, res_id: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = resources::by_id(res_id)?;
        let ns = if res.namespaced { namespace } else { "" };
        self.shared
            .store
            .tx(|tx| tx.get(res, &ObjKey::new(ns, name)).cloned())
    }

    /// The stored object of type `K`.
    pub fn get<K: k8s_openapi::Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<K> {
        let res = res_of::<K>();
        let v = self.get_json(res.id, namespace.unwrap_or(""), name)?;
        to_typed(v).ok()
    }

    /// All stored objects of type `K`, optionally in one namespace.
    pub fn list<K: k8s_openapi::Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
    ) -> Vec<K> {
        let res = res_of::<K>();
        self.shared
            .store
            .tx(|tx| tx.list(res, namespace))
            .into_iter()
            .filter_map(|v| to_typed(v).ok())
            .collect()
    }

    /// Creates or replaces `obj` as an admin would (create or unconditional
    /// update, then its status through the status subresource), watch
    /// events included.
    pub fn put<K: k8s_openapi::Resource + Serialize + DeserializeOwned>(
        &self,
        obj: &K,
    ) -> Result<K, String> {
        let res = res_of::<K>();
        let mut v = serde_json::to_value(obj).map_err(|e| e.to_string())?;
        meta::metadata(&mut v).remove("resourceVersion");
        let ns = if res.namespaced {
            meta::namespace(&v).to_string()
        } else {
            String::new()
        };
        let name = meta::name(&v).to_string();
        let admin = UserInfo::admin();
        let c = Caller {
            user: &admin,
            dry_run: false,
        };
        let shared = &*self.shared;
        let stored = shared.store.tx(|tx| -> Result<Value, ApiError> {
            let exists = tx.get(res, &ObjKey::new(&ns, &name)).is_some();
            let mut stored = if exists {
                ops::update_in(shared, tx, res, &ns, &name, None, v.clone(), &c, false)?.1
            } else {
                ops::create_in(shared, tx, res, &ns, v.clone(), &c)?
            };
            if res.has_subresource("status")
                && let Some(status) = v.get("status").filter(|s| !s.is_null())
            {
                let mut with_status = stored.clone();
                with_status["status"] = status.clone();
                meta::metadata(&mut with_status).remove("resourceVersion");
                stored = ops::update_in(
                    shared,
                    tx,
                    res,
                    &ns,
                    &name,
                    Some("status"),
                    with_status,
                    &c,
                    false,
                )?
                .1;
            }
            Ok(stored)
        });
        to_typed(stored.map_err(|e| e.message)?)
    }

    /// Deletes at once (grace 0), whatever the kind; false if absent.
    pub fn remove<K: k8s_openapi::Resource>(&self, namespace: Option<&str>, name: &str) -> bool {
        let res = res_of::<K>();
        let admin = UserInfo::admin();
        let c = Caller {
            user: &admin,
            dry_run: false,
        };
        let opts = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        delete::delete(&self.shared, res, namespace.unwrap_or(""), name, &opts, &c).is_ok()
    }

    /// Approves a CSR through its approval subresource, as `kubectl
    /// certificate approve` does.
    pub fn approve_csr(&self, name: &str) -> Result<(), String> {
        let res = resources::by_id("certificatesigningrequests.certificates.k8s.io")
            .ok_or("CSRs are not served")?;
        let admin = UserInfo::admin();
        let c = Caller {
            user: &admin,
            dry_run: false,
        };
        let shared = &*self.shared;
        shared
            .store
            .tx(|tx| {
                let mut csr = tx
                    .get(res, &ObjKey::new("", name))
                    .cloned()
                    .ok_or_else(|| ApiError::not_found(res, name))?;
                let now = meta::now_rfc3339();
                let status = meta::obj_at(&mut csr, &["status"]);
                let conds = status.entry("conditions").or_insert_with(|| json!([]));
                if let Value::Array(c) = conds {
                    c.push(json!({
                        "type": "Approved",
                        "status": "True",
                        "reason": "KubectlApprove",
                        "message": "This CSR was approved by kubectl certificate approve.",
                        "lastUpdateTime": now,
                    }));
                }
                ops::update_in(shared, tx, res, "", name, Some("approval"), csr, &c, false)
            })
            .map(|_| ())
            .map_err(|e| e.message)
    }
}

impl Drop for ApiServerDouble {
    fn drop(&mut self) {
        if let Ok(mut g) = self.running.try_lock()
            && let Some(r) = g.take()
        {
            r.cancel.cancel();
            r.accept.abort();
        }
    }
}
