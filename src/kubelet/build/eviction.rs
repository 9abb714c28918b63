//! The eviction manager's seams on the kubelet's side: the stats provider
//! over this host's cgroups and the runtime, the pod killer over the pod
//! workers (Go's killPodNow), and the pressure source node status reads,
//! set once the manager exists (node status is built before it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use crate::cri::RuntimeServices;
use crate::kubelet::eviction::{EvictionError, EvictionStatus, PodKiller};
use crate::kubelet::nodestatus::sources::PressureSource;
use crate::kubelet::pod_workers::{PodStatusFn, PodWorkers};
use crate::kubelet::stats::{NodeStatsProvider, NodeStatsProviderConfig, StatsError};

/// Node status's view of the pressure conditions: none until the eviction
/// manager is set.
#[derive(Clone, Default)]
pub struct LatePressure(Arc<OnceLock<Arc<dyn PressureSource>>>);

impl LatePressure {
    pub fn set(&self, source: Arc<dyn PressureSource>) {
        let _ = self.0.set(source);
    }

    fn with(&self, f: impl Fn(&dyn PressureSource) -> bool) -> bool {
        self.0.get().is_some_and(|s| f(s.as_ref()))
    }
}

impl PressureSource for LatePressure {
    fn memory_pressure(&self) -> bool {
        self.with(|s| s.memory_pressure())
    }
    fn disk_pressure(&self) -> bool {
        self.with(|s| s.disk_pressure())
    }
    fn pid_pressure(&self) -> bool {
        self.with(|s| s.pid_pressure())
    }
}

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
    .await
    .map_err(|e| StatsError::Other(e.to_string()))??;
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
