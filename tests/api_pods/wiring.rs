//! The managers where the kubelet uses them: container environments from
//! ConfigMaps and Secrets, and configMap/projected volumes (the service
//! account token through TokenRequest) on real mounts.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kubelet::kubelet::configmap::new_config_map_manager;
use kubelet::kubelet::envvars::{EnvContext, EnvError, make_environment_variables};
use kubelet::kubelet::pod::{PodManager, PodObjectRegistrar};
use kubelet::kubelet::pod_dirs::PodDirs;
use kubelet::kubelet::secret::new_secret_manager;
use kubelet::kubelet::token::new_token_manager;
use kubelet::kubelet::util::manager::ChangeDetectionStrategy;
use kubelet::kubelet::volumemanager::{
    PodStateProvider, SourcesReadyCheck, VolumeManager, VolumeManagerDeps,
};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use kubelet::volume::util::mount::{SystemMounter, parse_mountinfo};
use kubelet::volume::{PluginManager, StaticNodeAllocatable, VolumeHost};
use serde_json::json;

use crate::common::bound_pod;
use crate::support::apiserver::testkit::obj;
use crate::support::apiserver::{KubeUser, TestApi};
use crate::support::{eventually, is_root, skip};

fn watching(
    client: kube::Client,
) -> (
    Arc<kubelet::kubelet::configmap::ConfigMapManager>,
    Arc<kubelet::kubelet::secret::SecretManager>,
) {
    let clock = Arc::new(RealClock);
    (
        Arc::new(new_config_map_manager(
            ChangeDetectionStrategy::Watch,
            client.clone(),
            clock.clone(),
            Duration::from_secs(60),
            Arc::new(|| None),
        )),
        Arc::new(new_secret_manager(
            ChangeDetectionStrategy::Watch,
            client,
            clock,
            Duration::from_secs(60),
            Arc::new(|| None),
        )),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_environment_from_config_maps_and_secrets() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("env").await;
    let node = api.unique_name("envnode");
    api.put(&obj::<ConfigMap>(
        json!({"metadata": {"name": "app", "namespace": ns},
        "data": {"mode": "fast", "LEVEL": "3"}}),
    ))
    .await;
    api.put(&obj::<Secret>(
        json!({"metadata": {"name": "creds", "namespace": ns},
        "data": {"PASSWORD": "aHVudGVyMg=="}}),
    ))
    .await;
    let pod = api
        .put(&bound_pod(&ns, "envy", &node, json!({
            "enableServiceLinks": false,
            "containers": [{"name": "c", "image": "i",
                "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "mode"}}}],
                "envFrom": [{"configMapRef": {"name": "app"}}, {"secretRef": {"name": "creds"}}]}],
        })))
        .await;

    let (config_maps, secrets) = watching(api.client(&KubeUser::Node(node.clone())).await);
    let tasks = TaskSet::new();
    config_maps.start(&tasks);
    secrets.start(&tasks);
    let pods = PodManager::with_registrars(vec![
        config_maps.clone() as Arc<dyn PodObjectRegistrar>,
        secrets.clone() as Arc<dyn PodObjectRegistrar>,
    ]);
    pods.add_pod(Arc::new(pod.clone()));

    let allocatable = BTreeMap::new();
    let ctx = EnvContext {
        pod_ip: "10.88.0.9",
        pod_ips: &[],
        node_ips: &[],
        host_ips: &[],
        node_allocatable: &allocatable,
        services: &[],
        services_synced: true,
        master_service_namespace: "default",
        config_maps: Some(config_maps.as_ref()),
        secrets: Some(secrets.as_ref()),
    };
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let env = make_environment_variables(&pod, container, &ctx)
        .await
        .unwrap();
    let got: BTreeMap<String, String> = env
        .envs
        .iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    assert_eq!(got["MODE"], "fast");
    assert_eq!(got["LEVEL"], "3");
    assert_eq!(got["PASSWORD"], "hunter2");

    // A pod referencing a missing ConfigMap: the kubelet's error text.
    let broken = bound_pod(
        &ns,
        "broken",
        &node,
        json!({
            "enableServiceLinks": false,
            "containers": [{"name": "c", "image": "i",
                "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]}],
        }),
    );
    let mut broken = api.put(&broken).await;
    broken.metadata.uid.get_or_insert_with(|| "broken".into());
    pods.add_pod(Arc::new(broken.clone()));
    let err =
        make_environment_variables(&broken, &broken.spec.as_ref().unwrap().containers[0], &ctx)
            .await
            .unwrap_err();
    assert!(
        matches!(err, EnvError::Get(ref g) if g.is_not_found()),
        "{err}"
    );
    assert_eq!(err.to_string(), "configmap \"absent\" not found");
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    api.cleanup().await;
}

/// The pod workers' view for the volume manager: which pods stopped.
#[derive(Default)]
struct Workers(Mutex<HashSet<String>>);

impl PodStateProvider for Workers {
    fn should_pod_containers_be_terminating(&self, uid: &str) -> bool {
        self.0.lock().unwrap().contains(uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.0.lock().unwrap().contains(uid)
    }
}

struct Ready;
impl SourcesReadyCheck for Ready {
    fn all_ready(&self) -> bool {
        true
    }
}

fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_mountinfo(&info)
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p.starts_with(root))
        .collect()
}

struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        let mut left = mounts_under(&self.0);
        left.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
        for p in left {
            let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_read_through_the_managers_and_token_requests() {
    if !is_root() {
        skip(
            "volumes_read_through_the_managers_and_token_requests",
            "mounting needs root",
        );
        return;
    }
    let api = TestApi::start().await;
    let ns = api.create_namespace("wvol").await;
    let node = api.unique_name("wvnode");
    api.put(&obj::<ConfigMap>(
        json!({"metadata": {"name": "cfg", "namespace": ns}, "data": {"greeting": "hello"}}),
    ))
    .await;
    // The API server adds the kube-api-access-* projected volume.
    let pod = api
        .put(&bound_pod(&ns, "vols", &node, json!({
            "containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
        })))
        .await;
    let uid = pod.metadata.uid.clone().unwrap();
    let projected = pod
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .map(|v| v.name.clone())
        .expect("the service account admission added the token volume");

    let client = api.client(&KubeUser::Node(node.clone())).await;
    let (config_maps, secrets) = watching(client.clone());
    let tokens = new_token_manager(client, Arc::new(RealClock));
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let _guard = MountGuard(root.clone());
    let host = VolumeHost::new(
        PodDirs::new(&root),
        Arc::new(SystemMounter),
        Arc::new(RealClock),
        Arc::new(StaticNodeAllocatable::default()),
    )
    .with_config_maps(config_maps.clone())
    .with_secrets(secrets.clone())
    .with_tokens(tokens.clone());
    let pods = Arc::new(PodManager::with_registrars(vec![
        config_maps.clone() as Arc<dyn PodObjectRegistrar>,
        secrets.clone() as Arc<dyn PodObjectRegistrar>,
    ]));
    let workers = Arc::new(Workers::default());
    let vm = VolumeManager::new(VolumeManagerDeps {
        plugins: Arc::new(PluginManager::new(Arc::new(host))),
        pods: pods.clone(),
        pod_state: workers.clone(),
        sources_ready: Arc::new(Ready),
        clock: Arc::new(RealClock),
    });
    let tasks = TaskSet::new();
    config_maps.start(&tasks);
    secrets.start(&tasks);
    tokens.start(&tasks);
    vm.start(&tasks);

    let _ = api.clear_requests();
    let pod = Arc::new(pod);
    pods.add_pod(pod.clone());
    vm.wait_for_attach_and_mount(&pod).await.expect("mounted");
    let vol = |plugin: &str, name: &str| {
        root.join(format!("pods/{uid}/volumes/kubernetes.io~{plugin}/{name}"))
    };
    let cfg = vol("configmap", "cfg");
    assert_eq!(
        std::fs::read_to_string(cfg.join("greeting")).unwrap(),
        "hello"
    );
    let sa = vol("projected", &projected);
    let token = std::fs::read_to_string(sa.join("token")).unwrap();
    assert_eq!(token.split('.').count(), 3, "a JWT from TokenRequest");
    assert!(
        std::fs::read_to_string(sa.join("ca.crt"))
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    assert_eq!(std::fs::read_to_string(sa.join("namespace")).unwrap(), ns);
    if let Ok(log) = api.requests() {
        let token_requests: Vec<_> = log
            .iter()
            .filter(|r| r.subresource.as_deref() == Some("token"))
            .collect();
        assert_eq!(token_requests.len(), 1, "one TokenRequest");
        assert_eq!(token_requests[0].user.name, format!("system:node:{node}"));
        assert!(
            log.iter()
                .any(|r| r.verb == "watch" && r.resource.as_deref() == Some("configmaps")),
            "ConfigMaps are watched"
        );
    }

    // The ConfigMap changes: the watch brings it, the next remount writes it.
    api.put(&obj::<ConfigMap>(
        json!({"metadata": {"name": "cfg", "namespace": ns}, "data": {"greeting": "bonjour"}}),
    ))
    .await;
    let updated = eventually(Duration::from_secs(20), || async {
        vm.reprocess_pod(&uid);
        let _ = vm.wait_for_attach_and_mount(&pod).await;
        std::fs::read_to_string(cfg.join("greeting"))
            .ok()
            .filter(|s| s == "bonjour")
    })
    .await;
    assert!(updated.is_some(), "the update reached the volume");

    // The pod goes: volumes unmounted, its objects unregistered.
    pods.delete_pod(&pod);
    workers.0.lock().unwrap().insert(uid.clone());
    vm.wait_for_unmount(&pod).await.expect("unmounted");
    tokens.delete_service_account_token(&uid);
    assert!(tokens.is_empty());
    assert!(!config_maps.is_watching(&ns, "cfg"));
    let _ = eventually(Duration::from_secs(10), || async {
        vm.get_possibly_mounted_volumes_for_pod(&uid)
            .is_empty()
            .then_some(())
    })
    .await;
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(10))
        .await
        .unwrap();
    api.cleanup().await;
}
