//! The API server's copy of a pod that a status sync merges into and
//! diffs against, without a GET where a copy at hand can stand for it:
//! the pod as the kubelet's watch last delivered it (the pod manager's;
//! a static pod's mirror pod), or the pod as the last PATCH answered,
//! whichever is newer. Only when neither exists is the pod read from the
//! API server.
//!
//! A copy that lags the server (the watch behind a write by someone else)
//! at worst makes a patch that sets fields the server already has, or
//! finds no change where the server has drifted; the batch pass compares
//! the watch's copy with the kubelet's status again (`needs_reconcile`)
//! and syncs once more.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kubelet::pod::PodManager;
use crate::kubelet::types::is_static_pod;

/// The pods the server last answered for each (kubelet) pod UID.
#[derive(Debug, Default)]
pub struct WrittenPods {
    pods: HashMap<String, Box<Written>>,
    /// UIDs whose last write failed: read them from the server next.
    stale: HashSet<String>,
}

/// What is kept of an answer: its metadata and status (boxed: a map
/// slot holding a whole `Pod` inline costs kilobytes, spec or no spec).
#[derive(Debug)]
struct Written {
    metadata: ObjectMeta,
    status: Option<PodStatus>,
}

fn resource_version(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

impl WrittenPods {
    /// Remembers what the server answered a read or write of `uid`.
    /// Only the metadata and status are kept (the field managers'
    /// bookkeeping dropped, as the pod source drops it): the spec comes
    /// from the watch's copy of the same object when the copy is used.
    pub fn store(&mut self, uid: &str, pod: Pod) {
        let Pod {
            mut metadata,
            status,
            ..
        } = pod;
        metadata.managed_fields = None;
        self.stale.remove(uid);
        self.pods
            .insert(uid.to_string(), Box::new(Written { metadata, status }));
    }

    pub fn forget(&mut self, uid: &str) {
        self.stale.remove(uid);
        self.pods.remove(uid);
    }

    /// A write of `uid` failed: no copy at hand is trusted until the server
    /// answers again.
    pub fn mark_stale(&mut self, uid: &str) {
        self.pods.remove(uid);
        self.stale.insert(uid.to_string());
    }

    /// Keeps the entries of the UIDs `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.pods.retain(|uid, _| keep(uid));
        self.stale.retain(|uid| keep(uid));
    }

    /// The newest copy of the API pod behind kubelet pod `uid` at hand, or
    /// None when only a GET can tell.
    pub fn api_copy(&self, pod_manager: &PodManager, uid: &str) -> Option<Pod> {
        if self.stale.contains(uid) {
            return None;
        }
        let watched = watched_copy(pod_manager, uid);
        let written = self.pods.get(uid);
        match (watched, written) {
            (Some(w), Some(p)) if same_object(&w, p) => Some(newer(w, p)),
            (Some(w), _) => Some(w),
            // A write answered, but the watch no longer has the pod: it may
            // be gone; ask the server.
            (None, _) => None,
        }
    }
}

/// The pod the watch delivered: the pod itself, a static pod's mirror.
fn watched_copy(pod_manager: &PodManager, uid: &str) -> Option<Pod> {
    let pod = pod_manager.get_pod_by_uid(uid)?;
    let api: Arc<Pod> = if is_static_pod(&pod) {
        pod_manager.get_mirror_pod_by_pod(&pod)?
    } else {
        pod
    };
    // A pod that never came from the API server (no resourceVersion) is
    // not a copy of it.
    api.metadata.resource_version.as_ref()?;
    Some((*api).clone())
}

fn same_object(a: &Pod, b: &Written) -> bool {
    a.metadata.uid.is_some() && a.metadata.uid == b.metadata.uid
}

/// Of two copies of one object, the later write (resourceVersions compared
/// as numbers, as etcd issues them; the watch's copy when they are not).
/// The written copy brings its metadata and status; the spec is the
/// watch's (the written copy keeps none).
fn newer(mut watched: Pod, written: &Written) -> Pod {
    match (
        resource_version(&watched.metadata),
        resource_version(&written.metadata),
    ) {
        (Some(w), Some(p)) if p > w => {
            watched.metadata = written.metadata.clone();
            watched.status = written.status.clone();
            watched
        }
        _ => watched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, rv: Option<&str>, phase: &str, annotations: serde_json::Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": uid, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": phase},
        });
        if let Some(rv) = rv {
            v["metadata"]["resourceVersion"] = json!(rv);
        }
        serde_json::from_value(v).unwrap()
    }

    fn phase(p: &Option<Pod>) -> Option<String> {
        p.as_ref()?.status.as_ref()?.phase.clone()
    }

    #[test]
    fn the_newest_copy_at_hand_or_none() {
        // (case, the watch's copy, the last answer, the phase got)
        type Case = (&'static str, Option<Pod>, Option<Pod>, Option<&'static str>);
        let cases: Vec<Case> = vec![
            ("nothing at hand", None, None, None),
            (
                "the watch's copy",
                Some(pod("u", Some("5"), "Pending", json!({}))),
                None,
                Some("Pending"),
            ),
            (
                "the PATCH answer is newer",
                Some(pod("u", Some("5"), "Pending", json!({}))),
                Some(pod("u", Some("7"), "Running", json!({}))),
                Some("Running"),
            ),
            (
                "the watch caught up",
                Some(pod("u", Some("9"), "Succeeded", json!({}))),
                Some(pod("u", Some("7"), "Running", json!({}))),
                Some("Succeeded"),
            ),
            (
                "the watch lost the pod",
                None,
                Some(pod("u", Some("7"), "Running", json!({}))),
                None,
            ),
            (
                "no resourceVersion: not from the API",
                Some(pod("u", None, "Pending", json!({}))),
                None,
                None,
            ),
        ];
        for (name, watched, written, want) in cases {
            let pm = PodManager::new();
            if let Some(w) = watched {
                pm.add_pod(Arc::new(w));
            }
            let mut wp = WrittenPods::default();
            if let Some(p) = written {
                wp.store("u", p);
            }
            let got = wp.api_copy(&pm, "u");
            assert_eq!(phase(&got).as_deref(), want, "{name}");
            wp.mark_stale("u");
            assert_eq!(wp.api_copy(&pm, "u"), None, "{name}: after a failed write");
            wp.store("u", pod("u", Some("1"), "Pending", json!({})));
            assert!(wp.api_copy(&pm, "u").is_some() || want.is_none(), "{name}");
        }
    }

    #[test]
    fn a_static_pod_is_read_through_its_mirror() {
        let pm = PodManager::new();
        pm.add_pod(Arc::new(pod(
            "static",
            None,
            "Pending",
            json!({"kubernetes.io/config.source": "file"}),
        )));
        let wp = WrittenPods::default();
        assert_eq!(wp.api_copy(&pm, "static"), None, "no mirror yet");
        let mirror = pod(
            "mirror",
            Some("3"),
            "Running",
            json!({"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "h"}),
        );
        pm.add_pod(Arc::new(mirror));
        assert_eq!(
            phase(&wp.api_copy(&pm, "static")).as_deref(),
            Some("Running")
        );
    }
}
