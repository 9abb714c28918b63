//! The container manager on this machine's real cgroups (run as root).
//!
//! Every test works under its own cgroup root (`/kubelet-rs-test-<pid>-<n>`)
//! and removes everything it created through a guard, also on failure. The
//! kernel tunables are checked in a temporary tree, never on the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet::cadvisor::{
    FsInfo, HostMachineInfo, MachineInfo, MachineInfoError, MachineInfoProvider, VersionInfo,
};
use kubelet::cm::cgroupfs::{WriteMode, cgroup_procs};
use kubelet::cm::kernel::DESIRED_SYSCTLS;
use kubelet::cm::resources::{CgroupConfig, ResourceConfig};
use kubelet::cm::{
    CgroupDriver, CgroupManager, CgroupManagerImpl, CgroupMode, CgroupName, CgroupSubsystems,
    ContainerManager, ContainerManagerImpl, HostPaths, LoggingRecorder, NodeConfig,
};
use kubelet::util::lifecycle::TaskSet;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/go-kubelet-examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn reference_pod(name: &str) -> Arc<Pod> {
    Arc::new(serde_json::from_str(&fixture(&format!("pod-{name}.json"))).unwrap())
}

/// Root and a writable cgroup tree, or the reason the test cannot run here.
fn can_run() -> Result<CgroupSubsystems, String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("not root".into());
    }
    CgroupSubsystems::detect(&HostPaths::default()).map_err(|e| e.to_string())
}

macro_rules! require_cgroups {
    () => {
        match can_run() {
            Ok(s) => s,
            Err(why) => {
                eprintln!("SKIPPED: real cgroups unavailable: {why}");
                return;
            }
        }
    };
}

/// Removes a test's cgroup root, with everything below it, from every
/// hierarchy, killing what still runs there.
struct RootGuard {
    cgroups: Arc<dyn CgroupManager>,
    root: CgroupName,
}

impl RootGuard {
    fn new(cgroups: Arc<dyn CgroupManager>) -> Self {
        let name = format!(
            "kubelet-rs-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let root = CgroupName::root().child(&name).unwrap();
        cgroups
            .create(&CgroupConfig::new(root.clone(), ResourceConfig::default()))
            .unwrap();
        RootGuard { cgroups, root }
    }

    fn literal(&self) -> String {
        self.root.to_cgroupfs()
    }
}

impl Drop for RootGuard {
    fn drop(&mut self) {
        let _ = kubelet::cm::pod_container_manager::destroy_pod_cgroup(
            self.cgroups.as_ref(),
            &self.root,
        );
        let left: Vec<PathBuf> = self
            .cgroups
            .subsystems()
            .mount_points()
            .values()
            .map(|m| m.join(self.literal().trim_start_matches('/')))
            .filter(|p| p.exists())
            .collect();
        if !left.is_empty() {
            eprintln!("cleanup left {left:?}");
        }
    }
}

/// The reference node `gonode` (2 CPUs, 24684092Ki), whatever this machine is.
struct Gonode;

impl MachineInfoProvider for Gonode {
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError> {
        Ok(MachineInfo {
            num_cores: 2,
            memory_capacity: 24684092 * 1024,
            ..Default::default()
        })
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

/// A sysctl tree already as the kubelet wants it, with this host's process limits.
fn fake_sysctls() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("kernel")).unwrap();
    for limit in ["kernel/pid_max", "kernel/threads-max"] {
        std::fs::copy(Path::new("/proc/sys").join(limit), dir.path().join(limit)).unwrap();
    }
    for (name, value) in DESIRED_SYSCTLS {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{value}\n")).unwrap();
    }
    dir
}

fn own_oom_score_adj() -> i32 {
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A process to leave behind in a cgroup.
fn sleeper() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_pods_get_the_go_kubelet_cgroups() {
    let subsystems = require_cgroups!();
    if subsystems.mode() == CgroupMode::Unified {
        eprintln!("SKIPPED: the reference values are cgroup v1 files; this host is cgroup v2 only");
        return;
    }
    let host_cgroups: Arc<dyn CgroupManager> = Arc::new(
        CgroupManagerImpl::for_host(CgroupDriver::Cgroupfs, &HostPaths::default()).unwrap(),
    );
    let guard = RootGuard::new(host_cgroups.clone());
    let sysctls = fake_sysctls();
    let root_dir = tempfile::tempdir().unwrap();
    let host = HostPaths {
        sysctl: sysctls.path().to_path_buf(),
        ..HostPaths::default()
    };
    let config = NodeConfig {
        node_name: "rustnode".into(),
        cgroup_root: guard.literal(),
        kubelet_root_dir: root_dir.path().to_path_buf(),
        kubelet_oom_score_adj: own_oom_score_adj(),
        fail_swap_on: false,
        ..NodeConfig::default()
    };
    let cm = ContainerManagerImpl::new(config, Arc::new(Gonode), host, Arc::new(LoggingRecorder))
        .unwrap();
    let pods: Vec<Arc<Pod>> = ["guaranteed", "burstable", "besteffort"]
        .into_iter()
        .map(reference_pod)
        .collect();
    let active = pods.clone();
    let tasks = TaskSet::new();
    cm.start(&tasks, Arc::new(move || active.clone()), None)
        .await
        .unwrap();
    let pcm = cm.new_pod_container_manager();
    for pod in &pods {
        pcm.ensure_exists(pod).await.unwrap();
    }
    cm.update_qos_cgroups().await.unwrap();

    let uids: BTreeMap<&str, String> = ["guaranteed", "burstable", "besteffort"]
        .into_iter()
        .zip(pods.iter().map(|p| p.metadata.uid.clone().unwrap()))
        .collect();
    let mounts = subsystems.mount_points();
    let mut checked = 0;
    for line in fixture("cgroups.tsv")
        .lines()
        .filter(|l| !l.starts_with('#'))
    {
        let cols: Vec<&str> = line.split('\t').collect();
        let (pod, template, want) = (cols[0], cols[1], cols[2]);
        if template.contains("<container-id>") {
            continue; // written by the runtime, not the kubelet
        }
        let mut rel = template.to_string();
        if let Some(uid) = uids.get(pod) {
            rel = rel.replace("<uid>", uid);
        }
        let (subsystem, rest) = rel.split_once('/').unwrap();
        let path = mounts[subsystem]
            .join(guard.literal().trim_start_matches('/'))
            .join(rest);
        let got =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(got.trim(), want, "{pod} {template}");
        checked += 1;
    }
    assert_eq!(checked, 21, "every pod and node level value of cgroups.tsv");

    // kubepods also caps processes at the node's process limit (pid capacity).
    let pid_limit = ["kernel/pid_max", "kernel/threads-max"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(Path::new("/proc/sys").join(f))
                .unwrap()
                .trim()
                .parse::<i64>()
                .unwrap()
        })
        .min()
        .unwrap();
    let kubepods_pids = mounts["pids"]
        .join(guard.literal().trim_start_matches('/'))
        .join("kubepods/pids.max");
    assert_eq!(
        std::fs::read_to_string(kubepods_pids).unwrap().trim(),
        pid_limit.to_string()
    );

    // The tree: each level exists in every mounted hierarchy.
    let levels = [
        "kubepods".to_string(),
        "kubepods/burstable".into(),
        "kubepods/besteffort".into(),
        format!("kubepods/pod{}", uids["guaranteed"]),
        format!("kubepods/burstable/pod{}", uids["burstable"]),
        format!("kubepods/besteffort/pod{}", uids["besteffort"]),
    ];
    for (subsystem, mount) in mounts {
        let root = mount.join(guard.literal().trim_start_matches('/'));
        if subsystem == "devices" {
            assert!(
                !root.exists(),
                "like Go's, the kubelet's cgroups skip the devices controller"
            );
            continue;
        }
        for level in &levels {
            let dir = root.join(level);
            assert!(dir.is_dir(), "{subsystem}: {}", dir.display());
        }
    }
    assert_eq!(
        pcm.get_pod_container_name(&pods[1]).unwrap().1,
        format!(
            "{}/kubepods/burstable/pod{}",
            guard.literal(),
            uids["burstable"]
        )
    );

    // A process left in the besteffort pod cgroup dies with it.
    let mut straggler = sleeper();
    let (be_name, be_literal) = pcm.get_pod_container_name(&pods[2]).unwrap();
    for subsystem in ["cpu", "memory", "pids"] {
        let dir = mounts[subsystem].join(be_literal.trim_start_matches('/'));
        std::fs::write(dir.join("cgroup.procs"), straggler.id().to_string()).unwrap();
        assert_eq!(cgroup_procs(&dir).unwrap(), [straggler.id() as i32]);
    }
    let found = pcm.get_all_pods_from_cgroups().await.unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(found[&uids["besteffort"]], be_name);
    let running = [uids["guaranteed"].clone(), uids["burstable"].clone()].into();
    let report = pcm
        .cleanup_orphaned(&found, &running, &|_: &str| false)
        .await;
    assert_eq!(report.destroyed, [uids["besteffort"].clone()]);
    let status = straggler.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    for mount in mounts.values() {
        assert!(!mount.join(be_literal.trim_start_matches('/')).exists());
    }
    // QoS shares follow the pods that remain.
    let remaining: Vec<Arc<Pod>> = pods[..2].to_vec();
    assert_eq!(remaining.len(), 2);
    cm.update_qos_cgroups().await.unwrap();
    let burstable_shares = mounts["cpu"]
        .join(guard.literal().trim_start_matches('/'))
        .join("kubepods/burstable/cpu.shares");
    assert_eq!(
        std::fs::read_to_string(burstable_shares).unwrap().trim(),
        "102"
    );

    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(10))
        .await
        .unwrap();
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_root_must_exist_on_the_host() {
    let _ = require_cgroups!();
    let config = NodeConfig {
        cgroup_root: "/kubelet-rs-test-never-created".into(),
        fail_swap_on: false,
        ..NodeConfig::default()
    };
    let sysctls = fake_sysctls();
    let host = HostPaths {
        sysctl: sysctls.path().to_path_buf(),
        ..HostPaths::default()
    };
    let err = ContainerManagerImpl::new(config, Arc::new(Gonode), host, Arc::new(LoggingRecorder))
        .err()
        .expect("a missing cgroup root is refused");
    assert!(
        err.to_string()
            .contains("/kubelet-rs-test-never-created doesn't exist"),
        "{err}"
    );
}

/// Restores the v2 root's subtree_control to what it was.
struct SubtreeGuard {
    mount: PathBuf,
    before: String,
}

impl Drop for SubtreeGuard {
    fn drop(&mut self) {
        let now =
            std::fs::read_to_string(self.mount.join("cgroup.subtree_control")).unwrap_or_default();
        for c in now.split_whitespace() {
            if !self.before.split_whitespace().any(|b| b == c) {
                let _ = std::fs::write(self.mount.join("cgroup.subtree_control"), format!("-{c}"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_v2_tree_on_the_unified_hierarchy() {
    let subsystems = require_cgroups!();
    let Some(mount) = subsystems.unified_mount().map(Path::to_path_buf) else {
        eprintln!("SKIPPED: no cgroup v2 hierarchy mounted");
        return;
    };
    let v2 = CgroupSubsystems::unified_at(&mount).unwrap();
    let offered: Vec<String> = v2.unified_controllers().iter().cloned().collect();
    eprintln!(
        "cgroup v2 at {} ({:?} mode) offers controllers {offered:?}; the kubelet uses {:?} of them",
        mount.display(),
        subsystems.mode(),
        v2.unified_supported_controllers()
    );
    let _subtree = SubtreeGuard {
        mount: mount.clone(),
        before: std::fs::read_to_string(mount.join("cgroup.subtree_control")).unwrap_or_default(),
    };
    let sizes = kubelet::cm::resources::host_hugepage_sizes(Path::new("/sys/kernel/mm/hugepages"));
    let cgroups: Arc<dyn CgroupManager> = Arc::new(
        CgroupManagerImpl::cgroupfs(v2.clone(), sizes.clone()).with_write_mode(WriteMode::Kernel),
    );
    let guard = RootGuard::new(cgroups.clone());
    let pod = guard
        .root
        .child("kubepods")
        .and_then(|n| n.child("burstable"))
        .and_then(|n| n.child("pod91c5eba9-485b-4531-a424-9dc82293127e"))
        .unwrap();
    let mut limits = ResourceConfig::default();
    if v2.hugetlb_supported() && !sizes.is_empty() {
        limits.hugepage_limit.insert(2 << 20, 4 << 20);
    }
    cgroups
        .create(&CgroupConfig::new(pod.clone(), limits))
        .unwrap();
    let dir = mount.join(cgroups.name(&pod).unwrap().trim_start_matches('/'));
    assert!(dir.is_dir(), "{}", dir.display());
    assert!(
        cgroups.exists(&pod),
        "every controller the kubelet needs is enabled down the path"
    );
    let enabled = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap();
    for c in v2.unified_supported_controllers() {
        assert!(
            enabled.split_whitespace().any(|e| e == c),
            "{c} enabled in {enabled:?}"
        );
    }
    if v2.hugetlb_supported() && sizes.iter().any(|s| s == "2MB") {
        let max = std::fs::read_to_string(dir.join("hugetlb.2MB.max")).unwrap();
        assert_eq!(max.trim(), "4194304");
        for other in sizes.iter().filter(|s| *s != "2MB") {
            let v = std::fs::read_to_string(dir.join(format!("hugetlb.{other}.max"))).unwrap();
            assert_eq!(v.trim(), "0", "hugetlb.{other}.max");
        }
    } else {
        eprintln!("hugetlb is not offered on the v2 hierarchy here; no limits written");
    }

    let mut straggler = sleeper();
    std::fs::write(dir.join("cgroup.procs"), straggler.id().to_string()).unwrap();
    assert_eq!(cgroups.pids(&guard.root), [straggler.id() as i32]);
    kubelet::cm::pod_container_manager::destroy_pod_cgroup(cgroups.as_ref(), &pod).unwrap();
    let status = straggler.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(!dir.exists());
    assert!(!cgroups.exists(&pod));
    drop(guard);
    assert!(
        !mount
            .join(format!("kubelet-rs-test-{}", std::process::id()))
            .exists()
    );
}

#[test]
fn systemd_driver_is_refused_without_systemd() {
    let host = HostPaths::default();
    if host.systemd_running() {
        eprintln!("SKIPPED: systemd is the init system here");
        return;
    }
    let err = CgroupManagerImpl::for_host(CgroupDriver::Systemd, &host).unwrap_err();
    assert!(
        err.to_string().contains("needs systemd as the init system"),
        "{err}"
    );
}

#[test]
fn this_machine_reports_its_capacity() {
    let machine = HostMachineInfo::default();
    let info = machine.machine_info().unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = kubelet::cm::cpuset::CpuSet::parse(&online).unwrap();
    assert_eq!(info.num_cores as usize, online.len());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let capacity = kubelet::cm::capacity::capacity_from_machine_info(&info);
    assert_eq!(capacity["memory"].value() as u64, total_kib * 1024);
    assert_eq!(capacity["cpu"].milli_value(), online.len() as i64 * 1000);
    for hp in &info.hugepages {
        let name = kubelet::cm::resources::hugepage_resource_name((hp.page_size_kib * 1024) as i64);
        assert!(capacity.contains_key(&name), "{name}");
    }
    let root = machine.fs_info(Path::new("/")).unwrap();
    let st = nix::sys::statvfs::statvfs("/").unwrap();
    assert_eq!(
        root.capacity,
        st.blocks() as u64 * st.fragment_size() as u64
    );
}
