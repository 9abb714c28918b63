//! Pod operations, the update a pod source delivers, source names and the
//! annotations the kubelet keeps on the pods it is given.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// Annotation naming the source a pod came from ("file", "http", "api").
pub const CONFIG_SOURCE_ANNOTATION_KEY: &str = "kubernetes.io/config.source";
/// Annotation marking a mirror pod; its value is the static pod's hash.
pub const CONFIG_MIRROR_ANNOTATION_KEY: &str = "kubernetes.io/config.mirror";
/// Annotation recording when the kubelet first saw a pod (RFC 3339, nanoseconds).
pub const CONFIG_FIRST_SEEN_ANNOTATION_KEY: &str = "kubernetes.io/config.seen";
/// Annotation carrying a static pod's content hash (equal to its UID).
pub const CONFIG_HASH_ANNOTATION_KEY: &str = "kubernetes.io/config.hash";

/// Pods read from files under staticPodPath.
pub const FILE_SOURCE: &str = "file";
/// Pods fetched from staticPodURL.
pub const HTTP_SOURCE: &str = "http";
/// Pods bound to this node in the API server.
pub const API_SOURCE: &str = "api";
/// Every source at once.
pub const ALL_SOURCE: &str = "*";

/// The namespace given to static pods that name none.
pub const NAMESPACE_DEFAULT: &str = "default";

/// Priority at and above which a pod counts as critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2 * 1_000_000_000;
/// The priority class of pods the node cannot run without.
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";

/// What a [`PodUpdate`] does to the pods of its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodOperation {
    /// The complete set of pods of the source; anything not listed is gone.
    Set,
    /// Pods new to the source.
    Add,
    /// Pods being deleted gracefully (their deletion timestamp is set).
    Delete,
    /// Pods removed from the source.
    Remove,
    /// Pods whose spec, labels, annotations or deletion fields changed.
    Update,
    /// Pods whose status alone differs from what the source says.
    Reconcile,
}

impl fmt::Display for PodOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PodOperation::Set => "SET",
            PodOperation::Add => "ADD",
            PodOperation::Delete => "DELETE",
            PodOperation::Remove => "REMOVE",
            PodOperation::Update => "UPDATE",
            PodOperation::Reconcile => "RECONCILE",
        })
    }
}

/// One change to the desired pods, tagged with the source it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUpdate {
    pub pods: Vec<Arc<Pod>>,
    pub op: PodOperation,
    pub source: String,
}

/// A source name that is none of "file", "http", "api" or "*".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown pod source {0:?}")]
pub struct UnknownSourceError(pub String);

/// Expands and checks a list of source names: "*" means every source, empty
/// names are skipped, anything unknown is an error.
pub fn get_validated_sources<S: AsRef<str>>(
    sources: &[S],
) -> Result<Vec<&'static str>, UnknownSourceError> {
    let mut validated = Vec::with_capacity(sources.len());
    for source in sources {
        match source.as_ref() {
            ALL_SOURCE => return Ok(vec![FILE_SOURCE, HTTP_SOURCE, API_SOURCE]),
            FILE_SOURCE => validated.push(FILE_SOURCE),
            HTTP_SOURCE => validated.push(HTTP_SOURCE),
            API_SOURCE => validated.push(API_SOURCE),
            "" => {}
            other => return Err(UnknownSourceError(other.to_string())),
        }
    }
    Ok(validated)
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The source recorded on the pod, if any.
pub fn get_pod_source(pod: &Pod) -> Option<&str> {
    annotation(pod, CONFIG_SOURCE_ANNOTATION_KEY)
}

/// Whether the pod is a mirror pod (it carries the mirror annotation).
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION_KEY).is_some()
}

/// Whether the pod came from a source other than the API server.
pub fn is_static_pod(pod: &Pod) -> bool {
    get_pod_source(pod).is_some_and(|s| s != API_SOURCE)
}

/// Whether a priority value is in the critical range.
pub fn is_critical_pod_based_on_priority(priority: i32) -> bool {
    priority >= SYSTEM_CRITICAL_PRIORITY
}

/// Static pods, mirror pods and pods of critical priority are critical.
pub fn is_critical_pod(pod: &Pod) -> bool {
    is_static_pod(pod)
        || is_mirror_pod(pod)
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.priority)
            .is_some_and(is_critical_pod_based_on_priority)
}

/// A critical pod of the system-node-critical priority class.
pub fn is_node_critical_pod(pod: &Pod) -> bool {
    is_critical_pod(pod)
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref())
            == Some(SYSTEM_NODE_CRITICAL)
}

/// Whether `preemptor` may preempt `preemptee`: a critical pod preempts a
/// non-critical one, otherwise the higher priority wins when both have one.
pub fn preemptable(preemptor: &Pod, preemptee: &Pod) -> bool {
    if is_critical_pod(preemptor) && !is_critical_pod(preemptee) {
        return true;
    }
    let priority = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority);
    match (priority(preemptor), priority(preemptee)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

/// Why a pod worker is asked to sync a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncPodType {
    /// A periodic or event-driven resync.
    Sync,
    /// The pod's desired state changed.
    Update,
    /// The pod is new.
    Create,
    /// The pod must be stopped.
    Kill,
}

impl fmt::Display for SyncPodType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncPodType::Sync => "sync",
            SyncPodType::Update => "update",
            SyncPodType::Create => "create",
            SyncPodType::Kill => "kill",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use std::collections::BTreeMap;

    fn pod(annotations: &[(&str, &str)], priority: Option<i32>, class: Option<&str>) -> Pod {
        let mut p = Pod::default();
        if !annotations.is_empty() {
            p.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        p.spec = Some(PodSpec {
            priority,
            priority_class_name: class.map(str::to_string),
            ..Default::default()
        });
        p
    }

    #[test]
    fn validated_sources() {
        type Want<'a> = Result<Vec<&'a str>, &'a str>;
        let cases: &[(&[&str], Want)] = &[
            (&["file", "", "api"], Ok(vec!["file", "api"])),
            (&["http", "*"], Ok(vec!["file", "http", "api"])),
            (&[], Ok(vec![])),
            (&["file", "etcd"], Err("etcd")),
        ];
        for (input, want) in cases {
            let got = get_validated_sources(input);
            match want {
                Ok(w) => assert_eq!(got.as_ref().ok(), Some(w), "{input:?}"),
                Err(name) => assert_eq!(got, Err(UnknownSourceError(name.to_string()))),
            }
        }
    }

    #[test]
    fn static_mirror_and_critical_predicates() {
        struct Case {
            pod: Pod,
            static_: bool,
            mirror: bool,
            critical: bool,
            node_critical: bool,
        }
        let cases = [
            Case {
                pod: pod(&[(CONFIG_SOURCE_ANNOTATION_KEY, "file")], None, None),
                static_: true,
                mirror: false,
                critical: true,
                node_critical: false,
            },
            Case {
                pod: pod(
                    &[(CONFIG_SOURCE_ANNOTATION_KEY, "http")],
                    None,
                    Some(SYSTEM_NODE_CRITICAL),
                ),
                static_: true,
                mirror: false,
                critical: true,
                node_critical: true,
            },
            Case {
                pod: pod(&[(CONFIG_SOURCE_ANNOTATION_KEY, "api")], None, None),
                static_: false,
                mirror: false,
                critical: false,
                node_critical: false,
            },
            Case {
                pod: pod(
                    &[
                        (CONFIG_SOURCE_ANNOTATION_KEY, "api"),
                        (CONFIG_MIRROR_ANNOTATION_KEY, "abc"),
                    ],
                    None,
                    None,
                ),
                static_: false,
                mirror: true,
                critical: true,
                node_critical: false,
            },
            Case {
                pod: pod(&[], Some(SYSTEM_CRITICAL_PRIORITY), None),
                static_: false,
                mirror: false,
                critical: true,
                node_critical: false,
            },
            Case {
                pod: pod(&[], Some(SYSTEM_CRITICAL_PRIORITY - 1), None),
                static_: false,
                mirror: false,
                critical: false,
                node_critical: false,
            },
        ];
        for (i, c) in cases.iter().enumerate() {
            assert_eq!(is_static_pod(&c.pod), c.static_, "case {i}");
            assert_eq!(is_mirror_pod(&c.pod), c.mirror, "case {i}");
            assert_eq!(is_critical_pod(&c.pod), c.critical, "case {i}");
            assert_eq!(is_node_critical_pod(&c.pod), c.node_critical, "case {i}");
        }
    }

    #[test]
    fn preemption_rules() {
        let critical = pod(&[(CONFIG_SOURCE_ANNOTATION_KEY, "file")], None, None);
        let low = pod(&[], Some(10), None);
        let high = pod(&[], Some(100), None);
        let none = pod(&[], None, None);
        assert!(preemptable(&critical, &low));
        assert!(!preemptable(&low, &critical));
        assert!(preemptable(&high, &low));
        assert!(!preemptable(&low, &high));
        assert!(!preemptable(&high, &none));
    }
}
