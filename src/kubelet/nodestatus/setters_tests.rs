use std::time::Duration;

use super::*;
use crate::cadvisor::HugePagesInfo;

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn cfg() -> SetterConfig {
    SetterConfig {
        node_name: "gonode".into(),
        max_pods: 110,
        pods_per_core: 0,
        kubelet_port: 10250,
        node_status_max_images: 50,
        local_storage_capacity_isolation: true,
        kubelet_version: "v1.25.16".into(),
    }
}

fn machine() -> MachineInfo {
    MachineInfo {
        num_cores: 2,
        memory_capacity: 24_684_092 * 1024,
        hugepages: vec![
            HugePagesInfo {
                page_size_kib: 2048,
                num_pages: 0,
            },
            HugePagesInfo {
                page_size_kib: 1_048_576,
                num_pages: 0,
            },
        ],
        machine_id: "3d1219c7c4c5404aaa1f6d2a48adfda4".into(),
        system_uuid: "3d1219c7c4c5404aaa1f6d2a48adfda4".into(),
        boot_id: "f2fa0d39-68ee-4eb2-b02d-bbc7d08ec845".into(),
        ..Default::default()
    }
}

fn inputs(now: SystemTime) -> StatusInputs {
    let mut capacity = ResourceList::new();
    capacity.insert(
        RESOURCE_EPHEMERAL_STORAGE.into(),
        parse_quantity("264212084Ki").unwrap(),
    );
    let mut reservation = ResourceList::new();
    reservation.insert(RESOURCE_MEMORY.into(), parse_quantity("100Mi").unwrap());
    reservation.insert(
        RESOURCE_EPHEMERAL_STORAGE.into(),
        parse_quantity("27055317804").unwrap(),
    );
    StatusInputs {
        now,
        addresses: Ok(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: "10.88.0.1".into(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: "gonode".into(),
            },
        ]),
        machine_info: Ok(machine()),
        capacity,
        allocatable_reservation: reservation,
        device_plugins: Default::default(),
        version_info: Ok(VersionInfo {
            kernel_version: "6.18.44-fc-v657".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        }),
        runtime_type: "containerd".into(),
        runtime_version: Ok("containerd://1.6.20".into()),
        images: Ok(vec![
            Image {
                repo_tags: vec!["a:1".into()],
                size: 300,
                ..Default::default()
            },
            Image {
                repo_digests: vec!["b@sha256:1".into()],
                repo_tags: vec!["b:1".into(), "b:2".into()],
                size: 200,
                ..Default::default()
            },
            Image {
                size: 100,
                ..Default::default()
            },
        ]),
        memory_pressure: false,
        disk_pressure: false,
        pid_pressure: false,
        runtime_errors: vec![],
        network_errors: vec![],
        storage_errors: vec![],
        shutdown_errors: vec![],
        apparmor_enabled: false,
        soft_requirements: None,
        volumes_in_use: Some(vec![]),
    }
}

fn q(node: &Node, field: &str, name: &str) -> String {
    let s = node.status.as_ref().unwrap();
    let m = if field == "capacity" {
        &s.capacity
    } else {
        &s.allocatable
    };
    m.as_ref().unwrap()[name].0.clone()
}

fn cond<'a>(node: &'a Node, t: &str) -> &'a NodeCondition {
    node.status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == t)
        .unwrap()
}

#[test]
fn fresh_node_matches_the_reference_shape() {
    let mut node = Node::default();
    let events = set_node_status(&mut node, &cfg(), &inputs(t(0)));
    let s = node.status.as_ref().unwrap();
    for (name, cap, alloc) in [
        ("cpu", "2", "2"),
        ("memory", "24684092Ki", "24581692Ki"),
        ("pods", "110", "110"),
        ("hugepages-2Mi", "0", "0"),
        ("hugepages-1Gi", "0", "0"),
        ("ephemeral-storage", "264212084Ki", "243497856212"),
    ] {
        assert_eq!(q(&node, "capacity", name), cap, "capacity {name}");
        assert_eq!(q(&node, "allocatable", name), alloc, "allocatable {name}");
    }
    let types: Vec<&str> = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    let table = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        (
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ];
    for (ty, st, reason, msg) in table {
        let c = cond(&node, ty);
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            (st, Some(reason), Some(msg)),
            "{ty}"
        );
        assert_eq!(c.last_transition_time, Some(api_time(t(0))));
        assert_eq!(c.last_heartbeat_time, Some(api_time(t(0))));
    }
    let info = s.node_info.as_ref().unwrap();
    assert_eq!(info.container_runtime_version, "containerd://1.6.20");
    assert_eq!(info.kubelet_version, "v1.25.16");
    assert_eq!(info.kube_proxy_version, "v1.25.16");
    assert_eq!(info.operating_system, "linux");
    assert_eq!(info.machine_id, "3d1219c7c4c5404aaa1f6d2a48adfda4");
    assert_eq!(info.os_image, "Debian GNU/Linux 12 (bookworm)");
    assert_eq!(
        s.daemon_endpoints
            .as_ref()
            .unwrap()
            .kubelet_endpoint
            .as_ref()
            .unwrap()
            .port,
        10250
    );
    let images = s.images.as_ref().unwrap();
    assert_eq!(images[0].names.as_deref(), Some(&["a:1".to_string()][..]));
    assert_eq!(
        images[1].names.as_deref(),
        Some(&["b@sha256:1".to_string(), "b:1".into(), "b:2".into()][..])
    );
    assert_eq!(
        (images[2].names.as_ref(), images[2].size_bytes),
        (None, Some(100))
    );
    assert!(s.volumes_in_use.is_none());
    // New pressure conditions announce themselves; a new Ready does not.
    let reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID"
        ]
    );
    assert_eq!(
        events[0].message_for("gonode"),
        "Node gonode status is now: NodeHasSufficientMemory"
    );
}

#[test]
fn transitions_keep_or_move_last_transition_time() {
    let mut node = Node::default();
    set_node_status(&mut node, &cfg(), &inputs(t(0)));
    // Same state later: heartbeat moves, transition stays, no events.
    let events = set_node_status(&mut node, &cfg(), &inputs(t(10)));
    assert!(events.is_empty(), "{events:?}");
    let ready = cond(&node, "Ready");
    assert_eq!(ready.last_transition_time, Some(api_time(t(0))));
    assert_eq!(ready.last_heartbeat_time, Some(api_time(t(10))));

    // Runtime and network trouble: NotReady with Go's aggregated message.
    let mut bad = inputs(t(20));
    bad.runtime_errors = vec!["container runtime status check may not have completed yet".into()];
    bad.network_errors = vec!["network state unknown".into()];
    bad.memory_pressure = true;
    let events = set_node_status(&mut node, &cfg(), &bad);
    let ready = cond(&node, "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("[container runtime status check may not have completed yet, network state unknown]")
    );
    assert_eq!(ready.last_transition_time, Some(api_time(t(20))));
    let mem = cond(&node, "MemoryPressure");
    assert_eq!(
        (mem.status.as_str(), mem.reason.as_deref()),
        ("True", Some("KubeletHasInsufficientMemory"))
    );
    let reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["NodeHasInsufficientMemory", "NodeNotReady"]);

    let events = set_node_status(&mut node, &cfg(), &inputs(t(30)));
    let reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["NodeHasSufficientMemory", "NodeReady"]);
}

#[test]
fn ready_message_variants() {
    // (mutation, want status, want message)
    type Mutate = fn(&mut StatusInputs);
    let cases: Vec<(&str, Mutate, &str, &str)> = vec![
        (
            "apparmor",
            |i| i.apparmor_enabled = true,
            "True",
            "kubelet is posting ready status. AppArmor enabled",
        ),
        (
            "soft requirements",
            |i| i.soft_requirements = Some("missing cpu quota".into()),
            "True",
            "kubelet is posting ready status. WARNING: missing cpu quota",
        ),
        (
            "no machine info",
            |i| {
                i.machine_info = Err(std::sync::Arc::new(MachineInfoError::Parse {
                    path: "/proc/cpuinfo".into(),
                    detail: "boom".into(),
                }));
                i.capacity.clear();
            },
            "False",
            "missing node capacity for resources: ephemeral-storage",
        ),
        (
            "PLEG",
            |i| {
                i.runtime_errors = vec!["PLEG is not healthy: pleg has yet to be successful".into()]
            },
            "False",
            "PLEG is not healthy: pleg has yet to be successful",
        ),
    ];
    for (name, mutate, status, msg) in cases {
        let mut node = Node::default();
        let mut i = inputs(t(0));
        mutate(&mut i);
        set_node_status(&mut node, &cfg(), &i);
        let ready = cond(&node, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.message.as_deref()),
            (status, Some(msg)),
            "{name}"
        );
    }
}

#[test]
fn reboot_images_limit_and_extended_resources() {
    let mut node = Node::default();
    set_node_status(&mut node, &cfg(), &inputs(t(0)));
    // An extended resource advertised earlier that is gone from capacity
    // leaves allocatable.
    node.status
        .as_mut()
        .unwrap()
        .allocatable
        .as_mut()
        .unwrap()
        .insert("example.com/gpu".into(), ApiQuantity("1".into()));
    let mut i = inputs(t(5));
    if let Ok(m) = i.machine_info.as_mut() {
        m.boot_id = "new-boot".into();
    }
    let mut c = cfg();
    c.node_status_max_images = 1;
    c.pods_per_core = 10;
    let events = set_node_status(&mut node, &c, &i);
    assert_eq!(
        events,
        vec![StatusEvent {
            event_type: EventType::Warning,
            reason: "Rebooted".into(),
            message: Some("Node gonode has been rebooted, boot id: new-boot".into()),
        }]
    );
    let s = node.status.as_ref().unwrap();
    assert_eq!(s.images.as_ref().unwrap().len(), 1);
    assert!(
        !s.allocatable
            .as_ref()
            .unwrap()
            .contains_key("example.com/gpu")
    );
    assert_eq!(q(&node, "capacity", "pods"), "20");
}

/// Device plugin resources: capacity counts every device, allocatable the
/// healthy ones; a removed plugin's resource stays at zero, and an extended
/// resource gone from capacity leaves allocatable.
#[test]
fn device_plugin_capacity_and_allocatable() {
    use crate::cm::devicemanager::DevicePluginCapacity;
    let mut node = Node::default();
    let mut i = inputs(t(0));
    i.device_plugins = DevicePluginCapacity {
        capacity: [
            ("example.com/foo".to_string(), Quantity::from_decimal(3)),
            ("example.com/bar".to_string(), Quantity::from_decimal(1)),
        ]
        .into(),
        allocatable: [
            ("example.com/foo".to_string(), Quantity::from_decimal(2)),
            ("example.com/bar".to_string(), Quantity::from_decimal(0)),
        ]
        .into(),
        removed: vec![],
    };
    set_node_status(&mut node, &cfg(), &i);
    assert_eq!(q(&node, "capacity", "example.com/foo"), "3");
    assert_eq!(q(&node, "allocatable", "example.com/foo"), "2");
    assert_eq!(q(&node, "capacity", "example.com/bar"), "1");
    assert_eq!(q(&node, "allocatable", "example.com/bar"), "0");

    i.device_plugins = DevicePluginCapacity {
        removed: vec!["example.com/foo".to_string()],
        ..Default::default()
    };
    set_node_status(&mut node, &cfg(), &i);
    assert_eq!(q(&node, "capacity", "example.com/foo"), "0");
    assert_eq!(q(&node, "allocatable", "example.com/foo"), "0");
    // bar: nobody reports it any more, capacity keeps the last value (as
    // Go, which only ever adds to the node's capacity).
    assert_eq!(q(&node, "capacity", "example.com/bar"), "1");
}
