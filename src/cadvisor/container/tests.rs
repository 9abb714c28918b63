//! The readers over a fake cgroupfs and procfs, v1 and v2.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const NET_DEV: &str = "h1\nh2\n  eth0: 100 2 0 0 0 0 0 0 200 3 0 0 0 0 0 0\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n";

/// A procfs with pid 42: two descriptors (one a socket), limits, net/dev.
fn fake_proc(root: &Path) {
    write(root, "42/limits", "Max open files 1024 4096 files\n");
    write(root, "42/net/dev", NET_DEV);
    let fd = root.join("42/fd");
    std::fs::create_dir_all(&fd).unwrap();
    std::os::unix::fs::symlink("socket:[123]", fd.join("3")).unwrap();
    std::os::unix::fs::symlink("/dev/null", fd.join("4")).unwrap();
}

fn v1_tree(root: &Path, cg: &str) {
    write(root, &format!("cpuacct/{cg}/cpuacct.usage"), "5000000000\n");
    write(
        root,
        &format!("cpuacct/{cg}/cpuacct.stat"),
        "user 300\nsystem 100\n",
    );
    write(
        root,
        &format!("cpu/{cg}/cpu.stat"),
        "nr_periods 10\nnr_throttled 2\nthrottled_time 3000\n",
    );
    write(root, &format!("cpu/{cg}/cpu.shares"), "512\n");
    write(root, &format!("cpu/{cg}/cpu.cfs_period_us"), "100000\n");
    write(root, &format!("cpu/{cg}/cpu.cfs_quota_us"), "50000\n");
    write(root, &format!("cpu/{cg}/cgroup.procs"), "42\n");
    write(
        root,
        &format!("memory/{cg}/memory.usage_in_bytes"),
        "1000\n",
    );
    write(
        root,
        &format!("memory/{cg}/memory.max_usage_in_bytes"),
        "2000\n",
    );
    write(root, &format!("memory/{cg}/memory.failcnt"), "3\n");
    write(root, &format!("memory/{cg}/memory.use_hierarchy"), "1\n");
    write(
        root,
        &format!("memory/{cg}/memory.stat"),
        "cache 1\nrss 2\npgfault 7\npgmajfault 1\ntotal_cache 10\ntotal_rss 20\ntotal_mapped_file 5\ntotal_swap 0\ntotal_inactive_file 300\n",
    );
    write(
        root,
        &format!("memory/{cg}/memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
    );
    write(
        root,
        &format!("memory/{cg}/memory.limit_in_bytes"),
        "67108864\n",
    );
    write(
        root,
        &format!("memory/{cg}/memory.memsw.limit_in_bytes"),
        "9223372036854771712\n",
    );
    write(
        root,
        &format!("memory/{cg}/memory.soft_limit_in_bytes"),
        "9223372036854771712\n",
    );
    write(root, &format!("pids/{cg}/pids.current"), "4\n");
    write(root, &format!("pids/{cg}/pids.max"), "max\n");
}

fn v2_tree(root: &Path, cg: &str) {
    write(
        root,
        &format!("{cg}/cpu.stat"),
        "usage_usec 5000000\nuser_usec 3000000\nsystem_usec 1000000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 3\n",
    );
    write(root, &format!("{cg}/cpu.weight"), "20\n");
    write(root, &format!("{cg}/cpu.max"), "50000 100000\n");
    write(root, &format!("{cg}/cgroup.procs"), "42\n");
    write(root, &format!("{cg}/memory.current"), "1000\n");
    write(
        root,
        &format!("{cg}/memory.stat"),
        "anon 20\nfile 10\nfile_mapped 5\npgfault 7\npgmajfault 1\ninactive_file 300\n",
    );
    write(
        root,
        &format!("{cg}/memory.events"),
        "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n",
    );
    write(root, &format!("{cg}/memory.max"), "67108864\n");
    write(root, &format!("{cg}/memory.swap.max"), "max\n");
    write(root, &format!("{cg}/memory.high"), "max\n");
    write(root, &format!("{cg}/pids.current"), "4\n");
    write(root, &format!("{cg}/pids.max"), "max\n");
}

#[test]
fn runtime_container_on_v1_and_v2() {
    let cg = "kubepods/burstable/podu/c1";
    let created = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let now = SystemTime::now();
    for unified in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let (cgroot, proc_root) = (tmp.path().join("cg"), tmp.path().join("proc"));
        fake_proc(&proc_root);
        let layout = if unified {
            v2_tree(&cgroot, cg);
            CgroupLayout::V2(cgroot.clone())
        } else {
            v1_tree(&cgroot, cg);
            CgroupLayout::V1(
                ["cpu", "cpuacct", "memory", "pids"]
                    .into_iter()
                    .map(|c| (c.to_string(), cgroot.join(c)))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let reader = ContainerReader::new(layout, proc_root, SystemTime::UNIX_EPOCH, Vec::new());
        let (spec, s) = reader
            .read(&format!("/{cg}"), ContainerKind::Runtime(created), now)
            .unwrap();
        let ctx = format!("unified={unified}");
        assert_eq!(spec.creation_time, created, "{ctx}");
        assert_eq!(s.cpu.total_ns, 5_000_000_000, "{ctx}");
        assert_eq!(
            (s.cpu.user_ns, s.cpu.system_ns),
            (3_000_000_000, 1_000_000_000),
            "{ctx}"
        );
        assert_eq!((s.cfs.periods, s.cfs.throttled_periods), (10, 2), "{ctx}");
        assert_eq!(s.cfs.throttled_ns, 3000, "{ctx}");
        let m = &s.memory;
        assert_eq!(
            (m.usage, m.working_set, m.cache, m.rss, m.mapped_file),
            (1000, 700, 10, 20, 5),
            "{ctx}"
        );
        assert_eq!((m.failcnt, m.pgfault, m.pgmajfault), (3, 7, 1), "{ctx}");
        assert_eq!(s.oom_events, 2, "{ctx}");
        let p = &s.processes;
        assert_eq!(
            (p.process_count, p.fd_count, p.socket_count),
            (1, 2, 1),
            "{ctx}"
        );
        assert_eq!((p.threads_current, p.threads_max), (4, 0), "{ctx}");
        assert_eq!(
            p.ulimits,
            vec![("max_open_files".to_string(), 1024)],
            "{ctx}"
        );
        assert_eq!(s.network.len(), 1, "{ctx}");
        assert_eq!(
            (s.network[0].rx_bytes, s.network[0].tx_packets),
            (100, 3),
            "{ctx}"
        );
        assert!(s.filesystem.is_empty(), "{ctx}");
        let cpu = spec.cpu.unwrap();
        assert_eq!((cpu.period_us, cpu.quota_us), (100_000, 50_000), "{ctx}");
        // cpu.weight 20 is what shares 512 becomes on v2; back to shares it reads 500.
        assert_eq!(cpu.shares, if unified { 500 } else { 512 }, "{ctx}");
        let mem = spec.memory.unwrap();
        assert_eq!(mem.limit, 67_108_864, "{ctx}");
        assert!(mem.swap_limit > 1 << 62, "{ctx}");
    }
}

#[test]
fn raw_cgroup_has_no_network_and_missing_is_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let (cgroot, proc_root) = (tmp.path().join("cg"), tmp.path().join("proc"));
    fake_proc(&proc_root);
    v2_tree(&cgroot, "kubepods/podu");
    let boot = SystemTime::UNIX_EPOCH + Duration::from_secs(1);
    let reader = ContainerReader::new(CgroupLayout::V2(cgroot), proc_root, boot, Vec::new());
    let now = SystemTime::now() + Duration::from_secs(3600);
    let (spec, s) = reader
        .read("/kubepods/podu", ContainerKind::Raw, now)
        .unwrap();
    assert!(s.network.is_empty() && s.processes.ulimits.is_empty());
    assert!(spec.creation_time < now && spec.creation_time >= boot);
    assert!(matches!(
        reader.read("/kubepods/gone", ContainerKind::Raw, now),
        Err(ContainerReadError::NotFound { .. })
    ));
}

#[test]
fn this_machine_root_container() {
    let Ok(subsystems) =
        crate::cm::subsystems::CgroupSubsystems::detect(&crate::cm::host::HostPaths::default())
    else {
        return;
    };
    let layout = match subsystems.unified_mount() {
        Some(m) if subsystems.is_unified() => CgroupLayout::V2(m.to_path_buf()),
        _ => CgroupLayout::V1(subsystems.mount_points().clone()),
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let partitions = super::partitions(&mountinfo);
    let reader = ContainerReader::new(
        layout,
        "/proc".into(),
        SystemTime::UNIX_EPOCH,
        partitions.clone(),
    );
    let (_, s) = reader
        .read("/", ContainerKind::Root, SystemTime::now())
        .unwrap();
    assert!(s.cpu.total_ns > 0 && s.memory.usage > 0, "{s:?}");
    let devices: Vec<&str> = s.filesystem.iter().map(|f| f.device.as_str()).collect();
    let listed: Vec<&str> = partitions.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(devices, listed, "one row per partition listed at start");
    // The root filesystem is always among them.
    let root = partitions
        .iter()
        .find(|p| p.mount_point == std::path::Path::new("/"));
    assert!(root.is_some(), "{partitions:?}");
}
