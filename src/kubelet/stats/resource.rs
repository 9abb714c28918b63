//! CPU and memory usage of the node, its pods and their containers: what
//! the resource metrics endpoint (`/metrics/resource`, read by
//! metrics-server for `kubectl top`) reports. Cumulative CPU time and the
//! memory working set come from the root and pod cgroups; containers from
//! the runtime's container stats.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;

use super::memory::{
    MemoryReadError, cgroup_v1_working_set, cgroup_v2_working_set, read_memory_stat,
};
use super::provider::{
    NodeStatsProvider, NodeStatsProviderConfig, StatsError, pod_cgroup_candidates,
};
use crate::cri::api;
use crate::kubelet::kuberuntime::labels::{
    KUBERNETES_CONTAINER_NAME_LABEL, KUBERNETES_POD_NAME_LABEL, KUBERNETES_POD_NAMESPACE_LABEL,
};

/// One sample of CPU and memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMemory {
    pub time: SystemTime,
    /// Cumulative CPU time in nanoseconds.
    pub cpu_usage_ns: Option<u64>,
    pub memory_working_set_bytes: Option<u64>,
}

/// A pod's usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    pub name: String,
    pub namespace: String,
    pub usage: CpuMemory,
}

/// A running container's usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerUsage {
    pub name: String,
    pub pod: String,
    pub namespace: String,
    pub start_time: Option<SystemTime>,
    pub usage: CpuMemory,
}

/// Everything the resource metrics show.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceUsage {
    pub node: Option<CpuMemory>,
    /// The cgroup all pods run under (the "pods" system container).
    pub allocatable: Option<CpuMemory>,
    pub pods: Vec<PodUsage>,
    pub containers: Vec<ContainerUsage>,
}

/// Cumulative CPU time of a cgroup, in nanoseconds: `cpuacct.usage` on v1,
/// `usage_usec` of `cpu.stat` on v2.
pub fn cgroup_cpu_usage_ns(dir: &Path, unified: bool) -> Result<u64, MemoryReadError> {
    if unified {
        let path = dir.join("cpu.stat");
        let stat = read_memory_stat(&path)?;
        return stat
            .get("usage_usec")
            .map(|us| us.saturating_mul(1000))
            .ok_or(MemoryReadError::Parse {
                path,
                detail: "no usage_usec".into(),
            });
    }
    let path = dir.join("cpuacct.usage");
    let text = std::fs::read_to_string(&path).map_err(|source| MemoryReadError::Io {
        path: path.clone(),
        source,
    })?;
    text.trim().parse().map_err(|e| MemoryReadError::Parse {
        path,
        detail: format!("{e}"),
    })
}

fn working_set(config: &NodeStatsProviderConfig, rel: &Path) -> Option<u64> {
    let dir = config.memory_cgroup_mount.join(rel);
    let r = if config.unified {
        cgroup_v2_working_set(&dir)
    } else {
        cgroup_v1_working_set(&dir)
    };
    r.ok().map(|(_, ws)| ws)
}

fn cpu(config: &NodeStatsProviderConfig, rel: &Path) -> Option<u64> {
    let mount = config.cpu_cgroup_mount.as_ref()?;
    cgroup_cpu_usage_ns(&mount.join(rel), config.unified).ok()
}

fn node_usage(config: &NodeStatsProviderConfig, now: SystemTime) -> CpuMemory {
    let memory = if config.unified {
        super::memory::unified_root_working_set(
            &config.memory_cgroup_mount,
            &config.proc_root.join("meminfo"),
        )
        .ok()
        .map(|(_, ws)| ws)
    } else {
        working_set(config, Path::new(""))
    };
    CpuMemory {
        time: now,
        cpu_usage_ns: cpu(config, Path::new("")),
        memory_working_set_bytes: memory,
    }
}

fn pod_usage(
    config: &NodeStatsProviderConfig,
    pods: &[Arc<Pod>],
    now: SystemTime,
) -> Vec<PodUsage> {
    let mut out = Vec::new();
    for pod in pods {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let Some(rel) = pod_cgroup_candidates(config, uid)
            .into_iter()
            .find(|rel| config.memory_cgroup_mount.join(rel).is_dir())
        else {
            continue;
        };
        out.push(PodUsage {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            usage: CpuMemory {
                time: now,
                cpu_usage_ns: cpu(config, &rel),
                memory_working_set_bytes: working_set(config, &rel),
            },
        });
    }
    out
}

fn from_nanos(ns: i64) -> Option<SystemTime> {
    (ns > 0).then(|| UNIX_EPOCH + Duration::from_nanos(ns as u64))
}

impl NodeStatsProvider {
    /// CPU and memory of the node, of `pods` (those with a cgroup) and of
    /// their running containers.
    pub async fn resource_usage(&self, pods: &[Arc<Pod>]) -> Result<ResourceUsage, StatsError> {
        let mut containers = Vec::new();
        if let Some(runtime) = self.runtime() {
            let running = runtime
                .list_containers(Some(api::ContainerFilter {
                    state: Some(api::ContainerStateValue {
                        state: api::ContainerState::ContainerRunning as i32,
                    }),
                    ..Default::default()
                }))
                .await?;
            let created: HashMap<String, i64> = running
                .iter()
                .map(|c| (c.id.clone(), c.created_at))
                .collect();
            for s in runtime.list_container_stats(None).await? {
                let Some(attrs) = s.attributes.as_ref() else {
                    continue;
                };
                let Some(created_at) = created.get(&attrs.id) else {
                    continue;
                };
                let label = |k: &str| attrs.labels.get(k).cloned().unwrap_or_default();
                let time = s
                    .cpu
                    .as_ref()
                    .and_then(|c| from_nanos(c.timestamp))
                    .unwrap_or_else(SystemTime::now);
                containers.push(ContainerUsage {
                    name: label(KUBERNETES_CONTAINER_NAME_LABEL),
                    pod: label(KUBERNETES_POD_NAME_LABEL),
                    namespace: label(KUBERNETES_POD_NAMESPACE_LABEL),
                    start_time: from_nanos(*created_at),
                    usage: CpuMemory {
                        time,
                        cpu_usage_ns: s
                            .cpu
                            .as_ref()
                            .and_then(|c| c.usage_core_nano_seconds.map(|v| v.value)),
                        memory_working_set_bytes: s
                            .memory
                            .as_ref()
                            .and_then(|m| m.working_set_bytes.map(|v| v.value)),
                    },
                });
            }
        }
        let config = self.config();
        let pods = pods.to_vec();
        let (node, allocatable, pod_list) = tokio::task::spawn_blocking(move || {
            let now = SystemTime::now();
            let allocatable = CpuMemory {
                time: now,
                cpu_usage_ns: cpu(&config, &config.pods_cgroup),
                memory_working_set_bytes: working_set(&config, &config.pods_cgroup),
            };
            (
                node_usage(&config, now),
                allocatable,
                pod_usage(&config, &pods, now),
            )
        })
        .await?;
        containers
            .sort_by(|a, b| (&a.namespace, &a.pod, &a.name).cmp(&(&b.namespace, &b.pod, &b.name)));
        Ok(ResourceUsage {
            node: Some(node),
            allocatable: Some(allocatable),
            pods: pod_list,
            containers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_usage_of_v1_and_v2_cgroups() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpuacct.usage"), "123456789\n").unwrap();
        std::fs::write(
            dir.path().join("cpu.stat"),
            "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
        )
        .unwrap();
        assert_eq!(cgroup_cpu_usage_ns(dir.path(), false).unwrap(), 123_456_789);
        assert_eq!(cgroup_cpu_usage_ns(dir.path(), true).unwrap(), 2_500_000);
        std::fs::write(dir.path().join("cpu.stat"), "nr_periods 0\n").unwrap();
        assert!(cgroup_cpu_usage_ns(dir.path(), true).is_err());
    }

    #[test]
    fn this_machine_reports_node_cpu_and_memory() {
        let Ok(config) =
            NodeStatsProviderConfig::detect("n", Path::new("/"), Path::new("/kubepods"), false)
        else {
            return;
        };
        let usage = node_usage(&config, SystemTime::now());
        assert!(usage.cpu_usage_ns.is_some_and(|n| n > 0), "{usage:?}");
        assert!(
            usage.memory_working_set_bytes.is_some_and(|n| n > 0),
            "{usage:?}"
        );
    }
}
