//! Mirror pods as pod sync and housekeeping use them: the API server's
//! copies of static pods (none standalone).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::pod::PodManager;

/// The mirror pods of the static pods the kubelet runs.
#[async_trait]
pub trait MirrorPods: Send + Sync + 'static {
    /// Creates the static pod's mirror pod when it has none, replacing one
    /// that is outdated or being deleted (syncPod).
    async fn sync(&self, pod: &Pod, mirror: Option<&Pod>);
    /// Deletes the mirror pods whose static pod is gone, unless that pod
    /// still terminates (`is_terminating`, by full name) (HandlePodCleanups).
    async fn delete_orphaned(
        &self,
        pods: &PodManager,
        is_terminating: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync),
    );
}
