use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::checkpoint::MemoryManagerCheckpoint;
use super::error::MemoryManagerError;
use super::manager::{MemoryManager, MemoryManagerConfig};
use super::state::{Block, MemoryTable, NumaNodeState, State};
use crate::apis::config::types::MemoryReservation;
use crate::cadvisor::{HugePagesInfo, MachineInfo, NumaNode};
use crate::cm::resources::ResourceList;
use crate::cm::topologymanager::{AffinityStore, BitMask, HintProvider, TopologyHint};

/// The file the Go kubelet wrote with the reference pods running.
const GO_STATE: &str = include_str!(
    "../../../tests/fixtures/go-kubelet-examples/resource-managers/memory_manager_state"
);

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn table(total: u64, reserved_sys: u64, reserved: u64) -> MemoryTable {
    MemoryTable {
        total,
        system_reserved: reserved_sys,
        allocatable: total - reserved_sys,
        reserved,
        free: total - reserved_sys - reserved,
    }
}

#[test]
fn go_checkpoint_loads_and_is_rewritten_byte_for_byte() {
    let cp = MemoryManagerCheckpoint::unmarshal(GO_STATE.as_bytes()).unwrap();
    assert_eq!(cp.checksum, 1903701171);
    let machine = cp.numa_node_map().unwrap();
    let node = &machine[&0];
    assert_eq!(node.number_of_assignments, 1);
    assert_eq!(node.memory_map["memory"].reserved, 64 * MIB);
    let entries = cp.entries.clone().unwrap();
    let mut again = MemoryManagerCheckpoint::new("Static", &machine, &entries);
    let bytes = again.marshal().unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), GO_STATE);
    // A flipped byte is caught by the checksum.
    let bad = GO_STATE.replace("\"free\":13344403456", "\"free\":13344403457");
    assert!(matches!(
        MemoryManagerCheckpoint::unmarshal(bad.as_bytes()),
        Err(MemoryManagerError::CorruptCheckpoint)
    ));
}

/// A NUMA node: id, bytes, (huge page KiB, pages).
type NodeSpec<'a> = (u32, u64, &'a [(u64, u64)]);

fn machine(nodes: &[NodeSpec]) -> MachineInfo {
    MachineInfo {
        num_cores: 2,
        topology: nodes
            .iter()
            .map(|(id, mem, hps)| NumaNode {
                id: *id,
                memory: *mem,
                hugepages: hps
                    .iter()
                    .map(|(kib, n)| HugePagesInfo {
                        page_size_kib: *kib,
                        num_pages: *n,
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn reservation(list: &[(&str, &str)]) -> ResourceList {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

fn reserved(list: &[(i32, &str, &str)]) -> Vec<MemoryReservation> {
    let mut by_node: BTreeMap<i32, MemoryReservation> = BTreeMap::new();
    for (node, name, q) in list {
        by_node
            .entry(*node)
            .or_insert_with(|| MemoryReservation {
                numa_node: *node,
                limits: BTreeMap::new(),
            })
            .limits
            .insert(name.to_string(), q.parse().unwrap());
    }
    by_node.into_values().collect()
}

fn static_config(r: Vec<MemoryReservation>) -> MemoryManagerConfig {
    MemoryManagerConfig {
        policy: "Static".into(),
        reserved_memory: r,
    }
}

#[test]
fn start_up_refuses_bad_configurations_naming_the_field() {
    let two = machine(&[(0, 8 * GIB, &[]), (1, 8 * GIB, &[])]);
    let cases: Vec<(&str, MemoryManagerConfig, ResourceList, &str)> = vec![
        (
            "unknown policy",
            MemoryManagerConfig {
                policy: "static".into(),
                reserved_memory: Vec::new(),
            },
            ResourceList::new(),
            "unknown policy: \"static\"",
        ),
        (
            "no node 3",
            static_config(reserved(&[(3, "memory", "100Mi")])),
            reservation(&[("memory", "100Mi")]),
            "reservedMemory: the reserved memory configuration references a NUMA node 3 that does not exist on this machine",
        ),
        (
            "does not add up",
            static_config(reserved(&[(0, "memory", "100Mi")])),
            reservation(&[("memory", "200Mi")]),
            "reservedMemory: the total amount \"100Mi\" of type \"memory\" is not equal to the value \"200Mi\" determined by Node Allocatable feature",
        ),
        (
            "reservation without reservedMemory",
            static_config(Vec::new()),
            reservation(&[("memory", "100Mi")]),
            "the total amount \"0\" of type \"memory\" is not equal to the value \"100Mi\"",
        ),
        (
            "nothing reserved",
            static_config(Vec::new()),
            ResourceList::new(),
            "[memorymanager] you should specify the system reserved memory",
        ),
    ];
    for (what, config, res, want) in cases {
        let err = MemoryManager::new(
            &config,
            &two,
            &res,
            "/nonexistent".into(),
            Default::default(),
        )
        .expect_err(what);
        assert!(err.to_string().contains(want), "{what}: {err}");
    }
    // Split over two nodes, it adds up.
    MemoryManager::new(
        &static_config(reserved(&[(0, "memory", "60Mi"), (1, "memory", "40Mi")])),
        &two,
        &reservation(&[("memory", "100Mi"), ("cpu", "1")]),
        "/nonexistent".into(),
        Default::default(),
    )
    .unwrap();
}

fn guaranteed(uid: &str, containers: &[(&str, &str)], inits: &[(&str, &str)]) -> Pod {
    let c = |(name, mem): &(&str, &str)| {
        serde_json::json!({"name": name, "image": "x", "resources": {
            "limits": {"cpu": "1", "memory": mem}, "requests": {"cpu": "1", "memory": mem}}})
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {
            "containers": containers.iter().map(c).collect::<Vec<_>>(),
            "initContainers": inits.iter().map(c).collect::<Vec<_>>(),
        }
    }))
    .unwrap()
}

fn container(pod: &Pod, name: &str) -> Container {
    let spec = pod.spec.as_ref().unwrap();
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap()
        .clone()
}

fn started(m: &MachineInfo, dir: &std::path::Path, store: Arc<AffinityStore>) -> MemoryManager {
    let r = reserved(&[(0, "memory", "1Gi"), (1, "memory", "1Gi")]);
    let mm = MemoryManager::new(
        &static_config(r),
        m,
        &reservation(&[("memory", "2Gi")]),
        dir.into(),
        store,
    )
    .unwrap();
    mm.start_blocking(None, Default::default()).unwrap();
    mm
}

fn hints(mm: &MemoryManager, pod: &Pod, name: &str) -> Vec<(Vec<u32>, bool)> {
    let h = mm.topology_hints(pod, &container(pod, name));
    h.get("memory")
        .cloned()
        .flatten()
        .unwrap_or_default()
        .iter()
        .map(|h| (h.numa_node_affinity.unwrap().bits(), h.preferred))
        .collect()
}

#[test]
fn static_policy_places_accounts_and_releases_per_numa_node() {
    let dir = tempfile::tempdir().unwrap();
    let two = machine(&[(0, 9 * GIB, &[(2048, 0)]), (1, 9 * GIB, &[(2048, 0)])]);
    let store = Arc::new(AffinityStore::default());
    let mm = started(&two, dir.path(), store.clone());
    let text = std::fs::read_to_string(dir.path().join("memory_manager_state")).unwrap();
    assert!(text.starts_with(r#"{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"hugepages-2Mi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":{"total":9663676416,"systemReserved":1073741824,"allocatable":8589934592,"reserved":0,"free":8589934592}},"cells":[0]}"#), "{text}");

    // 6Gi fits one node: both single nodes preferred, the pair not.
    let a = guaranteed("a", &[("c", "6Gi")], &[]);
    assert_eq!(
        hints(&mm, &a, "c"),
        vec![(vec![0], true), (vec![1], true), (vec![0, 1], false)]
    );
    mm.allocate(&a, &container(&a, "c")).unwrap();
    assert_eq!(mm.memory_numa_nodes("a", "c"), vec![0]);
    // Already placed: hints are regenerated from the blocks.
    assert_eq!(hints(&mm, &a, "c"), vec![(vec![0], true)]);

    // 4Gi no longer fits node 0, and node 0 cannot join a group.
    let b = guaranteed("b", &[("c", "4Gi")], &[]);
    assert_eq!(hints(&mm, &b, "c"), vec![(vec![1], true)]);

    // 12Gi needs both nodes, but node 0 is in use on its own.
    let big = guaranteed("big", &[("c", "12Gi")], &[]);
    assert_eq!(hints(&mm, &big, "c"), Vec::<(Vec<u32>, bool)>::new());
    let err = mm.allocate(&big, &container(&big, "c")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    );

    // The topology manager's choice wins when it fits.
    store.set_for_test("b", "c", TopologyHint::new(BitMask::of(&[1]), true));
    mm.allocate(&b, &container(&b, "c")).unwrap();
    assert_eq!(mm.memory("b", "c")[0].numa_affinity, vec![1]);

    // Releasing a container gives its memory back.
    mm.add_container(&a, &container(&a, "c"), "cid-a");
    mm.remove_container("cid-a");
    assert!(mm.memory_numa_nodes("a", "c").is_empty());
    let state = State::checkpointed(dir.path(), "Static").unwrap();
    let m = state.machine_state();
    assert_eq!(m[&0].memory_map["memory"].reserved, 0);
    assert_eq!(m[&0].number_of_assignments, 0);
    assert_eq!(m[&1].memory_map["memory"].reserved, 4 * GIB);
    assert_eq!(m[&1].cells, vec![1]);
}

#[test]
fn spanning_requests_group_nodes_and_init_memory_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let two = machine(&[(0, 5 * GIB, &[]), (1, 5 * GIB, &[])]);
    let mm = started(&two, dir.path(), Default::default());
    // 6Gi only fits both nodes: the pair is the smallest that fits.
    let p = guaranteed("p", &[("c", "6Gi")], &[]);
    assert_eq!(hints(&mm, &p, "c"), vec![(vec![0, 1], true)]);
    mm.allocate(&p, &container(&p, "c")).unwrap();
    let s = State::checkpointed(dir.path(), "Static")
        .unwrap()
        .machine_state();
    assert_eq!(s[&0].cells, vec![0, 1]);
    assert_eq!(s[&0].memory_map["memory"], table(5 * GIB, GIB, 4 * GIB));
    assert_eq!(s[&1].memory_map["memory"], table(5 * GIB, GIB, 2 * GIB));
    // A node of a group no longer serves alone; the group is not the
    // narrowest that could fit, so it is not preferred.
    let q = guaranteed("q", &[("c", "1Gi")], &[]);
    assert_eq!(hints(&mm, &q, "c"), vec![(vec![0, 1], false)]);

    // An init container's memory goes to the app container after it.
    let dir = tempfile::tempdir().unwrap();
    let mm = started(&two, dir.path(), Default::default());
    let r = guaranteed("r", &[("app", "1Gi")], &[("init", "2Gi")]);
    mm.allocate(&r, &container(&r, "init")).unwrap();
    mm.allocate(&r, &container(&r, "app")).unwrap();
    let s = State::checkpointed(dir.path(), "Static").unwrap();
    assert_eq!(s.machine_state()[&0].memory_map["memory"].reserved, 2 * GIB);
    assert_eq!(
        s.memory_blocks("r", "init").unwrap(),
        vec![Block {
            numa_affinity: vec![0],
            kind: "memory".into(),
            size: GIB
        }]
    );
    assert_eq!(s.memory_blocks("r", "app").unwrap()[0].size, GIB);
}

#[test]
fn restored_state_is_checked_against_the_machine() {
    let one = machine(&[(0, 13516369920, &[(1048576, 0), (2048, 0)])]);
    let config = static_config(reserved(&[(0, "memory", "100Mi")]));
    let res = reservation(&[("memory", "100Mi")]);
    let new = |dir: &std::path::Path| {
        MemoryManager::new(&config, &one, &res, dir.into(), Default::default()).unwrap()
    };
    // The Go kubelet's file on the machine it was written on: loads.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory_manager_state");
    std::fs::write(&path, GO_STATE).unwrap();
    let mm = new(dir.path());
    mm.start_blocking(None, Default::default()).unwrap();
    assert_eq!(
        mm.memory_numa_nodes("d5728e25ce604581f166177c6cfb23d0", "pinned"),
        vec![0]
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), GO_STATE);

    let cases: Vec<(&str, String, Option<&str>)> = vec![
        (
            "another machine",
            GO_STATE.replace("13516369920", "13516369921"),
            Some("checkpoint is corrupted"),
        ),
        (
            "garbage",
            "{not json".into(),
            Some("please drain this node and delete the memory manager checkpoint file"),
        ),
        (
            "other policy with assignments",
            {
                let mut cp = MemoryManagerCheckpoint::unmarshal(GO_STATE.as_bytes()).unwrap();
                cp.policy_name = "None".into();
                String::from_utf8(cp.marshal().unwrap()).unwrap()
            },
            Some("configured policy \"Static\" differs from state checkpoint policy \"None\""),
        ),
        (
            "other policy, nothing assigned: starts fresh",
            r#"{"policyName":"None","machineState":{},"checksum":0}"#.into(),
            None,
        ),
        (
            "accounting that does not add up",
            {
                let mut cp = MemoryManagerCheckpoint::unmarshal(GO_STATE.as_bytes()).unwrap();
                let node = cp.machine_state.as_mut().unwrap().get_mut("0").unwrap();
                node.memory_map.get_mut("memory").unwrap().free -= 1;
                String::from_utf8(cp.marshal().unwrap()).unwrap()
            },
            Some("the expected machine state is different from the real one"),
        ),
    ];
    for (what, file, want) in cases {
        std::fs::write(&path, &file).unwrap();
        let got = new(dir.path()).start_blocking(None, Default::default());
        match want {
            None => got.expect(what),
            Some(w) => {
                let err = got.expect_err(what).to_string();
                assert!(err.contains(w), "{what}: {err}");
            }
        }
    }
    let _ = NumaNodeState::default();
}

#[test]
fn none_policy_writes_go_empty_state_and_allocates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let one = machine(&[(0, 4 * GIB, &[])]);
    let mm = MemoryManager::new(
        &MemoryManagerConfig {
            policy: "None".into(),
            reserved_memory: Vec::new(),
        },
        &one,
        &ResourceList::new(),
        dir.path().into(),
        Default::default(),
    )
    .unwrap();
    mm.start_blocking(None, Default::default()).unwrap();
    let text = std::fs::read_to_string(dir.path().join("memory_manager_state")).unwrap();
    let cp = MemoryManagerCheckpoint::unmarshal(text.as_bytes()).unwrap();
    assert!(
        text.starts_with(r#"{"policyName":"None","machineState":{},"checksum":"#),
        "{text}"
    );
    assert_ne!(cp.checksum, 0);
    let p = guaranteed("p", &[("c", "1Gi")], &[]);
    mm.allocate(&p, &container(&p, "c")).unwrap();
    assert!(mm.memory_numa_nodes("p", "c").is_empty());
    assert!(mm.topology_hints(&p, &container(&p, "c")).is_empty());
}
