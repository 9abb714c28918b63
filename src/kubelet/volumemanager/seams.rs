//! What the volume manager reads from the rest of the kubelet: the pods it
//! should serve (the pod manager), whether their containers may run or
//! have stopped (the pod workers), and whether every pod source has been
//! heard from. Traits, so the manager never holds those subsystems.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::config::SourcesReady;
use crate::kubelet::pod::PodManager;

/// The desired pods (Go's pod manager view).
pub trait PodLister: Send + Sync {
    fn get_pods(&self) -> Vec<Arc<Pod>>;
    fn get_pod_by_uid(&self, uid: &str) -> Option<Arc<Pod>>;
}

impl PodLister for PodManager {
    fn get_pods(&self) -> Vec<Arc<Pod>> {
        PodManager::get_pods(self)
    }

    fn get_pod_by_uid(&self, uid: &str) -> Option<Arc<Pod>> {
        PodManager::get_pod_by_uid(self, uid)
    }
}

/// The pod workers' view of a pod's lifecycle.
pub trait PodStateProvider: Send + Sync {
    /// The pod is terminating or terminated: mount nothing new for it.
    fn should_pod_containers_be_terminating(&self, uid: &str) -> bool;
    /// All its containers have stopped: its volumes may be unmounted.
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool;
}

/// Whether every configured pod source has delivered its pods.
pub trait SourcesReadyCheck: Send + Sync {
    fn all_ready(&self) -> bool;
}

impl SourcesReadyCheck for SourcesReady {
    fn all_ready(&self) -> bool {
        SourcesReady::all_ready(self)
    }
}
