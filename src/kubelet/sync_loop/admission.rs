//! Pod admission (Go's canAdmitPod and its admit handlers, and canRunPod's
//! soft admission): sysctls against the allowlist, the general predicates
//! against the node (with critical pods allowed to preempt others for
//! resources), the pod's OS; AppArmor before each sync. A rejected pod is
//! failed with the handler's reason and message and never started.
//!
//! The eviction manager's handler runs first (through [`AdmitFn`]); the
//! container manager's resource allocation (topology manager over the
//! device and CPU managers) runs before the predicates.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use super::fit::{FitFailure, NodeFn, general_predicates, pod_request};
use crate::cm::qos::{QosClass, get_pod_qos};
use crate::kubelet::container::format_pod;
use crate::kubelet::types::{is_critical_pod, preemptable};

/// The outcome of an admission check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAdmitResult {
    pub admit: bool,
    pub reason: String,
    pub message: String,
}

impl PodAdmitResult {
    pub fn admit() -> Self {
        PodAdmitResult {
            admit: true,
            reason: String::new(),
            message: String::new(),
        }
    }

    pub fn reject(reason: impl Into<String>, message: impl Into<String>) -> Self {
        PodAdmitResult {
            admit: false,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The container manager's resource allocation as an admit handler: a
/// failure rejects the pod with the allocator's reason (Go's
/// GetPodAdmitResult: typed errors name themselves, others are
/// `UnexpectedAdmissionError`).
pub fn resource_allocation_admit(cm: Arc<dyn crate::cm::ContainerManager>) -> AdmitFn {
    Arc::new(move |pod: &Pod| match cm.allocate_resources(pod) {
        Ok(()) => PodAdmitResult::admit(),
        Err(e) => PodAdmitResult::reject(e.admission_reason(), e.admission_message()),
    })
}

/// Sysctls every pod may set (v1.25's safe set).
pub const SAFE_SYSCTLS: [&str; 5] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
/// The reason of a sysctl rejection.
pub const SYSCTL_FORBIDDEN_REASON: &str = "SysctlForbidden";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SysctlNamespace {
    Ipc,
    Net,
    Unknown,
}

impl SysctlNamespace {
    fn of(name: &str) -> Self {
        let ipc = ["kernel.shm", "kernel.msg", "kernel.sem", "fs.mqueue."];
        if ipc.iter().any(|p| name.starts_with(p)) {
            SysctlNamespace::Ipc
        } else if name.starts_with("net.") {
            SysctlNamespace::Net
        } else {
            SysctlNamespace::Unknown
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            SysctlNamespace::Ipc => "ipc",
            SysctlNamespace::Net => "net",
            SysctlNamespace::Unknown => "",
        }
    }
}

/// The sysctl allowlist: the safe set plus allowedUnsafeSysctls (names, or
/// prefixes ending in `*`).
#[derive(Debug, Clone, Default)]
pub struct SysctlAllowlist {
    names: Vec<String>,
    prefixes: Vec<String>,
}

impl SysctlAllowlist {
    pub fn new(allowed_unsafe: &[String]) -> Self {
        let mut list = SysctlAllowlist::default();
        for s in SAFE_SYSCTLS
            .iter()
            .map(|s| s.to_string())
            .chain(allowed_unsafe.iter().cloned())
        {
            match s.strip_suffix('*') {
                Some(prefix) => list.prefixes.push(prefix.to_string()),
                None => list.names.push(s),
            }
        }
        list
    }

    fn validate(&self, name: &str, host_net: bool, host_ipc: bool) -> Result<(), AdmissionError> {
        let allowed = self.names.iter().any(|n| n == name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()));
        if !allowed {
            return Err(AdmissionError::SysctlNotAllowlisted(name.to_string()));
        }
        let ns = SysctlNamespace::of(name);
        if (ns == SysctlNamespace::Ipc && host_ipc) || (ns == SysctlNamespace::Net && host_net) {
            return Err(AdmissionError::SysctlHostNamespace {
                name: name.to_string(),
                namespace: ns.as_str(),
            });
        }
        Ok(())
    }

    /// The admit handler.
    pub fn admit(&self, pod: &Pod) -> PodAdmitResult {
        let Some(spec) = pod.spec.as_ref() else {
            return PodAdmitResult::admit();
        };
        let sysctls = spec
            .security_context
            .as_ref()
            .and_then(|s| s.sysctls.as_deref())
            .unwrap_or_default();
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        for s in sysctls {
            if let Err(e) = self.validate(&s.name, host_net, host_ipc) {
                return PodAdmitResult::reject(
                    SYSCTL_FORBIDDEN_REASON,
                    format!("forbidden sysctl: {e}"),
                );
            }
        }
        PodAdmitResult::admit()
    }
}

/// Why a sysctl is refused or a critical pod could not preempt others.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error("{0:?} not allowlisted")]
    SysctlNotAllowlisted(String),
    #[error("{name:?} not allowed with host {namespace} enabled")]
    SysctlHostNamespace {
        name: String,
        namespace: &'static str,
    },
    #[error(
        "preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [{}]",
        .0.iter().map(|(name, q)| format!("(res: {name}, q: {q}), ")).collect::<String>()
    )]
    NoVictims(Vec<(String, i64)>),
    #[error("preemption: no way to evict pods")]
    NoEvictor,
    #[error("preemption: pod {pod} failed to evict {reason}")]
    Evict { pod: String, reason: String },
}

/// Kills a pod to make room for a critical one (evicting it); resolves once
/// its containers stopped.
pub type PreemptFn = Arc<dyn Fn(Arc<Pod>) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What the predicate handler needs.
/// An admit handler another subsystem provides.
pub type AdmitFn = Arc<dyn Fn(&Pod) -> PodAdmitResult + Send + Sync>;

pub struct Admission {
    /// The eviction manager's handler (pods refused under node pressure),
    /// first as in Go.
    pub eviction: Option<AdmitFn>,
    pub node: NodeFn,
    pub sysctls: SysctlAllowlist,
    /// The container manager's resource allocation (the CPU manager
    /// assigns CPUs), after the sysctl check and before the predicates as
    /// in Go.
    pub resources: Option<AdmitFn>,
    /// Preempts a pod for a critical one; `None` disables preemption.
    pub preempt: Option<PreemptFn>,
    /// The node shutdown manager's handler (nothing admitted while the
    /// node shuts down), last as in Go.
    pub shutdown: Option<AdmitFn>,
}

fn qos_rank(pod: &Pod) -> u8 {
    match get_pod_qos(pod) {
        QosClass::BestEffort => 0,
        QosClass::Burstable => 1,
        QosClass::Guaranteed => 2,
    }
}

impl Admission {
    /// Runs the admit handlers in Go's order; the first rejection wins.
    pub async fn can_admit_pod(&self, active: &[Arc<Pod>], pod: &Pod) -> PodAdmitResult {
        if let Some(eviction) = &self.eviction {
            let r = eviction(pod);
            if !r.admit {
                return r;
            }
        }
        let sysctl = self.sysctls.admit(pod);
        if !sysctl.admit {
            return sysctl;
        }
        if let Some(resources) = &self.resources {
            // The allocators write their checkpoints: off the async threads.
            let (allocate, owned) = (resources.clone(), pod.clone());
            let r = tokio::task::spawn_blocking(move || allocate(&owned))
                .await
                .unwrap_or_else(|e| {
                    PodAdmitResult::reject(
                        "UnexpectedAdmissionError",
                        format!("Allocate failed due to {e}, which is unexpected"),
                    )
                });
            if !r.admit {
                return r;
            }
        }
        let predicates = self.predicates(active, pod).await;
        if !predicates.admit {
            return predicates;
        }
        match &self.shutdown {
            Some(shutdown) => shutdown(pod),
            None => predicates,
        }
    }

    async fn predicates(&self, active: &[Arc<Pod>], pod: &Pod) -> PodAdmitResult {
        let node = (self.node)();
        let mut failures = general_predicates(pod, &node, active);
        if !failures.is_empty() && is_critical_pod(pod) {
            let (resource, other): (Vec<FitFailure>, Vec<FitFailure>) = failures
                .into_iter()
                .partition(|f| matches!(f, FitFailure::Insufficient { .. }));
            if other.is_empty() {
                if let Err(e) = self.preempt_for(pod, active, &resource).await {
                    tracing::info!(pod = %format_pod(pod), err = %e, "Failed to admit pod, unexpected error while attempting to recover from admission failure");
                    return PodAdmitResult::reject(
                        "UnexpectedAdmissionError",
                        format!(
                            "Unexpected error while attempting to recover from admission failure: {e}"
                        ),
                    );
                }
                failures = Vec::new();
            } else {
                failures = other;
            }
        }
        if let Some(first) = failures.first() {
            crate::vlog!(2, pod = %format_pod(pod), err = %first.message(), "Predicate failed on Pod");
            return PodAdmitResult::reject(first.reason(), first.message());
        }
        let os = std::env::consts::OS;
        let node_os = node
            .labels
            .get("kubernetes.io/os")
            .filter(|v| v.as_str() == os)
            .cloned()
            .unwrap_or_else(|| os.to_string());
        if let Some(wanted) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/os"))
            && *wanted != node_os
        {
            return PodAdmitResult::reject(
                "PodOSSelectorNodeLabelDoesNotMatch",
                "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
            );
        }
        if let Some(pod_os) = pod.spec.as_ref().and_then(|s| s.os.as_ref())
            && pod_os.name != os
        {
            return PodAdmitResult::reject(
                "PodOSNotSupported",
                "Failed to admit pod as the OS field doesn't match node OS",
            );
        }
        PodAdmitResult::admit()
    }

    /// Frees what a critical pod lacks by evicting pods it may preempt,
    /// lowest QoS first (the critical pod admission handler).
    async fn preempt_for(
        &self,
        pod: &Pod,
        active: &[Arc<Pod>],
        lacking: &[FitFailure],
    ) -> Result<(), AdmissionError> {
        let mut needed: Vec<(String, i64)> = lacking
            .iter()
            .filter_map(FitFailure::insufficient_amount)
            .collect();
        let mut candidates: Vec<Arc<Pod>> = active
            .iter()
            .filter(|p| p.metadata.uid != pod.metadata.uid && preemptable(pod, p))
            .cloned()
            .collect();
        candidates.sort_by_key(|p| qos_rank(p));
        let mut chosen = Vec::new();
        for candidate in candidates {
            if needed.iter().all(|(_, q)| *q <= 0) {
                break;
            }
            let req = pod_request(&candidate);
            let helps = needed.iter().any(|(name, q)| {
                *q > 0 && (name == "pods" || req.get(name).is_some_and(|v| *v > 0))
            });
            if !helps {
                continue;
            }
            for (name, q) in needed.iter_mut() {
                *q -= if name == "pods" {
                    1
                } else {
                    req.get(name).copied().unwrap_or(0)
                };
            }
            chosen.push(candidate);
        }
        let unmet: Vec<(String, i64)> = needed.into_iter().filter(|(_, q)| *q > 0).collect();
        if !unmet.is_empty() {
            return Err(AdmissionError::NoVictims(unmet));
        }
        let Some(preempt) = &self.preempt else {
            return Err(AdmissionError::NoEvictor);
        };
        let signal = lacking
            .iter()
            .find_map(FitFailure::insufficient_amount)
            .map(|(name, _)| name)
            .unwrap_or_default();
        for victim in chosen {
            tracing::info!(pod = %format_pod(&victim), preemptor = %format_pod(pod), "Preempting pod to free up resources");
            preempt(victim.clone())
                .await
                .map_err(|reason| AdmissionError::Evict {
                    pod: format_pod(&victim),
                    reason,
                })?;
            crate::metrics::kubelet_admission::preemptions().inc(&[&signal]);
        }
        Ok(())
    }
}

/// The soft admit handlers run before every sync (canRunPod): a pod that
/// fails them is stopped and kept Pending until it passes.
#[derive(Debug, Clone)]
pub struct SoftAdmission {
    apparmor_enabled: bool,
}

/// The annotation prefix naming a container's AppArmor profile.
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

impl SoftAdmission {
    /// Reads whether AppArmor is enabled on the host (build phase).
    pub fn from_host() -> Self {
        let enabled = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|s| s.trim_start().starts_with('Y'));
        SoftAdmission {
            apparmor_enabled: enabled,
        }
    }

    pub fn with_apparmor(enabled: bool) -> Self {
        SoftAdmission {
            apparmor_enabled: enabled,
        }
    }

    /// AppArmor profiles can be enforced (the AppArmor admit handler).
    pub fn can_run_pod(&self, pod: &Pod) -> PodAdmitResult {
        let wants_apparmor = pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .any(|(k, v)| k.starts_with(APPARMOR_ANNOTATION_PREFIX) && v != "unconfined");
        if wants_apparmor && !self.apparmor_enabled {
            return PodAdmitResult::reject(
                "AppArmor",
                "Cannot enforce AppArmor: AppArmor is not enabled on the host",
            );
        }
        PodAdmitResult::admit()
    }
}
