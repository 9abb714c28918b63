//! What the runtime-manager tests share: a RuntimeHelper over the real DNS,
//! environment, run-option and hosts helpers with the pod directories in a
//! temp root, a capturing event recorder, a pod state provider the test
//! steers, a clock the test can move forward, and the manager built over a
//! private containerd.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Container, ObjectReference, Pod, Secret, Service};
use kubelet::cri::api::DnsConfig;
use kubelet::cri::{RemoteImageService, RemoteRuntimeService};
use kubelet::kubelet::container::{PodStatus, RunContainerOptions, Runtime};
use kubelet::kubelet::envvars::{
    ConfigMapGetter, EnvContext, GetError, ObjectKind, SecretGetter, make_environment_variables,
};
use kubelet::kubelet::images::credentialprovider::ProvidersKeyring;
use kubelet::kubelet::images::{
    IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX, ImageManager, PullSettings, RuntimeImageService,
};
use kubelet::kubelet::kuberuntime::events::EventType;
use kubelet::kubelet::kuberuntime::manager::{CRASH_BACKOFF_INITIAL, CRASH_BACKOFF_MAX};
use kubelet::kubelet::kuberuntime::{
    EventRecorder, HelperError, KubeGenericRuntimeManager, MountedVolume, PodStateProvider,
    RunOptionsParams, RuntimeHelper, RuntimeManagerConfig, RuntimeManagerDeps, RuntimeSettings,
    VolumeMap, generate_run_container_options,
};
use kubelet::kubelet::network::dns::DnsConfigurer;
use kubelet::kubelet::prober::results::ResultsManager;
use kubelet::kubelet::qos::{QosClass, get_pod_qos};
use kubelet::util::backoff::Backoff;
use kubelet::util::clock::Clock;

use crate::support::containerd::Containerd;

/// Wall time plus an offset the test can grow, to step over back-off
/// windows without waiting; monotonic time is tokio's.
#[derive(Default)]
pub struct OffsetClock(Mutex<Duration>);

impl OffsetClock {
    pub fn jump(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> SystemTime {
        SystemTime::now() + *self.0.lock().unwrap()
    }
    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

/// One recorded event.
#[derive(Debug, Clone)]
pub struct Event {
    pub field_path: String,
    pub reason: String,
    pub message: String,
}

#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Event>>);

impl Recorder {
    pub fn with_reason(&self, reason: &str) -> Vec<Event> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.reason == reason)
            .cloned()
            .collect()
    }
}

impl EventRecorder for Recorder {
    fn event(&self, object: &ObjectReference, _t: EventType, reason: &str, message: &str) {
        self.0.lock().unwrap().push(Event {
            field_path: object.field_path.clone().unwrap_or_default(),
            reason: reason.into(),
            message: message.into(),
        });
    }
}

/// Pods the test declares removed (content and runtime may go).
#[derive(Default)]
pub struct PodState(pub Mutex<HashSet<String>>);

impl PodStateProvider for PodState {
    fn is_pod_termination_requested(&self, uid: &str) -> bool {
        self.0.lock().unwrap().contains(uid)
    }
    fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        self.0.lock().unwrap().contains(uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.0.lock().unwrap().contains(uid)
    }
}

/// The cluster objects the reference pods read.
struct Cluster;

#[async_trait]
impl ConfigMapGetter for Cluster {
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, GetError> {
        match (namespace, name) {
            ("refpack", "cfg") => Ok(ConfigMap {
                data: Some([("greeting".to_string(), "hello".to_string())].into()),
                ..Default::default()
            }),
            _ => Err(GetError::NotFound {
                kind: ObjectKind::ConfigMap,
                name: name.into(),
            }),
        }
    }
}

#[async_trait]
impl SecretGetter for Cluster {
    async fn get_secret(&self, _namespace: &str, name: &str) -> Result<Secret, GetError> {
        Err(GetError::NotFound {
            kind: ObjectKind::Secret,
            name: name.into(),
        })
    }
}

fn kubernetes_service() -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}
    }))
    .expect("service")
}

/// The kubelet side of container creation, over the real helpers.
pub struct Helper {
    pub root: PathBuf,
    pub cgroup_root: String,
    pub dns: DnsConfigurer,
    pub host_dns: DnsConfig,
}

impl Helper {
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.root.join("pods").join(uid)
    }

    /// Where the volume manager would have mounted each volume; created
    /// (with the configMap's data) so containers can mount them.
    fn volumes(&self, pod: &Pod) -> VolumeMap {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut map = VolumeMap::new();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let plugin_dir = |plugin: &str| {
                self.pod_dir(&uid)
                    .join("volumes")
                    .join(format!("kubernetes.io~{plugin}"))
                    .join(&v.name)
            };
            let (path, read_only) = if let Some(hp) = &v.host_path {
                (PathBuf::from(&hp.path), false)
            } else if v.config_map.is_some() {
                let dir = plugin_dir("configmap");
                std::fs::create_dir_all(&dir).expect("configmap dir");
                std::fs::write(dir.join("greeting"), "hello").expect("configmap data");
                (dir, true)
            } else if v.secret.is_some() {
                (plugin_dir("secret"), true)
            } else if v.projected.is_some() {
                (plugin_dir("projected"), true)
            } else if v.empty_dir.is_some() {
                (plugin_dir("empty-dir"), false)
            } else {
                continue;
            };
            if !path.exists() {
                std::fs::create_dir_all(&path).expect("volume dir");
            }
            map.insert(
                v.name.clone(),
                MountedVolume {
                    host_path: path.display().to_string(),
                    read_only,
                    selinux_relabel: false,
                },
            );
        }
        map
    }
}

#[async_trait]
impl RuntimeHelper for Helper {
    async fn generate_run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        pod_ip: &str,
        pod_ips: &[String],
    ) -> Result<RunContainerOptions, HelperError> {
        let allocatable = BTreeMap::new();
        let services = vec![kubernetes_service()];
        let node_ips = vec!["10.88.0.1".parse().expect("ip")];
        let host_ips = vec!["10.88.0.1".to_string()];
        let ctx = EnvContext {
            pod_ip,
            pod_ips,
            node_ips: &node_ips,
            host_ips: &host_ips,
            node_allocatable: &allocatable,
            services: &services,
            services_synced: true,
            master_service_namespace: "default",
            config_maps: Some(&Cluster),
            secrets: Some(&Cluster),
        };
        let env = make_environment_variables(pod, container, &ctx)
            .await
            .map_err(|e| HelperError::new(e.to_string()))?;
        let volumes = self.volumes(pod);
        let pod_dir = self.pod_dir(pod.metadata.uid.as_deref().unwrap_or(""));
        std::fs::create_dir_all(&pod_dir).map_err(|e| HelperError::new(e.to_string()))?;
        generate_run_container_options(
            pod,
            container,
            RunOptionsParams {
                pod_dir: &pod_dir,
                pod_ips,
                cluster_domain: "cluster.local",
                volumes: &volumes,
                base: Default::default(),
                block_devices: vec![],
                envs: env.envs,
                node_hosts: None,
            },
        )
        .map_err(|e| HelperError::new(e.to_string()))
    }

    async fn get_pod_dns(&self, pod: &Pod) -> Result<DnsConfig, HelperError> {
        Ok(self.dns.pod_dns(pod, &self.host_dns).config)
    }

    fn get_pod_cgroup_parent(&self, pod: &Pod) -> String {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let tier = match get_pod_qos(pod) {
            QosClass::Guaranteed => String::new(),
            QosClass::Burstable => "/burstable".into(),
            QosClass::BestEffort => "/besteffort".into(),
        };
        format!("/{}/kubepods{tier}/pod{uid}", self.cgroup_root)
    }

    fn get_pod_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid)
    }

    fn get_extra_supplemental_groups_for_pod(&self, _pod: &Pod) -> Vec<i64> {
        Vec::new()
    }
}

/// A manager over the rig, with its parts exposed to the test.
pub struct Env {
    pub rig: Containerd,
    pub root: tempfile::TempDir,
    pub helper: Arc<Helper>,
    pub recorder: Arc<Recorder>,
    pub pod_state: Arc<PodState>,
    pub clock: Arc<OffsetClock>,
    pub liveness: Arc<ResultsManager>,
    pub manager: Arc<KubeGenericRuntimeManager>,
}

impl Env {
    pub fn logs_root(&self) -> PathBuf {
        self.root.path().join("log-pods")
    }

    pub fn symlinks_dir(&self) -> PathBuf {
        self.root.path().join("log-containers")
    }

    /// A CRI image service over the rig.
    pub async fn image_service(&self) -> (Arc<RemoteImageService>, Arc<RuntimeImageService>) {
        let image = Arc::new(
            RemoteImageService::connect(&self.rig.endpoint(), self.rig.timeout())
                .await
                .unwrap_or_else(|e| panic!("connect images: {e}")),
        );
        (
            image.clone(),
            Arc::new(RuntimeImageService::new(
                image,
                None,
                Arc::new(ProvidersKeyring::default()),
            )),
        )
    }

    /// A new manager over the same runtime and directories, with fresh
    /// back-off and probe state: the kubelet after a restart.
    pub async fn restarted_manager(&self) -> Arc<KubeGenericRuntimeManager> {
        let (liveness, _) = ResultsManager::new();
        build_manager(
            &self.rig,
            self.root.path(),
            self.helper.clone(),
            self.recorder.clone(),
            self.pod_state.clone(),
            self.clock.clone(),
            Arc::new(liveness),
        )
        .await
    }
}

pub fn settings(root: &Path) -> RuntimeSettings {
    RuntimeSettings {
        // The reference node's memory, so OOM scores match the reference.
        memory_capacity: 24684092 * 1024,
        hugepage_sizes: vec!["2MB".into(), "1GB".into()],
        seccomp_profile_root: root.join("seccomp"),
        ..Default::default()
    }
}

async fn build_manager(
    rig: &Containerd,
    root: &Path,
    helper: Arc<Helper>,
    recorder: Arc<Recorder>,
    pod_state: Arc<PodState>,
    clock: Arc<OffsetClock>,
    liveness: Arc<ResultsManager>,
) -> Arc<KubeGenericRuntimeManager> {
    let endpoint = rig.endpoint();
    let runtime = RemoteRuntimeService::connect(&endpoint, rig.timeout())
        .await
        .unwrap_or_else(|e| panic!("connect runtime: {e}\n{}", rig.log()));
    let image = RemoteImageService::connect(&endpoint, rig.timeout())
        .await
        .unwrap_or_else(|e| panic!("connect images: {e}\n{}", rig.log()));
    let clock: Arc<dyn Clock> = clock;
    let images = Arc::new(RuntimeImageService::new(
        Arc::new(image),
        None,
        Arc::new(ProvidersKeyring::default()),
    ));
    let image_manager = Arc::new(ImageManager::new(
        images.clone(),
        recorder.clone(),
        Arc::new(Backoff::new(
            IMAGE_BACKOFF_INITIAL,
            IMAGE_BACKOFF_MAX,
            clock.clone(),
        )),
        PullSettings {
            serialize_image_pulls: true,
            max_parallel_image_pulls: None,
        },
    ));
    let (startup, _) = ResultsManager::new();
    let deps = RuntimeManagerDeps {
        runtime_service: Arc::new(runtime),
        image_service: images,
        image_manager,
        helper,
        pod_state,
        liveness,
        startup: Arc::new(startup),
        recorder,
        crash_backoff: Arc::new(Backoff::new(
            CRASH_BACKOFF_INITIAL,
            CRASH_BACKOFF_MAX,
            clock.clone(),
        )),
        clock,
        lifecycle: Arc::new(kubelet::cm::internal_lifecycle::NoopLifecycle),
    };
    let config = RuntimeManagerConfig {
        settings: settings(root),
        cluster_domain: "cluster.local".into(),
        runtime_class_handlers: None,
        pod_logs_root: root.join("log-pods"),
        legacy_log_symlinks_dir: Some(root.join("log-containers")),
    };
    Arc::new(
        KubeGenericRuntimeManager::new(config, deps)
            .await
            .unwrap_or_else(|e| panic!("runtime manager: {e}")),
    )
}

/// A rig and a manager over it; `None` when the test cannot run here.
pub async fn env(test: &str) -> Option<Env> {
    let rig = Containerd::start(test)?;
    let root = tempfile::tempdir().expect("temp root");
    std::fs::create_dir_all(root.path().join("log-pods")).expect("log root");
    std::fs::create_dir_all(root.path().join("log-containers")).expect("symlink dir");
    let helper = Arc::new(Helper {
        root: root.path().to_path_buf(),
        cgroup_root: rig.cgroup_root().to_string(),
        dns: DnsConfigurer {
            cluster_dns: vec!["10.96.0.10".parse().expect("ip")],
            cluster_domain: "cluster.local".into(),
            resolver_config: "/etc/resolv.conf".into(),
            node_ips: vec!["10.88.0.1".parse().expect("ip")],
            expanded_dns_config: false,
        },
        host_dns: DnsConfig {
            servers: vec!["10.88.0.1".into()],
            searches: vec![],
            options: vec![],
        },
    });
    let (liveness, _) = ResultsManager::new();
    let liveness = Arc::new(liveness);
    let recorder = Arc::new(Recorder::default());
    let pod_state = Arc::new(PodState::default());
    let clock = Arc::new(OffsetClock::default());
    let manager = build_manager(
        &rig,
        root.path(),
        helper.clone(),
        recorder.clone(),
        pod_state.clone(),
        clock.clone(),
        liveness.clone(),
    )
    .await;
    Some(Env {
        rig,
        root,
        helper,
        recorder,
        pod_state,
        clock,
        liveness,
        manager,
    })
}

/// The runtime's view of a pod.
pub async fn status_of(m: &KubeGenericRuntimeManager, pod: &Pod) -> PodStatus {
    m.get_pod_status(
        pod.metadata.uid.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
    )
    .await
    .expect("pod status")
}

/// Syncs the pod until `done` holds for its status (or panics after
/// `within`); returns the status and the results of every sync.
pub async fn sync_until(
    m: &KubeGenericRuntimeManager,
    pod: &Pod,
    within: Duration,
    done: impl Fn(&PodStatus) -> bool,
) -> (PodStatus, Vec<kubelet::kubelet::container::PodSyncResult>) {
    let deadline = tokio::time::Instant::now() + within;
    let mut results = Vec::new();
    loop {
        let status = status_of(m, pod).await;
        if done(&status) {
            return (status, results);
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "pod {:?} did not reach the expected state; last status {status:#?}; results {results:#?}",
                pod.metadata.name
            );
        }
        results.push(m.sync_pod(pod, &status, &[]).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
