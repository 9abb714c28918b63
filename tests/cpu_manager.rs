//! The CPU manager's static policy end to end (issue 13): a standalone
//! kubelet over a private containerd on this 2-CPU machine with
//! `cpuManagerPolicy: static` and `reservedSystemCPUs: "0"`. Before any pod
//! the state file is Go's, byte for byte; a Guaranteed static pod asking
//! for one CPU gets CPU 1 to itself (the container's cgroup cpuset.cpus),
//! a BestEffort pod runs on the shared pool "0", the state file has the
//! pinned container under its pod UID; when the pinned pod goes, its
//! entry goes and the shared pool is "0-1" again, for the BestEffort
//! container too.

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::*;
use kubelet::cm::cpumanager::checkpoint::CpuManagerCheckpoint;
use kubelet::cri::RuntimeService;
use support::containerd::{Containerd, images};

const WAIT: Duration = Duration::from_secs(60);
/// The two tests share the ports 22300-22302.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const EMPTY_STATE: &str = r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}"#;

fn manifest(name: &str, container: &str, resources: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: {container}\n    image: {image}\n    command: [sleep, '3600']\n{resources}",
        image = images().busybox
    )
}

/// The directory of a cgroup named `name` somewhere under `dir`.
fn find_dir(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if entry.file_name() == name {
            return Some(path);
        }
        if let Some(found) = find_dir(&path, name) {
            return Some(found);
        }
    }
    None
}

/// cpuset.cpus of the container's cgroup under the node's cgroup root.
fn container_cpuset(root: &str, container_id: &str) -> Option<String> {
    let (_, mount) = support::cgroup_mounts()
        .into_iter()
        .find(|(c, _)| c.iter().any(|c| c == "cpuset"))?;
    let dir = find_dir(&mount.join(root.trim_start_matches('/')), container_id)?;
    Some(
        std::fs::read_to_string(dir.join("cpuset.cpus"))
            .ok()?
            .trim()
            .to_string(),
    )
}

/// `linux.resources.cpu.cpus` of the OCI spec containerd made from a CRI
/// config (its verbose status `info`).
fn spec_cpus(info: &std::collections::HashMap<String, String>) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(info.get("info")?).ok()?;
    v["runtimeSpec"]["linux"]["resources"]["cpu"]["cpus"]
        .as_str()
        .map(str::to_string)
}

fn container_id(p: &k8s_openapi::api::core::v1::Pod, name: &str) -> Option<String> {
    let id = container(p, name)?.container_id.clone()?;
    Some(id.split_once("://")?.1.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_policy_pins_guaranteed_containers_and_keeps_go_state() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if online.trim() != "0-1" {
        eprintln!("skipping: written for a 2-CPU machine (online: {online:?})");
        return;
    }
    let _serial = SERIAL.lock().await;
    let Some(rig) = Containerd::start("e2e_cpu_manager") else {
        return;
    };
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "cpumanager");
    let p = Ports {
        main: 22300,
        read_only: 22301,
        healthz: 22302,
    };
    let cfg = config(
        &dirs,
        &root,
        p,
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerReconcilePeriod: 2s\n",
    );
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, "cpu-node"), |s| deps(&dirs, s));
    let state_path = dirs.path("root").join("cpu_manager_state");
    let state = || std::fs::read_to_string(&state_path).unwrap_or_default();
    support::eventually(WAIT, || async { (state() == EMPTY_STATE).then_some(()) })
        .await
        .unwrap_or_else(|| panic!("Go's state before any pod; have {:?}", state()));

    dirs.write_manifest(
        "guaranteed.yaml",
        &manifest(
            "guaranteed",
            "pinned",
            "    resources: {limits: {cpu: '1', memory: 64Mi}, requests: {cpu: '1', memory: 64Mi}}\n",
        ),
    );
    let g = wait_pod(p.read_only, "guaranteed-cpu-node", WAIT, "Running", |pod| {
        is_running(pod, "pinned")
    })
    .await;
    dirs.write_manifest("besteffort.yaml", &manifest("besteffort", "be", ""));
    let be = wait_pod(p.read_only, "besteffort-cpu-node", WAIT, "Running", |pod| {
        is_running(pod, "be")
    })
    .await;
    let (gid, beid) = (
        container_id(&g, "pinned").expect("pinned id"),
        container_id(&be, "be").expect("be id"),
    );
    assert_eq!(container_cpuset(&root, &gid).as_deref(), Some("1"));
    // What reached the runtime: the pinned container's CreateContainer
    // config had cpuset "1"; its sandbox none.
    let rt = cri(&rig).await;
    let status = rt.container_status(&gid, true).await.expect("status");
    assert_eq!(spec_cpus(&status.info).as_deref(), Some("1"));
    let sandbox = cri_containers(&rt, &uid(&g)).await[0]
        .pod_sandbox_id
        .clone();
    let sandbox = rt
        .pod_sandbox_status(&sandbox, true)
        .await
        .expect("sandbox");
    assert!(sandbox.info.contains_key("info"), "verbose sandbox status");
    assert_eq!(spec_cpus(&sandbox.info), None, "sandboxes get no cpuset");
    support::eventually(WAIT, || async {
        (container_cpuset(&root, &beid).as_deref() == Some("0")).then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "best-effort on the shared pool: {:?}",
            container_cpuset(&root, &beid)
        )
    });

    let mut want = CpuManagerCheckpoint::new("static", "0");
    want.entries
        .get_or_insert_with(Default::default)
        .insert(uid(&g), [("pinned".to_string(), "1".to_string())].into());
    let want = String::from_utf8(want.marshal().unwrap()).unwrap();
    assert_eq!(state(), want);
    assert!(
        want.starts_with(&format!(
            r#"{{"policyName":"static","defaultCpuSet":"0","entries":{{"{}":{{"pinned":"1"}}}},"checksum":"#,
            uid(&g)
        )),
        "{want}"
    );

    // The pinned pod goes: its CPU returns to the pool, and the
    // best-effort container follows the pool.
    dirs.remove_manifest("guaranteed.yaml");
    support::eventually(WAIT, || async { (state() == EMPTY_STATE).then_some(()) })
        .await
        .unwrap_or_else(|| panic!("entry dropped; have {:?}", state()));
    support::eventually(WAIT, || async {
        (container_cpuset(&root, &beid).as_deref() == Some("0-1")).then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "best-effort back on 0-1: {:?}",
            container_cpuset(&root, &beid)
        )
    });
    dirs.remove_manifest("besteffort.yaml");
    kubelet.stop().await.expect("clean stop");

    // The state file is the static policy's and assigns nothing now: a
    // kubelet configured with another policy starts from a fresh state
    // (Go would refuse until someone deletes the file).
    let none = config(&dirs, &root, p, "cpuManagerPolicy: none\n");
    let kubelet = Kubelet::start(args(&dirs, &rig, &none, "cpu-node"), |s| deps(&dirs, s));
    support::eventually(WAIT, || async {
        state().contains(r#""policyName":"none""#).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("none policy's state; have {:?}", state()));
    kubelet.stop().await.expect("clean stop");

    // One that still assigns CPUs is refused, with Go's message.
    let mut pinned = CpuManagerCheckpoint::new("static", "0");
    pinned.entries.get_or_insert_with(Default::default).insert(
        "some-pod".into(),
        [("c".to_string(), "1".to_string())].into(),
    );
    std::fs::write(&state_path, pinned.marshal().unwrap()).unwrap();
    let kubelet = Kubelet::start(args(&dirs, &rig, &none, "cpu-node"), |s| deps(&dirs, s));
    let result = tokio::time::timeout(WAIT, kubelet.handle)
        .await
        .expect("run() returns")
        .expect("no panic");
    let err = result.expect_err("refused").to_string();
    assert!(
        err.contains(&format!(
            "could not restore state from checkpoint: configured policy \"none\" differs from state checkpoint policy \"static\", please drain this node and delete the CPU manager checkpoint file {state_path:?} before restarting Kubelet"
        )),
        "{err}"
    );
}

/// Start-up refuses what Go refuses: static without a reservation, an
/// unknown option, a reservedMemory that does not add up or names a NUMA
/// node the machine lacks (the field named).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_policy_refuses_bad_configurations_at_start_up() {
    if !support::cgroup_mounts()
        .iter()
        .any(|(c, _)| c.iter().any(|c| c == "cpuset"))
    {
        eprintln!("skipping: no cpuset cgroup");
        return;
    }
    let _serial = SERIAL.lock().await;
    let cases: [(&str, &str); 4] = [
        (
            "cpuManagerPolicy: static\n",
            // Go leaves zero reservations out of the reservation list, so
            // this is its message for a static policy with none.
            "failed to run Kubelet: [cpumanager] unable to determine reserved CPU resources for static policy",
        ),
        (
            "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions: {bogus: \"true\"}\n",
            "new static policy error: cpuManagerPolicyOptions (--cpu-manager-policy-options): unknown CPU Manager Policy option: \"bogus\"",
        ),
        (
            "memoryManagerPolicy: Static\nreservedMemory:\n- numaNode: 0\n  limits: {memory: 50Mi}\n",
            "reservedMemory: the total amount \"50Mi\" of type \"memory\" is not equal to the value \"100Mi\" determined by Node Allocatable feature",
        ),
        (
            "memoryManagerPolicy: Static\nreservedMemory:\n- numaNode: 7\n  limits: {memory: 100Mi}\n",
            "reservedMemory: the reserved memory configuration references a NUMA node 7 that does not exist on this machine",
        ),
    ];
    for (extra, want) in cases {
        let dirs = NodeDirs::new();
        let p = Ports {
            main: 22300,
            read_only: 22301,
            healthz: 22302,
        };
        let cfg = config(&dirs, "/", p, extra);
        let argv = vec![
            "kubelet".to_string(),
            format!("--config={}", cfg.display()),
            format!("--root-dir={}", dirs.path("root").display()),
            format!("--cert-dir={}", dirs.path("pki").display()),
            format!(
                "--container-runtime-endpoint=unix://{}",
                dirs.path("no-runtime.sock").display()
            ),
            "--hostname-override=cpu-bad".to_string(),
        ];
        let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
        let result = tokio::time::timeout(WAIT, kubelet.handle)
            .await
            .expect("run() returns")
            .expect("no panic");
        let err = result.expect_err(extra).to_string();
        assert!(err.contains(want), "{extra}: {err}");
    }
}

/// `linux.resources.cpu.mems` of the OCI spec containerd made.
fn spec_mems(info: &std::collections::HashMap<String, String>) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(info.get("info")?).ok()?;
    v["runtimeSpec"]["linux"]["resources"]["cpu"]["mems"]
        .as_str()
        .map(str::to_string)
}

/// The reference directory's files, as the Go kubelet wrote them.
const GO_CPU_STATE: &str =
    include_str!("fixtures/go-kubelet-examples/resource-managers/cpu_manager_state");
const GO_MEMORY_STATE: &str =
    include_str!("fixtures/go-kubelet-examples/resource-managers/memory_manager_state");
const GO_POD_UID: &str = "d5728e25ce604581f166177c6cfb23d0";

/// Go's memory_manager_state with node 0's memory as this machine has it
/// (the Go kubelet, too, refuses a state that does not match the machine).
fn go_memory_state_for_this_machine(node0_bytes: u64) -> String {
    use kubelet::cm::memorymanager::checkpoint::MemoryManagerCheckpoint;
    let mut cp = MemoryManagerCheckpoint::unmarshal(GO_MEMORY_STATE.trim().as_bytes()).unwrap();
    let node = cp.machine_state.as_mut().unwrap().get_mut("0").unwrap();
    let mem = node.memory_map.get_mut("memory").unwrap();
    mem.total = node0_bytes;
    mem.allocatable = node0_bytes - mem.system_reserved;
    mem.free = mem.allocatable - mem.reserved;
    String::from_utf8(cp.marshal().unwrap()).unwrap()
}

/// The reference configuration (static CPU policy, Static memory policy,
/// single-numa-node) over the Go kubelet's state files: they load, the
/// pinned container keeps CPU 1 and NUMA node 0, the shared pool is "0",
/// the files stay as Go wrote them, and a pod asking for CPU that is left
/// to no one is refused with Go's reason and message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_config_loads_go_state_and_aligns_cpu_and_memory() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let node0 = std::fs::read_to_string("/sys/devices/system/node/node0/meminfo").ok();
    let one_node = !std::path::Path::new("/sys/devices/system/node/node1").exists();
    let (Some(node0), true, "0-1") = (node0, one_node, online.trim()) else {
        eprintln!("skipping: written for a 2-CPU, one-NUMA-node machine");
        return;
    };
    let kib: u64 = node0
        .lines()
        .find(|l| l.contains("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .expect("node0 MemTotal");
    let _serial = SERIAL.lock().await;
    let Some(rig) = Containerd::start("e2e_resource_managers") else {
        return;
    };
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "resmgr");
    let p = Ports {
        main: 22300,
        read_only: 22301,
        healthz: 22302,
    };
    let memory_state = go_memory_state_for_this_machine(kib * 1024);
    let state_dir = dirs.path("root");
    std::fs::create_dir_all(&state_dir).unwrap();
    std::fs::write(state_dir.join("cpu_manager_state"), GO_CPU_STATE.trim()).unwrap();
    std::fs::write(state_dir.join("memory_manager_state"), &memory_state).unwrap();
    let cfg = config(
        &dirs,
        &root,
        p,
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\nmemoryManagerPolicy: Static\nreservedMemory:\n- numaNode: 0\n  limits: {memory: 100Mi}\ntopologyManagerPolicy: single-numa-node\n",
    );
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, "ref-node"), |s| deps(&dirs, s));
    let guaranteed = manifest(
        "guaranteed",
        "pinned",
        "    resources: {limits: {cpu: '1', memory: 64Mi}, requests: {cpu: '1', memory: 64Mi}}\n",
    )
    .replace(
        "  namespace: default\n",
        &format!("  namespace: default\n  uid: {GO_POD_UID}\n"),
    );
    dirs.write_manifest("guaranteed.yaml", &guaranteed);
    dirs.write_manifest(
        "burstable.yaml",
        &manifest(
            "burstable",
            "bu",
            "    resources: {requests: {memory: 16Mi}}\n",
        ),
    );
    dirs.write_manifest("besteffort.yaml", &manifest("besteffort", "be", ""));
    let mut ids = Vec::new();
    for (pod, c) in [
        ("guaranteed", "pinned"),
        ("burstable", "bu"),
        ("besteffort", "be"),
    ] {
        let got = wait_pod(
            p.read_only,
            &format!("{pod}-ref-node"),
            WAIT,
            "Running",
            |x| is_running(x, c),
        )
        .await;
        ids.push(container_id(&got, c).expect("container id"));
    }
    assert_eq!(
        uid(
            &wait_pod(p.read_only, "guaranteed-ref-node", WAIT, "Running", |_| {
                true
            })
            .await
        ),
        GO_POD_UID
    );
    // What reached the runtime, as the reference table shows it.
    let rt = cri(&rig).await;
    let mut got = Vec::new();
    for id in &ids {
        let status = rt.container_status(id, true).await.expect("status");
        got.push((spec_cpus(&status.info), spec_mems(&status.info)));
    }
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        got,
        vec![(s("1"), s("0")), (s("0"), None), (s("0"), None)],
        "pinned, burstable, best-effort"
    );
    support::eventually(WAIT, || async {
        (container_cpuset(&root, &ids[2]).as_deref() == Some("0")).then_some(())
    })
    .await
    .expect("best-effort on the shared pool");
    // The files are still the ones Go wrote (checksums included).
    let read = |name: &str| std::fs::read_to_string(state_dir.join(name)).unwrap_or_default();
    assert_eq!(read("cpu_manager_state"), GO_CPU_STATE.trim());
    assert_eq!(read("memory_manager_state"), memory_state);

    // The pod-resources API reports the pinned container's CPU and memory.
    let (cpus, memory, alloc_cpus) = pod_resources_of(&state_dir, "pinned")
        .await
        .expect("pod-resources answers");
    assert_eq!(cpus, vec![1]);
    assert_eq!(memory, vec![("memory".to_string(), 64 << 20, vec![0])]);
    // Go computes the allocatable CPUs once, at start, from the shared pool
    // less the reserved CPUs; the restored state already gave CPU 1 away.
    assert_eq!(alloc_cpus, Vec::<i64>::new());

    // No CPU is left to a second Guaranteed pod: Go's reason and message.
    dirs.write_manifest(
        "more.yaml",
        &manifest(
            "more",
            "c",
            "    resources: {limits: {cpu: 100m, memory: 16Mi}, requests: {cpu: 100m, memory: 16Mi}}\n",
        ),
    );
    let more = wait_pod(p.read_only, "more-ref-node", WAIT, "Failed", |x| {
        phase(x) == "Failed"
    })
    .await;
    let st = more.status.clone().unwrap_or_default();
    assert_eq!(st.reason.as_deref(), Some("UnexpectedAdmissionError"));
    assert_eq!(
        st.message.as_deref(),
        Some(
            "Pod Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 100), ]"
        )
    );
    for m in [
        "more.yaml",
        "guaranteed.yaml",
        "burstable.yaml",
        "besteffort.yaml",
    ] {
        dirs.remove_manifest(m);
    }
    kubelet.stop().await.expect("clean stop");
}

/// The exclusive CPUs and memory blocks pod-resources v1 List reports for a
/// container, and the allocatable CPUs.
async fn pod_resources_of(
    root: &Path,
    container: &str,
) -> Option<(Vec<i64>, Vec<(String, u64, Vec<i64>)>, Vec<i64>)> {
    use kubelet::kubelet::server::podresources::api::v1;
    let path = root.join("pod-resources/kubelet.sock");
    let ch = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move {
                tokio::net::UnixStream::connect(p)
                    .await
                    .map(hyper_util::rt::TokioIo::new)
            }
        }))
        .await
        .ok()?;
    let mut client = v1::pod_resources_lister_client::PodResourcesListerClient::new(ch);
    let list = client
        .list(v1::ListPodResourcesRequest {})
        .await
        .ok()?
        .into_inner();
    let c = list
        .pod_resources
        .iter()
        .flat_map(|p| &p.containers)
        .find(|c| c.name == container)?;
    let memory = c
        .memory
        .iter()
        .map(|m| {
            let nodes = m
                .topology
                .iter()
                .flat_map(|t| t.nodes.iter().map(|n| n.id))
                .collect();
            (m.memory_type.clone(), m.size, nodes)
        })
        .collect();
    let alloc = client
        .get_allocatable_resources(v1::AllocatableResourcesRequest {})
        .await
        .ok()?
        .into_inner();
    Some((c.cpu_ids.clone(), memory, alloc.cpu_ids))
}
