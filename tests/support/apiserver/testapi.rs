//! `TestApi`: one handle for tests, backed by the double or by a real
//! kube-apiserver when the environment names one. Double-only controls
//! answer `Err(Unsupported)` on a real server so tests can skip that step.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::faults::Fault;
use super::kubeconfig::{self, Creds, KubeUser};
use super::meta;
use super::options::DoubleOptions;
use super::real::RealServer;
use super::reqlog::RequestRecord;
use super::resources;
use super::server::ApiServerDouble;

/// A double-only control was asked of a real server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub &'static str);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not supported on a real API server", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// The object types the store helpers take.
pub trait Obj:
    kube::Resource<DynamicType = ()>
    + k8s_openapi::Resource
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
{
}
impl<K> Obj for K where
    K: kube::Resource<DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
{
}

enum Backend {
    Double(Box<ApiServerDouble>),
    Real(Box<RealServer>),
}

/// The API server of a test.
pub struct TestApi {
    backend: Backend,
    /// Objects the helpers created on a real server, for `cleanup`.
    created: Mutex<Vec<(ApiResource, Option<String>, String)>>,
}

fn dyn_api(client: kube::Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client, ns, ar),
        None => Api::all_with(client, ar),
    }
}

fn from_dyn<K: DeserializeOwned>(d: DynamicObject) -> K {
    let v = serde_json::to_value(d).unwrap_or(Value::Null);
    serde_json::from_value(v)
        .unwrap_or_else(|e| panic!("decoding a {}: {e}", std::any::type_name::<K>()))
}

fn to_dyn<K: Serialize>(k: &K) -> DynamicObject {
    let v = serde_json::to_value(k).unwrap_or(Value::Null);
    serde_json::from_value(v)
        .unwrap_or_else(|e| panic!("encoding a {}: {e}", std::any::type_name::<K>()))
}

impl TestApi {
    /// The real server the environment names, else a fresh double.
    pub async fn start() -> TestApi {
        Self::start_with(DoubleOptions::default()).await
    }

    /// As `start`; `opts` shape the double (ignored for a real server).
    pub async fn start_with(opts: DoubleOptions) -> TestApi {
        let backend = match RealServer::from_env() {
            Some(r) => Backend::Real(Box::new(r.unwrap_or_else(|e| panic!("{e}")))),
            None => Backend::Double(Box::new(
                ApiServerDouble::start_with(opts)
                    .await
                    .unwrap_or_else(|e| panic!("starting the API server double: {e}")),
            )),
        };
        TestApi {
            backend,
            created: Mutex::new(Vec::new()),
        }
    }

    /// The test API over the server an admin kubeconfig names (what
    /// `start` does when KUBELET_RS_TEST_KUBECONFIG is set).
    pub fn connect(kubeconfig: &Path, url: Option<&str>) -> TestApi {
        let real =
            RealServer::load(kubeconfig.to_path_buf(), url).unwrap_or_else(|e| panic!("{e}"));
        TestApi {
            backend: Backend::Real(Box::new(real)),
            created: Mutex::new(Vec::new()),
        }
    }

    pub fn is_real(&self) -> bool {
        matches!(self.backend, Backend::Real(_))
    }

    /// The double, for double-only controls.
    pub fn double(&self) -> Result<&ApiServerDouble, Unsupported> {
        match &self.backend {
            Backend::Double(d) => Ok(d),
            Backend::Real(_) => Err(Unsupported("the API server double")),
        }
    }

    pub fn url(&self) -> String {
        match &self.backend {
            Backend::Double(d) => d.url(),
            Backend::Real(r) => r.url(),
        }
    }

    pub fn ca_pem(&self) -> String {
        match &self.backend {
            Backend::Double(d) => d.ca_pem().to_string(),
            Backend::Real(r) => r.ca_pem(),
        }
    }

    /// A unique object name: `prefix` and a random suffix.
    pub fn unique_name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", meta::random_suffix(6))
    }

    pub async fn admin_client(&self) -> kube::Client {
        match &self.backend {
            Backend::Double(d) => d.client(&KubeUser::Admin).await,
            Backend::Real(r) => r.admin_client().await,
        }
    }

    /// Kubeconfig YAML for `user`. On a real server, node and certificate
    /// users get the admin credentials and Bootstrap a token this creates.
    pub async fn kubeconfig_yaml(&self, user: &KubeUser) -> String {
        match &self.backend {
            Backend::Double(d) => d.kubeconfig_yaml(user),
            Backend::Real(r) => match user {
                KubeUser::Token(t) => {
                    kubeconfig::render(&r.url(), &r.ca_pem(), "token", &Creds::Token(t.clone()))
                }
                KubeUser::Bootstrap => {
                    let token = self.create_bootstrap_token().await;
                    kubeconfig::render(&r.url(), &r.ca_pem(), "tls-bootstrap", &Creds::Token(token))
                }
                KubeUser::Anonymous => {
                    kubeconfig::render(&r.url(), &r.ca_pem(), "anonymous", &Creds::None)
                }
                _ => r.admin_yaml(),
            },
        }
    }

    /// A client authenticated as `user` (see `kubeconfig_yaml`).
    pub async fn client(&self, user: &KubeUser) -> kube::Client {
        if matches!(user, KubeUser::Admin) {
            return self.admin_client().await;
        }
        kubeconfig::client_from_yaml(&self.kubeconfig_yaml(user).await).await
    }

    /// A client from a kubeconfig file, loaded as the kubelet loads its own.
    pub async fn client_from_kubeconfig(&self, path: &Path) -> kube::Client {
        kubeconfig::client_from_file(path).await
    }

    /// Writes a kubeconfig for `user` to `path`.
    pub async fn write_kubeconfig(&self, path: &Path, user: &KubeUser) -> PathBuf {
        let yaml = self.kubeconfig_yaml(user).await;
        kubeconfig::write(path, &yaml)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path.to_path_buf()
    }

    /// `<dir>/kubeconfig-<node>` with node credentials (admin ones on a
    /// real server).
    pub async fn kubeconfig_for_node(&self, dir: &Path, node: &str) -> PathBuf {
        self.write_kubeconfig(
            &dir.join(format!("kubeconfig-{node}")),
            &KubeUser::node(node),
        )
        .await
    }

    /// A bootstrap-token kubeconfig at `path`.
    pub async fn bootstrap_kubeconfig(&self, path: &Path) -> PathBuf {
        self.write_kubeconfig(path, &KubeUser::Bootstrap).await
    }

    async fn create_bootstrap_token(&self) -> String {
        let id = meta::random_suffix(6);
        let secret = format!("{}{}", meta::random_suffix(8), meta::random_suffix(8));
        let (id, secret) = (id.to_lowercase(), secret.to_lowercase());
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "data": {
                "token-id": b64(&id),
                "token-secret": b64(&secret),
                "usage-bootstrap-authentication": b64("true"),
                "expiration": b64(&meta::rfc3339_in(3600)),
            },
        }))
        .unwrap_or_else(|e| panic!("bootstrap token secret: {e}"));
        self.put(&s).await;
        // What kubeadm sets up: bootstrap tokens may ask for client
        // certificates (a bare cluster answers 403 to the CSR otherwise).
        let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding =
            serde_json::from_value(json!({
                "metadata": {"name": "kubelet-rs-test:node-bootstrapper"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:node-bootstrapper"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                    "name": "system:bootstrappers"}],
            }))
            .unwrap_or_else(|e| panic!("bootstrapper binding: {e}"));
        self.put(&binding).await;
        format!("{id}.{secret}")
    }

    // ---- double-only controls ---------------------------------------------

    pub fn compact(&self) -> Result<u64, Unsupported> {
        self.double()
            .map(|d| d.compact())
            .map_err(|_| Unsupported("compact()"))
    }

    pub fn close_watches(&self) -> Result<(), Unsupported> {
        self.double()
            .map(|d| d.close_watches())
            .map_err(|_| Unsupported("close_watches()"))
    }

    pub async fn stop(&self) -> Result<(), Unsupported> {
        self.double()
            .map_err(|_| Unsupported("stop()"))?
            .stop()
            .await;
        Ok(())
    }

    pub async fn restart(&self) -> Result<(), Unsupported> {
        let d = self.double().map_err(|_| Unsupported("restart()"))?;
        d.restart()
            .await
            .unwrap_or_else(|e| panic!("restarting the double: {e}"));
        Ok(())
    }

    pub fn inject(&self, f: Fault) -> Result<(), Unsupported> {
        self.double()
            .map(|d| d.inject(f))
            .map_err(|_| Unsupported("fault injection"))
    }

    pub fn requests(&self) -> Result<Vec<RequestRecord>, Unsupported> {
        self.double()
            .map(|d| d.requests())
            .map_err(|_| Unsupported("the request log"))
    }

    pub fn clear_requests(&self) -> Result<(), Unsupported> {
        self.double()
            .map(|d| d.clear_requests())
            .map_err(|_| Unsupported("the request log"))
    }

    // ---- store helpers (both backends) ------------------------------------

    pub async fn get<K: Obj>(&self, namespace: Option<&str>, name: &str) -> Option<K> {
        match &self.backend {
            Backend::Double(d) => d.get::<K>(namespace, name),
            Backend::Real(_) => {
                let ar = ApiResource::erase::<K>(&());
                let api = dyn_api(self.admin_client().await, &ar, namespace);
                api.get_opt(name)
                    .await
                    .unwrap_or_else(|e| panic!("get {} {name}: {e}", K::KIND))
                    .map(from_dyn)
            }
        }
    }

    pub async fn list<K: Obj>(&self, namespace: Option<&str>) -> Vec<K> {
        match &self.backend {
            Backend::Double(d) => d.list::<K>(namespace),
            Backend::Real(_) => {
                let ar = ApiResource::erase::<K>(&());
                let api = dyn_api(self.admin_client().await, &ar, namespace);
                api.list(&Default::default())
                    .await
                    .unwrap_or_else(|e| panic!("list {}: {e}", K::KIND))
                    .items
                    .into_iter()
                    .map(from_dyn)
                    .collect()
            }
        }
    }

    /// Creates or replaces `obj`, status included, as an admin.
    pub async fn put<K: Obj>(&self, obj: &K) -> K {
        match &self.backend {
            Backend::Double(d) => d
                .put(obj)
                .unwrap_or_else(|e| panic!("put {}: {e}", K::KIND)),
            Backend::Real(_) => self.put_real(obj).await,
        }
    }

    async fn put_real<K: Obj>(&self, obj: &K) -> K {
        let ar = ApiResource::erase::<K>(&());
        let ns = obj.meta().namespace.clone();
        let name = obj.meta().name.clone().unwrap_or_default();
        let api = dyn_api(self.admin_client().await, &ar, ns.as_deref());
        let mut d = to_dyn(obj);
        d.metadata.resource_version = None;
        let pp = PostParams::default();
        let stored = match api
            .get_opt(&name)
            .await
            .unwrap_or_else(|e| panic!("get {name}: {e}"))
        {
            Some(existing) => {
                d.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &pp, &d).await
            }
            None => {
                let r = api.create(&pp, &d).await;
                if r.is_ok() {
                    self.created
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((ar.clone(), ns.clone(), name.clone()));
                }
                r
            }
        }
        .unwrap_or_else(|e| panic!("put {} {name}: {e}", K::KIND));
        let has_status = resources::by_kind(K::API_VERSION, K::KIND)
            .is_some_and(|r| r.has_subresource("status"));
        let status = serde_json::to_value(obj)
            .ok()
            .and_then(|v| v.get("status").cloned());
        match status.filter(|s| !s.is_null() && has_status) {
            Some(s) => {
                let mut v = serde_json::to_value(&stored).unwrap_or(Value::Null);
                v["status"] = s;
                let with_status: DynamicObject =
                    serde_json::from_value(v).unwrap_or_else(|e| panic!("encoding {name}: {e}"));
                from_dyn(
                    api.replace_status(&name, &pp, &with_status)
                        .await
                        .unwrap_or_else(|e| panic!("put status of {} {name}: {e}", K::KIND)),
                )
            }
            None => from_dyn(stored),
        }
    }

    /// Deletes at once (grace period 0); false when it was not there.
    pub async fn remove<K: Obj>(&self, namespace: Option<&str>, name: &str) -> bool {
        match &self.backend {
            Backend::Double(d) => d.remove::<K>(namespace, name),
            Backend::Real(_) => {
                let ar = ApiResource::erase::<K>(&());
                let api = dyn_api(self.admin_client().await, &ar, namespace);
                api.delete(name, &DeleteParams::default().grace_period(0))
                    .await
                    .is_ok()
            }
        }
    }

    /// Polls until `pred` holds for the object, or panics after `timeout`
    /// showing what was last seen.
    pub async fn wait_for<K: Obj>(
        &self,
        namespace: Option<&str>,
        name: &str,
        timeout: Duration,
        pred: impl Fn(&K) -> bool,
    ) -> K {
        let start = Instant::now();
        loop {
            let got = self.get::<K>(namespace, name).await;
            if let Some(k) = &got
                && pred(k)
            {
                return k.clone();
            }
            if start.elapsed() > timeout {
                panic!(
                    "waited {timeout:?} for {} {}/{name}; last seen: {}",
                    K::KIND,
                    namespace.unwrap_or(""),
                    last_seen(got.as_ref())
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every write the double saw to objects named `name` (time, user,
    /// method, path, answer, body), for a failure's message; empty on a
    /// real server.
    pub fn writes_to(&self, name: &str) -> Vec<String> {
        self.requests()
            .unwrap_or_default()
            .iter()
            .filter(|r| r.name.as_deref() == Some(name) && r.method != "GET")
            .map(|r| {
                format!(
                    "{:?} {} {} {} {} {}",
                    r.at,
                    r.user.name,
                    r.method,
                    r.path,
                    r.status,
                    String::from_utf8_lossy(&r.body)
                )
            })
            .collect()
    }

    /// Approves, until aborted, the kubelet client CSRs that bootstrap
    /// identities submit (what a cluster's CSR approver does for them).
    pub async fn approve_bootstrap_csrs(&self) {
        use k8s_openapi::api::certificates::v1::CertificateSigningRequest as Csr;
        loop {
            for csr in self.list::<Csr>(None).await {
                let pending = csr
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_none_or(|c| c.is_empty());
                let by_bootstrapper = csr
                    .spec
                    .username
                    .as_deref()
                    .is_some_and(|u| u.starts_with("system:bootstrap:"));
                if pending
                    && by_bootstrapper
                    && csr.spec.signer_name == "kubernetes.io/kube-apiserver-client-kubelet"
                {
                    self.track_for_cleanup(&csr).await;
                    self.approve_csr(csr.metadata.name.as_deref().unwrap_or_default())
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Approves a CSR through the approval subresource with the admin client
    /// (nothing to do when a real cluster's approver got there first).
    pub async fn approve_csr(&self, name: &str) {
        use k8s_openapi::api::certificates::v1::CertificateSigningRequest as Csr;
        let api: Api<Csr> = Api::all(self.admin_client().await);
        let mut csr = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get CSR {name}: {e}"));
        let approved = (csr.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Approved"));
        if approved {
            return;
        }
        let status = csr.status.get_or_insert_with(Default::default);
        let cond: k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition =
            serde_json::from_value(json!({
                "type": "Approved",
                "status": "True",
                "reason": "TestApprove",
                "message": "approved by the test",
            }))
            .unwrap_or_else(|e| panic!("{e}"));
        status.conditions.get_or_insert_with(Vec::new).push(cond);
        api.replace_subresource("approval", name, &PostParams::default(), &csr)
            .await
            .unwrap_or_else(|e| panic!("approve CSR {name}: {e}"));
    }

    /// A fresh namespace named after `prefix`, removed by `cleanup`.
    pub async fn create_namespace(&self, prefix: &str) -> String {
        let name = self.unique_name(prefix);
        let ns: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}}))
                .unwrap_or_else(|e| panic!("{e}"));
        self.put(&ns).await;
        if !self.is_real() {
            return name;
        }
        // A real cluster's controllers create the default service account
        // shortly after the namespace.
        self.wait_for::<k8s_openapi::api::core::v1::ServiceAccount>(
            Some(&name),
            "default",
            Duration::from_secs(30),
            |_| true,
        )
        .await;
        name
    }

    /// Has `cleanup` delete `obj` (on a real server).
    pub async fn track_for_cleanup<K: Obj>(&self, obj: &K) {
        let ar = ApiResource::erase::<K>(&());
        let m = obj.meta();
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((ar, m.namespace.clone(), m.name.clone().unwrap_or_default()));
    }

    /// Deletes what the helpers created on a real server (a double goes away
    /// with its handle).
    pub async fn cleanup(&self) {
        if !self.is_real() {
            return;
        }
        let created: Vec<_> =
            std::mem::take(&mut *self.created.lock().unwrap_or_else(|p| p.into_inner()));
        let client = self.admin_client().await;
        for (ar, ns, name) in created.into_iter().rev() {
            let api = dyn_api(client.clone(), &ar, ns.as_deref());
            let _ = api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
        }
    }
}

/// What a failed wait shows of the object: its status first (the part that
/// says why, and survives a CI log cut short), then the rest as JSON.
fn last_seen<K: Serialize>(got: Option<&K>) -> String {
    let Some(k) = got else {
        return "nothing (not found)".to_string();
    };
    let mut v = serde_json::to_value(k).unwrap_or_default();
    let status = v
        .as_object_mut()
        .and_then(|o| o.remove("status"))
        .unwrap_or_default();
    format!(
        "status {}\nthe rest {}",
        serde_json::to_string_pretty(&status).unwrap_or_default(),
        serde_json::to_string(&v).unwrap_or_default()
    )
}
