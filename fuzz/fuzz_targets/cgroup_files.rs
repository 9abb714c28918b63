//! A container's cgroup files and its process's procfs files as the kernel
//! (or anything mounted over it) might hold them, read the way
//! /metrics/cadvisor reads them and rendered as its text. The input's first
//! byte picks v1 or v2; the rest, split at 0xff bytes, fills the files in
//! order (a file past the last chunk is missing).
#![no_main]

use std::collections::BTreeMap;
use std::time::SystemTime;

use kubelet::cadvisor::container::{CgroupLayout, ContainerInfo, ContainerKind, ContainerReader};
use kubelet::cadvisor::prometheus::{CadvisorSnapshot, render};
use libfuzzer_sys::fuzz_target;

const V1: &[&str] = &[
    "cpuacct/c/cpuacct.usage",
    "cpuacct/c/cpuacct.stat",
    "cpu/c/cpu.stat",
    "cpu/c/cpu.shares",
    "cpu/c/cpu.cfs_period_us",
    "cpu/c/cpu.cfs_quota_us",
    "cpu/c/cgroup.procs",
    "memory/c/memory.usage_in_bytes",
    "memory/c/memory.max_usage_in_bytes",
    "memory/c/memory.failcnt",
    "memory/c/memory.stat",
    "memory/c/memory.oom_control",
    "memory/c/memory.limit_in_bytes",
    "memory/c/memory.memsw.limit_in_bytes",
    "memory/c/memory.soft_limit_in_bytes",
    "pids/c/pids.current",
    "pids/c/pids.max",
];
const V2: &[&str] = &[
    "c/cgroup.procs",
    "c/cpu.stat",
    "c/cpu.weight",
    "c/cpu.max",
    "c/memory.current",
    "c/memory.peak",
    "c/memory.stat",
    "c/memory.events",
    "c/memory.max",
    "c/memory.high",
    "c/memory.swap.current",
    "c/memory.swap.max",
    "c/pids.current",
    "c/pids.max",
];
const PROC: &[&str] = &["1/limits", "1/net/dev", "diskstats"];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let unified = mode & 1 == 1;
    let Ok(tmp) = tempfile::tempdir() else {
        return;
    };
    let (cg, proc_root) = (tmp.path().join("cg"), tmp.path().join("proc"));
    let files = if unified { V2 } else { V1 };
    for dir in files.iter().filter_map(|f| cg.join(f).parent().map(|d| d.to_path_buf())) {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut chunks = rest.split(|&b| b == 0xff);
    for rel in files.iter().map(|f| cg.join(f)).chain(PROC.iter().map(|f| proc_root.join(f))) {
        let Some(chunk) = chunks.next() else { break };
        if let Some(dir) = rel.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&rel, chunk);
    }
    let layout = if unified {
        CgroupLayout::V2(cg)
    } else {
        CgroupLayout::V1(
            ["cpu", "cpuacct", "memory", "pids"]
                .into_iter()
                .map(|c| (c.to_string(), cg.join(c)))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    let reader = ContainerReader::new(layout, proc_root, SystemTime::UNIX_EPOCH, Vec::new());
    let now = SystemTime::now();
    let Ok((spec, stats)) = reader.read("/c", ContainerKind::Runtime(now), now) else {
        return;
    };
    let info = ContainerInfo {
        name: "/c".into(),
        alias: "c".into(),
        image: "i".into(),
        pod: "p".into(),
        namespace: "n".into(),
        container: "c".into(),
        spec,
        stats,
    };
    let snapshot = CadvisorSnapshot {
        containers: Some(vec![info]),
        machine: None,
        version: None,
    };
    let _ = render(&snapshot, now);
});
