//! pkg/kubelet/lifecycle: pod admission.
//!
//! Before the kubelet starts a pod it asks every [`PodAdmitHandler`] in turn
//! ([`PodAdmitHandlers::can_admit_pod`], Go's `canAdmitPod`); the first that
//! refuses decides the pod's fate: it is not run, and its status becomes
//! phase Failed with the handler's reason and message
//! ([`rejected_pod_status`]), plus a warning event. Other pods are never
//! touched by a rejection.
//!
//! Handlers built here:
//! - [`PredicateAdmitHandler`]: the scheduler predicates the kubelet re-checks
//!   (resources fit: `OutOfcpu`, `OutOfmemory`, `OutOfpods`,
//!   `OutOfephemeral-storage`, `OutOf<extended>`; `NodeAffinity`, `NodeName`,
//!   `NodePorts`, `TaintToleration` for NoExecute taints on non-static pods;
//!   the OS label and field checks), with an [`AdmissionFailureHandler`] hook
//!   where critical (static) pods may preempt others.
//! - [`SysctlAllowlist`]: the safe sysctls plus `allowedUnsafeSysctls`
//!   (`SysctlForbidden`).
//!
//! Everything is pure and synchronous: the node comes from a [`NodeGetter`]
//! that reads the kubelet's cached Node (or its locally built initial Node).

mod affinity;
mod error;
mod interfaces;
mod node_info;
mod predicate;
mod resource_names;
mod sysctl;
mod taints;

pub use affinity::{RequiredNodeAffinity, match_node_selector_terms};
pub use error::LifecycleError;
pub use interfaces::{
    PodAdmitAttributes, PodAdmitHandler, PodAdmitHandlers, PodAdmitResult, rejected_pod_status,
};
pub use node_info::{HostPortInfo, NodeInfo, Resource, compute_pod_resource_request};
pub use predicate::{
    AdmissionFailureHandler, AdmissionFailureHandlerStub, NodeGetter, PluginResourceUpdateFn,
    PredicateAdmitHandler, PredicateFailureReason, general_filter,
};
pub use resource_names::{
    is_extended_resource_name, is_hugepage_resource_name, is_native_resource,
    is_prefixed_native_resource, is_scalar_resource_name,
};
pub use sysctl::{
    FORBIDDEN_REASON as SYSCTL_FORBIDDEN_REASON, SysctlAllowlist, SysctlNamespace, namespaced_by,
    safe_sysctl_allowlist,
};
pub use taints::{find_matching_untolerated_taint, toleration_tolerates_taint};
