//! What the eviction manager calls out to: the pod killer, image and
//! container garbage collection, the active pods and whether an evicted
//! pod's resources are gone. The kubelet passes adapters over its pod
//! workers and GC managers; unit tests pass fakes.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::error::EvictionError;

/// The pods eligible for eviction (admitted, not terminated).
pub type ActivePodsFn = Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>;
/// Whether every resource of an evicted pod has been reclaimed.
pub type PodCleanedUpFn = Arc<dyn Fn(&Pod) -> bool + Send + Sync>;

/// The status an evicted pod ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionStatus {
    /// Always `Failed`.
    pub phase: String,
    /// Always `Evicted`.
    pub reason: String,
    pub message: String,
}

/// Stops a pod for eviction.
#[async_trait]
pub trait PodKiller: Send + Sync + 'static {
    /// Kills `pod` with `grace_period_seconds` instead of its own, records
    /// `status` as its final status, and returns once it is stopped.
    async fn kill_pod(
        &self,
        pod: &Arc<Pod>,
        status: EvictionStatus,
        grace_period_seconds: i64,
    ) -> Result<(), EvictionError>;
}

/// Frees image filesystem space by removing unused images.
#[async_trait]
pub trait ImageGc: Send + Sync + 'static {
    async fn delete_unused_images(&self) -> Result<(), EvictionError>;
}

/// Frees space by removing every dead container (those of terminated pods
/// included).
#[async_trait]
pub trait ContainerGc: Send + Sync + 'static {
    async fn delete_all_unused_containers(&self) -> Result<(), EvictionError>;
}

/// A node-level reclaim step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeReclaim {
    DeleteUnusedContainers,
    DeleteUnusedImages,
}

/// What the manager tries before evicting pods for a signal: with a
/// dedicated image filesystem, imagefs pressure removes dead containers and
/// unused images and nodefs pressure nothing; without, any disk pressure
/// does both. Memory and PID pressure have nothing to reclaim.
pub fn node_reclaim_for(
    signal: super::threshold::Signal,
    dedicated_image_fs: bool,
) -> Vec<NodeReclaim> {
    use super::threshold::Signal::*;
    let gc = vec![
        NodeReclaim::DeleteUnusedContainers,
        NodeReclaim::DeleteUnusedImages,
    ];
    match signal {
        ImageFsAvailable | ImageFsInodesFree => gc,
        NodeFsAvailable | NodeFsInodesFree if !dedicated_image_fs => gc,
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::threshold::Signal;
    use super::*;

    #[test]
    fn node_reclaim_table() {
        use NodeReclaim::*;
        let gc = vec![DeleteUnusedContainers, DeleteUnusedImages];
        let cases = [
            (Signal::MemoryAvailable, false, vec![]),
            (Signal::AllocatableMemoryAvailable, true, vec![]),
            (Signal::PidAvailable, false, vec![]),
            (Signal::NodeFsAvailable, false, gc.clone()),
            (Signal::NodeFsInodesFree, false, gc.clone()),
            (Signal::NodeFsAvailable, true, vec![]),
            (Signal::NodeFsInodesFree, true, vec![]),
            (Signal::ImageFsAvailable, true, gc.clone()),
            (Signal::ImageFsInodesFree, true, gc.clone()),
            (Signal::ImageFsAvailable, false, gc.clone()),
        ];
        for (signal, dedicated, want) in cases {
            assert_eq!(
                node_reclaim_for(signal, dedicated),
                want,
                "{signal} dedicated={dedicated}"
            );
        }
    }
}
