//! A whole kubelet over a private containerd, through the library's start
//! path (`app::run::run_with`): its root, pod logs, manifests, cert dir and
//! sysctl tree in a temp dir, a cgroup root of its own under the rig's,
//! ports of its own. Dropping the node stops the kubelet; the rig cleans up
//! sandboxes, containers and cgroups.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet::app::command::{Outcome, build};
use kubelet::app::dependencies::Dependencies;
use kubelet::app::run::{RunError, run_with};
use kubelet::cri::{RemoteRuntimeService, RuntimeService};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::containerd::Containerd;

/// Files of one node (kept across kubelet restarts).
pub struct NodeDirs {
    pub dir: tempfile::TempDir,
}

impl NodeDirs {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("kubelet-rs-e2e.")
            .tempdir()
            .expect("temp dir");
        for d in ["root", "logs", "manifests", "pki", "host"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        // A sysctl tree of our own: the container manager tunes these.
        for (file, value) in [
            ("vm/overcommit_memory", "0"),
            ("vm/panic_on_oom", "0"),
            ("kernel/panic", "0"),
            ("kernel/panic_on_oops", "0"),
            ("kernel/keys/root_maxkeys", "200"),
            ("kernel/keys/root_maxbytes", "20000"),
        ] {
            let path = dir.path().join("sysctl").join(file);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, value).expect("sysctl");
        }
        NodeDirs { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn manifests(&self) -> PathBuf {
        self.path("manifests")
    }

    /// Writes a manifest atomically (the file source must never read half a file).
    pub fn write_manifest(&self, file: &str, body: &str) {
        let tmp = self.path(&format!("{file}.tmp"));
        std::fs::write(&tmp, body).expect("write manifest");
        std::fs::rename(&tmp, self.manifests().join(file)).expect("rename manifest");
    }

    pub fn remove_manifest(&self, file: &str) {
        std::fs::remove_file(self.manifests().join(file)).expect("remove manifest");
    }
}

/// Mount points at or below `dir` (deepest first).
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|m| m.starts_with(dir))
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    out.dedup();
    out
}

impl Drop for NodeDirs {
    /// The kubelet makes its root directory a shared mount and mounts
    /// volumes below it; take them all down before the temp dir goes.
    fn drop(&mut self) {
        for m in mounts_under(self.dir.path()) {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// Ports of one node.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub main: u16,
    pub read_only: u16,
    pub healthz: u16,
}

/// The cgroup root the node's pods go under (created in every hierarchy;
/// the rig removes it with its own root).
pub fn make_cgroup_root(rig: &Containerd, name: &str) -> String {
    let rel = format!("{}/{name}", rig.cgroup_root());
    for (controllers, mount) in crate::support::cgroup_mounts() {
        let dir = mount.join(&rel);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {dir:?}: {e}"));
        if controllers.iter().any(|c| c == "cpuset") {
            let mut parent = mount.clone();
            for part in rel.split('/') {
                let here = parent.join(part);
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let have = std::fs::read_to_string(here.join(f)).unwrap_or_default();
                    if have.trim().is_empty() {
                        let from = std::fs::read_to_string(parent.join(f)).unwrap_or_default();
                        let _ = std::fs::write(here.join(f), from.trim());
                    }
                }
                parent = here;
            }
        }
    }
    format!("/{rel}")
}

/// The configuration file of a test node.
pub fn config(dirs: &NodeDirs, cgroup_root: &str, ports: Ports, extra: &str) -> PathBuf {
    let mut body = base_config(dirs, cgroup_root, ports, extra);
    if !body.ends_with('\n') {
        body.push('\n');
    }
    body.push_str(&disk_settings(extra));
    let path = dirs.path("kubelet-conf.yml");
    std::fs::write(&path, body).expect("config");
    path
}

/// Image GC and disk eviction thresholds for a test node, unless the test
/// sets its own: the kubelet reads the host's disk, which on a CI machine
/// can be over Go's defaults (image GC at 85% used, eviction at 15% of the
/// image filesystem free). The offline test images cannot be pulled again
/// once collected, and a node under disk pressure admits no pods.
fn disk_settings(extra: &str) -> String {
    let mut out = String::new();
    if !extra.contains("imageGCHighThresholdPercent") {
        out.push_str("imageGCHighThresholdPercent: 100\n");
    }
    if !extra.contains("evictionHard") {
        out.push_str("evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 1%\n  imagefs.available: 1%\n");
    }
    out
}

fn base_config(dirs: &NodeDirs, cgroup_root: &str, ports: Ports, extra: &str) -> String {
    format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: {manifests}
fileCheckFrequency: 2s
syncFrequency: 10s
cgroupRoot: {cgroup_root}
cgroupDriver: cgroupfs
failSwapOn: false
address: 127.0.0.1
port: {main}
readOnlyPort: {ro}
healthzPort: {hz}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
{extra}",
        manifests = dirs.manifests().display(),
        main = ports.main,
        ro = ports.read_only,
        hz = ports.healthz,
    )
}

/// The command line of a test node.
pub fn args(dirs: &NodeDirs, rig: &Containerd, config: &Path, node: &str) -> Vec<String> {
    vec![
        "kubelet".into(),
        format!("--config={}", config.display()),
        format!("--root-dir={}", dirs.path("root").display()),
        format!("--cert-dir={}", dirs.path("pki").display()),
        format!("--container-runtime-endpoint={}", rig.endpoint()),
        format!("--hostname-override={node}"),
    ]
}

/// The host seams of a test node.
pub fn deps(dirs: &NodeDirs, server: &kubelet::app::server::KubeletServer) -> Dependencies {
    let mut deps = Dependencies::unsecured(server);
    deps.host_paths.sysctl = dirs.path("sysctl");
    deps.pod_logs_root = dirs.path("logs/pods");
    deps.container_logs_dir = dirs.path("logs/containers");
    deps
}

/// A kubelet running in this process.
pub struct Kubelet {
    pub stop: CancellationToken,
    pub handle: JoinHandle<Result<(), RunError>>,
}

impl Kubelet {
    pub fn start(
        args: Vec<String>,
        deps_fn: impl FnOnce(&kubelet::app::server::KubeletServer) -> Dependencies,
    ) -> Kubelet {
        let mut warnings = Vec::new();
        let server =
            match build(args.into_iter().skip(1), &mut warnings).expect("valid command line") {
                Outcome::Run { server, .. } => server,
                _ => panic!("not a run"),
            };
        let deps = deps_fn(&server);
        let stop = CancellationToken::new();
        let handle = tokio::spawn(run_with(server, deps, stop.clone()));
        Kubelet { stop, handle }
    }

    /// Stops it and waits for run() to return.
    pub async fn stop(self) -> Result<(), RunError> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .expect("run() returns within 10 s")
            .expect("run() did not panic")
    }
}

/// GET on 127.0.0.1:`port` (plain HTTP/1.0): (status, body).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// The pods /pods on the read-only port shows, by name.
pub fn pods(port: u16) -> BTreeMap<String, Pod> {
    let Some((200, body)) = http_get(port, "/pods") else {
        return BTreeMap::new();
    };
    let list: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| serde_json::from_value::<Pod>(i.clone()).ok())
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
        .collect()
}

/// Polls /pods until `f` accepts the named pod (or `within` passes).
pub async fn wait_pod(
    port: u16,
    name: &str,
    within: Duration,
    what: &str,
    f: impl Fn(&Pod) -> bool,
) -> Pod {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = tokio::task::spawn_blocking({
            let name = name.to_string();
            move || pods(port).remove(&name)
        })
        .await
        .expect("join");
        if let Some(p) = &found
            && f(p)
        {
            return p.clone();
        }
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "{name}: timed out waiting for {what}; last: {}",
                serde_json::to_string_pretty(&found.map(|p| p.status)).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The pod's phase.
pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The status of the named (init) container.
pub fn container<'a>(
    p: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    let s = p.status.as_ref()?;
    s.container_statuses
        .iter()
        .flatten()
        .chain(s.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

pub fn is_running(p: &Pod, name: &str) -> bool {
    container(p, name)
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

/// A CRI client on the rig.
pub async fn cri(rig: &Containerd) -> Arc<RemoteRuntimeService> {
    Arc::new(
        RemoteRuntimeService::connect(&rig.endpoint(), rig.timeout())
            .await
            .expect("connect CRI"),
    )
}

/// The CRI containers of a pod UID.
pub async fn cri_containers(
    rt: &RemoteRuntimeService,
    uid: &str,
) -> Vec<kubelet::cri::api::Container> {
    rt.list_containers(None)
        .await
        .expect("list containers")
        .into_iter()
        .filter(|c| c.labels.get("io.kubernetes.pod.uid").map(String::as_str) == Some(uid))
        .collect()
}

pub fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

/// Trust in the self-signed serving certificate the kubelet wrote to its
/// cert dir.
pub fn kubelet_roots(dirs: &NodeDirs) -> rustls::RootCertStore {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dirs.path("pki/kubelet.crt"))
            .expect("kubelet.crt")
            .collect::<Result<_, _>>()
            .expect("PEM certificates");
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(certs);
    roots
}

/// A TLS connection to the node's main port, trusting the self-signed
/// certificate the kubelet wrote to its cert dir for `node`, with HTTP/1.1
/// on it (upgrades allowed).
pub async fn https_connect(
    dirs: &NodeDirs,
    node: &str,
    port: u16,
) -> hyper::client::conn::http1::SendRequest<http_body_util::Empty<bytes::Bytes>> {
    use rustls::pki_types::ServerName;
    let roots = kubelet_roots(dirs);
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the main port");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(node.to_string()).expect("name"), tcp)
        .await
        .expect("TLS handshake with the kubelet's own certificate");
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .expect("HTTP handshake");
    tokio::spawn(conn.with_upgrades());
    sender
}

/// Sends `method path` (with `headers`) to the node's main port; returns
/// the response as it streams.
pub async fn https_send(
    dirs: &NodeDirs,
    node: &str,
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> http::Response<hyper::body::Incoming> {
    let mut sender = https_connect(dirs, node, port).await;
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", node);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    sender.send_request(req).await.expect("response")
}

/// GET `path` on the node's main port: the status and the body as it
/// streams.
pub async fn https_request(
    dirs: &NodeDirs,
    node: &str,
    port: u16,
    path: &str,
) -> (u16, hyper::body::Incoming) {
    let resp = https_send(dirs, node, port, "GET", path, &[]).await;
    (resp.status().as_u16(), resp.into_body())
}

/// GET on the main port, the whole body as text.
pub async fn https_get(dirs: &NodeDirs, node: &str, port: u16, path: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let (status, body) = https_request(dirs, node, port, path).await;
    let bytes = body.collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// The real sysctls the binary tunes (as the Go kubelet does), put back
/// when dropped.
pub struct SysctlGuard(Vec<(String, String)>);

impl SysctlGuard {
    /// The binary tunes the real sysctls as the Go kubelet does; put them back.
    pub fn save() -> Self {
        let keys = [
            "vm/overcommit_memory",
            "vm/panic_on_oom",
            "kernel/panic",
            "kernel/panic_on_oops",
            "kernel/keys/root_maxkeys",
            "kernel/keys/root_maxbytes",
        ];
        SysctlGuard(
            keys.iter()
                .filter_map(|k| {
                    let v = std::fs::read_to_string(format!("/proc/sys/{k}")).ok()?;
                    Some((k.to_string(), v.trim().to_string()))
                })
                .collect(),
        )
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            let _ = std::fs::write(format!("/proc/sys/{k}"), v);
        }
    }
}

pub fn spawn_binary(args: &[String], logs: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_kubelet"))
        .args(&args[1..])
        .env("KUBELET_RS_LOG_ROOT", logs)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn kubelet")
}

pub fn collect_stderr(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let mut err = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = String::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let _ = tx.send(all);
    });
    rx
}

pub fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
