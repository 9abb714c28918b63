//! QoS tiers, pod cgroups and the container manager on fake trees.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::cgroup_manager::CgroupManager;
use super::cgroup_name::CgroupName;
use super::container_manager::*;
use super::host::HostPaths;
use super::kernel::DESIRED_SYSCTLS;
use super::node_config::NodeConfig;
use super::pod_container_manager::{PodContainerManager, PodContainerManagerImpl};
use super::qos_container_manager::{ActivePodsFn, QosContainerManager, QosSettings};
use super::resources::{CgroupConfig, ResourceConfig, ResourceList};
use super::testing::*;
use crate::cadvisor::{FsInfo, MachineInfo, MachineInfoError, MachineInfoProvider, VersionInfo};
use crate::util::lifecycle::TaskSet;

fn reference(name: &str) -> Arc<Pod> {
    let text = match name {
        "guaranteed" => {
            include_str!("../../tests/fixtures/go-kubelet-examples/pod-guaranteed.json")
        }
        "burstable" => include_str!("../../tests/fixtures/go-kubelet-examples/pod-burstable.json"),
        _ => include_str!("../../tests/fixtures/go-kubelet-examples/pod-besteffort.json"),
    };
    Arc::new(serde_json::from_str(text).unwrap())
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap()
}

fn pods() -> Vec<Arc<Pod>> {
    vec![
        reference("guaranteed"),
        reference("burstable"),
        reference("besteffort"),
    ]
}

fn active(pods: Vec<Arc<Pod>>) -> ActivePodsFn {
    Arc::new(move || pods.clone())
}

fn kubepods() -> CgroupName {
    CgroupName::root().child("kubepods").unwrap()
}

fn allocatable(memory: &str) -> super::qos_container_manager::ResourceListFn {
    let list: ResourceList = [("memory".to_string(), memory.parse().unwrap())].into();
    Arc::new(move || list.clone())
}

#[test]
fn qos_tiers_follow_active_pods() {
    let tree = FakeV1::standard();
    let cgroups: Arc<dyn CgroupManager> = Arc::new(tree.manager(&[]));
    let qos =
        QosContainerManager::new(cgroups.clone(), &kubepods(), QosSettings::default()).unwrap();
    let err = qos.setup(allocatable("1Gi"), active(pods())).unwrap_err();
    assert!(
        err.to_string()
            .contains("root container [kubepods] doesn't exist"),
        "{err}"
    );

    cgroups
        .create(&CgroupConfig::new(kubepods(), ResourceConfig::default()))
        .unwrap();
    qos.setup(allocatable("1Gi"), active(pods())).unwrap();
    assert_eq!(tree.read("cpu", "kubepods/besteffort", "cpu.shares"), "2");
    assert!(tree.path("memory", "kubepods/burstable").is_dir());
    qos.update_cgroups().unwrap();
    assert_eq!(tree.read("cpu", "kubepods/burstable", "cpu.shares"), "102");
    assert_eq!(tree.read("cpu", "kubepods/besteffort", "cpu.shares"), "2");
    assert!(
        !tree
            .path("memory", "kubepods/burstable")
            .join("memory.limit_in_bytes")
            .exists()
    );
    assert!(
        !tree.path("cpu", "kubepods").join("cpu.shares").exists(),
        "the guaranteed tier is not touched"
    );
}

#[test]
fn qos_reserved_memory_limits_lower_tiers() {
    let tree = FakeV1::standard();
    let cgroups: Arc<dyn CgroupManager> = Arc::new(tree.manager(&[]));
    cgroups
        .create(&CgroupConfig::new(kubepods(), ResourceConfig::default()))
        .unwrap();
    let settings = |enabled| QosSettings {
        qos_reserved: BTreeMap::from([("memory".to_string(), 50)]),
        qos_reserved_enabled: enabled,
        ..Default::default()
    };
    let off = QosContainerManager::new(cgroups.clone(), &kubepods(), settings(false)).unwrap();
    off.setup(allocatable("24684092Ki"), active(pods()))
        .unwrap();
    off.update_cgroups().unwrap();
    assert!(
        !tree
            .path("memory", "kubepods/burstable")
            .join("memory.limit_in_bytes")
            .exists(),
        "gate off"
    );

    let on = QosContainerManager::new(cgroups.clone(), &kubepods(), settings(true)).unwrap();
    on.setup(allocatable("24684092Ki"), active(pods())).unwrap();
    on.update_cgroups().unwrap();
    let alloc: i64 = 24684092 * 1024;
    let burstable = alloc - (128 << 20) * 50 / 100;
    let best_effort = burstable - (64 << 20) * 50 / 100;
    assert_eq!(
        tree.read("memory", "kubepods/burstable", "memory.limit_in_bytes"),
        burstable.to_string()
    );
    assert_eq!(
        tree.read("memory", "kubepods/besteffort", "memory.limit_in_bytes"),
        best_effort.to_string()
    );
}

#[test]
fn memory_qos_sets_memory_min_on_v2() {
    let tree = FakeV2::new("cpu memory pids");
    let cgroups: Arc<dyn CgroupManager> = Arc::new(tree.manager(&[]));
    cgroups
        .create(&CgroupConfig::new(kubepods(), ResourceConfig::default()))
        .unwrap();
    tree.kernel_lists_controllers("kubepods", "cpu memory pids");
    let qos = QosContainerManager::new(
        cgroups,
        &kubepods(),
        QosSettings {
            memory_qos: true,
            ..Default::default()
        },
    )
    .unwrap();
    qos.setup(allocatable("1Gi"), active(pods())).unwrap();
    qos.update_cgroups().unwrap();
    assert_eq!(
        tree.read("kubepods/burstable", "memory.min"),
        (64u64 << 20).to_string()
    );
    assert_eq!(
        tree.read("kubepods", "memory.min"),
        (192u64 << 20).to_string()
    );
    assert_eq!(tree.read("kubepods/burstable", "cpu.weight"), "4");
}

fn pod_manager(tree: &FakeV1, systemd: bool, pids: i64) -> PodContainerManagerImpl {
    let cgroups: Arc<dyn CgroupManager> = if systemd {
        Arc::new(tree.systemd_manager(FakeDbus::with_version(252)))
    } else {
        Arc::new(tree.manager(&[]))
    };
    let info = super::qos_container_manager::QosContainersInfo::under(&kubepods()).unwrap();
    PodContainerManagerImpl::new(info, cgroups, pids, Default::default())
}

#[tokio::test]
async fn pod_cgroups_cgroupfs() {
    let tree = FakeV1::standard();
    let pcm = pod_manager(&tree, false, 4096);
    let [g, b, e] = [
        reference("guaranteed"),
        reference("burstable"),
        reference("besteffort"),
    ];
    let cases = [
        (&g, format!("/kubepods/pod{}", uid(&g))),
        (&b, format!("/kubepods/burstable/pod{}", uid(&b))),
        (&e, format!("/kubepods/besteffort/pod{}", uid(&e))),
    ];
    for (pod, literal) in &cases {
        let (_, got) = pcm.get_pod_container_name(pod).unwrap();
        assert_eq!(&got, literal);
        assert_eq!(&pcm.get_pod_cgroup_parent(pod).unwrap(), literal);
        assert!(!pcm.exists(pod).await);
        pcm.ensure_exists(pod).await.unwrap();
        assert!(pcm.exists(pod).await);
        assert_eq!(
            tree.read("pids", literal, "pids.max"),
            "4096",
            "podPidsLimit"
        );
        assert_eq!(pcm.is_pod_cgroup(literal), Some(uid(pod)));
    }
    assert_eq!(tree.read("cpu", &cases[0].1, "cpu.shares"), "512");
    assert_eq!(tree.read("cpu", &cases[1].1, "cpu.cfs_quota_us"), "100000");
    assert_eq!(
        tree.read("memory", &cases[1].1, "memory.limit_in_bytes"),
        "268435456"
    );
    assert_eq!(tree.read("cpu", &cases[2].1, "cpu.shares"), "2");
    // Existing cgroups are left alone.
    std::fs::write(tree.path("cpu", &cases[0].1).join("cpu.shares"), "1000").unwrap();
    pcm.ensure_exists(&g).await.unwrap();
    assert_eq!(tree.read("cpu", &cases[0].1, "cpu.shares"), "1000");

    assert_eq!(pcm.is_pod_cgroup("/kubepods/burstable"), None);
    assert_eq!(pcm.is_pod_cgroup("/kubepods/besteffort/notapod"), None);
    // As in Go, only the depth below a tier is checked, not the tier itself.
    assert_eq!(pcm.is_pod_cgroup("/other/pod123"), Some("123".to_string()));
    assert_eq!(pcm.is_pod_cgroup("/a/b/c/pod123"), None);

    std::fs::create_dir_all(tree.path("memory", "kubepods/besteffort/stray")).unwrap();
    let found = pcm.get_all_pods_from_cgroups().await.unwrap();
    let want: BTreeSet<String> = [uid(&g), uid(&b), uid(&e)].into();
    assert_eq!(found.keys().cloned().collect::<BTreeSet<_>>(), want);
    assert_eq!(found[&uid(&b)].to_cgroupfs(), cases[1].1);

    let running: BTreeSet<String> = [uid(&g)].into();
    let b_uid = uid(&b);
    let report = pcm
        .cleanup_orphaned(&found, &running, &move |u: &str| u == b_uid)
        .await;
    assert_eq!(report.destroyed, [uid(&e)]);
    assert_eq!(report.reduced, [uid(&b)]);
    assert!(report.failed.is_empty());
    assert!(!tree.path("cpu", &cases[2].1).exists());
    assert_eq!(
        tree.read("cpu", &cases[1].1, "cpu.shares"),
        "2",
        "kept, cpu reduced"
    );
    assert!(tree.path("cpu", &cases[0].1).exists());
}

#[tokio::test]
async fn pod_cgroups_systemd() {
    let tree = FakeV1::standard();
    let pcm = pod_manager(&tree, true, -1);
    let b = reference("burstable");
    let (name, literal) = pcm.get_pod_container_name(&b).unwrap();
    let escaped = uid(&b).replace('-', "_");
    assert_eq!(
        literal,
        format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice")
    );
    pcm.ensure_exists(&b).await.unwrap();
    assert!(
        !tree.path("pids", &literal).join("pids.max").exists(),
        "no pids limit"
    );
    assert_eq!(pcm.is_pod_cgroup(&literal), Some(uid(&b)));
    let found = pcm.get_all_pods_from_cgroups().await.unwrap();
    assert_eq!(found.get(&uid(&b)), Some(&name));
    pcm.destroy(&name).await.unwrap();
    assert!(!tree.path("cpu", &literal).exists());
}

#[tokio::test]
async fn destroy_kills_stragglers() {
    let tree = FakeV1::standard();
    let pcm = pod_manager(&tree, false, -1);
    let e = reference("besteffort");
    pcm.ensure_exists(&e).await.unwrap();
    let (name, literal) = pcm.get_pod_container_name(&e).unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(
        tree.path("cpu", &literal).join("cgroup.procs"),
        child.id().to_string(),
    )
    .unwrap();
    pcm.destroy(&name).await.unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(!tree.path("cpu", &literal).exists());
}

struct FakeMachine(MachineInfo);

impl MachineInfoProvider for FakeMachine {
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError> {
        Ok(self.0.clone())
    }
    fn version_info(&self) -> Result<VersionInfo, MachineInfoError> {
        Ok(VersionInfo::default())
    }
    fn fs_info(&self, _path: &Path) -> Result<FsInfo, MachineInfoError> {
        Ok(FsInfo {
            capacity: 264212084 * 1024,
            ..Default::default()
        })
    }
}

fn gonode() -> Arc<dyn MachineInfoProvider> {
    Arc::new(FakeMachine(MachineInfo {
        num_cores: 2,
        memory_capacity: 24684092 * 1024,
        ..Default::default()
    }))
}

#[derive(Default)]
struct Events(Mutex<Vec<(EventType, String, String)>>);

impl NodeEventRecorder for Events {
    fn node_event(&self, t: EventType, reason: &str, message: &str) {
        self.0
            .lock()
            .unwrap()
            .push((t, reason.into(), message.into()));
    }
}

struct Host {
    dir: tempfile::TempDir,
    paths: HostPaths,
}

fn fake_host(sysctls: &[(&str, i64)], swaps: &str) -> Host {
    let dir = tempfile::tempdir().unwrap();
    for (name, v) in sysctls {
        let p = dir.path().join("sys").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{v}\n")).unwrap();
    }
    std::fs::write(dir.path().join("swaps"), swaps).unwrap();
    let paths = HostPaths {
        proc: dir.path().to_path_buf(),
        sysctl: dir.path().join("sys"),
        run_systemd_system: dir.path().join("run/systemd/system"),
        hugepages: dir.path().join("hugepages"),
    };
    Host { dir, paths }
}

const NO_SWAP: &str = "Filename\tType\tSize\tUsed\tPriority\n";

fn build(
    tree: &FakeV1,
    mut config: NodeConfig,
    host: &Host,
    events: Arc<Events>,
) -> Result<ContainerManagerImpl, super::CmError> {
    // The CPU, memory and device managers write under the root dir; these
    // tests are about cgroups.
    config.features.cpu_manager = false;
    config.features.memory_manager = false;
    config.features.device_plugins = false;
    ContainerManagerImpl::with_cgroup_manager(
        config,
        gonode(),
        host.paths.clone(),
        Arc::new(tree.manager(&[])),
        events,
    )
}

#[tokio::test]
async fn container_manager_lays_out_the_node() {
    let tree = FakeV1::standard();
    let mut sysctls = DESIRED_SYSCTLS.to_vec();
    sysctls[0].1 = 0;
    sysctls.push(("kernel/pid_max", 4194304));
    sysctls.push(("kernel/threads-max", 200000));
    let host = fake_host(&sysctls, NO_SWAP);
    let events = Arc::new(Events::default());
    let cm = build(&tree, NodeConfig::default(), &host, events.clone()).unwrap();
    let tasks = TaskSet::new();
    cm.start(&tasks, active(pods()), None).await.unwrap();

    assert_eq!(tree.read("cpu", "kubepods", "cpu.shares"), "2048");
    assert_eq!(
        tree.read("memory", "kubepods", "memory.limit_in_bytes"),
        "25276510208"
    );
    assert_eq!(
        tree.read("pids", "kubepods", "pids.max"),
        "200000",
        "pid capacity is the smaller of pid_max and threads-max"
    );
    assert_eq!(tree.read("cpu", "kubepods/besteffort", "cpu.shares"), "2");
    assert_eq!(
        std::fs::read_to_string(host.dir.path().join("sys/vm/overcommit_memory")).unwrap(),
        "1",
        "unprotected kernel defaults are set"
    );
    assert_eq!(
        cm.status().soft_requirements.as_deref(),
        Some("CPU hardcapping unsupported")
    );
    let capacity = cm.get_capacity(true).await;
    assert_eq!(capacity["ephemeral-storage"].to_string(), "264212084Ki");
    assert_eq!(capacity["memory"].to_string(), "24684092Ki");
    assert!(!capacity.contains_key("pid"), "pid capacity is internal");
    assert_eq!(cm.get_pod_cgroup_root(), "/kubepods");

    let pcm = cm.new_pod_container_manager();
    for p in pods() {
        pcm.ensure_exists(&p).await.unwrap();
    }
    cm.update_qos_cgroups().await.unwrap();
    assert_eq!(tree.read("cpu", "kubepods/burstable", "cpu.shares"), "102");

    tokio::time::timeout(Duration::from_secs(5), async {
        while !events
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|(_, r, _)| r == EVENT_NODE_ALLOCATABLE_ENFORCED)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("node allocatable enforcement reports success");
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
}

#[tokio::test]
async fn container_manager_refusals() {
    let tree = FakeV1::standard();
    let events = Arc::new(Events::default());
    let good = fake_host(&DESIRED_SYSCTLS, NO_SWAP);

    let swapping = fake_host(
        &DESIRED_SYSCTLS,
        "Filename\tType\tSize\tUsed\tPriority\n/swap\tfile\t10\t0\t-2\n",
    );
    let err = build(&tree, NodeConfig::default(), &swapping, events.clone())
        .err()
        .unwrap();
    assert!(err.to_string().contains("swap"), "{err}");
    let swap_allowed = NodeConfig {
        fail_swap_on: false,
        ..Default::default()
    };
    assert!(build(&tree, swap_allowed, &swapping, events.clone()).is_ok());

    let missing_root = NodeConfig {
        cgroup_root: "/missing".into(),
        ..Default::default()
    };
    let err = build(&tree, missing_root, &good, events.clone())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("cgroupRoot (--cgroup-root) /missing doesn't exist"),
        "{err}"
    );

    let mut wrong = DESIRED_SYSCTLS.to_vec();
    wrong[1].1 = 1;
    let protected_host = fake_host(&wrong, NO_SWAP);
    let protected = NodeConfig {
        protect_kernel_defaults: true,
        ..Default::default()
    };
    let cm = build(&tree, protected, &protected_host, events.clone()).unwrap();
    let tasks = TaskSet::new();
    let err = cm
        .start(&tasks, active(Vec::new()), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("vm/panic_on_oom"), "{err}");

    let mut reserved = NodeConfig::default();
    reserved.node_allocatable.system_reserved =
        [("memory".to_string(), "1Gi".parse().unwrap())].into();
    reserved.node_allocatable.system_reserved_cgroup_name = "/system.slice".into();
    reserved
        .node_allocatable
        .enforce_node_allocatable
        .insert("system-reserved".into());
    let cm = build(&tree, reserved.clone(), &good, events.clone()).unwrap();
    let err = cm
        .start(&tasks, active(Vec::new()), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(events.0.lock().unwrap().iter().any(
        |(t, r, _)| *t == EventType::Warning && r == EVENT_FAILED_NODE_ALLOCATABLE_ENFORCEMENT
    ));

    for s in ["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"] {
        std::fs::create_dir_all(tree.path(s, "system.slice")).unwrap();
    }
    let cm = build(&tree, reserved, &good, events.clone()).unwrap();
    cm.start(&tasks, active(Vec::new()), None).await.unwrap();
    assert_eq!(
        tree.read("memory", "system.slice", "memory.limit_in_bytes"),
        (1u64 << 30).to_string()
    );
    assert_eq!(
        tree.read("memory", "kubepods", "memory.limit_in_bytes"),
        (24684092u64 * 1024 - (1 << 30)).to_string(),
        "kubepods leaves out the system reservation"
    );
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
}

#[tokio::test]
async fn without_cgroups_per_qos_pods_share_the_root() {
    let tree = FakeV1::standard();
    let host = fake_host(&DESIRED_SYSCTLS, NO_SWAP);
    let config = NodeConfig {
        cgroups_per_qos: false,
        cgroup_root: String::new(),
        node_allocatable: Default::default(),
        ..Default::default()
    };
    let cm = build(&tree, config, &host, Arc::new(Events::default())).unwrap();
    let tasks = TaskSet::new();
    cm.start(&tasks, active(pods()), None).await.unwrap();
    assert!(!tree.path("cpu", "kubepods").exists());
    let pcm = cm.new_pod_container_manager();
    let g = reference("guaranteed");
    pcm.ensure_exists(&g).await.unwrap();
    assert_eq!(pcm.get_pod_container_name(&g).unwrap().1, "");
    assert!(pcm.get_all_pods_from_cgroups().await.unwrap().is_empty());
    assert_eq!(cm.get_qos_containers_info(), Default::default());
    cm.update_qos_cgroups().await.unwrap();
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
}
