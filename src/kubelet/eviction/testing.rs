//! Builders for the eviction unit tests.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, Pod, PodSpec, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kubelet::stats::{
    ContainerStats, FsStats, MemoryStats, PodStats, ProcessStats, VolumeStats,
};

fn list(pairs: &[(&str, &str)]) -> Option<std::collections::BTreeMap<String, ApiQuantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ApiQuantity(v.to_string())))
            .collect()
    })
}

/// A container with requests and limits.
pub fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: list(requests),
            limits: list(limits),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pod named `name` (uid `name`) with containers and a priority.
pub fn pod(name: &str, priority: Option<i32>, containers: Vec<Container>) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            priority,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Adds an emptyDir volume (with an optional size limit).
pub fn with_empty_dir(pod: Arc<Pod>, volume: &str, size_limit: Option<&str>) -> Arc<Pod> {
    let mut p = (*pod).clone();
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: volume.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: size_limit.map(|s| ApiQuantity(s.into())),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    Arc::new(p)
}

pub fn mem(working_set: u64) -> MemoryStats {
    MemoryStats {
        working_set_bytes: Some(working_set),
        ..Default::default()
    }
}

pub fn used(bytes: u64, inodes: u64) -> FsStats {
    FsStats {
        used_bytes: Some(bytes),
        inodes_used: Some(inodes),
        ..Default::default()
    }
}

/// Pod stats: each container `(name, working set, rootfs, logs)` and the
/// pod memory as their sum.
pub fn pod_stats(pod: &Pod, containers: &[(&str, u64, u64, u64)]) -> PodStats {
    let cs: Vec<ContainerStats> = containers
        .iter()
        .map(|(n, ws, root, logs)| ContainerStats {
            name: n.to_string(),
            memory: Some(mem(*ws)),
            rootfs: Some(used(*root, 1)),
            logs: Some(used(*logs, 1)),
            start_time: None,
        })
        .collect();
    let total: u64 = containers.iter().map(|c| c.1).sum();
    let disk: u64 = containers.iter().map(|c| c.2 + c.3).sum();
    PodStats {
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: "ns".into(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        containers: cs,
        memory: Some(mem(total)),
        volume_stats: Vec::new(),
        ephemeral_storage: Some(used(disk, 2)),
        process_stats: None,
        ..Default::default()
    }
}

pub fn with_volume(mut stats: PodStats, volume: &str, bytes: u64) -> PodStats {
    stats.volume_stats.push(VolumeStats {
        name: volume.into(),
        fs: used(bytes, 1),
    });
    if let Some(e) = stats.ephemeral_storage.as_mut() {
        e.used_bytes = Some(e.used_bytes.unwrap_or(0) + bytes);
    }
    stats
}

pub fn with_processes(mut stats: PodStats, n: u64) -> PodStats {
    stats.process_stats = Some(ProcessStats {
        process_count: Some(n),
    });
    stats
}

pub const MI: u64 = 1024 * 1024;
