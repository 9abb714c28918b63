//! The cgroup manager on fake v1 and v2 trees, with the cgroupfs driver and
//! with the systemd driver over a fake D-Bus.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cgroup_manager::{CgroupDriver, CgroupManager, CgroupManagerImpl};
use super::cgroup_name::CgroupName;
use super::host::HostPaths;
use super::resources::{CgroupConfig, ResourceConfig};
use super::systemd::{PropValue, UnitProperty};
use super::testing::*;

fn name(parts: &[&str]) -> CgroupName {
    CgroupName::new(&CgroupName::root(), parts).unwrap()
}

fn guaranteed_limits() -> ResourceConfig {
    ResourceConfig {
        cpu_shares: Some(512),
        cpu_quota: Some(50_000),
        cpu_period: Some(100_000),
        memory: Some(134_217_728),
        ..Default::default()
    }
}

#[test]
fn v1_create_update_exists_destroy() {
    let tree = FakeV1::standard();
    let cm = tree.manager(&[]);
    let pod = name(&["kubepods", "pod1234"]);
    assert!(!cm.exists(&pod));
    cm.create(&CgroupConfig::new(pod.clone(), guaranteed_limits()))
        .unwrap();
    for s in ["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"] {
        assert!(tree.path(s, "kubepods/pod1234").is_dir(), "{s}");
    }
    assert!(cm.exists(&pod));
    assert_eq!(tree.read("cpu", "kubepods/pod1234", "cpu.shares"), "512");
    assert_eq!(
        tree.read("cpu", "kubepods/pod1234", "cpu.cfs_quota_us"),
        "50000"
    );
    assert_eq!(
        tree.read("cpu", "kubepods/pod1234", "cpu.cfs_period_us"),
        "100000"
    );
    assert_eq!(
        tree.read("memory", "kubepods/pod1234", "memory.limit_in_bytes"),
        "134217728"
    );
    assert!(
        !tree
            .path("pids", "kubepods/pod1234")
            .join("pids.max")
            .exists(),
        "no pids limit asked"
    );
    assert_eq!(
        tree.read("cpuset", "kubepods/pod1234", "cpuset.cpus"),
        "0-3"
    );

    cm.reduce_cpu_limits(&pod).unwrap();
    assert_eq!(tree.read("cpu", "kubepods/pod1234", "cpu.shares"), "2");
    cm.update(&CgroupConfig::new(
        pod.clone(),
        ResourceConfig {
            pids_limit: Some(100),
            ..Default::default()
        },
    ))
    .unwrap();
    assert_eq!(tree.read("pids", "kubepods/pod1234", "pids.max"), "100");
    // Each operation is timed under its Go operation type.
    for op in ["create", "update"] {
        let seen = crate::metrics::kubelet::cgroup_manager_duration()
            .snapshot(&[op])
            .map_or(0, |s| s.count);
        assert!(seen >= 1, "{op}");
    }

    std::fs::write(
        tree.path("memory", "kubepods/pod1234")
            .join("memory.usage_in_bytes"),
        "4096\n",
    )
    .unwrap();
    assert_eq!(cm.memory_usage(&pod).unwrap(), 4096);

    std::fs::create_dir_all(tree.path("cpu", "kubepods/pod1234/ctr")).unwrap();
    std::fs::write(
        tree.path("cpu", "kubepods/pod1234").join("cgroup.procs"),
        "10\n",
    )
    .unwrap();
    std::fs::write(
        tree.path("cpu", "kubepods/pod1234/ctr")
            .join("cgroup.procs"),
        "11\n12\n",
    )
    .unwrap();
    std::fs::write(
        tree.path("memory", "kubepods/pod1234").join("cgroup.procs"),
        "10\n",
    )
    .unwrap();
    assert_eq!(cm.pids(&pod), [10, 11, 12]);

    cm.destroy(&pod).unwrap();
    for s in ["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"] {
        assert!(!tree.path(s, "kubepods/pod1234").exists(), "{s} removed");
        assert!(tree.path(s, "kubepods").is_dir(), "{s} parent kept");
    }
    assert!(!cm.exists(&pod));
    cm.destroy(&pod).unwrap();
}

#[test]
fn v1_exists_needs_every_required_hierarchy() {
    let tree = FakeV1::new(&[
        "cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "freezer",
    ]);
    let cm = tree.manager(&[]);
    let n = name(&["x"]);
    cm.create(&CgroupConfig::new(n.clone(), ResourceConfig::default()))
        .unwrap();
    std::fs::remove_dir(tree.path("freezer", "x")).unwrap();
    assert!(cm.exists(&n), "freezer is not required");
    std::fs::remove_dir(tree.path("memory", "x")).unwrap();
    assert!(!cm.exists(&n), "memory is");
}

#[test]
fn v1_hugetlb_limits_cover_every_host_size() {
    let tree = FakeV1::new(&["cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb"]);
    let cm = tree.manager(&["2MB", "1GB"]);
    let n = name(&["pod"]);
    let r = ResourceConfig {
        hugepage_limit: BTreeMap::from([(2 << 20, 4 << 20)]),
        ..Default::default()
    };
    cm.create(&CgroupConfig::new(n, r)).unwrap();
    assert_eq!(
        tree.read("hugetlb", "pod", "hugetlb.2MB.limit_in_bytes"),
        "4194304"
    );
    assert_eq!(
        tree.read("hugetlb", "pod", "hugetlb.1GB.limit_in_bytes"),
        "0"
    );
    assert!(cm.exists(&name(&["pod"])));
    std::fs::remove_dir_all(tree.path("hugetlb", "pod")).unwrap();
    assert!(
        !cm.exists(&name(&["pod"])),
        "hugetlb is required when mounted"
    );
}

#[test]
fn v2_create_update_exists_destroy() {
    let tree = FakeV2::new("cpuset cpu io memory hugetlb pids");
    let cm = tree.manager(&["2MB"]);
    let burstable = name(&["kubepods", "burstable"]);
    let pod = name(&["kubepods", "burstable", "pod42"]);
    let r = ResourceConfig {
        cpu_shares: Some(102),
        cpu_quota: Some(100_000),
        cpu_period: Some(100_000),
        memory: Some(268_435_456),
        pids_limit: Some(1024),
        ..Default::default()
    };
    cm.create(&CgroupConfig::new(pod.clone(), r)).unwrap();
    let all = "+cpu +cpuset +hugetlb +io +memory +pids";
    assert_eq!(tree.read("", "cgroup.subtree_control"), all);
    assert_eq!(tree.read("kubepods", "cgroup.subtree_control"), all);
    assert_eq!(
        tree.read("kubepods/burstable", "cgroup.subtree_control"),
        all
    );
    assert_eq!(tree.read("kubepods/burstable/pod42", "cpu.weight"), "4");
    assert_eq!(
        tree.read("kubepods/burstable/pod42", "cpu.max"),
        "100000 100000"
    );
    assert_eq!(
        tree.read("kubepods/burstable/pod42", "memory.max"),
        "268435456"
    );
    assert_eq!(tree.read("kubepods/burstable/pod42", "pids.max"), "1024");
    assert_eq!(
        tree.read("kubepods/burstable/pod42", "hugetlb.2MB.max"),
        "0"
    );
    assert!(!cm.exists(&pod), "no controllers listed yet");
    tree.kernel_lists_controllers("kubepods/burstable/pod42", "cpuset cpu memory pids\n");
    assert!(!cm.exists(&pod), "hugetlb is offered, so it is required");
    tree.kernel_lists_controllers(
        "kubepods/burstable/pod42",
        "cpuset cpu io memory hugetlb pids\n",
    );
    assert!(cm.exists(&pod));

    cm.update(&CgroupConfig::new(
        pod.clone(),
        ResourceConfig {
            cpu_quota: Some(-1),
            cpu_period: Some(100_000),
            unified: BTreeMap::from([("memory.high".to_string(), "max".to_string())]),
            ..Default::default()
        },
    ))
    .unwrap();
    assert_eq!(
        tree.read("kubepods/burstable/pod42", "cpu.max"),
        "max 100000"
    );
    assert_eq!(tree.read("kubepods/burstable/pod42", "memory.high"), "max");

    std::fs::write(
        tree.path("kubepods/burstable/pod42").join("memory.current"),
        "8192",
    )
    .unwrap();
    assert_eq!(cm.memory_usage(&pod).unwrap(), 8192);
    std::fs::write(
        tree.path("kubepods/burstable/pod42").join("cgroup.procs"),
        "7\n",
    )
    .unwrap();
    assert_eq!(cm.pids(&pod), [7]);
    assert_eq!(cm.pids(&burstable), [7], "children are included");

    cm.destroy(&pod).unwrap();
    assert!(!tree.path("kubepods/burstable/pod42").exists());
    assert!(tree.path("kubepods/burstable").exists());
}

#[test]
fn v2_without_hugetlb_writes_no_hugetlb_files() {
    let tree = FakeV2::new("cpu memory pids");
    let cm = tree.manager(&["2MB"]);
    cm.create(&CgroupConfig::new(name(&["a"]), ResourceConfig::default()))
        .unwrap();
    assert!(!tree.path("a").join("hugetlb.2MB.max").exists());
    assert_eq!(
        tree.read("", "cgroup.subtree_control"),
        "+cpu +memory +pids"
    );
}

fn prop<'a>(props: &'a [UnitProperty], n: &str) -> Option<&'a PropValue> {
    props.iter().find(|p| p.name == n).map(|p| &p.value)
}

#[test]
fn systemd_v1_slices_over_dbus() {
    let tree = FakeV1::standard();
    let dbus = FakeDbus::with_version(252);
    let cm = tree.systemd_manager(dbus.clone());
    assert_eq!(cm.driver(), CgroupDriver::Systemd);
    let pod = name(&["kubepods", "burstable", "pod12-34"]);
    assert_eq!(
        cm.name(&pod).unwrap(),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice"
    );
    assert_eq!(
        cm.cgroup_name(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice"
        ),
        pod
    );
    cm.create(&CgroupConfig::new(pod.clone(), guaranteed_limits()))
        .unwrap();
    let calls = dbus.calls();
    let DbusCall::Start(unit, props) = &calls[0] else {
        panic!("first call starts the unit: {calls:?}");
    };
    assert_eq!(unit, "kubepods-burstable-pod12_34.slice");
    assert_eq!(
        prop(props, "Wants"),
        Some(&PropValue::StrList(vec!["kubepods-burstable.slice".into()]))
    );
    assert_eq!(
        prop(props, "BlockIOAccounting"),
        Some(&PropValue::Bool(true))
    );
    assert_eq!(
        prop(props, "DefaultDependencies"),
        Some(&PropValue::Bool(false))
    );
    assert!(prop(props, "PIDs").is_none(), "a slice gets no processes");
    let DbusCall::Set(unit, props) = &calls[1] else {
        panic!("then its limits are set: {calls:?}");
    };
    assert_eq!(unit, "kubepods-burstable-pod12_34.slice");
    assert_eq!(prop(props, "CPUShares"), Some(&PropValue::U64(512)));
    assert_eq!(
        prop(props, "MemoryLimit"),
        Some(&PropValue::U64(134_217_728))
    );
    assert_eq!(
        prop(props, "CPUQuotaPerSecUSec"),
        Some(&PropValue::U64(500_000))
    );
    let dir = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice";
    assert_eq!(
        tree.read("cpu", dir, "cpu.shares"),
        "512",
        "files are written too"
    );
    assert!(cm.exists(&pod));

    cm.destroy(&pod).unwrap();
    assert_eq!(
        dbus.calls().last(),
        Some(&DbusCall::Stop("kubepods-burstable-pod12_34.slice".into()))
    );
    assert!(!tree.path("cpu", dir).exists());
}

#[test]
fn systemd_v2_uses_v2_properties() {
    let tree = FakeV2::new("cpu memory pids");
    let dbus = FakeDbus::with_version(239);
    let cm = CgroupManagerImpl::systemd(tree.subsystems.clone(), Vec::new(), dbus.clone())
        .with_write_mode(super::cgroupfs::WriteMode::PlainFiles);
    let qos = name(&["kubepods", "besteffort"]);
    cm.create(&CgroupConfig::new(
        qos,
        ResourceConfig {
            cpu_shares: Some(2),
            cpu_period: Some(100_000),
            ..Default::default()
        },
    ))
    .unwrap();
    let calls = dbus.calls();
    let DbusCall::Start(unit, props) = &calls[0] else {
        panic!("{calls:?}")
    };
    assert_eq!(unit, "kubepods-besteffort.slice");
    assert_eq!(prop(props, "IOAccounting"), Some(&PropValue::Bool(true)));
    let DbusCall::Set(_, props) = &calls[1] else {
        panic!("{calls:?}")
    };
    assert_eq!(prop(props, "CPUWeight"), Some(&PropValue::U64(1)));
    assert!(
        prop(props, "CPUQuotaPeriodUSec").is_none(),
        "systemd 239 predates it"
    );
    assert_eq!(
        prop(props, "CPUQuotaPerSecUSec"),
        Some(&PropValue::U64(u64::MAX))
    );
    assert_eq!(
        tree.read("kubepods.slice/kubepods-besteffort.slice", "cpu.weight"),
        "1"
    );
}

#[test]
fn systemd_start_failure_fails_create() {
    let tree = FakeV1::standard();
    let dbus = FakeDbus::with_version(252);
    *dbus.fail_start.lock().unwrap() = true;
    let cm = tree.systemd_manager(dbus);
    let err = cm
        .create(&CgroupConfig::new(
            name(&["kubepods"]),
            ResourceConfig::default(),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    assert!(!tree.path("cpu", "kubepods.slice").exists());
}

#[test]
fn systemd_driver_needs_systemd_as_init() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostPaths {
        run_systemd_system: dir.path().join("run/systemd/system"),
        ..HostPaths::default()
    };
    let err = CgroupManagerImpl::for_host(CgroupDriver::Systemd, &host).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("needs systemd as the init system") && msg.contains("cgroupfs"),
        "{msg}"
    );
    assert!("systemd".parse::<CgroupDriver>().is_ok());
    assert!(
        "docker"
            .parse::<CgroupDriver>()
            .unwrap_err()
            .to_string()
            .contains("cgroupDriver")
    );
    let _ = Arc::new(0);
}
