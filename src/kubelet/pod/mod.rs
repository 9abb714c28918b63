//! pkg/kubelet/pod: the desired pods and their mirror pods.

mod mirror_client;
mod pod_manager;

pub use mirror_client::{
    BasicMirrorClient, MirrorClient, MirrorError, delete_orphaned_mirror_pods, mirror_pod_for,
    sync_mirror_pod,
};
pub use pod_manager::{PodManager, PodObjectRegistrar, get_hash_from_mirror_pod, get_pod_hash};
