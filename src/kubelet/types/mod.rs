//! pkg/kubelet/types: the vocabulary the pod sources, the pod manager and the
//! sync loop share: pod operations and updates, source names, the config
//! annotations, static/mirror/critical pod predicates, pod full names and the
//! kubelet's timestamp format.

mod names;
mod pod_update;
mod timestamp;

pub use names::{
    MirrorPodUid, PodFullNameError, ResolvedPodUid, build_pod_full_name, get_pod_full_name,
    parse_pod_full_name,
};
pub use pod_update::{
    ALL_SOURCE, API_SOURCE, CONFIG_FIRST_SEEN_ANNOTATION_KEY, CONFIG_HASH_ANNOTATION_KEY,
    CONFIG_MIRROR_ANNOTATION_KEY, CONFIG_SOURCE_ANNOTATION_KEY, FILE_SOURCE, HTTP_SOURCE,
    NAMESPACE_DEFAULT, PodOperation, PodUpdate, SYSTEM_CRITICAL_PRIORITY, SYSTEM_NODE_CRITICAL,
    SyncPodType, UnknownSourceError, get_pod_source, get_validated_sources, is_critical_pod,
    is_critical_pod_based_on_priority, is_mirror_pod, is_node_critical_pod, is_static_pod,
    preemptable,
};
pub use timestamp::{format_rfc3339_nano, local_time_zone, parse_rfc3339};
