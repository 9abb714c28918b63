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

    // The state file is the static policy's: a kubelet configured with
    // another policy refuses to start, as Go's does.
    let cfg = config(&dirs, &root, p, "cpuManagerPolicy: none\n");
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, "cpu-node"), |s| deps(&dirs, s));
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
/// unknown option (the field named).
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
    let cases: [(&str, &str); 2] = [
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
