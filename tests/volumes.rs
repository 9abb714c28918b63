//! The volume manager and plugins on real mounts, as root: tmpfs emptyDir
//! mounted and unmounted; configMap, secret and projected volumes read
//! from an API server (the double, or a real one named by the
//! environment) with their content, modes and fsGroup ownership, and
//! updates swapped in atomically; reconstruction after a kubelet
//! "restart"; and real containers (private containerd) reading the
//! volumes and seeing an update.
//!
//! The pod workers are not part of this crate yet: their view
//! (PodStateProvider) is a small set-backed implementation here.

mod support;

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

use kubelet::kubelet::envvars::{ConfigMapGetter, GetError, ObjectKind, SecretGetter};
use kubelet::kubelet::pod::PodManager;
use kubelet::kubelet::pod_dirs::PodDirs;
use kubelet::kubelet::volumemanager::{
    PodStateProvider, SourcesReadyCheck, VolumeManager, VolumeManagerDeps,
};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use kubelet::volume::util::mount::{SystemMounter, parse_mountinfo};
use kubelet::volume::{
    PluginManager, ServiceAccountTokenGetter, StaticNodeAllocatable, TokenError, TokenManager,
    VolumeHost,
};
use support::apiserver::TestApi;
use support::apiserver::testkit::obj;

// ---------------------------------------------------------------------------
// Seams

/// ConfigMaps, Secrets and tokens straight from the API server (a GET or a
/// TokenRequest per call).
struct ApiObjects {
    client: kube::Client,
}

fn get_error(kind: ObjectKind, name: &str, e: kube::Error) -> GetError {
    match e {
        kube::Error::Api(s) if s.code == 404 => GetError::NotFound {
            kind,
            name: name.to_string(),
        },
        e => GetError::getter(e),
    }
}

#[async_trait]
impl ConfigMapGetter for ApiObjects {
    async fn get_config_map(&self, ns: &str, name: &str) -> Result<ConfigMap, GetError> {
        Api::<ConfigMap>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| get_error(ObjectKind::ConfigMap, name, e))
    }
}

#[async_trait]
impl SecretGetter for ApiObjects {
    async fn get_secret(&self, ns: &str, name: &str) -> Result<Secret, GetError> {
        Api::<Secret>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| get_error(ObjectKind::Secret, name, e))
    }
}

#[async_trait]
impl ServiceAccountTokenGetter for ApiObjects {
    async fn create_token(
        &self,
        ns: &str,
        sa: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenError> {
        Api::<ServiceAccount>::namespaced(self.client.clone(), ns)
            .create_subresource("token", sa, &PostParams::default(), request)
            .await
            .map_err(|e| TokenError(e.to_string()))
    }
}

/// Which pods' containers have stopped.
#[derive(Default)]
struct Workers {
    stopped: Mutex<HashSet<String>>,
}

impl Workers {
    fn stop(&self, uid: &str) {
        self.stopped.lock().unwrap().insert(uid.to_string());
    }
}

impl PodStateProvider for Workers {
    fn should_pod_containers_be_terminating(&self, uid: &str) -> bool {
        self.stopped.lock().unwrap().contains(uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.stopped.lock().unwrap().contains(uid)
    }
}

struct AllReady;
impl SourcesReadyCheck for AllReady {
    fn all_ready(&self) -> bool {
        true
    }
}

// ---------------------------------------------------------------------------
// Rig

struct Kubelet {
    vm: VolumeManager,
    pods: Arc<PodManager>,
    workers: Arc<Workers>,
    tasks: TaskSet,
}

fn allocatable() -> StaticNodeAllocatable {
    StaticNodeAllocatable(
        [
            ("cpu".to_string(), obj(json!("2"))),
            ("memory".to_string(), obj(json!("1Gi"))),
        ]
        .into(),
    )
}

/// A volume manager over `root`, started; `api` gives it API access.
fn start_kubelet(root: &Path, api: Option<kube::Client>) -> Kubelet {
    let mut host = VolumeHost::new(
        PodDirs::new(root),
        Arc::new(SystemMounter),
        Arc::new(RealClock),
        Arc::new(allocatable()),
    );
    if let Some(client) = api {
        let objects = Arc::new(ApiObjects { client });
        host = host
            .with_config_maps(objects.clone())
            .with_secrets(objects.clone())
            .with_tokens(Arc::new(TokenManager::new(objects, Arc::new(RealClock))));
    }
    let pods = Arc::new(PodManager::new());
    let workers = Arc::new(Workers::default());
    let vm = VolumeManager::new(VolumeManagerDeps {
        plugins: Arc::new(PluginManager::new(Arc::new(host))),
        pods: pods.clone(),
        pod_state: workers.clone(),
        sources_ready: Arc::new(AllReady),
        clock: Arc::new(RealClock),
    });
    let tasks = TaskSet::new();
    vm.start(&tasks);
    Kubelet {
        vm,
        pods,
        workers,
        tasks,
    }
}

impl Kubelet {
    async fn stop(self) {
        self.tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(10))
            .await
            .expect("volume manager stops");
    }

    /// Pod gone, containers stopped: waits for the unmounts and the
    /// housekeeping cleanup of the pod directory.
    async fn remove_pod(&self, pod: &Pod) {
        self.pods.delete_pod(pod);
        self.workers.stop(pod.metadata.uid.as_deref().unwrap());
        self.vm.wait_for_unmount(pod).await.expect("unmounted");
        eventually("the volumes to go", || {
            self.vm
                .get_possibly_mounted_volumes_for_pod(pod.metadata.uid.as_deref().unwrap())
                .is_empty()
        })
        .await;
        self.vm
            .cleanup_orphaned_pod_dirs(HashSet::new())
            .await
            .expect("orphan cleanup");
    }
}

/// Unmounts whatever is left under `root` (a failed test), deepest first.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        let mut left: Vec<PathBuf> = mounts_under(&self.0);
        left.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
        for p in left {
            let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

fn mounts_under(root: &Path) -> Vec<PathBuf> {
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap())
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p.starts_with(root))
        .collect()
}

fn mount_count(p: &Path) -> usize {
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap())
        .into_iter()
        .filter(|m| m.mount_point == p)
        .count()
}

fn fs_type(p: &Path) -> String {
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap())
        .into_iter()
        .find(|m| m.mount_point == p)
        .map(|m| m.fs_type)
        .unwrap_or_default()
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..300 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

fn root_or_skip(test: &str) -> bool {
    if support::is_root() {
        return true;
    }
    support::skip(test, "mounting needs root");
    false
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn visible(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".."))
        .collect();
    v.sort();
    v
}

fn ts_dirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("..") && n != "..data")
        .collect();
    v.sort();
    v
}

fn vol(root: &Path, uid: &str, plugin: &str, name: &str) -> PathBuf {
    root.join(format!("pods/{uid}/volumes/kubernetes.io~{plugin}/{name}"))
}

fn ready(root: &Path, uid: &str, name: &str) -> PathBuf {
    root.join(format!(
        "pods/{uid}/plugins/kubernetes.io~empty-dir/{name}/ready"
    ))
}

fn local_pod(uid: &str, spec: serde_json::Value) -> Arc<Pod> {
    Arc::new(obj(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": uid},
        "spec": spec,
    })))
}

// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmpfs_empty_dir_is_mounted_sized_and_removed() {
    if !root_or_skip("tmpfs_empty_dir_is_mounted_sized_and_removed") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let _guard = MountGuard(root.clone());
    let k = start_kubelet(&root, None);
    let pod = local_pod(
        "tmpfs-1",
        json!({
            "containers": [{"name": "c", "resources": {"limits": {"memory": "64Mi"}},
                "volumeMounts": [{"name": "mem", "mountPath": "/mem"}, {"name": "disk", "mountPath": "/disk"},
                                 {"name": "big", "mountPath": "/big"}]}],
            "volumes": [{"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
                        {"name": "big", "emptyDir": {"medium": "Memory"}},
                        {"name": "disk", "emptyDir": {}}]
        }),
    );
    k.pods.add_pod(pod.clone());
    k.vm.wait_for_attach_and_mount(&pod).await.expect("mounted");

    let mem = vol(&root, "tmpfs-1", "empty-dir", "mem");
    let big = vol(&root, "tmpfs-1", "empty-dir", "big");
    let disk = vol(&root, "tmpfs-1", "empty-dir", "disk");
    assert_eq!(fs_type(&mem), "tmpfs");
    let size = |p: &Path| {
        let st = nix::sys::statfs::statfs(p).unwrap();
        st.blocks() as u64 * st.block_size() as u64
    };
    assert_eq!(size(&mem), 8 << 20, "sizeLimit below the pod limit");
    assert_eq!(size(&big), 64 << 20, "the pod's memory limit");
    assert_eq!(mount_count(&disk), 0, "medium \"\" is a plain directory");
    assert_eq!(mode(&disk), 0o777);
    for name in ["mem", "big", "disk"] {
        assert!(
            ready(&root, "tmpfs-1", name).is_file(),
            "{name} ready marker"
        );
    }
    let vols = k.vm.get_mounted_volumes_for_pod("tmpfs-1");
    assert_eq!(vols["mem"].host_path, mem.to_string_lossy());
    assert!(!vols["mem"].read_only);

    k.remove_pod(&pod).await;
    assert!(mounts_under(&root).is_empty(), "everything unmounted");
    assert!(!root.join("pods/tmpfs-1").exists(), "pod directory removed");
    k.stop().await;
}

fn api_pod_spec(ca_name: &str) -> serde_json::Value {
    json!({
        "securityContext": {"fsGroup": 2000},
        "serviceAccountName": "default",
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
            "volumeMounts": [
                {"name": "cfg", "mountPath": "/cfg"},
                {"name": "sec", "mountPath": "/sec"},
                {"name": "kube-api-access-test", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
                {"name": "info", "mountPath": "/info"}
            ]}],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}},
            {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 256}},
            {"name": "info", "downwardAPI": {"defaultMode": 420, "items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "cpu_limit", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "1m"}}
            ]}},
            {"name": "kube-api-access-test", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": ca_name, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}}
        ]
    })
}

/// Creates the objects and the pod in a fresh namespace; returns the pod
/// as the API server stored it.
async fn api_objects(api: &TestApi, prefix: &str) -> (String, Pod) {
    let ns = api.create_namespace(prefix).await;
    let client = api.admin_client().await;
    let pp = PostParams::default();
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "cfg"}, "data": {"greeting": "hello"}})),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "sec"}, "data": {"password": "aHVudGVyMg=="}})),
        )
        .await
        .unwrap();
    let pod: Pod = obj(json!({
        "metadata": {"name": "vols", "labels": {"app": "vols"}},
        "spec": api_pod_spec("kube-root-ca.crt"),
    }));
    let pod = Api::<Pod>::namespaced(client, &ns)
        .create(&pp, &pod)
        .await
        .unwrap();
    (ns, pod)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_volumes_content_modes_ownership_and_atomic_update() {
    if !root_or_skip("api_volumes_content_modes_ownership_and_atomic_update") {
        return;
    }
    let api = TestApi::start().await;
    let (ns, pod) = api_objects(&api, "vols").await;
    let uid = pod.metadata.uid.clone().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let _guard = MountGuard(root.clone());
    let k = start_kubelet(&root, Some(api.admin_client().await));
    let pod = Arc::new(pod);
    k.pods.add_pod(pod.clone());
    k.vm.wait_for_attach_and_mount(&pod).await.expect("mounted");

    // configMap: on disk, 0644, fsGroup as group (read-only volume: +r).
    let cfg = vol(&root, &uid, "configmap", "cfg");
    assert_eq!(mount_count(&cfg), 0);
    assert_eq!(visible(&cfg), vec!["greeting"]);
    assert_eq!(
        std::fs::read_to_string(cfg.join("greeting")).unwrap(),
        "hello"
    );
    assert_eq!(mode(&cfg.join("greeting")), 0o644);
    assert_eq!(std::fs::metadata(cfg.join("greeting")).unwrap().gid(), 2000);
    assert_eq!(
        std::fs::read_link(cfg.join("greeting")).unwrap(),
        Path::new("..data/greeting")
    );
    assert!(ready(&root, &uid, "wrapped_cfg").is_file());

    // secret: tmpfs, 0400 + group read.
    let sec = vol(&root, &uid, "secret", "sec");
    assert_eq!(fs_type(&sec), "tmpfs");
    assert_eq!(std::fs::read(sec.join("password")).unwrap(), b"hunter2");
    assert_eq!(mode(&sec.join("password")), 0o440);
    assert_eq!(std::fs::metadata(sec.join("password")).unwrap().gid(), 2000);

    // downwardAPI.
    let info = vol(&root, &uid, "downward-api", "info");
    assert_eq!(fs_type(&info), "tmpfs");
    assert_eq!(
        std::fs::read_to_string(info.join("labels")).unwrap(),
        "app=\"vols\""
    );
    assert_eq!(
        std::fs::read_to_string(info.join("cpu_limit")).unwrap(),
        "2000"
    );

    // projected kube-api-access: the reference layout; the token is 0600
    // made 0640 by fsGroup.
    let sa = vol(&root, &uid, "projected", "kube-api-access-test");
    assert_eq!(fs_type(&sa), "tmpfs");
    assert_eq!(visible(&sa), vec!["ca.crt", "namespace", "token"]);
    let ts = ts_dirs(&sa);
    assert_eq!(ts.len(), 1);
    let (prefix, random) = ts[0].rsplit_once('.').unwrap();
    assert!(
        prefix.starts_with("..20") && prefix.len() == "..2026_11_22_04_03_42".len(),
        "{ts:?}"
    );
    assert!(random.parse::<u32>().is_ok(), "{ts:?}");
    for f in ["ca.crt", "namespace", "token"] {
        assert!(
            sa.join(&ts[0]).join(f).is_file(),
            "{f} in the timestamped dir"
        );
    }
    assert_eq!(std::fs::read_to_string(sa.join("namespace")).unwrap(), ns);
    let token = std::fs::read_to_string(sa.join("token")).unwrap();
    assert_eq!(token.split('.').count(), 3, "a JWT from TokenRequest");
    assert_eq!(mode(&sa.join("token")), 0o640);
    assert_eq!(mode(&sa.join("ca.crt")), 0o644);
    assert!(
        std::fs::read_to_string(sa.join("ca.crt"))
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    assert_eq!(std::fs::metadata(sa.join("token")).unwrap().gid(), 2000);
    assert!(ready(&root, &uid, "wrapped_kube-api-access-test").is_file());

    let vols = k.vm.get_mounted_volumes_for_pod(&uid);
    for name in ["cfg", "sec", "info", "kube-api-access-test"] {
        assert!(vols[name].read_only, "{name} is mounted read-only");
    }

    // Update: a reader holding ..data sees the old or the new set, never a
    // mix; the old timestamped dir goes.
    let before = std::fs::read_link(cfg.join("..data")).unwrap();
    let old_view = cfg.join(&before);
    Api::<ConfigMap>::namespaced(api.admin_client().await, &ns)
        .replace(
            "cfg",
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "cfg", "namespace": ns}, "data": {"greeting": "bonjour", "extra": "x"}})),
        )
        .await
        .unwrap();
    k.vm.wait_for_attach_and_mount(&pod).await.expect("resync");
    // The reader side sees the new set as soon as ..data is renamed; the
    // writer then adds new links and removes the old version.
    eventually("the update", || {
        std::fs::read_to_string(cfg.join("greeting")).is_ok_and(|s| s == "bonjour")
            && !old_view.exists()
    })
    .await;
    let after = std::fs::read_link(cfg.join("..data")).unwrap();
    assert_ne!(before, after);
    assert!(!old_view.exists(), "the old version is removed");
    assert_eq!(visible(&cfg), vec!["extra", "greeting"]);
    assert_eq!(ts_dirs(&cfg).len(), 1);
    assert_eq!(
        token,
        std::fs::read_to_string(sa.join("token")).unwrap(),
        "a fresh token is reused"
    );

    k.remove_pod(&pod).await;
    assert!(mounts_under(&root).is_empty());
    assert!(!root.join(format!("pods/{uid}")).exists());
    k.stop().await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconstruction_after_restart_keeps_running_pods_volumes() {
    if !root_or_skip("reconstruction_after_restart_keeps_running_pods_volumes") {
        return;
    }
    let api = TestApi::start().await;
    let (_ns, pod) = api_objects(&api, "restart").await;
    let uid = pod.metadata.uid.clone().unwrap();
    let running = Arc::new(pod);
    let gone = local_pod(
        "gone-1",
        json!({"containers": [{"name": "c", "volumeMounts": [
            {"name": "mem", "mountPath": "/mem"}, {"name": "disk", "mountPath": "/disk"}]}],
            "volumes": [{"name": "mem", "emptyDir": {"medium": "Memory"}}, {"name": "disk", "emptyDir": {}}]}),
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let _guard = MountGuard(root.clone());

    let first = start_kubelet(&root, Some(api.admin_client().await));
    for p in [&running, &gone] {
        first.pods.add_pod(p.clone());
        first
            .vm
            .wait_for_attach_and_mount(p)
            .await
            .expect("mounted");
    }
    let sec = vol(&root, &uid, "secret", "sec");
    let cfg = vol(&root, &uid, "configmap", "cfg");
    let gone_mem = vol(&root, "gone-1", "empty-dir", "mem");
    let gone_disk = vol(&root, "gone-1", "empty-dir", "disk");
    std::fs::write(gone_disk.join("scratch"), b"left behind").unwrap();
    let mount_ids = |p: &Path| -> Vec<u32> {
        parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap())
            .into_iter()
            .filter(|m| m.mount_point == p)
            .map(|m| m.id)
            .collect()
    };
    let sec_mount = mount_ids(&sec);
    assert_eq!(sec_mount.len(), 1);
    let cfg_data = std::fs::read_link(cfg.join("..data")).unwrap();
    let sa = vol(&root, &uid, "projected", "kube-api-access-test");
    let sa_mount = mount_ids(&sa);

    // The kubelet exits; mounts stay. While it is down the second pod is
    // deleted and its containers stop.
    first.stop().await;

    let second = start_kubelet(&root, Some(api.admin_client().await));
    second.workers.stop("gone-1");
    second.pods.add_pod(running.clone());
    second
        .vm
        .wait_for_attach_and_mount(&running)
        .await
        .expect("remounted");
    eventually("reconstruction", || second.vm.states_synced()).await;

    // The running pod's volumes were kept, not remounted or rewritten.
    assert_eq!(mount_ids(&sec), sec_mount, "the same tmpfs mount");
    assert_eq!(std::fs::read(sec.join("password")).unwrap(), b"hunter2");
    assert_eq!(std::fs::read_link(cfg.join("..data")).unwrap(), cfg_data);
    // A new kubelet has no cached token and asks for one (as Go's does);
    // the token file may change, the tmpfs it lives on does not.
    assert_eq!(mount_ids(&sa), sa_mount, "the same projected tmpfs");
    assert_eq!(ts_dirs(&sa).len(), 1);
    assert_eq!(second.vm.get_mounted_volumes_for_pod(&uid).len(), 4);

    // The deleted pod's volumes were found on disk and torn down.
    eventually("the gone pod's tmpfs to be unmounted", || {
        mount_count(&gone_mem) == 0
    })
    .await;
    eventually("the gone pod's volume dirs to go", || {
        !gone_mem.exists() && !gone_disk.exists()
    })
    .await;
    let active: HashSet<String> = [uid.clone()].into();
    second
        .vm
        .cleanup_orphaned_pod_dirs(active)
        .await
        .expect("cleanup");
    assert!(!root.join("pods/gone-1").exists());
    assert!(root.join(format!("pods/{uid}")).exists());

    second.remove_pod(&running).await;
    assert!(mounts_under(&root).is_empty());
    second.stop().await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_mount_of_a_missing_config_map_is_reported() {
    if !root_or_skip("failed_mount_of_a_missing_config_map_is_reported") {
        return;
    }
    let api = TestApi::start().await;
    let ns = api.create_namespace("missing").await;
    let pod: Pod = obj(json!({
        "metadata": {"name": "m", "namespace": ns, "uid": "missing-1"},
        "spec": {"containers": [{"name": "c", "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}],
                 "volumes": [{"name": "cfg", "configMap": {"name": "absent", "defaultMode": 420}},
                             {"name": "opt", "configMap": {"name": "absent", "optional": true, "defaultMode": 420}}]}
    }));
    let tmp = tempfile::tempdir().unwrap();
    let _guard = MountGuard(tmp.path().to_path_buf());
    let k = start_kubelet(tmp.path(), Some(api.admin_client().await));
    let mut events = k.vm.take_events().unwrap();
    let pod = Arc::new(pod);
    k.pods.add_pod(pod.clone());
    let ev = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let e = events.recv().await.unwrap();
            if e.reason == "FailedMount" {
                return e;
            }
        }
    })
    .await
    .expect("a FailedMount event");
    assert_eq!(
        ev.message,
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"absent\" not found"
    );
    assert_eq!(ev.event_type.as_str(), "Warning");
    assert!(!vol(tmp.path(), "missing-1", "configmap", "cfg").exists());
    // Creating the object lets the retry succeed.
    Api::<ConfigMap>::namespaced(api.admin_client().await, &ns)
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "absent"}, "data": {"k": "v"}})),
        )
        .await
        .unwrap();
    k.vm.wait_for_attach_and_mount(&pod)
        .await
        .expect("mounted after the object appeared");
    k.remove_pod(&pod).await;
    k.stop().await;
    api.cleanup().await;
}

/// The files the volumes lay out under `<root>/pods/<uid>` (regular
/// files and links to them, empty directories with a trailing `/`, not
/// `..data`), as `layout.txt` lists them, timestamped dirs as `..<ts>`.
fn volume_layout(pod_dir: &Path, label: &str) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        if entries.is_empty() {
            out.push(format!("{}/", dir.strip_prefix(base).unwrap().display()));
        }
        for e in entries {
            let p = e.path();
            if e.file_name() == "..data" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                walk(base, &p, out);
            } else if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    for top in ["plugins", "volumes"] {
        walk(pod_dir, &pod_dir.join(top), &mut out);
    }
    let mut out: Vec<String> = out
        .into_iter()
        .map(|l| format!("pods/<uid:{label}>/{}", normalize_ts(&l)))
        .collect();
    out.sort();
    out
}

fn normalize_ts(line: &str) -> String {
    line.split('/')
        .map(|c| if c.starts_with("..20") { "..<ts>" } else { c })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_pods_lay_out_volumes_as_the_go_kubelet() {
    if !root_or_skip("reference_pods_lay_out_volumes_as_the_go_kubelet") {
        return;
    }
    let api = TestApi::start().await;
    let ns = api.create_namespace("refpack").await;
    let client = api.admin_client().await;
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "cfg"}, "data": {"greeting": "hello"}})),
        )
        .await
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let _guard = MountGuard(root.clone());
    let k = start_kubelet(&root, Some(client.clone()));
    let reference = include_str!("fixtures/go-kubelet-examples/layout.txt");
    for label in ["guaranteed", "burstable", "besteffort"] {
        let text = std::fs::read_to_string(support::repo_root().join(format!(
            "tests/fixtures/go-kubelet-examples/pod-{label}.json"
        )))
        .unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v.as_object_mut().unwrap().remove("status");
        v["metadata"] = json!({"name": label, "namespace": ns, "labels": v["metadata"]["labels"]});
        let pod: Pod = obj(v);
        let pod = Arc::new(
            Api::<Pod>::namespaced(client.clone(), &ns)
                .create(&PostParams::default(), &pod)
                .await
                .unwrap(),
        );
        k.pods.add_pod(pod.clone());
        k.vm.wait_for_attach_and_mount(&pod).await.expect("mounted");
        let uid = pod.metadata.uid.clone().unwrap();
        let got = volume_layout(&root.join(format!("pods/{uid}")), label);
        let mut want: Vec<String> = reference
            .lines()
            .filter(|l| {
                l.starts_with(&format!("pods/<uid:{label}>/plugins/"))
                    || l.starts_with(&format!("pods/<uid:{label}>/volumes/"))
            })
            .map(normalize_ts)
            .collect();
        want.sort();
        assert!(
            want.len() >= 4,
            "{label}: the reference lists the volume files"
        );
        assert_eq!(got, want, "{label}");
        k.remove_pod(&pod).await;
    }
    assert!(mounts_under(&root).is_empty());
    k.stop().await;
    api.cleanup().await;
}

#[path = "volumes/containers.rs"]
mod containers;
