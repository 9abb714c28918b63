use super::*;
use crate::kubelet::eviction::local_storage_violation;
use crate::kubelet::eviction::message::eviction_message;
use crate::kubelet::eviction::testing::*;

fn names(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn memory_ranking() {
    // best effort using 100Mi; burstable within request; burstable over
    // request by 50Mi; high priority over request by 400Mi; one without stats.
    let be = pod("best-effort", None, vec![container("c", &[], &[])]);
    let within = pod(
        "within",
        None,
        vec![container("c", &[("memory", "200Mi")], &[])],
    );
    let over = pod(
        "over",
        None,
        vec![container("c", &[("memory", "100Mi")], &[])],
    );
    let high = pod(
        "high",
        Some(1000),
        vec![container("c", &[("memory", "100Mi")], &[])],
    );
    let nostats = pod("nostats", Some(5000), vec![container("c", &[], &[])]);
    let stats = PodStatsIndex::new(&[
        pod_stats(&be, &[("c", 100 * MI, 0, 0)]),
        pod_stats(&within, &[("c", 150 * MI, 0, 0)]),
        pod_stats(&over, &[("c", 150 * MI, 0, 0)]),
        pod_stats(&high, &[("c", 500 * MI, 0, 0)]),
    ]);
    let mut pods = vec![
        within.clone(),
        high.clone(),
        be.clone(),
        over.clone(),
        nostats,
    ];
    RankFunc::Memory.rank(&mut pods, &stats);
    // No stats first; then those exceeding requests by priority (best effort
    // uses 100Mi above its zero request, more than "over"'s 50Mi); high
    // priority after them; the pod within its request last.
    assert_eq!(
        names(&pods),
        vec!["nostats", "best-effort", "over", "high", "within"]
    );
}

#[test]
fn pid_ranking() {
    let a = pod("a", Some(10), vec![container("c", &[], &[])]);
    let b = pod("b", None, vec![container("c", &[], &[])]);
    let c = pod("c", None, vec![container("c", &[], &[])]);
    let stats = PodStatsIndex::new(&[
        with_processes(pod_stats(&a, &[("c", 0, 0, 0)]), 1000),
        with_processes(pod_stats(&b, &[("c", 0, 0, 0)]), 5),
        with_processes(pod_stats(&c, &[("c", 0, 0, 0)]), 50),
    ]);
    let mut pods = vec![a, b, c];
    RankFunc::Pid.rank(&mut pods, &stats);
    assert_eq!(names(&pods), vec!["c", "b", "a"]);
}

#[test]
fn disk_ranking_counts_what_the_filesystem_holds() {
    let logs = pod("logs", None, vec![container("c", &[], &[])]);
    let rootfs = pod("rootfs", None, vec![container("c", &[], &[])]);
    let vol = with_empty_dir(
        pod(
            "vol",
            None,
            vec![container("c", &[("ephemeral-storage", "1Gi")], &[])],
        ),
        "v",
        None,
    );
    let stats = PodStatsIndex::new(&[
        pod_stats(&logs, &[("c", 0, 0, 300 * MI)]),
        pod_stats(&rootfs, &[("c", 0, 500 * MI, 0)]),
        with_volume(pod_stats(&vol, &[("c", 0, 0, 0)]), "v", 800 * MI),
    ]);
    // Shared filesystem: everything counts; "vol" is within its request.
    let mut pods = vec![vol.clone(), logs.clone(), rootfs.clone()];
    rank_func_for(Signal::NodeFsAvailable, false).rank(&mut pods, &stats);
    assert_eq!(names(&pods), vec!["rootfs", "logs", "vol"]);
    // Dedicated imagefs: nodefs counts logs and volumes only.
    let mut pods = vec![vol.clone(), rootfs.clone(), logs.clone()];
    rank_func_for(Signal::NodeFsAvailable, true).rank(&mut pods, &stats);
    assert_eq!(names(&pods), vec!["logs", "rootfs", "vol"]);
    // ... and imagefs writable layers only.
    let mut pods = vec![logs.clone(), vol.clone(), rootfs.clone()];
    rank_func_for(Signal::ImageFsAvailable, true).rank(&mut pods, &stats);
    assert_eq!(names(&pods)[0], "rootfs");
}

#[test]
fn rank_functions_by_signal() {
    assert_eq!(
        rank_func_for(Signal::AllocatableMemoryAvailable, true),
        RankFunc::Memory
    );
    assert_eq!(rank_func_for(Signal::PidAvailable, false), RankFunc::Pid);
    assert_eq!(
        rank_func_for(Signal::ImageFsInodesFree, false),
        RankFunc::Disk(
            vec![
                FsStatsType::Root,
                FsStatsType::Logs,
                FsStatsType::LocalVolumeSource
            ],
            DiskResource::Inodes
        )
    );
}

#[test]
fn pod_request_sums_containers_and_init_max() {
    let mut p = (*pod(
        "p",
        None,
        vec![
            container("a", &[("memory", "100Mi")], &[]),
            container("b", &[("memory", "50Mi")], &[]),
        ],
    ))
    .clone();
    assert_eq!(pod_request(&p, "memory"), (150 * MI) as i64);
    p.spec.as_mut().unwrap().init_containers =
        Some(vec![container("i", &[("memory", "1Gi")], &[])]);
    assert_eq!(pod_request(&p, "memory"), (1024 * MI) as i64);
    assert_eq!(pod_request(&p, "ephemeral-storage"), 0);
}

#[test]
fn eviction_messages() {
    let p = pod(
        "p",
        None,
        vec![
            container("big", &[("memory", "100Mi")], &[]),
            container("small", &[("memory", "100Mi")], &[]),
            container("none", &[], &[]),
        ],
    );
    let stats = PodStatsIndex::new(&[pod_stats(
        &p,
        &[
            ("big", 300 * MI, 10 * MI, 5 * MI),
            ("small", 10 * MI, 0, 0),
            ("none", 0, 0, 0),
        ],
    )]);
    assert_eq!(
        eviction_message("memory", &p, &stats),
        "The node was low on resource: memory. Container big was using 300Mi, which exceeds its request of 100Mi. "
    );
    assert_eq!(
        eviction_message("ephemeral-storage", &p, &stats),
        "The node was low on resource: ephemeral-storage. Container big was using 15Mi, which exceeds its request of 0. "
    );
    assert_eq!(
        eviction_message("pids", &p, &stats),
        "The node was low on resource: pids. "
    );
    let other = pod("other", None, vec![]);
    assert_eq!(
        eviction_message("memory", &other, &stats),
        "The node was low on resource: memory. "
    );
}

#[test]
fn local_storage_limits() {
    let ed = with_empty_dir(
        pod("ed", None, vec![container("c", &[], &[])]),
        "cache",
        Some("10Mi"),
    );
    let ed_stats = with_volume(pod_stats(&ed, &[("c", 0, 0, 0)]), "cache", 20 * MI);
    assert_eq!(
        local_storage_violation(&ed, &ed_stats, false).as_deref(),
        Some("Usage of EmptyDir volume \"cache\" exceeds the limit \"10Mi\". ")
    );
    let ok = with_volume(pod_stats(&ed, &[("c", 0, 0, 0)]), "cache", 5 * MI);
    assert_eq!(local_storage_violation(&ed, &ok, false), None);

    let limited = pod(
        "lim",
        None,
        vec![
            container("a", &[], &[("ephemeral-storage", "30Mi")]),
            container("b", &[], &[("ephemeral-storage", "30Mi")]),
        ],
    );
    // Each container within its own limit, the pod above the 60Mi sum.
    let mut s = pod_stats(
        &limited,
        &[("a", 0, 20 * MI, 5 * MI), ("b", 0, 20 * MI, 5 * MI)],
    );
    s.ephemeral_storage = Some(used(70 * MI, 4));
    assert_eq!(
        local_storage_violation(&limited, &s, false).as_deref(),
        Some("Pod ephemeral local storage usage exceeds the total limit of containers 60Mi. ")
    );
    // One container above its own limit (rootfs counts without imagefs).
    let s = pod_stats(&limited, &[("a", 0, 40 * MI, MI), ("b", 0, 0, 0)]);
    assert_eq!(
        local_storage_violation(&limited, &s, false).as_deref(),
        Some("Container a exceeded its local ephemeral storage limit \"30Mi\". ")
    );
    // With a dedicated imagefs only logs count for the container limit.
    let mut s = pod_stats(&limited, &[("a", 0, 40 * MI, MI), ("b", 0, 0, 0)]);
    s.ephemeral_storage = Some(used(MI, 1));
    assert_eq!(local_storage_violation(&limited, &s, true), None);
}
