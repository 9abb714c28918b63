//! The eviction manager's configuration, from the KubeletConfiguration.

use std::path::PathBuf;
use std::time::Duration;

use super::threshold::{Threshold, ThresholdError, parse_threshold_config};
use crate::apis::config::KubeletConfiguration;

/// How the manager is configured.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// How long a pressure condition stays after its threshold clears.
    pub pressure_transition_period: Duration,
    /// The grace period given to pods evicted for a soft threshold.
    pub max_pod_grace_period_seconds: i64,
    pub thresholds: Vec<Threshold>,
    /// Whether pods past their local storage limits are evicted.
    pub local_storage_capacity_isolation: bool,
    /// Whether memory thresholds also arm kernel memcg notifications
    /// (cgroup v1 only; needs `memory_cgroup`).
    pub kernel_memcg_notification: bool,
    /// The v1 memory controller's mount and the pods cgroup below it, for
    /// the memcg notifiers.
    pub memory_cgroup: Option<MemoryCgroup>,
}

/// Where the memcg notifiers register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCgroup {
    /// The memory controller's mount (`/sys/fs/cgroup/memory`).
    pub mount: PathBuf,
    /// The cgroup all pods run under, relative to the mount (`kubepods`).
    pub pods_cgroup: PathBuf,
}

impl EvictionConfig {
    /// Parses the eviction settings of `config`.
    pub fn from_kubelet_config(config: &KubeletConfiguration) -> Result<Self, ThresholdError> {
        Ok(EvictionConfig {
            pressure_transition_period: config.eviction_pressure_transition_period.to_std(),
            max_pod_grace_period_seconds: i64::from(config.eviction_max_pod_grace_period),
            thresholds: parse_threshold_config(
                &config.enforce_node_allocatable,
                &config.eviction_hard,
                &config.eviction_soft,
                &config.eviction_soft_grace_period,
                &config.eviction_minimum_reclaim,
            )?,
            local_storage_capacity_isolation: config.local_storage_capacity_isolation,
            kernel_memcg_notification: config.kernel_memcg_notification,
            memory_cgroup: None,
        })
    }
}
