//! The stats seam the eviction manager reads, and its real implementation
//! over cgroups (v1 and v2), procfs, statfs of the kubelet's directories and
//! the CRI (image filesystem, container memory and writable layers).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::fsusage::{FsUsageError, dir_fs_stats, statfs_usage};
use super::host;
use super::memory::{
    MemoryReadError, cgroup_memory_limit, cgroup_v1_working_set, cgroup_v2_working_set,
    read_meminfo, unified_root_working_set,
};
use super::network::network_stats;
use super::types::{
    ContainerStats, FsStats, MemoryStats, NodeStats, PodStats, ProcessStats, RlimitStats, Summary,
    VolumeStats,
};
use crate::cri::{ImageService, RuntimeService, api};
use crate::kubelet::kuberuntime::labels::{
    KUBERNETES_CONTAINER_NAME_LABEL, KUBERNETES_POD_UID_LABEL,
};
use crate::kubelet::kuberuntime::log_paths::build_pod_logs_directory;

/// Statistics that could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("node memory: {0}")]
    Memory(#[from] MemoryReadError),
    #[error("filesystem: {0}")]
    Fs(#[from] FsUsageError),
    #[error("runtime: {0}")]
    Runtime(#[from] crate::cri::CriError),
    #[error("cgroup layout: {0}")]
    CgroupLayout(#[source] Box<crate::cm::CmError>),
    #[error("memory cgroup mount point not found")]
    NoMemoryMount,
    #[error("stats task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Where the eviction manager reads node and pod statistics.
#[async_trait]
pub trait StatsProvider: Send + Sync + 'static {
    /// Node statistics and those of `pods` (pods without stats are left out).
    async fn summary(&self, pods: &[Arc<Pod>]) -> Result<Summary, StatsError>;
    /// Whether images live on a different device than the kubelet's root
    /// directory.
    async fn has_dedicated_image_fs(&self) -> Result<bool, StatsError>;
}

/// Where the real provider finds things on the host.
#[derive(Debug, Clone)]
pub struct NodeStatsProviderConfig {
    pub node_name: String,
    /// The kubelet's root directory (`/var/lib/kubelet`): nodefs, and the
    /// pods' volume directories under `pods/<uid>/volumes`.
    pub root_dir: PathBuf,
    /// Where container logs live (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// procfs (`/proc`).
    pub proc_root: PathBuf,
    /// The memory controller's mount (v1: `/sys/fs/cgroup/memory`; v2: the
    /// unified mount).
    pub memory_cgroup_mount: PathBuf,
    /// The pids controller's mount, when there is one.
    pub pids_cgroup_mount: Option<PathBuf>,
    /// Where CPU time is accounted (v1: the cpuacct mount; v2: the unified
    /// mount), when there is such a mount.
    pub cpu_cgroup_mount: Option<PathBuf>,
    /// Whether the memory controller is on cgroup v2.
    pub unified: bool,
    /// The cgroup all pods run under, relative to the controller mount
    /// (`kubepods`, or `kubepods.slice` with the systemd driver).
    pub pods_cgroup: PathBuf,
    /// Whether pod cgroups are systemd slices (`kubepods-burstable-pod<uid>.slice`).
    pub systemd_driver: bool,
}

impl NodeStatsProviderConfig {
    /// Reads the cgroup layout of this host (blocking: build phase).
    pub fn detect(
        node_name: &str,
        root_dir: &Path,
        pods_cgroup: &Path,
        systemd_driver: bool,
    ) -> Result<Self, StatsError> {
        let subsystems =
            crate::cm::subsystems::CgroupSubsystems::detect(&crate::cm::host::HostPaths::default())
                .map_err(|e| StatsError::CgroupLayout(Box::new(e)))?;
        let memory = subsystems
            .mount_point("memory")
            .ok_or(StatsError::NoMemoryMount)?;
        Ok(NodeStatsProviderConfig {
            node_name: node_name.to_string(),
            root_dir: root_dir.to_path_buf(),
            pod_logs_dir: PathBuf::from(
                crate::kubelet::kuberuntime::log_paths::POD_LOGS_ROOT_DIRECTORY,
            ),
            proc_root: PathBuf::from("/proc"),
            memory_cgroup_mount: memory.to_path_buf(),
            pids_cgroup_mount: subsystems.mount_point("pids").map(Path::to_path_buf),
            cpu_cgroup_mount: subsystems
                .mount_point(if subsystems.is_unified() {
                    "cpu"
                } else {
                    "cpuacct"
                })
                .map(Path::to_path_buf),
            unified: subsystems.is_unified(),
            pods_cgroup: pods_cgroup
                .strip_prefix("/")
                .unwrap_or(pods_cgroup)
                .to_path_buf(),
            systemd_driver,
        })
    }
}

/// The real stats provider.
pub struct NodeStatsProvider {
    config: Arc<NodeStatsProviderConfig>,
    runtime: Option<Arc<dyn RuntimeService>>,
    images: Option<Arc<dyn ImageService>>,
}

impl NodeStatsProvider {
    /// Pure construction. Without a runtime, container stats are left out;
    /// without an image service, imagefs is the nodefs.
    pub fn new(
        config: NodeStatsProviderConfig,
        runtime: Option<Arc<dyn RuntimeService>>,
        images: Option<Arc<dyn ImageService>>,
    ) -> Self {
        NodeStatsProvider {
            config: Arc::new(config),
            runtime,
            images,
        }
    }

    /// The runtime service, when container stats are read.
    pub(crate) fn runtime(&self) -> Option<&Arc<dyn RuntimeService>> {
        self.runtime.as_ref()
    }

    /// Where things are on the host.
    pub(crate) fn config(&self) -> Arc<NodeStatsProviderConfig> {
        self.config.clone()
    }

    async fn image_fs_mountpoint(&self) -> Result<Option<PathBuf>, StatsError> {
        let Some(images) = &self.images else {
            return Ok(None);
        };
        let usages = images.image_fs_info().await?;
        Ok(usages
            .into_iter()
            .filter_map(|u| u.fs_id.map(|f| PathBuf::from(f.mountpoint)))
            .find(|p| !p.as_os_str().is_empty()))
    }

    async fn container_stats(&self) -> Result<HashMap<String, Vec<ContainerStats>>, StatsError> {
        let mut out: HashMap<String, Vec<(u32, ContainerStats)>> = HashMap::new();
        let Some(runtime) = &self.runtime else {
            return Ok(HashMap::new());
        };
        let running: HashMap<String, i64> = runtime
            .list_containers(Some(api::ContainerFilter {
                state: Some(api::ContainerStateValue {
                    state: api::ContainerState::ContainerRunning as i32,
                }),
                ..Default::default()
            }))
            .await?
            .into_iter()
            .map(|c| (c.id, c.created_at))
            .collect();
        for s in runtime.list_container_stats(None).await? {
            let Some(attrs) = s.attributes.as_ref() else {
                continue;
            };
            let Some(created_at) = running.get(&attrs.id) else {
                continue;
            };
            let Some(uid) = attrs.labels.get(KUBERNETES_POD_UID_LABEL) else {
                continue;
            };
            let name = attrs
                .labels
                .get(KUBERNETES_CONTAINER_NAME_LABEL)
                .cloned()
                .or_else(|| attrs.metadata.as_ref().map(|m| m.name.clone()))
                .unwrap_or_default();
            let attempt = attrs.metadata.as_ref().map(|m| m.attempt).unwrap_or(0);
            // The runtime's container stats carry the working set only (as
            // in Go's CRI stats provider).
            let memory = s.memory.as_ref().map(|m| MemoryStats {
                time: Some(SystemTime::now()),
                working_set_bytes: m.working_set_bytes.map(|v| v.value),
                ..MemoryStats::default()
            });
            let rootfs = s.writable_layer.as_ref().map(|w| FsStats {
                time: Some(SystemTime::now()),
                used_bytes: w.used_bytes.map(|v| v.value),
                inodes_used: w.inodes_used.map(|v| v.value),
                ..FsStats::default()
            });
            let stats = ContainerStats {
                name,
                memory,
                rootfs,
                logs: None,
                start_time: from_nanos(*created_at),
            };
            let list = out.entry(uid.clone()).or_default();
            match list.iter_mut().find(|(_, c)| c.name == stats.name) {
                Some(slot) if slot.0 <= attempt => *slot = (attempt, stats),
                Some(_) => {}
                None => list.push((attempt, stats)),
            }
        }
        Ok(out
            .into_iter()
            .map(|(uid, v)| (uid, v.into_iter().map(|(_, c)| c).collect()))
            .collect())
    }

    /// When each pod's ready sandbox was created, by pod UID.
    async fn sandbox_start_times(&self) -> Result<HashMap<String, SystemTime>, StatsError> {
        let Some(runtime) = &self.runtime else {
            return Ok(HashMap::new());
        };
        let ready = api::PodSandboxFilter {
            state: Some(api::PodSandboxStateValue {
                state: api::PodSandboxState::SandboxReady as i32,
            }),
            ..Default::default()
        };
        let mut out = HashMap::new();
        for sb in runtime.list_pod_sandbox(Some(ready)).await? {
            let (Some(meta), Some(t)) = (sb.metadata, from_nanos(sb.created_at)) else {
                continue;
            };
            let slot = out.entry(meta.uid).or_insert(t);
            *slot = (*slot).max(t);
        }
        Ok(out)
    }
}

fn from_nanos(ns: i64) -> Option<SystemTime> {
    (ns > 0).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns as u64))
}

#[async_trait]
impl StatsProvider for NodeStatsProvider {
    async fn summary(&self, pods: &[Arc<Pod>]) -> Result<Summary, StatsError> {
        let image_mount = self.image_fs_mountpoint().await;
        let containers = match self.container_stats().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "Eviction stats: failed to list container stats");
                HashMap::new()
            }
        };
        let started = self.sandbox_start_times().await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "Stats: failed to list pod sandboxes");
            HashMap::new()
        });
        let config = self.config.clone();
        let pods: Vec<Arc<Pod>> = pods.to_vec();
        let image_mount = match image_mount {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "Eviction stats: failed to get image filesystem info");
                None
            }
        };
        tokio::task::spawn_blocking(move || {
            blocking_summary(&config, image_mount.as_deref(), &pods, containers, &started)
        })
        .await?
    }

    async fn has_dedicated_image_fs(&self) -> Result<bool, StatsError> {
        let Some(mount) = self.image_fs_mountpoint().await? else {
            return Ok(false);
        };
        let root = self.config.root_dir.clone();
        tokio::task::spawn_blocking(move || -> Result<bool, StatsError> {
            let dev = |p: &Path| {
                std::fs::metadata(p)
                    .map(|m| m.dev())
                    .map_err(|source| FsUsageError::Stat {
                        path: p.to_path_buf(),
                        source,
                    })
            };
            Ok(dev(&mount)? != dev(&root)?)
        })
        .await?
    }
}

fn blocking_summary(
    config: &NodeStatsProviderConfig,
    image_mount: Option<&Path>,
    pods: &[Arc<Pod>],
    mut containers: HashMap<String, Vec<ContainerStats>>,
    started: &HashMap<String, SystemTime>,
) -> Result<Summary, StatsError> {
    let now = SystemTime::now();
    let node_memory = node_memory(config, now)?;
    let allocatable_memory = cgroup_memory(config, &config.pods_cgroup, now)
        .map_err(
            |e| tracing::warn!(error = %e, "Eviction stats: no memory stats of the pods cgroup"),
        )
        .ok();
    let fs = statfs_usage(&config.root_dir)?;
    let image_fs = match image_mount {
        Some(m) => statfs_usage(m)
            .map_err(|e| tracing::warn!(error = %e, "Eviction stats: image filesystem"))
            .ok(),
        None => Some(fs.clone()),
    };
    let rlimit = rlimit_stats(&config.proc_root, now);
    let logs_fs = statfs_usage(&config.pod_logs_dir).ok();
    let mut pod_stats = Vec::new();
    for pod in pods {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut cs = containers.remove(&uid).unwrap_or_default();
        for c in &mut cs {
            fill_capacity(&mut c.rootfs, image_fs.as_ref());
        }
        let mut stats = one_pod(config, pod, &uid, cs, now);
        for c in &mut stats.containers {
            fill_capacity(&mut c.logs, logs_fs.as_ref());
        }
        stats.start_time = started.get(&uid).copied();
        pod_stats.push(stats);
    }
    Ok(Summary {
        node: NodeStats {
            node_name: config.node_name.clone(),
            memory: Some(node_memory),
            allocatable_memory,
            fs: Some(fs),
            image_fs,
            rlimit: Some(rlimit),
            start_time: host::boot_time(&config.proc_root),
            allocatable_start_time: host::cgroup_start_time(
                &config.memory_cgroup_mount.join(&config.pods_cgroup),
            ),
            network: network_stats(&config.proc_root.join("net/dev"), now),
        },
        pods: pod_stats,
    })
}

fn node_memory(
    config: &NodeStatsProviderConfig,
    now: SystemTime,
) -> Result<MemoryStats, StatsError> {
    let meminfo = read_meminfo(&config.proc_root.join("meminfo"))?;
    let capacity = meminfo.get("MemTotal").copied().unwrap_or(0);
    let (usage, ws) = if config.unified {
        unified_root_working_set(
            &config.memory_cgroup_mount,
            &config.proc_root.join("meminfo"),
        )?
    } else {
        cgroup_v1_working_set(&config.memory_cgroup_mount)?
    };
    let counters = if config.unified {
        host::host_memory_counters(&config.proc_root)
    } else {
        host::cgroup_memory_counters(&config.memory_cgroup_mount, false)
    };
    Ok(MemoryStats {
        time: Some(now),
        available_bytes: Some(capacity.saturating_sub(ws)),
        usage_bytes: Some(usage),
        working_set_bytes: Some(ws),
        rss_bytes: counters.rss,
        page_faults: counters.page_faults,
        major_page_faults: counters.major_page_faults,
    })
}

/// Memory of a cgroup below the memory mount; available only when limited.
fn cgroup_memory(
    config: &NodeStatsProviderConfig,
    rel: &Path,
    now: SystemTime,
) -> Result<MemoryStats, MemoryReadError> {
    let dir = config.memory_cgroup_mount.join(rel);
    let (usage, ws) = if config.unified {
        cgroup_v2_working_set(&dir)?
    } else {
        cgroup_v1_working_set(&dir)?
    };
    let limit = cgroup_memory_limit(&dir, config.unified)?;
    let counters = host::cgroup_memory_counters(&dir, config.unified);
    Ok(MemoryStats {
        time: Some(now),
        available_bytes: limit.map(|l| l.saturating_sub(ws)),
        usage_bytes: Some(usage),
        working_set_bytes: Some(ws),
        rss_bytes: counters.rss,
        page_faults: counters.page_faults,
        major_page_faults: counters.major_page_faults,
    })
}

/// Gives a usage the capacity, free space and inodes of the filesystem it
/// lives on.
fn fill_capacity(usage: &mut Option<FsStats>, device: Option<&FsStats>) {
    let (Some(u), Some(d)) = (usage.as_mut(), device) else {
        return;
    };
    u.capacity_bytes = d.capacity_bytes;
    u.available_bytes = d.available_bytes;
    u.inodes = d.inodes;
    u.inodes_free = d.inodes_free;
}

/// pid_max, and the number of tasks from the fourth field of loadavg
/// (`running/total`), which unlike sysinfo does not truncate.
fn rlimit_stats(proc_root: &Path, now: SystemTime) -> RlimitStats {
    let max_pid = std::fs::read_to_string(proc_root.join("sys/kernel/pid_max"))
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let running = std::fs::read_to_string(proc_root.join("loadavg"))
        .ok()
        .and_then(|s| {
            let field = s.split_whitespace().nth(3)?.to_string();
            field.split_once('/')?.1.parse().ok()
        });
    RlimitStats {
        time: Some(now),
        max_pid,
        num_of_running_processes: running,
    }
}

/// Where a pod's cgroup may be, relative to a controller mount.
pub(crate) fn pod_cgroup_candidates(config: &NodeStatsProviderConfig, uid: &str) -> Vec<PathBuf> {
    let base = &config.pods_cgroup;
    if config.systemd_driver {
        let u = uid.replace('-', "_");
        vec![
            base.join(format!("kubepods-pod{u}.slice")),
            base.join("kubepods-burstable.slice")
                .join(format!("kubepods-burstable-pod{u}.slice")),
            base.join("kubepods-besteffort.slice")
                .join(format!("kubepods-besteffort-pod{u}.slice")),
        ]
    } else {
        vec![
            base.join(format!("pod{uid}")),
            base.join("burstable").join(format!("pod{uid}")),
            base.join("besteffort").join(format!("pod{uid}")),
        ]
    }
}

fn one_pod(
    config: &NodeStatsProviderConfig,
    pod: &Pod,
    uid: &str,
    mut containers: Vec<ContainerStats>,
    now: SystemTime,
) -> PodStats {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let cgroup = pod_cgroup_candidates(config, uid)
        .into_iter()
        .find(|rel| config.memory_cgroup_mount.join(rel).is_dir());
    let memory = cgroup
        .as_ref()
        .and_then(|rel| cgroup_memory(config, rel, now).ok());
    let network = cgroup
        .as_ref()
        .and_then(|rel| host::any_pid_in(&config.memory_cgroup_mount.join(rel)))
        .and_then(|pid| network_stats(&config.proc_root.join(format!("{pid}/net/dev")), now));
    let process_stats = cgroup.as_ref().and_then(|rel| {
        let dir = match (&config.pids_cgroup_mount, config.unified) {
            (_, true) => config.memory_cgroup_mount.join(rel),
            (Some(m), false) => m.join(rel),
            (None, false) => return None,
        };
        let count = std::fs::read_to_string(dir.join("pids.current"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(ProcessStats {
            process_count: Some(count),
        })
    });
    let pod_logs = build_pod_logs_directory(&namespace, &name, uid);
    let logs_dir = config
        .pod_logs_dir
        .join(pod_logs.file_name().unwrap_or_default());
    for c in &mut containers {
        c.logs = dir_fs_stats(&logs_dir.join(&c.name)).ok();
    }
    let mut volume_stats = Vec::new();
    let volumes_dir = config.root_dir.join("pods").join(uid).join("volumes");
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let plugin_dir = if v.empty_dir.is_some() {
            "kubernetes.io~empty-dir"
        } else if v.config_map.is_some() {
            "kubernetes.io~configmap"
        } else if v.secret.is_some() {
            "kubernetes.io~secret"
        } else if v.downward_api.is_some() {
            "kubernetes.io~downward-api"
        } else if v.projected.is_some() {
            "kubernetes.io~projected"
        } else {
            continue;
        };
        if let Ok(fs) = dir_fs_stats(&volumes_dir.join(plugin_dir).join(&v.name)) {
            volume_stats.push(VolumeStats {
                name: v.name.clone(),
                fs,
            });
        }
    }
    let ephemeral_storage = Some(ephemeral_usage(pod, &containers, &volume_stats, now));
    PodStats {
        name,
        namespace,
        uid: uid.to_string(),
        containers,
        memory,
        volume_stats,
        ephemeral_storage,
        process_stats,
        start_time: None,
        network,
    }
}

/// A pod's local ephemeral storage: its containers' writable layers and
/// logs, and its local ephemeral volumes (emptyDir not in memory, configMap,
/// downwardAPI, gitRepo).
fn ephemeral_usage(
    pod: &Pod,
    containers: &[ContainerStats],
    volumes: &[VolumeStats],
    now: SystemTime,
) -> FsStats {
    let mut bytes = 0u64;
    let mut inodes = 0u64;
    for c in containers {
        for fs in [&c.rootfs, &c.logs].into_iter().flatten() {
            bytes += fs.used_bytes.unwrap_or(0);
            inodes += fs.inodes_used.unwrap_or(0);
        }
    }
    for name in crate::kubelet::eviction::rank::local_ephemeral_volume_names(pod) {
        if let Some(v) = volumes.iter().find(|v| v.name == name) {
            bytes += v.fs.used_bytes.unwrap_or(0);
            inodes += v.fs.inodes_used.unwrap_or(0);
        }
    }
    FsStats {
        time: Some(now),
        used_bytes: Some(bytes),
        inodes_used: Some(inodes),
        ..FsStats::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, systemd: bool) -> NodeStatsProviderConfig {
        NodeStatsProviderConfig {
            node_name: "n".into(),
            root_dir: dir.to_path_buf(),
            pod_logs_dir: dir.join("logs"),
            proc_root: dir.join("proc"),
            memory_cgroup_mount: dir.join("memory"),
            pids_cgroup_mount: Some(dir.join("pids")),
            cpu_cgroup_mount: Some(dir.join("cpuacct")),
            unified: false,
            pods_cgroup: PathBuf::from(if systemd {
                "kubepods.slice"
            } else {
                "kubepods"
            }),
            systemd_driver: systemd,
        }
    }

    #[test]
    fn pod_cgroup_paths_follow_the_driver() {
        let d = Path::new("/x");
        let c = pod_cgroup_candidates(&config(d, false), "a-b");
        assert_eq!(c[1], PathBuf::from("kubepods/burstable/poda-b"));
        let c = pod_cgroup_candidates(&config(d, true), "a-b");
        assert_eq!(
            c[2],
            PathBuf::from(
                "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poda_b.slice"
            )
        );
    }

    #[test]
    fn rlimit_reads_pid_max_and_loadavg_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path();
        std::fs::create_dir_all(proc_root.join("sys/kernel")).unwrap();
        std::fs::write(proc_root.join("sys/kernel/pid_max"), "4194304\n").unwrap();
        std::fs::write(proc_root.join("loadavg"), "0.10 0.20 0.30 2/345 6789\n").unwrap();
        let r = rlimit_stats(proc_root, SystemTime::now());
        assert_eq!(r.max_pid, Some(4194304));
        assert_eq!(r.num_of_running_processes, Some(345));
    }
}
