//! The CPU manager as a topology hint provider (Go's hint tables over fake
//! sysfs machines) and NUMA alignment of CPUs and memory at admission.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::manager::CpuManager;
use super::policy_options::OptionGates;
use super::policy_static::StaticPolicy;
use super::state::ContainerMap;
use super::tests::{c_of, container, pod, reservation, set, static_config, sysfs_machine};
use super::topology::CpuTopology;
use crate::apis::config::types::MemoryReservation;
use crate::cm::cpuset::CpuSet;
use crate::cm::memorymanager::{MemoryManager, MemoryManagerConfig};
use crate::cm::topologymanager::{
    AffinityStore, BitMask, HintProvider, TopologyManager, TopologyManagerConfig,
};

fn policy(sockets: u32, numa: u32, cores: u32, threads: u32) -> StaticPolicy {
    let topo = CpuTopology::discover(&sysfs_machine(sockets, numa, cores, threads)).unwrap();
    StaticPolicy::new(
        topo,
        1,
        &set("0"),
        &BTreeMap::new(),
        OptionGates::default(),
        "none",
    )
    .unwrap()
}

fn hints_text(p: &StaticPolicy, available: &CpuSet, request: usize) -> Vec<String> {
    p.generate_hints(available, &CpuSet::new(), request)
        .iter()
        .map(|h| {
            let bits: String = h
                .numa_node_affinity
                .unwrap()
                .bits()
                .iter()
                .map(u32::to_string)
                .collect();
            format!("{bits}{}", if h.preferred { "" } else { "!" })
        })
        .collect()
}

#[test]
fn cpu_hints_table() {
    // Two sockets = two NUMA nodes, 3 cores × 2 threads each (Go's
    // topoDualSocketHT): node 0 holds 0-2,6-8, node 1 holds 3-5,9-11.
    let dual = policy(2, 1, 3, 2);
    let four_and_six = set("0-1,6-7,3-5,9-11");
    let one_each = set("0,3");
    let cases: [(&str, &CpuSet, usize, &[&str]); 5] = [
        ("2 of 4+6", &four_and_six, 2, &["0", "1", "01!"]),
        ("5 of 4+6", &four_and_six, 5, &["1", "01!"]),
        (
            "7 of 4+6: only both nodes, the narrowest that can ever fit",
            &four_and_six,
            7,
            &["01"],
        ),
        ("11 of 4+6", &four_and_six, 11, &[]),
        ("2 of 1+1", &one_each, 2, &["01!"]),
    ];
    for (name, available, request, want) in cases {
        assert_eq!(hints_text(&dual, available, request), want, "{name}");
    }
    // 2 sockets × 2 NUMA nodes × 8 cores × 2 threads: 16 CPUs per node.
    let big = policy(2, 2, 8, 2);
    let all = big.topology().details.cpus();
    let got = hints_text(&big, &all, 20);
    assert_eq!(
        got,
        [
            "01", "02", "03", "12", "13", "23", "012!", "013!", "023!", "123!", "0123!"
        ]
    );
    assert_eq!(hints_text(&big, &all, 16)[..4], ["0", "1", "2", "3"]);
}

fn memory_config() -> MemoryManagerConfig {
    MemoryManagerConfig {
        policy: "Static".into(),
        reserved_memory: (0..2)
            .map(|n| MemoryReservation {
                numa_node: n,
                limits: [("memory".to_string(), "100Mi".parse().unwrap())].into(),
            })
            .collect(),
    }
}

/// CPU and memory managers under one topology manager on a two-node machine.
fn managers(
    dir: &std::path::Path,
    policy: &str,
) -> (Arc<CpuManager>, Arc<MemoryManager>, TopologyManager) {
    let mut machine = sysfs_machine(2, 1, 3, 2);
    for node in &mut machine.topology {
        node.memory = 4 << 30;
    }
    let store = Arc::new(AffinityStore::default());
    let cpu = Arc::new(
        CpuManager::new(
            &static_config(&[]),
            &machine,
            &set("0"),
            &reservation("1"),
            dir.into(),
            store.clone(),
        )
        .unwrap(),
    );
    cpu.start_blocking(None, ContainerMap::new()).unwrap();
    let mem_reservation = [("memory".to_string(), "200Mi".parse().unwrap())].into();
    let memory = Arc::new(
        MemoryManager::new(
            &memory_config(),
            &machine,
            &mem_reservation,
            dir.into(),
            store.clone(),
        )
        .unwrap(),
    );
    memory.start_blocking(None, Default::default()).unwrap();
    let config = TopologyManagerConfig {
        policy: policy.into(),
        scope: "container".into(),
    };
    let providers: Vec<Arc<dyn HintProvider>> = vec![cpu.clone(), memory.clone()];
    let tm = TopologyManager::new(&config, &[0, 1], store, providers).unwrap();
    (cpu, memory, tm)
}

#[test]
fn admission_aligns_cpus_and_memory_on_one_numa_node() {
    let dir = tempfile::tempdir().unwrap();
    let (cpu, memory, tm) = managers(dir.path(), "single-numa-node");
    let node_of = |cpus: &CpuSet| -> Vec<u32> {
        let mut nodes: Vec<u32> = cpus.iter().map(|c| if c % 6 < 3 { 0 } else { 1 }).collect();
        nodes.dedup();
        nodes
    };
    // 2 CPUs and 1Gi: one node for both.
    let a = pod("a", vec![], vec![container("c", Some("2"), Some("1Gi"))]);
    tm.admit(&a).unwrap();
    let cpus = cpu.exclusive_cpus("a", "c");
    assert_eq!(cpus.len(), 2);
    let node = node_of(&cpus);
    assert_eq!(node.len(), 1, "{cpus}");
    assert_eq!(memory.memory_numa_nodes("a", "c"), node);
    assert_eq!(
        tm.store().get_affinity("a", "c").numa_node_affinity,
        Some(BitMask::of(&node))
    );

    // 4 CPUs and 3Gi: the node pod a left whole (the other lost CPU 0 to
    // the reservation and two CPUs to pod a), memory on it too.
    let b = pod("b", vec![], vec![container("c", Some("4"), Some("3Gi"))]);
    tm.admit(&b).unwrap();
    let node_b = node_of(&cpu.exclusive_cpus("b", "c"));
    assert_eq!(node_b.len(), 1);
    assert_eq!(memory.memory_numa_nodes("b", "c"), node_b);

    // 7 CPUs fit no single node: refused with Go's reason, nothing taken.
    let big = pod("big", vec![], vec![container("c", Some("7"), Some("1Gi"))]);
    let before = cpu.default_cpu_set();
    let err = tm.admit(&big).unwrap_err();
    assert_eq!(err.admission_reason(), "TopologyAffinityError");
    assert_eq!(cpu.default_cpu_set(), before);
    assert!(memory.memory("big", "c").is_empty());
    assert_eq!(c_of(&big, "c").name, "c");
}

#[test]
fn best_effort_admits_what_cannot_be_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let (cpu, memory, tm) = managers(dir.path(), "best-effort");
    let big = pod("big", vec![], vec![container("c", Some("7"), Some("5Gi"))]);
    tm.admit(&big).unwrap();
    assert_eq!(cpu.exclusive_cpus("big", "c").len(), 7);
    assert_eq!(memory.memory_numa_nodes("big", "c"), vec![0, 1]);
}

#[test]
fn align_by_socket_widens_hints_and_allocation_to_sockets() {
    let gates = OptionGates {
        alpha: true,
        beta: true,
    };
    let options: BTreeMap<String, String> =
        [("align-by-socket".to_string(), "true".to_string())].into();
    // 2 sockets × 2 NUMA nodes × 2 cores × 1 thread: node n holds 2n, 2n+1.
    let topo = CpuTopology::discover(&sysfs_machine(2, 2, 2, 1)).unwrap();
    let p = StaticPolicy::new(topo.clone(), 1, &set("0"), &options, gates, "best-effort").unwrap();
    let all = p.topology().details.cpus();
    // 3 CPUs: no single node fits, so every pair is the narrowest and
    // preferred with or without the option; the triples are not.
    let got = hints_text(&p, &all, 3);
    let preferred: Vec<&String> = got.iter().filter(|h| !h.ends_with('!')).collect();
    assert_eq!(preferred, ["01", "02", "03", "12", "13", "23"]);
    let plain =
        StaticPolicy::new(topo.clone(), 1, &set("0"), &BTreeMap::new(), gates, "none").unwrap();
    assert_eq!(hints_text(&plain, &all, 3), got);
    // 1 CPU: single nodes are the narrowest; a pair inside one socket is
    // socket aligned too.
    let got = hints_text(&p, &all, 1);
    assert!(
        got.contains(&"01".to_string()) && got.contains(&"23".to_string()),
        "{got:?}"
    );
    assert!(got.contains(&"02!".to_string()), "{got:?}");
    assert!(!hints_text(&plain, &all, 1).contains(&"01".to_string()));

    // Refused with single-numa-node, and where sockets outnumber nodes.
    let err =
        StaticPolicy::new(topo, 1, &set("0"), &options, gates, "single-numa-node").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
    );
    let mut odd = CpuTopology::discover(&sysfs_machine(2, 1, 2, 1)).unwrap();
    odd.num_numa_nodes = 1;
    let err = StaticPolicy::new(odd, 1, &set("0"), &options, gates, "none").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Align by socket is not compatible"),
        "{err}"
    );
}
