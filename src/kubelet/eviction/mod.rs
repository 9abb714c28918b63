//! pkg/kubelet/eviction: eviction signals and thresholds, the stats they
//! are observed from, the eviction manager (node pressure conditions,
//! node-level reclaim, ranking and evicting pods, local storage limits) and
//! its admission check.

mod adapters;
mod admit;
mod config;
mod error;
pub mod evaluate;
mod local_storage;
mod manager;
pub mod memcg;
pub mod message;
mod notifiers;
pub mod rank;
mod seams;
pub mod signals;
#[cfg(test)]
mod testing;
pub use crate::apis::eviction as threshold;

pub use adapters::RuntimeContainerGc;
pub use admit::{EvictionAdmitHandler, TAINT_NODE_MEMORY_PRESSURE, admit_under_pressure};
pub use config::{EvictionConfig, MemoryCgroup};
pub use error::EvictionError;
pub use evaluate::NodeConditionType;
pub use local_storage::local_storage_violation;
pub use manager::{
    EvictionDeps, EvictionManager, MONITORING_INTERVAL, POD_CLEANUP_POLL, POD_CLEANUP_TIMEOUT,
};
pub use seams::{
    ActivePodsFn, ContainerGc, EvictionStatus, ImageGc, NodeReclaim, PodCleanedUpFn, PodKiller,
    node_reclaim_for,
};
