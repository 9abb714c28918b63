//! The eviction manager's seams on the kubelet's side: the stats provider
//! over this host's cgroups and the runtime and the pod killer over the pod
//! workers (Go's killPodNow).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use crate::cri::RuntimeServices;
use crate::kubelet::eviction::{
    EvictionConfig, EvictionDeps, EvictionError, EvictionManager, EvictionStatus, MemoryCgroup,
    PodKiller, RuntimeContainerGc,
};
use crate::kubelet::pod_workers::{PodStatusFn, PodWorkers};
use crate::kubelet::stats::{NodeStatsProvider, NodeStatsProviderConfig, StatsError};

/// Evicts through the pod workers: the pod is killed with the given grace
/// period and ends with the eviction status.
pub struct WorkersPodKiller(pub PodWorkers);

#[async_trait]
impl PodKiller for WorkersPodKiller {
    async fn kill_pod(
        &self,
        pod: &Arc<Pod>,
        status: EvictionStatus,
        grace_period_seconds: i64,
    ) -> Result<(), EvictionError> {
        let status_fn: PodStatusFn = Arc::new(move |s| {
            s.phase = Some(status.phase.clone());
            s.reason = Some(status.reason.clone());
            s.message = Some(status.message.clone());
        });
        self.0
            .kill_pod_now(
                pod.clone(),
                true,
                Some(grace_period_seconds),
                Some(status_fn),
            )
            .await
            .map_err(|e| EvictionError::KillPod {
                pod: crate::kubelet::container::format_pod(pod),
                message: e.to_string(),
            })
    }
}

/// The stats provider of this host (reads the cgroup layout: build phase,
/// on the blocking pool).
pub async fn stats_provider(
    node_name: &str,
    root_dir: &Path,
    pod_logs_root: &Path,
    pods_cgroup: &str,
    systemd_driver: bool,
    runtime_services: &RuntimeServices,
) -> Result<Arc<NodeStatsProvider>, StatsError> {
    let (node, root, logs) = (
        node_name.to_string(),
        root_dir.to_path_buf(),
        pod_logs_root.to_path_buf(),
    );
    let pods_cgroup = PathBuf::from(pods_cgroup);
    let mut config = tokio::task::spawn_blocking(move || {
        NodeStatsProviderConfig::detect(&node, &root, &pods_cgroup, systemd_driver)
    })
    .await??;
    config.pod_logs_dir = logs;
    Ok(Arc::new(NodeStatsProvider::new(
        config,
        Some(runtime_services.runtime.clone()),
        Some(runtime_services.image.clone()),
    )))
}

/// The resource metrics' numbers and the stats summary: the stats
/// provider over the pod manager's pods.
pub struct KubeletResourceUsage {
    pub stats: Arc<NodeStatsProvider>,
    pub pod_manager: Arc<crate::kubelet::pod::PodManager>,
    pub rates: crate::kubelet::stats::CpuRates,
}

#[async_trait]
impl crate::kubelet::server::stats_summary::SummarySource for KubeletResourceUsage {
    async fn summary(&self, only_cpu_and_memory: bool) -> Result<serde_json::Value, String> {
        use crate::kubelet::stats::StatsProvider;
        let pods = self.pod_manager.get_pods();
        let summary = self.stats.summary(&pods).await.map_err(|e| e.to_string())?;
        let usage = self
            .stats
            .resource_usage(&pods)
            .await
            .map_err(|e| e.to_string())?;
        Ok(crate::kubelet::stats::summary_json(
            &summary,
            &usage,
            &self.rates,
            only_cpu_and_memory,
        ))
    }
}

#[async_trait]
impl crate::kubelet::server::resource_metrics::ResourceUsageSource for KubeletResourceUsage {
    async fn resource_usage(&self) -> Result<crate::kubelet::stats::ResourceUsage, String> {
        self.stats
            .resource_usage(&self.pod_manager.get_pods())
            .await
            .map_err(|e| e.to_string())
    }
}

/// The stats provider of this host and the eviction manager over it,
/// killing through the pod workers.
pub(super) async fn build(
    env: &super::Env,
    runtime: &super::runtime::RuntimeParts,
    core: &super::lifecycle::PodCore,
    sources: &super::sources::PodSources,
) -> Result<(Arc<NodeStatsProvider>, Arc<EvictionManager>), super::BuildError> {
    use super::BuildError;
    let c = &env.server.config;
    let stats = stats_provider(
        &env.node_name,
        Path::new(&env.server.flags.root_directory),
        &env.pod_logs_root,
        &env.container_manager.get_pod_cgroup_root(),
        c.cgroup_driver == "systemd",
        &env.runtime_services,
    )
    .await
    .map_err(|e| BuildError::Eviction(e.to_string()))?;
    let mut config =
        EvictionConfig::from_kubelet_config(c).map_err(|e| BuildError::Eviction(e.to_string()))?;
    if config.kernel_memcg_notification {
        let sc = stats.config();
        if !sc.unified {
            config.memory_cgroup = Some(MemoryCgroup {
                mount: sc.memory_cgroup_mount.clone(),
                pods_cgroup: sc.pods_cgroup.clone(),
            });
        }
    }
    let active_pods = core.active_pods_fn();
    let cleaned = core.pod_workers.clone();
    let gc_ready = sources.ready.clone();
    let manager = EvictionManager::new(
        config,
        EvictionDeps {
            stats: stats.clone(),
            killer: Arc::new(WorkersPodKiller(core.pod_workers.clone())),
            image_gc: runtime.image_gc.clone(),
            container_gc: Arc::new(RuntimeContainerGc::new(
                runtime.runtime.clone(),
                runtime.container_gc_policy,
                Arc::new(move || gc_ready.all_ready()),
            )),
            recorder: env.events.clone(),
            node_ref: super::node_ref(&env.node_name),
            clock: core.clock.clone(),
            active_pods,
            pod_cleaned_up: Arc::new(move |pod: &Pod| {
                !cleaned
                    .could_have_running_containers(pod.metadata.uid.as_deref().unwrap_or_default())
            }),
        },
    );
    Ok((stats, manager))
}
