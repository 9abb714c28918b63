//! The CPU manager over fake topologies (built from fake sysfs trees the
//! way cadvisor reads them), fake pods and a fake cpuset updater.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};

use super::cpu_assignment::take_by_topology;
use super::manager::{CpuManager, CpuManagerConfig, CpuManagerSources};
use super::policy_options::OptionGates;
use super::reconcile::CpusetUpdater;
use super::state::ContainerMap;
use super::topology::CpuTopology;
use super::*;
use crate::cadvisor::MachineInfo;
use crate::cm::cpuset::CpuSet;
use crate::cm::resources::ResourceList;
use crate::cri::CriError;
use crate::util::lifecycle::TaskSet;
use crate::util::quantity::Quantity;

fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// A fake sysfs: `sockets` packages, `numa_per_socket` nodes each, `cores`
/// cores per node, `threads` per core. CPU ids as Linux numbers them on
/// such machines: first threads of every core, then the siblings.
pub(super) fn sysfs_machine(
    sockets: u32,
    numa_per_socket: u32,
    cores: u32,
    threads: u32,
) -> MachineInfo {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path();
    let total_cores = sockets * numa_per_socket * cores;
    let mut online = Vec::new();
    for s in 0..sockets {
        for n in 0..numa_per_socket {
            let node = s * numa_per_socket + n;
            write(
                sys,
                &format!("devices/system/node/node{node}/meminfo"),
                &format!("Node {node} MemTotal: 1000 kB\n"),
            );
            for c in 0..cores {
                let core = node * cores + c;
                for t in 0..threads {
                    let cpu = t * total_cores + core;
                    online.push(cpu);
                    let d = format!("devices/system/node/node{node}/cpu{cpu}/topology");
                    write(sys, &format!("{d}/core_id"), &format!("{c}\n"));
                    write(sys, &format!("{d}/physical_package_id"), &format!("{s}\n"));
                }
            }
        }
    }
    let online: CpuSet = online.into_iter().collect();
    write(sys, "devices/system/cpu/online", &format!("{online}\n"));
    let (nodes, logical) = crate::cadvisor::topology::nodes(sys).unwrap();
    MachineInfo {
        num_cores: logical,
        num_sockets: sockets,
        topology: nodes,
        ..Default::default()
    }
}

fn topo(sockets: u32, numa: u32, cores: u32, threads: u32) -> CpuTopology {
    CpuTopology::discover(&sysfs_machine(sockets, numa, cores, threads)).unwrap()
}

pub(super) fn set(text: &str) -> CpuSet {
    CpuSet::parse(text).unwrap()
}

#[test]
fn topology_from_sysfs() {
    // 2 sockets × 1 node × 2 cores × 2 threads: cpus 0-3 first threads,
    // 4-7 their siblings.
    let t = topo(2, 1, 2, 2);
    assert_eq!(
        (t.num_cpus, t.num_cores, t.num_sockets, t.num_numa_nodes),
        (8, 4, 2, 2)
    );
    assert_eq!(t.cpus_per_core(), 2);
    assert_eq!(t.cpus_per_socket(), 4);
    assert_eq!(t.details.cpus_in_sockets(&[0]), set("0-1,4-5"));
    assert_eq!(t.details.cpus_in_cores(&[1]), set("1,5"));
    let t = topo(1, 2, 2, 1);
    assert_eq!((t.num_sockets, t.num_numa_nodes), (1, 2));
    assert_eq!(t.details.cpus_in_numa_nodes(&[1]), set("2-3"));
    assert!(CpuTopology::discover(&MachineInfo::default()).is_err());
}

#[test]
fn take_by_topology_table() {
    let dual_ht = topo(2, 1, 2, 2); // sockets {0,1,4,5} {2,3,6,7}
    let single_ht = topo(1, 1, 4, 2); // cores {0,4} {1,5} {2,6} {3,7}
    let numa_in_socket = topo(1, 2, 2, 2); // nodes {0,1,4,5} {2,3,6,7}
    let two = topo(1, 1, 2, 1); // this machine: 0-1
    type Case<'a> = (
        &'a str,
        &'a CpuTopology,
        &'a str,
        usize,
        Result<&'a str, &'a str>,
    );
    let cases: &[Case] = &[
        ("nothing", &dual_ht, "0-7", 0, Ok("")),
        ("one thread, lowest core", &dual_ht, "0-7", 1, Ok("0")),
        ("a whole core", &dual_ht, "0-7", 2, Ok("0,4")),
        ("a whole socket", &dual_ht, "0-7", 4, Ok("0-1,4-5")),
        ("socket and a core", &dual_ht, "0-7", 6, Ok("0-2,4-6")),
        ("everything", &dual_ht, "0-7", 8, Ok("0-7")),
        ("fullest socket first", &dual_ht, "1-7", 2, Ok("1,5")),
        ("whole socket when free", &dual_ht, "1-7", 4, Ok("2-3,6-7")),
        (
            "half cores fill up before free cores",
            &single_ht,
            "1-7",
            1,
            Ok("4"),
        ),
        ("two cores", &single_ht, "0-7", 4, Ok("0-1,4-5")),
        (
            "numa node inside a socket",
            &numa_in_socket,
            "0-7",
            4,
            Ok("0-1,4-5"),
        ),
        ("reserve one of two", &two, "0-1", 1, Ok("0")),
        ("too many", &two, "0-1", 3, Err("not enough cpus")),
    ];
    for (what, t, available, n, want) in cases {
        match (take_by_topology(t, &set(available), *n), want) {
            (Ok(got), Ok(w)) => assert_eq!(got.to_string(), *w, "{what}"),
            (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{what}: {e}"),
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}

pub(super) fn container(name: &str, cpu: Option<&str>, memory: Option<&str>) -> serde_json::Value {
    let mut res = serde_json::Map::new();
    if let Some(c) = cpu {
        res.insert("cpu".into(), c.into());
    }
    if let Some(m) = memory {
        res.insert("memory".into(), m.into());
    }
    serde_json::json!({
        "name": name,
        "image": "busybox",
        "resources": {"requests": res.clone(), "limits": res},
    })
}

pub(super) fn pod(
    uid: &str,
    init: Vec<serde_json::Value>,
    containers: Vec<serde_json::Value>,
) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("pod-{uid}"), "namespace": "default", "uid": uid},
        "spec": {"initContainers": init, "containers": containers},
    }))
    .unwrap()
}

fn besteffort(uid: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "be", "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "be", "image": "busybox"}]},
    }))
    .unwrap()
}

pub(super) fn reservation(cpu: &str) -> ResourceList {
    [("cpu".to_string(), cpu.parse::<Quantity>().unwrap())].into()
}

pub(super) fn static_config(options: &[(&str, &str)]) -> CpuManagerConfig {
    CpuManagerConfig {
        policy: "static".into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        reconcile_period: Duration::from_secs(10),
        option_gates: OptionGates::default(),
        topology_policy: "none".into(),
    }
}

pub(super) fn c_of(p: &Pod, name: &str) -> Container {
    let spec = p.spec.as_ref().unwrap();
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
        .unwrap()
        .clone()
}

#[test]
fn construction_errors_table() {
    let two = sysfs_machine(1, 1, 2, 1);
    let none = CpuManagerConfig::default();
    let cases: Vec<(&str, CpuManagerConfig, &str, &str, &str)> = vec![
        (
            "zero reservation",
            static_config(&[]),
            "",
            "0",
            "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero",
        ),
        (
            "unknown policy",
            CpuManagerConfig {
                policy: "dynamic".into(),
                ..none.clone()
            },
            "",
            "1",
            "unknown policy: \"dynamic\"",
        ),
        (
            "none with options",
            CpuManagerConfig {
                options: [("full-pcpus-only".to_string(), "true".to_string())].into(),
                ..none.clone()
            },
            "",
            "1",
            "None policy: received unsupported options=map[full-pcpus-only:true]",
        ),
        (
            "unknown option",
            static_config(&[("bogus", "true")]),
            "",
            "1",
            "cpuManagerPolicyOptions (--cpu-manager-policy-options): unknown CPU Manager Policy option: \"bogus\"",
        ),
        (
            "reserved list of the wrong size",
            static_config(&[]),
            "0-1",
            "1",
            "unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)",
        ),
        (
            "reserved cpu not online",
            static_config(&[]),
            "5",
            "1",
            "reserved-cpus: 5 is not a subset of online-cpus: 0-1",
        ),
    ];
    for (what, config, reserved, cpu, want) in cases {
        let reserved = if reserved.is_empty() {
            CpuSet::new()
        } else {
            set(reserved)
        };
        let err = CpuManager::new(
            &config,
            &two,
            &reserved,
            &reservation(cpu),
            "/nonexistent".into(),
            Default::default(),
        )
        .expect_err(what);
        assert!(err.to_string().contains(want), "{what}: {err}");
    }
    let mut no_cpu = ResourceList::new();
    no_cpu.insert("memory".into(), "1Gi".parse().unwrap());
    let err = CpuManager::new(
        &static_config(&[]),
        &two,
        &CpuSet::new(),
        &no_cpu,
        "/x".into(),
        Default::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("unable to determine reserved CPU resources")
    );
}

fn started(
    config: &CpuManagerConfig,
    machine: &MachineInfo,
    reserved: &str,
    cpu: &str,
    dir: &Path,
    sources: Option<CpuManagerSources>,
) -> Result<CpuManager, CpuManagerError> {
    let reserved = if reserved.is_empty() {
        CpuSet::new()
    } else {
        set(reserved)
    };
    let m = CpuManager::new(
        config,
        machine,
        &reserved,
        &reservation(cpu),
        dir.into(),
        Default::default(),
    )?;
    m.start_blocking(sources, ContainerMap::new())?;
    Ok(m)
}

fn state_file(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(CPU_MANAGER_STATE_FILE_NAME)).unwrap()
}

#[test]
fn static_policy_writes_go_state() {
    let dir = tempfile::tempdir().unwrap();
    let two = sysfs_machine(1, 1, 2, 1);
    let m = started(&static_config(&[]), &two, "0", "1", dir.path(), None).unwrap();
    assert_eq!(
        state_file(dir.path()),
        r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}"#
    );
    let g = pod(
        "d5728e25ce604581f166177c6cfb23d0",
        vec![],
        vec![container("pinned", Some("1"), Some("64Mi"))],
    );
    m.allocate(&g, &c_of(&g, "pinned")).unwrap();
    assert_eq!(
        state_file(dir.path()),
        r#"{"policyName":"static","defaultCpuSet":"0","entries":{"d5728e25ce604581f166177c6cfb23d0":{"pinned":"1"}},"checksum":2714905772}"#
    );
    assert_eq!(
        m.cpu_affinity("d5728e25ce604581f166177c6cfb23d0", "pinned")
            .to_string(),
        "1"
    );
    let be = besteffort("be-uid");
    m.allocate(&be, &c_of(&be, "be")).unwrap();
    assert_eq!(m.cpu_affinity("be-uid", "be").to_string(), "0");
    // No CPU left for another exclusive container.
    let g2 = pod("g2", vec![], vec![container("c", Some("1"), Some("1Mi"))]);
    let err = m.allocate(&g2, &c_of(&g2, "c")).unwrap_err();
    assert_eq!(err.admission_reason(), "UnexpectedAdmissionError");
    assert_eq!(
        err.admission_message(),
        "Allocate failed due to not enough cpus available to satisfy request, which is unexpected"
    );

    // A restart restores the state; another policy refuses it.
    drop(m);
    let again = started(&static_config(&[]), &two, "0", "1", dir.path(), None).unwrap();
    assert_eq!(
        again
            .cpu_affinity("d5728e25ce604581f166177c6cfb23d0", "pinned")
            .to_string(),
        "1"
    );
    let err = started(
        &CpuManagerConfig::default(),
        &two,
        "",
        "1",
        dir.path(),
        None,
    )
    .unwrap_err();
    let path = dir.path().join(CPU_MANAGER_STATE_FILE_NAME);
    assert_eq!(
        err.to_string(),
        format!(
            "could not restore state from checkpoint: configured policy \"none\" differs from state checkpoint policy \"static\", please drain this node and delete the CPU manager checkpoint file {path:?} before restarting Kubelet"
        )
    );
    std::fs::write(
        &path,
        r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":7}"#,
    )
    .unwrap();
    let err = started(&static_config(&[]), &two, "0", "1", dir.path(), None).unwrap_err();
    assert!(err.to_string().contains("checkpoint is corrupted"), "{err}");
    // State that leaves out a CPU of the machine is refused by the policy.
    let mut cp = super::checkpoint::CpuManagerCheckpoint::new("static", "0");
    std::fs::write(&path, cp.marshal().unwrap()).unwrap();
    let err = started(&static_config(&[]), &two, "0", "1", dir.path(), None).unwrap_err();
    assert!(
        err.to_string().contains(
            "current set of available CPUs \"0-1\" doesn't match with CPUs in state \"0\""
        ),
        "{err}"
    );
    // Another policy's file that assigns nothing is replaced, not refused.
    std::fs::write(&path, cp.marshal().unwrap()).unwrap();
    started(
        &CpuManagerConfig::default(),
        &two,
        "",
        "1",
        dir.path(),
        None,
    )
    .unwrap();
    assert!(state_file(dir.path()).starts_with(r#"{"policyName":"none","defaultCpuSet":"","#));
}

#[test]
fn none_policy_writes_its_state_and_pins_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let two = sysfs_machine(1, 1, 2, 1);
    let m = started(
        &CpuManagerConfig::default(),
        &two,
        "",
        "0",
        dir.path(),
        None,
    )
    .unwrap();
    let text = state_file(dir.path());
    let cp = super::checkpoint::CpuManagerCheckpoint::unmarshal(text.as_bytes()).unwrap();
    assert_eq!(
        (cp.policy_name.as_str(), cp.default_cpu_set.as_str()),
        ("none", "")
    );
    let g = pod("g", vec![], vec![container("c", Some("1"), Some("1Mi"))]);
    m.allocate(&g, &c_of(&g, "c")).unwrap();
    assert!(m.cpu_affinity("g", "c").is_empty());
}

#[test]
fn allocation_table() {
    let ht = sysfs_machine(1, 1, 4, 2); // cores {0,4} {1,5} {2,6} {3,7}
    type Step = (
        &'static str,
        &'static str,
        Result<&'static str, &'static str>,
    );
    type Case = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Pod,
        Vec<Step>,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "fractional and burstable get the pool",
            vec![],
            pod(
                "p",
                vec![],
                vec![
                    container("frac", Some("1500m"), Some("1Mi")),
                    container("two", Some("2"), Some("1Mi")),
                ],
            ),
            vec![("frac", "", Ok("")), ("two", "", Ok("1,5"))],
            "0,2-4,6-7",
        ),
        (
            "init container CPUs go to the app container",
            vec![],
            pod(
                "p",
                vec![container("init", Some("2"), Some("1Mi"))],
                vec![container("app", Some("2"), Some("1Mi"))],
            ),
            vec![("init", "", Ok("1,5")), ("app", "", Ok("1,5"))],
            "0,2-4,6-7",
        ),
        (
            "full-pcpus-only refuses half cores",
            vec![("full-pcpus-only", "true")],
            pod("p", vec![], vec![container("one", Some("1"), Some("1Mi"))]),
            vec![(
                "one",
                "",
                Err(
                    "SMTAlignmentError|SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2",
                ),
            )],
            "0-7",
        ),
        (
            "full-pcpus-only takes whole cores",
            vec![("full-pcpus-only", "true")],
            pod("p", vec![], vec![container("two", Some("2"), Some("1Mi"))]),
            vec![("two", "", Ok("1,5"))],
            "0,2-4,6-7",
        ),
    ];
    for (what, options, p, steps, pool) in cases {
        let dir = tempfile::tempdir().unwrap();
        // One reserved CPU takes the lowest thread: 0.
        let m = started(&static_config(&options), &ht, "", "1", dir.path(), None).unwrap();
        for (name, _, want) in steps {
            let got = m.allocate(&p, &c_of(&p, name));
            match (got, want) {
                (Ok(()), Ok(w)) => {
                    assert_eq!(m.exclusive_cpus("p", name).to_string(), w, "{what}: {name}")
                }
                (Err(e), Err(w)) => {
                    let (reason, message) = w.split_once('|').unwrap();
                    assert_eq!(e.admission_reason(), reason, "{what}");
                    assert_eq!(e.admission_message(), message, "{what}");
                }
                (got, want) => panic!("{what}: {name}: got {got:?}, want {want:?}"),
            }
        }
        assert_eq!(m.default_cpu_set().to_string(), pool, "{what}");
    }
}

#[derive(Default)]
struct Updates(Mutex<Vec<(String, String)>>);

#[async_trait::async_trait]
impl CpusetUpdater for Updates {
    async fn update_cpuset(&self, id: &str, cpus: &CpuSet) -> Result<(), CriError> {
        self.0.lock().unwrap().push((id.into(), cpus.to_string()));
        Ok(())
    }
}

fn running_status(containers: &[(&str, &str)]) -> PodStatus {
    let statuses: Vec<serde_json::Value> = containers
        .iter()
        .map(|(name, id)| {
            serde_json::json!({
                "name": name, "containerID": format!("containerd://{id}"),
                "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {}},
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({"containerStatuses": statuses})).unwrap()
}

#[tokio::test(start_paused = true)]
async fn reconcile_pushes_cpusets_and_drops_stale_state() {
    let dir = tempfile::tempdir().unwrap();
    let two = sysfs_machine(1, 1, 2, 1);
    let g = Arc::new(pod(
        "g",
        vec![],
        vec![container("pinned", Some("1"), Some("1Mi"))],
    ));
    let be = Arc::new(besteffort("b"));
    let active: Arc<Mutex<Vec<Arc<Pod>>>> = Arc::new(Mutex::new(vec![g.clone(), be.clone()]));
    let updates = Arc::new(Updates::default());
    let statuses: BTreeMap<String, PodStatus> = [
        ("g".to_string(), running_status(&[("pinned", "cg")])),
        ("b".to_string(), running_status(&[("be", "cb")])),
    ]
    .into();
    let a = active.clone();
    let sources = CpuManagerSources {
        active_pods: Arc::new(move || a.lock().unwrap().clone()),
        sources_ready: Arc::new(|| true),
        pod_status: Arc::new(move |uid: &str| statuses.get(uid).cloned()),
        runtime: updates.clone(),
    };
    let m = Arc::new(
        started(
            &static_config(&[]),
            &two,
            "0",
            "1",
            dir.path(),
            Some(sources),
        )
        .unwrap(),
    );
    m.allocate(&g, &c_of(&g, "pinned")).unwrap();
    m.allocate(&be, &c_of(&be, "be")).unwrap();
    // The pinned container was created on its CPU; the best-effort one
    // before the pool shrank would have been on 0-1: it is updated.
    m.add_container(&g, &c_of(&g, "pinned"), "cg");
    let tasks = TaskSet::new();
    m.spawn_reconcile(&tasks, Arc::new(crate::util::clock::RealClock));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        *updates.0.lock().unwrap(),
        vec![("cb".to_string(), "0".to_string())]
    );

    // The pinned pod goes: within a period its CPU returns to the pool.
    active
        .lock()
        .unwrap()
        .retain(|p| p.metadata.uid.as_deref() != Some("g"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        state_file(dir.path()),
        r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}"#
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        updates.0.lock().unwrap().last().unwrap(),
        &("cb".to_string(), "0-1".to_string())
    );
    let (ok, _) = m.reconcile_state().await;
    assert_eq!(ok.len(), 1);
    tasks.token().cancel();
}

#[test]
fn v1_state_files_migrate_through_the_runtime_containers() {
    let dir = tempfile::tempdir().unwrap();
    let mut v1 = super::checkpoint::CpuManagerCheckpointV1 {
        policy_name: "static".into(),
        default_cpu_set: "0".into(),
        entries: Some([("cid-1".to_string(), "1".to_string())].into()),
        checksum: 0,
    };
    v1.checksum = v1.compute_checksum();
    let body = format!(
        r#"{{"policyName":"static","defaultCpuSet":"0","entries":{{"cid-1":"1"}},"checksum":{}}}"#,
        v1.checksum
    );
    let path = dir.path().join(CPU_MANAGER_STATE_FILE_NAME);
    std::fs::write(&path, &body).unwrap();
    let initial: ContainerMap = [(
        "cid-1".to_string(),
        (
            "d5728e25ce604581f166177c6cfb23d0".to_string(),
            "pinned".to_string(),
        ),
    )]
    .into();
    let s = super::state::State::checkpointed(dir.path(), "static", &initial).unwrap();
    assert_eq!(
        s.get_cpu_set("d5728e25ce604581f166177c6cfb23d0", "pinned"),
        Some(set("1"))
    );
    // Rewritten as v2 on the next change, with Go's checksum.
    let mut s = s;
    s.set_default_cpu_set(set("0"));
    assert_eq!(
        state_file(dir.path()),
        r#"{"policyName":"static","defaultCpuSet":"0","entries":{"d5728e25ce604581f166177c6cfb23d0":{"pinned":"1"}},"checksum":2714905772}"#
    );
    // A container the runtime does not know cannot be migrated.
    std::fs::write(&path, &body).unwrap();
    let err =
        super::state::State::checkpointed(dir.path(), "static", &ContainerMap::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("containerID 'cid-1' not found in initial containers list"),
        "{err}"
    );
}

#[test]
fn distributed_take_table() {
    use super::cpu_distribute::take_by_topology_numa_distributed;
    let two_numa = topo(1, 2, 4, 1); // nodes {0-3} {4-7}
    let two_numa_ht = topo(1, 2, 2, 2); // node0 cores {0,4} {1,5}; node1 {2,6} {3,7}
    type Case<'a> = (&'a str, &'a CpuTopology, &'a str, usize, usize, &'a str);
    let cases: &[Case] = &[
        ("fits one node: packed there", &two_numa, "0-7", 4, 1, "0-3"),
        ("spans two nodes: evenly", &two_numa, "0-7", 6, 1, "0-2,4-6"),
        (
            "uneven free CPUs: an even share from each",
            &two_numa,
            "1-7",
            6,
            1,
            "1-6",
        ),
        (
            "whole cores, remainder on one node",
            &two_numa_ht,
            "0-7",
            6,
            2,
            "0-2,4-6",
        ),
        (
            "not whole groups: packed",
            &two_numa_ht,
            "0-7",
            3,
            2,
            "0-1,4",
        ),
    ];
    for (what, t, available, n, group, want) in cases {
        let got = take_by_topology_numa_distributed(t, &set(available), *n, *group).unwrap();
        assert_eq!(got.to_string(), *want, "{what}");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = CpuManagerConfig {
        option_gates: OptionGates {
            alpha: true,
            beta: true,
        },
        ..static_config(&[("distribute-cpus-across-numa", "true")])
    };
    let m = started(
        &config,
        &sysfs_machine(1, 2, 4, 1),
        "",
        "1",
        dir.path(),
        None,
    )
    .unwrap();
    let p = pod("p", vec![], vec![container("c", Some("6"), Some("1Mi"))]);
    m.allocate(&p, &c_of(&p, "c")).unwrap();
    assert_eq!(m.exclusive_cpus("p", "c").to_string(), "1-6");
}
