//! Capacity, reservation and allocatable against worked examples,
//! including the reference node `gonode`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::capacity::*;
use super::cpuset::CpuSet;
use super::node_allocatable::*;
use super::resources::ResourceList;
use crate::apis::eviction::parse_threshold_config;
use crate::cadvisor::{Core, FsInfo, HugePagesInfo, MachineInfo, NumaNode};

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

fn printed(l: &ResourceList) -> Vec<(String, String)> {
    l.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
}

fn gonode() -> MachineInfo {
    MachineInfo {
        num_cores: 2,
        memory_capacity: 24684092 * 1024,
        hugepages: vec![
            HugePagesInfo {
                page_size_kib: 1048576,
                num_pages: 0,
            },
            HugePagesInfo {
                page_size_kib: 2048,
                num_pages: 0,
            },
        ],
        topology: vec![NumaNode {
            id: 0,
            cores: vec![
                Core {
                    id: 0,
                    threads: vec![0],
                    socket_id: 0,
                },
                Core {
                    id: 1,
                    threads: vec![1],
                    socket_id: 0,
                },
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn default_hard_eviction() -> Vec<crate::apis::eviction::Threshold> {
    let hard = strings(&[
        ("memory.available", "100Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
        ("imagefs.available", "15%"),
    ]);
    let none = BTreeMap::new();
    parse_threshold_config(&["pods".into()], &hard, &none, &none, &none).unwrap()
}

fn node_capacity(info: &MachineInfo, disk_kib: u64) -> ResourceList {
    let mut c = capacity_from_machine_info(info);
    c.insert(
        "ephemeral-storage".into(),
        ephemeral_storage_capacity(&FsInfo {
            capacity: disk_kib * 1024,
            ..Default::default()
        }),
    );
    c.insert("pods".into(), pods_capacity(110, 0, info.num_cores));
    c
}

#[test]
fn reference_node_capacity_and_allocatable() {
    let capacity = node_capacity(&gonode(), 264212084);
    let nc = NodeAllocatableConfig {
        hard_eviction_thresholds: default_hard_eviction(),
        enforce_node_allocatable: ["pods".to_string()].into(),
        ..Default::default()
    };
    let reservation = node_allocatable_reservation(&capacity, &nc);
    let alloc = allocatable(&capacity, &reservation);
    let want_capacity = [
        ("cpu", "2"),
        ("ephemeral-storage", "264212084Ki"),
        ("hugepages-1Gi", "0"),
        ("hugepages-2Mi", "0"),
        ("memory", "24684092Ki"),
        ("pods", "110"),
    ];
    let want_allocatable = [
        ("cpu", "2"),
        ("ephemeral-storage", "243497856212"),
        ("hugepages-1Gi", "0"),
        ("hugepages-2Mi", "0"),
        ("memory", "24581692Ki"),
        ("pods", "110"),
    ];
    let as_vec = |w: &[(&str, &str)]| {
        w.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(printed(&capacity), as_vec(&want_capacity));
    assert_eq!(printed(&alloc), as_vec(&want_allocatable));
    // kubepods is sized to capacity minus reservations, eviction excluded.
    let absolute = node_allocatable_absolute(&capacity, &nc);
    assert_eq!(absolute["memory"].value(), 25276510208);
    let limits = cgroup_config_for(&absolute).unwrap();
    assert_eq!(limits.cpu_shares, Some(2048));
    assert_eq!(limits.memory, Some(25276510208));
    validate_node_allocatable(&capacity, &nc).unwrap();
}

#[test]
fn allocatable_table() {
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, &'static str)],
        bool,
        &'static [(&'static str, &'static str)],
    );
    let cases: &[Case] = &[
        (
            "kube and system reserved add up, with the default hard eviction",
            &[("cpu", "500m"), ("memory", "1Gi")],
            &[
                ("cpu", "250m"),
                ("memory", "512Mi"),
                ("ephemeral-storage", "1Gi"),
            ],
            &[],
            false,
            &[
                ("cpu", "1250m"),
                ("ephemeral-storage", "242424114388"),
                ("hugepages-2Mi", "256Mi"),
                ("memory", "22746684Ki"),
                ("pods", "110"),
            ],
        ),
        (
            "eviction ignored (experimental-allocatable-ignore-eviction)",
            &[],
            &[],
            &[],
            true,
            &[
                ("cpu", "2"),
                ("ephemeral-storage", "264212084Ki"),
                ("hugepages-2Mi", "256Mi"),
                ("memory", "24421948Ki"),
                ("pods", "110"),
            ],
        ),
        (
            "eviction with absolute memory and percentage disk",
            &[],
            &[],
            &[("memory.available", "1Gi"), ("nodefs.available", "50%")],
            false,
            &[
                ("cpu", "2"),
                ("ephemeral-storage", "132106042Ki"),
                ("hugepages-2Mi", "256Mi"),
                ("memory", "23373372Ki"),
                ("pods", "110"),
            ],
        ),
        (
            "reservation above capacity floors at zero",
            &[("cpu", "3")],
            &[("memory", "100Gi")],
            &[],
            true,
            &[
                ("cpu", "0"),
                ("ephemeral-storage", "264212084Ki"),
                ("hugepages-2Mi", "256Mi"),
                ("memory", "0"),
                ("pods", "110"),
            ],
        ),
    ];
    let mut info = gonode();
    info.hugepages = vec![HugePagesInfo {
        page_size_kib: 2048,
        num_pages: 128,
    }];
    let capacity = node_capacity(&info, 264212084);
    for (what, kube, system, hard, ignore_eviction, want) in cases {
        let none = BTreeMap::new();
        let thresholds = if *ignore_eviction {
            Vec::new()
        } else if hard.is_empty() {
            default_hard_eviction()
        } else {
            parse_threshold_config(&[], &strings(hard), &none, &none, &none).unwrap()
        };
        let nc = NodeAllocatableConfig {
            kube_reserved: list(kube),
            system_reserved: list(system),
            hard_eviction_thresholds: thresholds,
            ..Default::default()
        };
        let alloc = allocatable(&capacity, &node_allocatable_reservation(&capacity, &nc));
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(printed(&alloc), want, "{what}");
    }
}

#[test]
fn reservation_validation() {
    let capacity = node_capacity(&gonode(), 1024);
    let nc = NodeAllocatableConfig {
        system_reserved: list(&[("memory", "30Gi")]),
        ..Default::default()
    };
    let err = validate_node_allocatable(&capacity, &nc)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"memory\""), "{err}");
    let reservation = node_allocatable_reservation(&capacity, &NodeAllocatableConfig::default());
    assert!(reservation.is_empty(), "zero reservations are left out");
}

#[test]
fn reserved_resource_parsing() {
    let ok = parse_resource_list(&strings(&[
        ("cpu", "200m"),
        ("memory", "1Gi"),
        ("pid", "1000"),
        ("ephemeral-storage", "1Gi"),
    ]))
    .unwrap();
    assert_eq!(ok.len(), 4);
    for (bad, want) in [
        (strings(&[("gpu", "1")]), "cannot reserve \"gpu\""),
        (strings(&[("memory", "-1Gi")]), "cannot be negative"),
        (strings(&[("cpu", "lots")]), "failed to parse quantity"),
    ] {
        let err = parse_resource_list(&bad).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn reserved_cpus_override_cpu_reservation() {
    let info = gonode();
    let cpus = reserved_cpus(&info, "1").unwrap();
    let mut kube = strings(&[("cpu", "500m"), ("memory", "1Gi")]);
    let mut system = strings(&[("cpu", "100m")]);
    apply_reserved_cpus(&mut kube, &mut system, &cpus);
    assert_eq!(kube, strings(&[("memory", "1Gi")]));
    assert_eq!(system, strings(&[("cpu", "1")]));
    assert!(
        reserved_cpus(&info, "0-3")
            .unwrap_err()
            .to_string()
            .contains("not a subset of online-cpus: 0-1")
    );
    assert!(reserved_cpus(&info, "x").is_err());
    assert_eq!(reserved_cpus(&info, "").unwrap(), CpuSet::new());
}

#[test]
fn qos_reserved_parsing() {
    assert_eq!(
        parse_qos_reserved(&strings(&[("memory", "50%")])).unwrap()["memory"],
        50
    );
    for (bad, want) in [
        (strings(&[("cpu", "50%")]), "cannot reserve"),
        (strings(&[("memory", "50")]), "percentage expected"),
        (strings(&[("memory", "x%")]), "invalid number"),
        (strings(&[("memory", "101%")]), "between 0 and 100"),
    ] {
        assert!(
            parse_qos_reserved(&bad)
                .unwrap_err()
                .to_string()
                .contains(want)
        );
    }
}

#[test]
fn pods_per_core() {
    assert_eq!(pods_capacity(110, 0, 2).to_string(), "110");
    assert_eq!(pods_capacity(110, 10, 2).to_string(), "20");
    assert_eq!(pods_capacity(110, 100, 2).to_string(), "110");
    let _ = Duration::ZERO;
}
