//! The eviction manager's configuration, from the KubeletConfiguration.

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
        })
    }
}
