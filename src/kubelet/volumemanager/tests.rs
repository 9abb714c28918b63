//! The volume manager end to end over temp dirs, with the pod manager and
//! pod workers replaced by in-memory views.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::util::clock::RealClock;
use crate::util::lifecycle::TaskSet;
use crate::volume::PluginManager;
use crate::volume::testing::{self, Objects};

#[derive(Default)]
pub struct FakePods {
    pods: Mutex<Vec<Arc<Pod>>>,
    terminating: Mutex<HashSet<String>>,
    removed: Mutex<HashSet<String>>,
}

impl FakePods {
    fn set(&self, pods: Vec<Arc<Pod>>) {
        *self.pods.lock().expect("lock") = pods;
    }
    fn remove_runtime(&self, uid: &str) {
        self.terminating.lock().expect("lock").insert(uid.into());
        self.removed.lock().expect("lock").insert(uid.into());
    }
}

impl PodLister for FakePods {
    fn get_pods(&self) -> Vec<Arc<Pod>> {
        self.pods.lock().expect("lock").clone()
    }
    fn get_pod_by_uid(&self, uid: &str) -> Option<Arc<Pod>> {
        self.get_pods()
            .into_iter()
            .find(|p| p.metadata.uid.as_deref() == Some(uid))
    }
}

impl PodStateProvider for FakePods {
    fn should_pod_containers_be_terminating(&self, uid: &str) -> bool {
        self.terminating.lock().expect("lock").contains(uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.removed.lock().expect("lock").contains(uid)
    }
}

struct Ready;
impl SourcesReadyCheck for Ready {
    fn all_ready(&self) -> bool {
        true
    }
}

struct Rig {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    objects: Arc<Objects>,
    pods: Arc<FakePods>,
    vm: VolumeManager,
    tasks: TaskSet,
}

fn rig() -> Rig {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().to_path_buf();
    let objects = Arc::new(Objects::default());
    let host = testing::host(&root)
        .with_config_maps(objects.clone())
        .with_secrets(objects.clone());
    let pods = Arc::new(FakePods::default());
    let vm = VolumeManager::new(VolumeManagerDeps {
        plugins: Arc::new(PluginManager::new(Arc::new(host))),
        pods: pods.clone(),
        pod_state: pods.clone(),
        sources_ready: Arc::new(Ready),
        clock: Arc::new(RealClock),
    });
    let tasks = TaskSet::new();
    vm.start(&tasks);
    Rig {
        _tmp: tmp,
        root,
        objects,
        pods,
        vm,
        tasks,
    }
}

fn pod(uid: &str, volumes: serde_json::Value, mounts: serde_json::Value) -> Arc<Pod> {
    testing::pod(
        uid,
        json!({"containers": [{"name": "c", "volumeMounts": mounts}], "volumes": volumes}),
    )
}

fn web_pod(uid: &str) -> Arc<Pod> {
    pod(
        uid,
        json!([{"name": "scratch", "emptyDir": {}},
               {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}},
               {"name": "unused", "emptyDir": {}}]),
        json!([{"name": "scratch", "mountPath": "/scratch"}, {"name": "cfg", "mountPath": "/cfg"}]),
    )
}

async fn shutdown(tasks: TaskSet) {
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

fn vol_dir(root: &Path, uid: &str, plugin: &str, name: &str) -> std::path::PathBuf {
    root.join(format!("pods/{uid}/volumes/kubernetes.io~{plugin}/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_used_volumes_and_reports_them() {
    let r = rig();
    let mut events = r.vm.take_events().expect("events");
    assert!(r.vm.take_events().is_none(), "taken once");
    r.objects.put_config_map("cfg", &[("greeting", "hello")]);
    let p = web_pod("u1");
    r.pods.set(vec![p.clone()]);
    r.vm.wait_for_attach_and_mount(&p).await.expect("mounted");

    let vols = r.vm.get_mounted_volumes_for_pod("u1");
    let mut names: Vec<&String> = vols.keys().collect();
    names.sort();
    assert_eq!(
        names,
        vec!["cfg", "scratch"],
        "unused volumes are not mounted"
    );
    let cfg = &vols["cfg"];
    assert_eq!(
        cfg.host_path,
        vol_dir(&r.root, "u1", "configmap", "cfg").to_string_lossy()
    );
    assert!(cfg.read_only && cfg.selinux_relabel);
    let scratch = &vols["scratch"];
    assert_eq!(
        scratch.host_path,
        vol_dir(&r.root, "u1", "empty-dir", "scratch").to_string_lossy()
    );
    assert!(!scratch.read_only && scratch.selinux_relabel);
    assert_eq!(
        std::fs::read_to_string(Path::new(&cfg.host_path).join("greeting")).expect("read"),
        "hello"
    );
    assert!(!vol_dir(&r.root, "u1", "empty-dir", "unused").exists());
    assert!(r.vm.get_volumes_in_use().is_empty(), "nothing attachable");
    assert!(r.vm.get_extra_supplemental_groups_for_pod(&p).is_empty());
    assert!(r.vm.pod_volumes_exist("u1").await);

    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push((e.volume, e.reason, e.record));
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("cfg".to_string(), "SuccessfulMountVolume", false),
            ("scratch".to_string(), "SuccessfulMountVolume", false)
        ]
    );
    shutdown(r.tasks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_reaches_the_volume_on_reprocess() {
    let r = rig();
    r.objects.put_config_map("cfg", &[("greeting", "hello")]);
    let p = web_pod("u1");
    r.pods.set(vec![p.clone()]);
    r.vm.wait_for_attach_and_mount(&p).await.expect("mounted");
    let file = vol_dir(&r.root, "u1", "configmap", "cfg").join("greeting");
    r.objects.put_config_map("cfg", &[("greeting", "bonjour")]);
    // The next sync of the pod asks for its volumes again.
    r.vm.wait_for_attach_and_mount(&p).await.expect("again");
    eventually("the new content", || {
        std::fs::read_to_string(&file).is_ok_and(|s| s == "bonjour")
    })
    .await;
    shutdown(r.tasks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_volume_fails_the_wait_at_once() {
    let r = rig();
    let p = pod(
        "u2",
        json!([{"name": "n", "nfs": {"server": "s", "path": "/"}}, {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}}]),
        json!([{"name": "n", "mountPath": "/n"}, {"name": "claim", "mountPath": "/c"}]),
    );
    r.pods.set(vec![p.clone()]);
    let started = std::time::Instant::now();
    let err = r.vm.wait_for_attach_and_mount(&p).await.expect_err("fails");
    assert!(started.elapsed() < Duration::from_secs(10));
    let WaitError::Mount {
        unmounted,
        unattached,
        cause,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(unmounted, &vec!["claim".to_string(), "n".to_string()]);
    assert_eq!(unattached, &vec!["claim".to_string(), "n".to_string()]);
    assert_eq!(
        cause.to_string(),
        "error processing PVC \"c\": PersistentVolumeClaim volumes are not supported by this kubelet; \
         failed to get Plugin from volumeSpec for volume \"n\" err=no volume plugin matched"
    );
    assert!(
        err.event_message()
            .starts_with("Unable to attach or mount volumes: unmounted volumes=[claim n]")
    );
    shutdown(r.tasks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_go_only_after_the_containers_stopped() {
    let r = rig();
    r.objects.put_config_map("cfg", &[("k", "v")]);
    let p = web_pod("u3");
    r.pods.set(vec![p.clone()]);
    r.vm.wait_for_attach_and_mount(&p).await.expect("mounted");
    let cfg = vol_dir(&r.root, "u3", "configmap", "cfg");
    let scratch = vol_dir(&r.root, "u3", "empty-dir", "scratch");

    // Deleted from the pod manager while its containers still run: kept.
    r.pods.set(vec![]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(cfg.exists() && scratch.exists());
    assert_eq!(r.vm.get_mounted_volumes_for_pod("u3").len(), 2);

    // Containers stopped: torn down.
    r.pods.remove_runtime("u3");
    r.vm.wait_for_unmount(&p).await.expect("unmounted");
    assert!(r.vm.get_possibly_mounted_volumes_for_pod("u3").is_empty());
    eventually("dirs removed", || !cfg.exists() && !scratch.exists()).await;
    assert!(
        !r.root
            .join("pods/u3/plugins/kubernetes.io~empty-dir/wrapped_cfg")
            .exists()
    );
    assert!(!r.vm.pod_volumes_exist("u3").await);

    // Then housekeeping removes the pod directory.
    r.vm.cleanup_orphaned_pod_dirs(HashSet::new())
        .await
        .expect("cleanup");
    assert!(!r.root.join("pods/u3").exists());
    shutdown(r.tasks).await;
}

#[tokio::test(start_paused = true)]
async fn missing_config_map_times_out_with_go_text_and_failed_mount_events() {
    let r = rig();
    let mut events = r.vm.take_events().expect("events");
    let p = web_pod("u4");
    r.pods.set(vec![p.clone()]);
    let err =
        r.vm.wait_for_attach_and_mount(&p)
            .await
            .expect_err("times out");
    assert_eq!(
        err.to_string(),
        "unmounted volumes=[cfg], unattached volumes=[cfg scratch]: timed out waiting for the condition"
    );
    let mut failed = 0;
    while let Ok(e) = events.try_recv() {
        if e.reason == FAILED_MOUNT {
            failed += 1;
            assert_eq!(e.volume, "cfg");
            assert_eq!(e.event_type, EventType::Warning);
            assert!(e.record);
            assert_eq!(
                e.message,
                "MountVolume.SetUp failed for volume \"cfg\" : configmap \"cfg\" not found"
            );
            assert_eq!(e.pod.uid, "u4");
        }
    }
    // Retries back off exponentially from 500 ms: about 8 in two minutes.
    assert!((5..=12).contains(&failed), "{failed} FailedMount events");
    shutdown(r.tasks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_path_type_failure_is_a_failed_mount_event() {
    let r = rig();
    let mut events = r.vm.take_events().expect("events");
    let file = r.root.join("a-file");
    std::fs::write(&file, b"x").expect("file");
    let file = file.to_string_lossy().into_owned();
    let p = pod(
        "u5",
        json!([{"name": "h", "hostPath": {"path": file, "type": "Directory"}},
               {"name": "ok", "hostPath": {"path": file, "type": "File"}}]),
        json!([{"name": "h", "mountPath": "/h"}, {"name": "ok", "mountPath": "/ok"}]),
    );
    r.pods.set(vec![p.clone()]);
    let ev = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let e = events.recv().await.expect("event");
            if e.reason == FAILED_MOUNT {
                return e;
            }
        }
    })
    .await
    .expect("FailedMount");
    assert_eq!(ev.volume, "h");
    assert_eq!(
        ev.message,
        format!(
            "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: {file} is not a directory"
        )
    );
    eventually("the good hostPath", || {
        r.vm.get_mounted_volumes_for_pod("u5").contains_key("ok")
    })
    .await;
    let vols = r.vm.get_mounted_volumes_for_pod("u5");
    assert_eq!(vols["ok"].host_path, file);
    assert!(!vols["ok"].read_only && !vols["ok"].selinux_relabel);
    assert!(!vols.contains_key("h"));
    shutdown(r.tasks).await;
}
