//! Shared parts of the api_node tests: client settings, a node status rig
//! over a private containerd, and small helpers.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::Api;
use kubelet::apis::config::types::KubeletConfiguration;
use kubelet::cadvisor::HostMachineInfo;
use kubelet::cm::{ContainerManager, ContainerManagerImpl, HostPaths, NodeConfig};
use kubelet::kubelet::client::{ClientParams, KubeClients, build_clients};
use kubelet::kubelet::events::{ApiEventRecorder, KubeEventSink, NodeEvents};
use kubelet::kubelet::node_status::{NodeStatusDeps, NodeStatusManager, NodeStatusParams};
use kubelet::kubelet::nodestatus::registration::RegistrationConfig;
use kubelet::kubelet::nodestatus::{
    AddressConfig, CriRuntimeInfo, NoPressure, NoVolumes, RuntimeInfo, RuntimeState, SetterConfig,
    StatusSources,
};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;

use crate::support;
use crate::support::apiserver::TestApi;
use crate::support::apiserver::testkit::skip;
use crate::support::containerd::Containerd;

pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub fn params(kubeconfig: &Path, dir: &Path, node: &str) -> ClientParams {
    ClientParams {
        kubeconfig: kubeconfig.to_path_buf(),
        bootstrap_kubeconfig: None,
        cert_dir: dir.join("pki"),
        node_name: node.to_string(),
        rotate_certificates: false,
        content_type: "application/vnd.kubernetes.protobuf".into(),
        kube_api_qps: 50,
        kube_api_burst: 100,
        event_record_qps: 50,
        event_burst: 100,
        heartbeat_timeout: Duration::from_secs(10),
    }
}

pub async fn node_clients(api: &TestApi, dir: &Path, node: &str) -> KubeClients {
    let kubeconfig = api.kubeconfig_for_node(dir, node).await;
    build_clients(&params(&kubeconfig, dir, node))
        .await
        .expect("clients")
}

pub async fn stop(tasks: TaskSet) {
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(10))
        .await
        .expect("node tasks stop");
}

pub fn ready_status(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// Node status over a private containerd, with the lease and events.
pub struct NodeRig {
    pub name: String,
    pub cm: Arc<dyn ContainerManager>,
    pub clients: KubeClients,
    pub manager: Arc<NodeStatusManager>,
    pub params: NodeStatusParams,
    pub sources: StatusSources,
    pub recorder: Arc<ApiEventRecorder>,
    pub tasks: TaskSet,
    pub _containerd: Containerd,
    pub _dir: tempfile::TempDir,
}

pub async fn node_rig(
    api: &TestApi,
    test: &str,
    update: Duration,
    report: Duration,
    heartbeat_timeout: Duration,
) -> Option<NodeRig> {
    install_provider();
    let containerd = Containerd::start(test)?;
    let dir = tempfile::tempdir().unwrap();
    let name = api.unique_name("node");
    let kubeconfig = api.kubeconfig_for_node(dir.path(), &name).await;
    let mut p = params(&kubeconfig, dir.path(), &name);
    p.heartbeat_timeout = heartbeat_timeout;
    let clients = build_clients(&p).await.expect("clients");
    let recorder = ApiEventRecorder::new(&name, Arc::new(RealClock));
    let defaults = KubeletConfiguration::v1beta1_defaults();
    let thresholds = kubelet::kubelet::eviction::threshold::parse_threshold_config(
        &[],
        &defaults.eviction_hard,
        &Default::default(),
        &Default::default(),
        &Default::default(),
    )
    .unwrap();
    let mut cm_config = NodeConfig {
        node_name: name.clone(),
        cgroups_per_qos: false,
        cgroup_root: String::new(),
        kubelet_root_dir: dir.path().to_path_buf(),
        fail_swap_on: false,
        ..NodeConfig::default()
    };
    cm_config.node_allocatable.enforce_node_allocatable.clear();
    cm_config.node_allocatable.hard_eviction_thresholds = thresholds;
    let cm: Arc<dyn ContainerManager> = Arc::new(
        ContainerManagerImpl::new(
            cm_config,
            Arc::new(HostMachineInfo::new("/")),
            HostPaths::default(),
            Arc::new(NodeEvents::new(recorder.clone(), &name)),
        )
        .expect("container manager"),
    );
    let services =
        kubelet::cri::connect_runtime_services(&containerd.endpoint(), "", containerd.timeout())
            .await
            .expect("CRI");
    let runtime: Arc<dyn RuntimeInfo> =
        Arc::new(CriRuntimeInfo::new(services.runtime, services.image));
    let runtime_state = Arc::new(RuntimeState::default());
    let tasks = TaskSet::new();
    recorder.start(&tasks, Arc::new(KubeEventSink::new(clients.events.clone())));
    runtime_state.start_updater(&tasks, runtime.clone());
    let params = NodeStatusParams {
        registration: RegistrationConfig {
            node_name: name.clone(),
            hostname: name.clone(),
            register_schedulable: true,
            enable_controller_attach_detach: true,
            ..Default::default()
        },
        register_node: true,
        setter: SetterConfig {
            node_name: name.clone(),
            max_pods: 110,
            pods_per_core: 0,
            kubelet_port: 10250,
            node_status_max_images: 50,
            local_storage_capacity_isolation: true,
            kubelet_version: kubelet::version::git_version(),
        },
        address: AddressConfig {
            hostname: name.clone(),
            ..Default::default()
        },
        update_frequency: update,
        report_frequency: report,
    };
    let sources = StatusSources::new(
        cm.clone(),
        Arc::new(HostMachineInfo::new("/")),
        runtime,
        runtime_state,
        Arc::new(NoPressure),
        Arc::new(NoVolumes),
        Arc::new(RealClock),
    );
    let manager = NodeStatusManager::new(
        params.clone(),
        NodeStatusDeps {
            client: clients.main.clone(),
            heartbeat_client: clients.heartbeat.clone(),
            sources: sources.clone(),
            recorder: recorder.clone(),
            on_heartbeat_failure: Some(clients.heartbeat_failure_hook()),
            reset_extended_resources: true,
            clock: Arc::new(RealClock),
        },
    );
    manager.start(&tasks);
    Some(NodeRig {
        name,
        cm,
        clients,
        manager,
        params,
        sources,
        recorder,
        tasks,
        _containerd: containerd,
        _dir: dir,
    })
}

pub fn reference_node() -> serde_json::Value {
    let p = support::repo_root().join("tests/fixtures/go-kubelet-examples/node-gonode.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

pub fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

pub fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub fn host_hugepage_resources() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/sys/kernel/mm/hugepages")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    let kb: u64 = n
                        .strip_prefix("hugepages-")?
                        .strip_suffix("kB")?
                        .parse()
                        .ok()?;
                    Some(if kb.is_multiple_of(1024 * 1024) {
                        format!("hugepages-{}Gi", kb / 1024 / 1024)
                    } else {
                        format!("hugepages-{}Mi", kb / 1024)
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

pub fn quantity(s: &str) -> i128 {
    let (num, mult): (&str, i128) = if let Some(n) = s.strip_suffix("Ki") {
        (n, 1024)
    } else if let Some(n) = s.strip_suffix("Mi") {
        (n, 1024 * 1024)
    } else if let Some(n) = s.strip_suffix("Gi") {
        (n, 1024 * 1024 * 1024)
    } else {
        (s, 1)
    };
    num.parse::<i128>().unwrap() * mult
}

pub async fn wait_events(
    api: &TestApi,
    ns: &str,
    object: &str,
    pred: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    let start = Instant::now();
    loop {
        let events: Vec<Event> = api
            .list::<Event>(Some(ns))
            .await
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(object))
            .collect();
        if pred(&events) {
            return events;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let seen: Vec<(Option<String>, Option<String>, Option<i32>)> = events
                .iter()
                .map(|e| (e.reason.clone(), e.message.clone(), e.count))
                .collect();
            panic!("events of {ns}/{object} never matched; seen {seen:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn status_patches(api: &TestApi, node: &str) -> Option<usize> {
    let reqs = api.requests().map_err(skip).ok()?;
    Some(
        reqs.iter()
            .filter(|r| {
                r.method == "PATCH"
                    && r.resource.as_deref() == Some("nodes")
                    && r.subresource.as_deref() == Some("status")
                    && r.name.as_deref() == Some(node)
                    && r.status == 200
            })
            .count(),
    )
}

/// Plays the CSR approver for `node`'s kubelet client requests (up to a
/// minute): approves pending requests whose subject is that node.
pub async fn approve_pending(api: &TestApi, node: &str) {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest as Csr;
    let want_cn = format!("system:node:{node}");
    for _ in 0..600 {
        for csr in api.list::<Csr>(None).await {
            let pending = csr
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none_or(|c| c.is_empty());
            if pending
                && csr.spec.signer_name == "kubernetes.io/kube-apiserver-client-kubelet"
                && csr_common_name(&csr.spec.request.0).as_deref() == Some(want_cn.as_str())
            {
                let name = csr.metadata.name.clone().unwrap();
                api.track_for_cleanup(&csr).await;
                api.approve_csr(&name).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn csr_common_name(pem: &[u8]) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    use x509_parser::prelude::FromDer;
    let der = rustls::pki_types::CertificateSigningRequestDer::from_pem_slice(pem).ok()?;
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(der.as_ref())
            .ok()?;
    let cn = req
        .certification_request_info
        .subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(cn)
}

pub fn cert_subject(pem: &str) -> (String, Vec<String>) {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let cn = c
        .subject()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let o = c
        .subject()
        .iter_organization()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    (cn, o)
}

/// One HTTPS GET to the main server; (status, body).
pub async fn https_get(
    addr: std::net::SocketAddr,
    host: &str,
    roots: &rustls::RootCertStore,
    path: &str,
    token: Option<&str>,
) -> (u16, String) {
    use http_body_util::BodyExt;
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots.clone())
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(
            rustls::pki_types::ServerName::try_from(host.to_string()).unwrap(),
            tcp,
        )
        .await
        .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::get(path).header("host", host);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = sender
        .send_request(
            req.body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).to_string())
}

/// A service account token of `ns/default`, from TokenRequest.
pub async fn service_account_token(api: &TestApi, ns: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let sas: Api<ServiceAccount> = Api::namespaced(api.admin_client().await, ns);
    let req: TokenRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}
    }))
    .unwrap();
    let tr: TokenRequest = sas
        .create_subresource("token", "default", &Default::default(), &req)
        .await
        .expect("token request");
    tr.status.expect("token").token
}

/// On a real server: lets `user` read nodes/proxy (what the double allows
/// anyone through SubjectAccessReview).
pub async fn grant_node_proxy(api: &TestApi, user: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let role_name = api.unique_name("kubelet-test-proxy");
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": role_name},
        "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}]
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": role_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .unwrap();
    api.put(&role).await;
    api.put(&binding).await;
}
