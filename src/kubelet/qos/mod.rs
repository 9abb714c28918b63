//! Quality of service: the pod's QoS class (Guaranteed, Burstable,
//! BestEffort) and the oom_score_adj policy derived from it
//! (pkg/apis/core/v1/helper/qos and pkg/kubelet/qos).

pub mod policy;

/// The class itself is computed once, in `cm::qos`, for cgroups and runtime alike.
pub use crate::cm::qos::{QosClass, get_pod_qos};
pub use crate::kubelet::types::{
    is_critical_pod, is_mirror_pod, is_node_critical_pod, is_static_pod,
};
pub use policy::{KUBE_PROXY_OOM_SCORE_ADJ, KUBELET_OOM_SCORE_ADJ, get_container_oom_score_adjust};
