//! Fault drills (issue 18): the kubelet binary SIGKILLed while it starts a
//! batch of static pods, then started again on the same node, over a
//! private containerd. Nothing running is lost and nothing is duplicated:
//! every pod ends with one ready sandbox and one running container; a
//! container that was running before the kill is the one still running
//! (no restart); pod directories and pod cgroups match the pods one to one.
//!
//! `KUBELET_RS_DRILL_PODS` (default 30) and `KUBELET_RS_DRILL_KILLS`
//! (default 3; bench/fault_drills.sh runs 10) size it; the kill points are
//! drawn from a seed printed at the start (`KUBELET_RS_DRILL_SEED` replays
//! one).
//!
//! Also: corrupt state files at start-up, and containerd killed while pods
//! start and probes run, in API mode against the API server double (or the
//! real kube-apiserver KUBELET_RS_TEST_KUBECONFIG names); the root dir and
//! the pod logs dir full; a flood of invalid manifests.

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

use support::process::rss_kib;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use harness::*;
use support::containerd::{Containerd, images};
use support::runtime_view::{PodRuntime, pod_runtime_view};

const NODE: &str = "drill-node";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (splitmix64) for the kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

async fn runtime_view(rig: &Containerd) -> BTreeMap<String, PodRuntime> {
    pod_runtime_view(cri(rig).await.as_ref()).await
}

fn pod_names(n: u64) -> BTreeSet<String> {
    (0..n).map(|i| format!("p{i}-{NODE}")).collect()
}

/// Every pod has one ready sandbox and one running container in it.
fn settled(view: &BTreeMap<String, PodRuntime>, want: &BTreeSet<String>) -> Result<(), String> {
    let mut problems = Vec::new();
    for name in want {
        match view.get(name) {
            None => problems.push(format!("{name}: nothing in the runtime")),
            Some(p) => {
                if p.ready_sandboxes.len() != 1 {
                    problems.push(format!(
                        "{name}: {} ready sandboxes",
                        p.ready_sandboxes.len()
                    ));
                }
                if p.running.len() != 1 {
                    problems.push(format!("{name}: {} running containers", p.running.len()));
                } else if !p.running.values().all(|sb| p.ready_sandboxes.contains(sb)) {
                    problems.push(format!("{name}: its container runs in a dead sandbox"));
                }
            }
        }
    }
    let extra: Vec<&String> = view.keys().filter(|k| !want.contains(*k)).collect();
    if !extra.is_empty() {
        problems.push(format!("pods no manifest names: {extra:?}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn dir_names(dir: &std::path::Path, prefix: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The pod cgroups (`pod<uid>`) under the QoS tiers of `root` in the
/// memory hierarchy (v1) or the unified one.
fn pod_cgroups(root: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (controllers, mount) in support::cgroup_mounts() {
        if !(controllers.iter().any(|c| c == "memory") || controllers.is_empty()) {
            continue;
        }
        let base = mount.join(root.trim_start_matches('/')).join("kubepods");
        for tier in ["", "burstable", "besteffort"] {
            out.extend(
                dir_names(&base.join(tier), "pod")
                    .into_iter()
                    .map(|n| n.trim_start_matches("pod").to_string()),
            );
        }
        break;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_starting_pods_loses_and_duplicates_nothing() {
    let Some(rig) = Containerd::start("fault_drills") else {
        return;
    };
    let _sysctls = SysctlGuard::save();
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "drills");
    let n_pods = env_or("KUBELET_RS_DRILL_PODS", 30);
    let kills = env_or("KUBELET_RS_DRILL_KILLS", 3);
    let seed = env_or(
        "KUBELET_RS_DRILL_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    );
    eprintln!("fault drill: {n_pods} pods, {kills} kills, seed {seed}");
    let mut rng = Rng(seed);
    let cfg = config(
        &dirs,
        &root,
        Ports {
            main: 22348,
            read_only: 22349,
            healthz: 0,
        },
        "",
    );
    let argv = args(&dirs, &rig, &cfg, NODE);
    let logs = dirs.path("logs");
    let want = pod_names(n_pods);
    let bb = &images().busybox;

    let mut runs: Vec<String> = Vec::new();
    for round in 0..kills {
        if round == 0 {
            for i in 0..n_pods {
                dirs.write_manifest(
                    &format!("p{i}.yaml"),
                    &format!(
                        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {bb}\n    command: [sleep, '3600']\n"
                    ),
                );
            }
        }
        let before = runtime_view(&rig).await;
        let mut child = spawn_binary(&argv, &logs);
        let _stderr = collect_stderr(&mut child);
        // Kill once a drawn share of the pods have a running container
        // (0 = at once, before any), or after a drawn delay when the batch
        // finishes first.
        let already = before.values().filter(|p| !p.running.is_empty()).count() as u64;
        let target = (already + rng.next() % (n_pods - already.min(n_pods) + 1)) as usize;
        let started = Instant::now();
        let delay = Duration::from_millis(500 + rng.next() % 8000);
        loop {
            let running = runtime_view(&rig)
                .await
                .values()
                .filter(|p| !p.running.is_empty())
                .count();
            if running >= target || started.elapsed() > delay {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let at = started.elapsed();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("SIGKILL");
        let _ = child.wait();
        let view = runtime_view(&rig).await;
        let running_then = view.values().filter(|p| !p.running.is_empty()).count();
        runs.push(format!(
            "round {round}: killed after {at:?} with {running_then}/{n_pods} pods running (before the start: {})",
            before.values().filter(|p| !p.running.is_empty()).count()
        ));
    }

    // The last start runs to the end.
    let survivors: BTreeMap<String, String> = runtime_view(&rig)
        .await
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.running_id()?.clone())))
        .collect();
    let mut child = spawn_binary(&argv, &logs);
    let stderr = collect_stderr(&mut child);
    let start = Instant::now();
    let mut last = Err(String::new());
    while start.elapsed() < Duration::from_secs(180) {
        last = settled(&runtime_view(&rig).await, &want);
        if last.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "{}\nall {n_pods} pods settled {:?} after the last start",
        runs.join("\n"),
        start.elapsed()
    );
    if let Err(e) = &last {
        let _ = child.kill();
        let _ = child.wait();
        let log = stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        panic!(
            "not settled: {e}\nlast log lines:\n{}",
            log.lines().rev().take(30).collect::<Vec<_>>().join("\n")
        );
    }
    // Settled for a while: nothing restarts what ran before the kills.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let view = runtime_view(&rig).await;
    settled(&view, &want).expect("still settled");
    for (pod, id) in &survivors {
        let now = view[pod].running_id().expect("running");
        assert_eq!(
            now, id,
            "{pod}: the container that ran before the kill still runs"
        );
    }

    // The kubelet's view: each pod Running once, its files and cgroups.
    let listed = pods(22349);
    assert_eq!(listed.len() as u64, n_pods, "{:?}", listed.keys());
    let uids: BTreeSet<String> = listed.values().map(uid).collect();
    for p in listed.values() {
        assert_eq!(phase(p), "Running", "{:?}", p.metadata.name);
    }
    let pod_dirs = dir_names(&dirs.path("root/pods"), "");
    assert_eq!(pod_dirs, uids, "pod directories are the pods'");
    let cgroups = pod_cgroups(&root);
    assert_eq!(cgroups, uids, "pod cgroups are the pods'");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), Some(0));
}

/// What a start over a damaged state file does.
enum Expect {
    /// run() fails with an error naming the file (Go refuses to start).
    Refused(&'static str),
    /// The kubelet goes on (logging what it could not read) and runs pods.
    Runs,
}

/// Corrupt, truncated and misplaced state: the CPU and memory managers'
/// checkpoints refuse the start naming the file, with Go's advice; the
/// device manager's checkpoint and a pod directory that is not a directory
/// are logged and the kubelet goes on. Never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_state_files_are_named_or_recovered_from() {
    let Some(rig) = Containerd::start("fault_drills_state") else {
        return;
    };
    let bb = &images().busybox;
    let cases: Vec<(&str, &str, &[u8], Expect)> = vec![
        (
            "truncated CPU manager state",
            "cpu_manager_state",
            br#"{"policyName":"none","defaultCpuSet":"","chec"#,
            Expect::Refused("CPU manager checkpoint file"),
        ),
        (
            "CPU manager state with a wrong checksum",
            "cpu_manager_state",
            br#"{"policyName":"none","defaultCpuSet":"","checksum":1}"#,
            Expect::Refused("CPU manager checkpoint file"),
        ),
        (
            "binary garbage as CPU manager state",
            "cpu_manager_state",
            b"\x00\xff\xfe garbage \x01",
            Expect::Refused("CPU manager checkpoint file"),
        ),
        (
            "truncated memory manager state",
            "memory_manager_state",
            br#"{"policyName":"None","machineState":{"#,
            Expect::Refused("memory manager checkpoint file"),
        ),
        (
            "truncated device manager checkpoint",
            "device-plugins/kubelet_internal_checkpoint",
            br#"{"Data":{"PodDeviceEntries":[{"#,
            Expect::Runs,
        ),
        (
            "a pod directory that is a file",
            "pods/0b5c3a1e-0000-4000-8000-00000000dead",
            b"not a directory",
            Expect::Runs,
        ),
    ];
    let mut seen = Vec::new();
    for (i, (name, file, bytes, expect)) in cases.into_iter().enumerate() {
        let dirs = NodeDirs::new();
        let root = make_cgroup_root(&rig, &format!("state{i}"));
        let path = dirs.path("root").join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("state dir");
        std::fs::write(&path, bytes).expect("state file");
        dirs.write_manifest(
            "good.yaml",
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: good\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {bb}\n    command: [sleep, '3600']\n"
            ),
        );
        let ports = Ports {
            main: 22240,
            read_only: 22241,
            healthz: 0,
        };
        let cfg = config(&dirs, &root, ports, "");
        let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
        match expect {
            Expect::Refused(what) => {
                let result = tokio::time::timeout(Duration::from_secs(60), kubelet.handle)
                    .await
                    .unwrap_or_else(|_| panic!("{name}: run() returns"))
                    .unwrap_or_else(|e| panic!("{name}: run() panicked: {e}"));
                let err = result
                    .err()
                    .unwrap_or_else(|| panic!("{name}: the start is refused"))
                    .to_string();
                let quoted = format!("{path:?}");
                assert!(
                    err.contains(what)
                        && err.contains(&quoted)
                        && err.contains("please drain this node"),
                    "{name}: {err}"
                );
                seen.push(format!("{name}: refused: {err}"));
            }
            Expect::Runs => {
                wait_pod(
                    ports.read_only,
                    &format!("good-{NODE}"),
                    Duration::from_secs(60),
                    "Running",
                    |p| phase(p) == "Running",
                )
                .await;
                assert!(
                    !kubelet.handle.is_finished(),
                    "{name}: the kubelet keeps running"
                );
                kubelet.stop().await.expect("clean stop");
                seen.push(format!("{name}: kept running, the pod ran"));
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    eprintln!("{}", seen.join("\n"));
}

fn ready_condition(n: &k8s_openapi::api::core::v1::Node) -> Option<(String, String, String)> {
    let c = n
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// containerd SIGKILLed while ten pods start and a readiness probe runs,
/// kept down past the runtime's 30 s threshold, then started again: the
/// Node goes Ready=False with Go's reason and message, healthz keeps
/// answering 200 (Go's sync-loop check allows 5 minutes), and after the
/// restart the kubelet, never restarted itself, brings the Node back to
/// Ready and every pod to Running with one ready sandbox, the containers
/// that ran before the outage untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_killed_while_pods_start_and_probes_run() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use support::apiserver::TestApi;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("fault_drills_runtime") else {
        return;
    };
    let api = TestApi::start().await;
    let ns = api.create_namespace("outage").await;
    let node = api.unique_name("outage");
    let root = make_cgroup_root(&rig, "outage");
    let ports = Ports {
        main: 22242,
        read_only: 22243,
        healthz: 22244,
    };
    let cfg = config(
        &dirs,
        &root,
        ports,
        "nodeStatusUpdateFrequency: 2s\nnodeStatusReportFrequency: 4s\n",
    );
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    let wait = Duration::from_secs(90);
    api.wait_for::<Node>(None, &node, wait, |n| {
        ready_condition(n).is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    let pod = |name: &str, probe: bool| -> Pod {
        let mut c = serde_json::json!({"name": "c", "image": images().busybox,
            "command": ["sleep", "3600"]});
        if probe {
            c["readinessProbe"] =
                serde_json::json!({"exec": {"command": ["true"]}, "periodSeconds": 1});
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [c]},
        }))
        .expect("pod")
    };
    api.put(&pod("prober", true)).await;
    api.wait_for::<Pod>(Some(&ns), "prober", wait, |p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;
    for i in 0..10 {
        api.put(&pod(&format!("batch-{i}"), false)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before: BTreeMap<String, String> = runtime_view(&rig)
        .await
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.running_id()?.clone())))
        .collect();

    let down = Instant::now();
    rig.kill();
    let n = api
        .wait_for::<Node>(None, &node, Duration::from_secs(90), |n| {
            ready_condition(n).is_some_and(|(s, _, _)| s == "False")
        })
        .await;
    let (_, reason, message) = ready_condition(&n).expect("Ready condition");
    eprintln!(
        "runtime down: Node Ready=False after {:?}: {reason}: {message}",
        down.elapsed()
    );
    assert_eq!(reason, "KubeletNotReady");
    assert!(message.contains("container runtime is down"), "{message}");
    assert_eq!(
        http_get(ports.healthz, "/healthz").map(|(c, _)| c),
        Some(200),
        "healthz within Go's 5 minute sync-loop allowance"
    );
    assert!(!kubelet.handle.is_finished(), "the kubelet did not exit");

    rig.restart();
    let up = Instant::now();
    api.wait_for::<Node>(None, &node, Duration::from_secs(90), |n| {
        ready_condition(n).is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    eprintln!("runtime back: Node Ready=True after {:?}", up.elapsed());
    let want: BTreeSet<String> = std::iter::once("prober".to_string())
        .chain((0..10).map(|i| format!("batch-{i}")))
        .collect();
    let start = Instant::now();
    let mut last = Err(String::new());
    while start.elapsed() < Duration::from_secs(120) {
        last = settled(&runtime_view(&rig).await, &want);
        if last.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    last.expect("every pod once in the runtime");
    let view = runtime_view(&rig).await;
    for (name, id) in &before {
        assert_eq!(
            view[name].running_id().expect("running"),
            id,
            "{name}: the container that ran before the outage still runs"
        );
    }
    for name in &want {
        api.wait_for::<Pod>(Some(&ns), name, wait, |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await;
    }
    eprintln!(
        "all {} pods Running {:?} after the runtime came back; {} had been running before the outage",
        want.len(),
        up.elapsed(),
        before.len()
    );
    kubelet.stop().await.expect("kubelet stops cleanly");
    api.cleanup().await;
}

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &std::path::Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the filesystem of `dir` with `dir/filler` until about `leave`
/// bytes are free (0: until a write fails, the last bytes in small pieces).
fn fill(dir: &std::path::Path, leave: u64) -> u64 {
    use std::io::Write;
    let free = || {
        nix::sys::statvfs::statvfs(dir)
            .map(|s| s.blocks_available() * s.fragment_size())
            .unwrap_or(0)
    };
    let mut f = std::fs::File::create(dir.join("filler")).expect("filler");
    let chunk = vec![0x5au8; 64 * 1024];
    let mut written = 0u64;
    while (leave == 0 || free() > leave + chunk.len() as u64) && f.write_all(&chunk).is_ok() {
        written += chunk.len() as u64;
    }
    while leave == 0 && f.write_all(&chunk[..512]).is_ok() {
        written += 512;
    }
    let _ = f.sync_all();
    written
}

/// A kubelet's directories with `rel` on its own small tmpfs, a private
/// containerd and a cgroup root, and a configuration with `extra`; `None`
/// (the test skipped) where no tmpfs can be mounted outside CI.
struct FullDiskRig {
    rig: Containerd,
    dirs: NodeDirs,
    _fs: Tmpfs,
    cfg: std::path::PathBuf,
}

fn full_disk_rig(
    name: &str,
    rel: &str,
    size: &str,
    ports: Ports,
    extra: &str,
) -> Option<FullDiskRig> {
    let rig = Containerd::start(&format!("fault_drills_{name}"))?;
    let dirs = NodeDirs::new();
    let Some(fs) = Tmpfs::mount(&dirs.path(rel), size) else {
        eprintln!("SKIPPED: no tmpfs mount here");
        assert!(std::env::var_os("CI").is_none(), "CI needs tmpfs mounts");
        return None;
    };
    let root = make_cgroup_root(&rig, name);
    // Memory thresholds only: a full disk here must not also evict (that
    // is the eviction manager's drill, tests/eviction.rs).
    let cfg = config(
        &dirs,
        &root,
        ports,
        &format!("evictionHard:\n  memory.available: 100Mi\n{extra}"),
    );
    Some(FullDiskRig {
        rig,
        dirs,
        _fs: fs,
        cfg,
    })
}

/// A static pod of one busybox container `c` running `command` (a YAML
/// flow sequence).
fn busybox_pod(name: &str, command: &str) -> String {
    let bb = &images().busybox;
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {bb}\n    command: {command}\n"
    )
}

const SLEEP: &str = "[sleep, '3600']";

/// Waits until static pod `name` runs; its container `c`'s id.
async fn running_container_id(port: u16, name: &str) -> String {
    let pod = wait_pod(
        port,
        &format!("{name}-{NODE}"),
        Duration::from_secs(60),
        "Running",
        |p| phase(p) == "Running",
    )
    .await;
    container(&pod, "c")
        .and_then(|c| c.container_id.clone())
        .expect("container id")
}

/// The kubelet healthy and running on a full disk, and pod `name` still
/// running container `id`; the pods it lists.
fn assert_still_serving(
    ports: Ports,
    kubelet: &Kubelet,
    name: &str,
    id: &str,
) -> BTreeMap<String, k8s_openapi::api::core::v1::Pod> {
    assert_eq!(
        http_get(ports.healthz, "/healthz").map(|(c, _)| c),
        Some(200),
        "healthy with a full disk"
    );
    assert!(!kubelet.handle.is_finished(), "the kubelet keeps running");
    let listed = pods(ports.read_only);
    let now = &listed[&format!("{name}-{NODE}")];
    assert_eq!(phase(now), "Running");
    assert_eq!(
        container(now, "c")
            .and_then(|c| c.container_id.clone())
            .as_deref(),
        Some(id),
        "the running pod {name} is untouched"
    );
    listed
}

/// The root dir full (a small tmpfs at 100%): the kubelet keeps running
/// and healthy, the pod it already runs is untouched, the state files stay
/// whole (no half-written file, no temporary left), a new pod waits with
/// its error instead of crashing anything, and runs once space is back.
/// Eviction thresholds are on memory only here, so the full root dir does
/// not also evict (that is the eviction manager's drill, tests/eviction.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_root_dir_keeps_the_kubelet_and_its_pods_running() {
    let ports = Ports {
        main: 22245,
        read_only: 22246,
        healthz: 22247,
    };
    let Some(FullDiskRig {
        rig,
        dirs,
        _fs,
        cfg,
    }) = full_disk_rig("disk", "root", "24m", ports, "")
    else {
        return;
    };
    dirs.write_manifest("quiet.yaml", &busybox_pod("quiet", SLEEP));
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    let quiet_id = running_container_id(ports.read_only, "quiet").await;

    let filled = fill(&dirs.path("root"), 0);
    eprintln!("root dir full: {filled} bytes of filler");
    dirs.write_manifest("late.yaml", &busybox_pod("late", SLEEP));
    tokio::time::sleep(Duration::from_secs(15)).await;
    let listed = assert_still_serving(ports, &kubelet, "quiet", &quiet_id);
    let late = listed.get(&format!("late-{NODE}")).expect("late is known");
    assert_ne!(phase(late), "Running", "no room for its files yet");
    for state in ["cpu_manager_state", "memory_manager_state"] {
        let text = std::fs::read_to_string(dirs.path("root").join(state)).expect(state);
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap_or_else(|e| panic!("{state} is whole: {e}: {text:?}"));
    }
    let temporaries: Vec<String> = dir_names(&dirs.path("root"), ".tmp-").into_iter().collect();
    assert!(temporaries.is_empty(), "temporaries left: {temporaries:?}");

    std::fs::remove_file(dirs.path("root/filler")).expect("free the space");
    running_container_id(ports.read_only, "late").await;
    let late = &pods(ports.read_only)[&format!("late-{NODE}")];
    let hosts = std::fs::read_to_string(dirs.path("root/pods").join(uid(late)).join("etc-hosts"))
        .expect("etc-hosts");
    assert!(
        hosts.contains("late"),
        "the managed hosts file is whole: {hosts:?}"
    );
    kubelet.stop().await.expect("kubelet stops cleanly");
}

/// Every file under `dir` whose name ends with `suffix`, relative to `dir`.
fn files_ending(dir: &std::path::Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p.strip_prefix(dir).unwrap_or(&p).to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The pod logs directory full (its own small tmpfs at 100%) while a
/// container writes and its log rotates (containerLogMaxSize 1Mi): the
/// kubelet keeps running and healthy, the container is untouched, a
/// rotation that cannot compress leaves no temporary and no cut-short
/// `.gz` behind (every compressed log decompresses whole), and once space is
/// back rotation goes on and a pod created meanwhile runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_pod_logs_dir_keeps_the_kubelet_and_its_pods_running() {
    let ports = Ports {
        main: 22233,
        read_only: 22234,
        healthz: 22235,
    };
    let Some(FullDiskRig {
        rig,
        dirs,
        _fs,
        cfg,
    }) = full_disk_rig(
        "logs",
        "logs",
        "16m",
        ports,
        "containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\n",
    )
    else {
        return;
    };
    for d in ["logs/pods", "logs/containers"] {
        std::fs::create_dir_all(dirs.path(d)).expect("logs dirs");
    }
    // About 200 KB a second of log that compresses only to three quarters:
    // a rotation every check period, and compressing needs real space.
    dirs.write_manifest(
        "chatty.yaml",
        &busybox_pod(
            "chatty",
            "[sh, -c, 'while true; do head -c 15000 /dev/urandom | base64; sleep 0.1; done']",
        ),
    );
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    let id = running_container_id(ports.read_only, "chatty").await;
    let logs = dirs.path("logs/pods");
    let rotated = support::eventually(Duration::from_secs(60), || {
        let logs = logs.clone();
        async move {
            let gz = files_ending(&logs, ".gz");
            (!gz.is_empty()).then_some(gz)
        }
    })
    .await
    .expect("the log rotates and compresses before the disk fills");
    eprintln!("rotated before the fill: {rotated:?}");

    // Room for the live log to pass 1Mi, not for compressing the rotated
    // one beside it: the container's own writes fill the rest.
    let filled = fill(&dirs.path("logs"), 1_300_000);
    eprintln!("pod logs dir filled: {filled} bytes of filler, 1.3 MB left for the container");
    dirs.write_manifest("late.yaml", &busybox_pod("late", SLEEP));
    // The disk full with a rotation due: the live log over the limit and
    // the last rotated log waiting for compression, which has no room.
    let blocked = support::eventually(Duration::from_secs(60), || {
        let logs = logs.clone();
        async move {
            let files = files_ending(&logs, "");
            let live_over = files.iter().any(|f| {
                f.to_string_lossy()
                    .starts_with(&format!("default_chatty-{NODE}_"))
                    && f.ends_with("0.log")
                    && std::fs::metadata(logs.join(f)).is_ok_and(|m| m.len() >= 1 << 20)
            });
            let waiting = files.iter().any(|f| {
                let name = f.to_string_lossy();
                name.contains("0.log.") && !name.ends_with(".gz") && !name.ends_with(".tmp")
            });
            (live_over && waiting).then_some(files)
        }
    })
    .await
    .unwrap_or_else(|| {
        let sizes: Vec<(std::path::PathBuf, u64)> = files_ending(&logs, "")
            .into_iter()
            .map(|f| {
                let len = std::fs::metadata(logs.join(&f)).map_or(0, |m| m.len());
                (f, len)
            })
            .collect();
        panic!("no rotation due on the full disk; files: {sizes:?}")
    });
    eprintln!("rotation blocked by the full disk: {blocked:?}");
    // Two more check periods of rotation against the full disk.
    tokio::time::sleep(Duration::from_secs(22)).await;
    let listed = assert_still_serving(ports, &kubelet, "chatty", &id);
    eprintln!(
        "late pod while full: {:?}",
        listed.get(&format!("late-{NODE}")).map(phase)
    );
    eprintln!(
        "while full: {:?}",
        files_ending(&logs, "")
            .iter()
            .map(|f| f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned())
            .collect::<Vec<_>>()
    );
    let temporaries = files_ending(&logs, ".tmp");
    assert!(temporaries.is_empty(), "temporaries left: {temporaries:?}");
    for gz in files_ending(&logs, ".gz") {
        let f = std::fs::File::open(logs.join(&gz)).expect("gz");
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(f), &mut text)
            .unwrap_or_else(|e| panic!("{gz:?} is not whole: {e}"));
    }

    std::fs::remove_file(dirs.path("logs/filler")).expect("free the space");
    let before: BTreeSet<_> = files_ending(&logs, ".gz").into_iter().collect();
    let after = support::eventually(Duration::from_secs(60), || {
        let (logs, before) = (logs.clone(), before.clone());
        async move {
            let now: BTreeSet<_> = files_ending(&logs, ".gz").into_iter().collect();
            (now.difference(&before).count() > 0).then_some(now)
        }
    })
    .await
    .expect("rotation goes on once space is back");
    eprintln!("compressed logs after the space came back: {after:?}");
    running_container_id(ports.read_only, "late").await;
    assert!(files_ending(&logs, ".tmp").is_empty(), "no temporaries");
    kubelet.stop().await.expect("kubelet stops cleanly");
}

/// A thousand invalid manifests next to five valid ones in staticPodPath:
/// every invalid file is refused with a log line naming it, the valid pods
/// run, and the kubelet's memory stays bounded (printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_invalid_manifests_is_refused_file_by_file() {
    let Some(rig) = Containerd::start("fault_drills_flood") else {
        return;
    };
    let _sysctls = SysctlGuard::save();
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "flood");
    let bb = &images().busybox;
    let bad = |i: usize| -> String {
        match i % 5 {
            0 => format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: bad{i}\n"),
            1 => format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: bad{i}\n"),
            2 => format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Bad_{i}\nspec:\n  containers:\n  - name: c\n    image: {bb}\n"
            ),
            3 => format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad{i}\nspec:\n  containers:\n  - name: c\n    image: {bb}\n    resources: {{limits: {{cpu: lots}}}}\n"
            ),
            _ => format!("{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": [{i}]}}"),
        }
    };
    for i in 0..1000 {
        dirs.write_manifest(&format!("bad-{i:04}.yaml"), &bad(i));
    }
    for i in 0..5 {
        dirs.write_manifest(
            &format!("good-{i}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: good{i}\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {bb}\n    command: [sleep, '3600']\n"
            ),
        );
    }
    let ports = Ports {
        main: 22230,
        read_only: 22231,
        healthz: 22232,
    };
    let cfg = config(&dirs, &root, ports, "");
    let argv = args(&dirs, &rig, &cfg, NODE);
    let mut child = spawn_binary(&argv, &dirs.path("logs"));
    let stderr = collect_stderr(&mut child);
    let wait = Duration::from_secs(90);
    for i in 0..5 {
        wait_pod(
            ports.read_only,
            &format!("good{i}-{NODE}"),
            wait,
            "Running",
            |p| phase(p) == "Running",
        )
        .await;
    }
    // A few file-check periods over the same flood.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss = rss_kib(child.id());
    let listed = pods(ports.read_only);
    assert_eq!(listed.len(), 5, "only the valid pods: {:?}", listed.keys());
    assert_eq!(
        http_get(ports.healthz, "/healthz").map(|(c, _)| c),
        Some(200)
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), Some(0));
    let log = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    let named: BTreeSet<String> = log
        .lines()
        .filter(|l| l.contains("Could not process manifest file"))
        .filter_map(|l| {
            let at = l.find("bad-")?;
            Some(l[at..at + 8].to_string())
        })
        .collect();
    eprintln!(
        "flood: {} of 1000 invalid manifests named in the log, 5 valid pods Running, kubelet RSS {} MiB",
        named.len(),
        rss / 1024
    );
    assert_eq!(named.len(), 1000, "every invalid file is named");
    assert!(rss < 256 * 1024, "RSS {rss} KiB stays bounded");
}
