//! The labels and annotations the kubelet puts on CRI sandboxes and
//! containers, and their parsing back after a restart (kuberuntime
//! labels.go). A kubelet-rs taking over from a Go kubelet finds its
//! containers, their hashes and restart counts through these.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, ContainerPort, LifecycleHandler, Pod};

use crate::kubelet::container::gojson::{container_ports_to_go_json, lifecycle_handler_to_go_json};
use crate::kubelet::container::{RunContainerOptions, hash_container_hex};

/// Label keys shared by sandboxes and containers (pkg/kubelet/types).
pub const KUBERNETES_POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const KUBERNETES_POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub const KUBERNETES_POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
pub const KUBERNETES_CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";

/// Container annotation keys.
pub const POD_DELETION_GRACE_PERIOD_LABEL: &str = "io.kubernetes.pod.deletionGracePeriod";
pub const POD_TERMINATION_GRACE_PERIOD_LABEL: &str = "io.kubernetes.pod.terminationGracePeriod";
pub const CONTAINER_HASH_LABEL: &str = "io.kubernetes.container.hash";
pub const CONTAINER_RESTART_COUNT_LABEL: &str = "io.kubernetes.container.restartCount";
pub const CONTAINER_TERMINATION_MESSAGE_PATH_LABEL: &str =
    "io.kubernetes.container.terminationMessagePath";
pub const CONTAINER_TERMINATION_MESSAGE_POLICY_LABEL: &str =
    "io.kubernetes.container.terminationMessagePolicy";
pub const CONTAINER_PRE_STOP_HANDLER_LABEL: &str = "io.kubernetes.container.preStopHandler";
pub const CONTAINER_PORTS_LABEL: &str = "io.kubernetes.container.ports";

fn meta(pod: &Pod) -> (&str, &str, &str) {
    (
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.uid.as_deref().unwrap_or(""),
    )
}

/// Sandbox labels: the pod's labels plus its name, namespace and UID.
pub fn new_pod_labels(pod: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = pod
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (name, ns, uid) = meta(pod);
    labels.insert(KUBERNETES_POD_NAME_LABEL.into(), name.into());
    labels.insert(KUBERNETES_POD_NAMESPACE_LABEL.into(), ns.into());
    labels.insert(KUBERNETES_POD_UID_LABEL.into(), uid.into());
    labels
}

/// Sandbox annotations: the pod's annotations as they are.
pub fn new_pod_annotations(pod: &Pod) -> HashMap<String, String> {
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Container labels: pod name, namespace, UID and the container name.
pub fn new_container_labels(container: &Container, pod: &Pod) -> HashMap<String, String> {
    let (name, ns, uid) = meta(pod);
    HashMap::from([
        (KUBERNETES_POD_NAME_LABEL.to_string(), name.to_string()),
        (KUBERNETES_POD_NAMESPACE_LABEL.to_string(), ns.to_string()),
        (KUBERNETES_POD_UID_LABEL.to_string(), uid.to_string()),
        (
            KUBERNETES_CONTAINER_NAME_LABEL.to_string(),
            container.name.clone(),
        ),
    ])
}

/// Container annotations: device plugin annotations first (the kubelet's own
/// override them), then hash, restart count, termination message settings,
/// grace periods, and the preStop handler and ports as Go JSON.
pub fn new_container_annotations(
    container: &Container,
    pod: &Pod,
    restart_count: u32,
    opts: &RunContainerOptions,
) -> HashMap<String, String> {
    let mut a: HashMap<String, String> = opts
        .annotations
        .iter()
        .map(|x| (x.name.clone(), x.value.clone()))
        .collect();
    a.insert(CONTAINER_HASH_LABEL.into(), hash_container_hex(container));
    a.insert(
        CONTAINER_RESTART_COUNT_LABEL.into(),
        restart_count.to_string(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_PATH_LABEL.into(),
        container
            .termination_message_path
            .clone()
            .unwrap_or_default(),
    );
    a.insert(
        CONTAINER_TERMINATION_MESSAGE_POLICY_LABEL.into(),
        container
            .termination_message_policy
            .clone()
            .unwrap_or_default(),
    );
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(POD_DELETION_GRACE_PERIOD_LABEL.into(), g.to_string());
    }
    if let Some(g) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        a.insert(POD_TERMINATION_GRACE_PERIOD_LABEL.into(), g.to_string());
    }
    if let Some(pre_stop) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
    {
        a.insert(
            CONTAINER_PRE_STOP_HANDLER_LABEL.into(),
            lifecycle_handler_to_go_json(pre_stop),
        );
    }
    if let Some(ports) = container.ports.as_deref().filter(|p| !p.is_empty()) {
        a.insert(
            CONTAINER_PORTS_LABEL.into(),
            container_ports_to_go_json(ports),
        );
    }
    a
}

/// What a sandbox's labels say about its pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabeledPodSandboxInfo {
    /// The pod's own labels (the kubelet's removed).
    pub labels: BTreeMap<String, String>,
    pub pod_name: String,
    pub pod_namespace: String,
    pub pod_uid: String,
}

/// What a container's labels say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabeledContainerInfo {
    pub container_name: String,
    pub pod_name: String,
    pub pod_namespace: String,
    pub pod_uid: String,
}

/// What a container's annotations say. Unparsable values are logged and
/// left at their defaults, as the Go kubelet does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnnotatedContainerInfo {
    pub hash: u64,
    pub restart_count: i64,
    pub pod_deletion_grace_period: Option<i64>,
    pub pod_termination_grace_period: Option<i64>,
    pub termination_message_path: String,
    pub termination_message_policy: String,
    pub pre_stop_handler: Option<LifecycleHandler>,
    pub container_ports: Vec<ContainerPort>,
}

fn string_value(labels: &HashMap<String, String>, key: &str) -> String {
    match labels.get(key) {
        Some(v) => v.clone(),
        None => {
            crate::vlog!(
                3,
                label = key,
                "container does not have the requested label, it may be an old or invalid container"
            );
            String::new()
        }
    }
}

/// Parses a sandbox's labels.
pub fn get_pod_sandbox_info_from_labels(labels: &HashMap<String, String>) -> LabeledPodSandboxInfo {
    LabeledPodSandboxInfo {
        labels: labels
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    KUBERNETES_POD_NAME_LABEL
                        | KUBERNETES_POD_NAMESPACE_LABEL
                        | KUBERNETES_POD_UID_LABEL
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        pod_name: string_value(labels, KUBERNETES_POD_NAME_LABEL),
        pod_namespace: string_value(labels, KUBERNETES_POD_NAMESPACE_LABEL),
        pod_uid: string_value(labels, KUBERNETES_POD_UID_LABEL),
    }
}

/// Parses a container's labels.
pub fn get_container_info_from_labels(labels: &HashMap<String, String>) -> LabeledContainerInfo {
    LabeledContainerInfo {
        container_name: string_value(labels, KUBERNETES_CONTAINER_NAME_LABEL),
        pod_name: string_value(labels, KUBERNETES_POD_NAME_LABEL),
        pod_namespace: string_value(labels, KUBERNETES_POD_NAMESPACE_LABEL),
        pod_uid: string_value(labels, KUBERNETES_POD_UID_LABEL),
    }
}

fn log_bad(key: &str, err: &dyn std::fmt::Display) {
    tracing::error!(label = key, error = %err, "unable to get label value from annotations");
}

/// Parses a container's annotations.
pub fn get_container_info_from_annotations(a: &HashMap<String, String>) -> AnnotatedContainerInfo {
    let mut info = AnnotatedContainerInfo {
        termination_message_path: string_value(a, CONTAINER_TERMINATION_MESSAGE_PATH_LABEL),
        termination_message_policy: string_value(a, CONTAINER_TERMINATION_MESSAGE_POLICY_LABEL),
        ..Default::default()
    };
    if let Some(v) = a.get(CONTAINER_HASH_LABEL) {
        match u64::from_str_radix(v, 16) {
            Ok(h) => info.hash = h,
            Err(e) => log_bad(CONTAINER_HASH_LABEL, &e),
        }
    }
    if let Some(v) = a.get(CONTAINER_RESTART_COUNT_LABEL) {
        match v.parse::<i64>() {
            Ok(n) => info.restart_count = n,
            Err(e) => log_bad(CONTAINER_RESTART_COUNT_LABEL, &e),
        }
    }
    for (key, slot) in [
        (
            POD_DELETION_GRACE_PERIOD_LABEL,
            &mut info.pod_deletion_grace_period,
        ),
        (
            POD_TERMINATION_GRACE_PERIOD_LABEL,
            &mut info.pod_termination_grace_period,
        ),
    ] {
        if let Some(v) = a.get(key) {
            match v.parse::<i64>() {
                Ok(n) => *slot = Some(n),
                Err(e) => log_bad(key, &e),
            }
        }
    }
    if let Some(v) = a.get(CONTAINER_PRE_STOP_HANDLER_LABEL) {
        match serde_json::from_str::<LifecycleHandler>(v) {
            Ok(h) => info.pre_stop_handler = Some(h),
            Err(e) => log_bad(CONTAINER_PRE_STOP_HANDLER_LABEL, &e),
        }
    }
    if let Some(v) = a.get(CONTAINER_PORTS_LABEL) {
        match serde_json::from_str::<Vec<ContainerPort>>(v) {
            Ok(p) => info.container_ports = p,
            Err(e) => log_bad(CONTAINER_PORTS_LABEL, &e),
        }
    }
    info
}

#[cfg(test)]
#[path = "labels_tests.rs"]
mod tests;
