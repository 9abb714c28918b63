//! pkg/kubelet/pod: the desired pods and their mirror pods.

mod pod_manager;

pub use pod_manager::{PodManager, PodObjectRegistrar, get_hash_from_mirror_pod, get_pod_hash};
