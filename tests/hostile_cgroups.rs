//! Hostile input (issue 18): odd cgroup and procfs files under the
//! statistics the kubelet serves. Each case writes a fake cgroup tree (v1 or
//! v2: the root, the pods cgroup, a pod and a container) and a fake procfs
//! whose every file is missing, empty, garbage, a huge or negative number,
//! `max`, or keyed lines with such values, then reads it as
//! /metrics/cadvisor and /stats/summary are built: the container reader and
//! the Prometheus text, the node stats provider and the summary's JSON, the
//! resource metrics' CPU counter. Nothing may panic (a kernel file is
//! outside bytes too), and every sample line of the exposition must still
//! parse. Cases: `KUBELET_RS_FUZZ_CASES` (256 by default).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kubelet::cadvisor::container::{
    CgroupLayout, ContainerInfo, ContainerKind, ContainerReader, ContainerSpec, ContainerStats,
};
use kubelet::cadvisor::prometheus::{CadvisorSnapshot, render};
use kubelet::kubelet::stats::{
    CpuRates, NodeStatsProvider, NodeStatsProviderConfig, ResourceUsage, StatsProvider,
    cgroup_cpu_usage_ns, summary_json,
};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("KUBELET_RS_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const POD_UID: &str = "u1";
/// The cgroups of each case, as cadvisor names them.
const CGROUPS: &[&str] = &[
    "/",
    "/kubepods",
    "/kubepods/burstable/podu1",
    "/kubepods/burstable/podu1/c1",
];
/// v1: controller and file.
const V1_FILES: &[(&str, &str)] = &[
    ("cpuacct", "cpuacct.usage"),
    ("cpuacct", "cpuacct.stat"),
    ("cpu", "cpu.stat"),
    ("cpu", "cpu.shares"),
    ("cpu", "cpu.cfs_period_us"),
    ("cpu", "cpu.cfs_quota_us"),
    ("cpu", "cgroup.procs"),
    ("memory", "cgroup.procs"),
    ("memory", "memory.usage_in_bytes"),
    ("memory", "memory.max_usage_in_bytes"),
    ("memory", "memory.failcnt"),
    ("memory", "memory.use_hierarchy"),
    ("memory", "memory.stat"),
    ("memory", "memory.oom_control"),
    ("memory", "memory.limit_in_bytes"),
    ("memory", "memory.memsw.limit_in_bytes"),
    ("memory", "memory.soft_limit_in_bytes"),
    ("pids", "pids.current"),
    ("pids", "pids.max"),
];
const V2_FILES: &[&str] = &[
    "cgroup.procs",
    "cpu.stat",
    "cpu.weight",
    "cpu.max",
    "memory.current",
    "memory.peak",
    "memory.stat",
    "memory.events",
    "memory.max",
    "memory.high",
    "memory.swap.current",
    "memory.swap.max",
    "pids.current",
    "pids.max",
];
const PROC_FILES: &[&str] = &[
    "stat",
    "meminfo",
    "vmstat",
    "loadavg",
    "diskstats",
    "net/dev",
    "sys/kernel/pid_max",
    "42/limits",
    "42/net/dev",
];
/// Keys the keyed files use, so generated lines reach the parsers' values.
const KEYS: &[&str] = &[
    "user",
    "system",
    "usage_usec",
    "user_usec",
    "system_usec",
    "nr_periods",
    "nr_throttled",
    "throttled_time",
    "throttled_usec",
    "cache",
    "rss",
    "total_rss",
    "total_cache",
    "total_inactive_file",
    "inactive_file",
    "anon",
    "file",
    "pgfault",
    "pgmajfault",
    "oom_kill",
    "oom",
    "max",
    "btime",
    "MemTotal:",
    "MemAvailable:",
    "MemFree:",
    "Max open files",
    "eth0:",
    "lo:",
];

/// A value as a kernel file might hold it, or should never.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,6}",
        Just("0".to_string()),
        Just("max".to_string()),
        Just("-1".to_string()),
        Just("18446744073709551615".to_string()),
        Just("9223372036854775807".to_string()),
        Just("99999999999999999999999".to_string()),
        "[0-9]{15,20}",
        "-?[0-9.eE+]{1,8}",
    ]
}

/// One file's text.
fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        number().prop_map(|n| format!("{n}\n")),
        (number(), number()).prop_map(|(a, b)| format!("{a} {b}\n")),
        prop::collection::vec(
            (
                prop::sample::select(KEYS),
                prop::collection::vec(number(), 0..18)
            ),
            0..8
        )
        .prop_map(|lines| {
            lines
                .into_iter()
                .map(|(k, vs)| format!("{k} {}\n", vs.join(" ")))
                .collect()
        }),
        Just(String::new()),
        "(?s).{0,60}",
    ]
}

/// Every file of a case: `None` leaves it out.
fn files(count: usize) -> impl Strategy<Value = Vec<Option<String>>> {
    prop::collection::vec(prop::option::weighted(0.85, content()), count)
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("fake tree dir");
    }
    std::fs::write(path, text).expect("fake tree file");
}

/// Writes the case's tree under `root`; returns the cgroup layout.
fn tree(
    root: &Path,
    unified: bool,
    cgroup_files: &[Option<String>],
    proc_files: &[Option<String>],
) -> CgroupLayout {
    let cg = root.join("cg");
    let mut texts = cgroup_files.iter();
    for name in CGROUPS {
        let rel = name.trim_start_matches('/');
        if unified {
            std::fs::create_dir_all(cg.join(rel)).expect("cgroup dir");
            for file in V2_FILES {
                if let Some(Some(text)) = texts.next() {
                    write(&cg.join(rel).join(file), text);
                }
            }
        } else {
            for c in ["cpu", "cpuacct", "memory", "pids"] {
                std::fs::create_dir_all(cg.join(c).join(rel)).expect("cgroup dir");
            }
            for (c, file) in V1_FILES {
                if let Some(Some(text)) = texts.next() {
                    write(&cg.join(c).join(rel).join(file), text);
                }
            }
        }
    }
    for (file, text) in PROC_FILES.iter().zip(proc_files) {
        if let Some(text) = text {
            write(&root.join("proc").join(file), text);
        }
    }
    if unified {
        CgroupLayout::V2(cg)
    } else {
        CgroupLayout::V1(
            ["cpu", "cpuacct", "memory", "pids"]
                .into_iter()
                .map(|c| (c.to_string(), cg.join(c)))
                .collect::<BTreeMap<_, _>>(),
        )
    }
}

/// Every non-comment line of an exposition is `name{labels} value [ts]`
/// with a value Prometheus parses.
fn assert_exposition(text: &str) {
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let tail = match line.rfind('}') {
            Some(i) => &line[i + 1..],
            None => line.split_once(' ').map(|(_, t)| t).unwrap_or(""),
        };
        let mut fields = tail.split_whitespace();
        let value = fields.next().unwrap_or("");
        let parsed = match value {
            "+Inf" | "-Inf" | "NaN" => true,
            v => v.parse::<f64>().is_ok(),
        };
        assert!(parsed, "sample value {value:?} does not parse: {line}");
        if let Some(ts) = fields.next() {
            assert!(ts.parse::<i64>().is_ok(), "timestamp {ts:?}: {line}");
        }
        assert!(fields.next().is_none(), "trailing fields: {line}");
    }
}

fn pod() -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.name = Some("p".into());
    pod.metadata.namespace = Some("default".into());
    pod.metadata.uid = Some(POD_UID.into());
    Arc::new(pod)
}

fn check(unified: bool, cgroup_files: &[Option<String>], proc_files: &[Option<String>]) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = tree(tmp.path(), unified, cgroup_files, proc_files);
    let proc_root = tmp.path().join("proc");
    let now = SystemTime::now();

    // /metrics/cadvisor.
    let reader = ContainerReader::new(
        layout.clone(),
        proc_root.clone(),
        SystemTime::UNIX_EPOCH,
        Vec::new(),
    );
    let kinds = [
        ContainerKind::Root,
        ContainerKind::Raw,
        ContainerKind::Raw,
        ContainerKind::Runtime(now - Duration::from_secs(5)),
    ];
    let containers: Vec<ContainerInfo> = CGROUPS
        .iter()
        .zip(kinds)
        .filter_map(|(name, kind)| {
            let (spec, stats): (ContainerSpec, ContainerStats) =
                reader.read(name, kind, now).ok()?;
            Some(ContainerInfo {
                name: name.to_string(),
                alias: String::new(),
                image: String::new(),
                pod: "p".into(),
                namespace: "default".into(),
                container: "c1".into(),
                spec,
                stats,
            })
        })
        .collect();
    assert_eq!(
        containers.len(),
        CGROUPS.len(),
        "every cgroup dir exists, so each reads"
    );
    let text = render(
        &CadvisorSnapshot {
            containers: Some(containers),
            machine: None,
            version: None,
        },
        now,
    );
    assert_exposition(&text);

    // /stats/summary and the resource metrics.
    let memory_mount = layout.dir("memory", "/").expect("memory mount");
    let provider = NodeStatsProvider::new(
        NodeStatsProviderConfig {
            node_name: "n".into(),
            root_dir: tmp.path().to_path_buf(),
            pod_logs_dir: tmp.path().join("logs"),
            proc_root,
            memory_cgroup_mount: memory_mount.clone(),
            pids_cgroup_mount: layout.dir("pids", "/"),
            cpu_cgroup_mount: layout.dir(if unified { "cpu" } else { "cpuacct" }, "/"),
            unified,
            pods_cgroup: "kubepods".into(),
            systemd_driver: false,
        },
        None,
        None,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(summary) = rt.block_on(provider.summary(&[pod()])) {
        let json = summary_json(
            &summary,
            &ResourceUsage::default(),
            &CpuRates::default(),
            false,
        );
        serde_json::to_string(&json).expect("summary serializes");
    }
    for name in CGROUPS {
        if let Some(dir) = layout.dir(if unified { "cpu" } else { "cpuacct" }, name) {
            let _ = cgroup_cpu_usage_ns(&dir, unified);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn odd_v1_cgroup_files(
        cgroup_files in files(CGROUPS.len() * V1_FILES.len()),
        proc_files in files(PROC_FILES.len()),
    ) {
        check(false, &cgroup_files, &proc_files);
    }

    #[test]
    fn odd_v2_cgroup_files(
        cgroup_files in files(CGROUPS.len() * V2_FILES.len()),
        proc_files in files(PROC_FILES.len()),
    ) {
        check(true, &cgroup_files, &proc_files);
    }
}

/// The values that overflowed a multiplication or a time addition, each in
/// the file that carries it: read without a panic.
#[test]
fn largest_values_in_every_file() {
    for unified in [false, true] {
        let per_cgroup = if unified {
            V2_FILES.len()
        } else {
            V1_FILES.len()
        };
        for text in ["18446744073709551615\n", "max\n", "-1\n"] {
            let keyed: String = KEYS.iter().map(|k| format!("{k} {}", text)).collect();
            let cgroup_files: Vec<Option<String>> = (0..CGROUPS.len() * per_cgroup)
                .map(|i| {
                    Some(if i % 2 == 0 {
                        text.to_string()
                    } else {
                        keyed.clone()
                    })
                })
                .collect();
            let proc_files: Vec<Option<String>> =
                PROC_FILES.iter().map(|_| Some(keyed.clone())).collect();
            check(unified, &cgroup_files, &proc_files);
        }
    }
}
