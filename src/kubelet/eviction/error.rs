//! Errors of the eviction manager.

use crate::kubelet::stats::StatsError;

#[derive(Debug, thiserror::Error)]
pub enum EvictionError {
    #[error("eviction manager: failed to get HasDedicatedImageFs: {0}")]
    DedicatedImageFs(#[source] StatsError),
    #[error("eviction manager: failed to get summary stats: {0}")]
    Stats(#[source] StatsError),
    #[error("eviction manager: no ranking function for signal {0}")]
    NoRankFunc(String),
    #[error("kill pod {pod}: {message}")]
    KillPod { pod: String, message: String },
    #[error("{what}: {message}")]
    Reclaim { what: &'static str, message: String },
}
