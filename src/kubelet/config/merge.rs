//! The pod storage behind PodConfig (Go's podStorage.merge): each source's
//! pods by UID, and what a SET, ADD, UPDATE, DELETE or REMOVE from a source
//! means for them — new pods, changed pods, gracefully deleted pods, removed
//! pods, and pods whose status alone differs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::types::{
    CONFIG_FIRST_SEEN_ANNOTATION_KEY, CONFIG_MIRROR_ANNOTATION_KEY, CONFIG_SOURCE_ANNOTATION_KEY,
    PodOperation, get_pod_full_name,
};

/// Annotations the kubelet manages itself; they never make a pod "changed".
const LOCAL_ANNOTATIONS: [&str; 3] = [
    CONFIG_SOURCE_ANNOTATION_KEY,
    CONFIG_MIRROR_ANNOTATION_KEY,
    CONFIG_FIRST_SEEN_ANNOTATION_KEY,
];

/// What one merge found, per kind of change.
#[derive(Debug, Default)]
pub struct MergeResult {
    pub adds: Vec<Arc<Pod>>,
    pub updates: Vec<Arc<Pod>>,
    pub deletes: Vec<Arc<Pod>>,
    pub removes: Vec<Arc<Pod>>,
    pub reconciles: Vec<Arc<Pod>>,
    /// This merge was the source's first SET.
    pub first_set: bool,
}

/// Every source's current pods.
#[derive(Debug, Default)]
pub struct PodStorage {
    pods: BTreeMap<String, HashMap<String, Arc<Pod>>>,
    sources_seen: HashSet<String>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

impl PodStorage {
    /// Whether every named source has delivered at least one SET.
    pub fn seen_sources<'a>(&self, mut sources: impl Iterator<Item = &'a str>) -> bool {
        sources.all(|s| self.sources_seen.contains(s))
    }

    /// Every pod of every source.
    pub fn merged_state(&self) -> Vec<Arc<Pod>> {
        self.pods
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    /// Applies one update from `source`; `seen` stamps pods new to the kubelet.
    pub fn merge<P: Into<Arc<Pod>>>(
        &mut self,
        source: &str,
        op: PodOperation,
        pods: Vec<P>,
        seen: &str,
    ) -> MergeResult {
        let pods: Vec<Arc<Pod>> = pods.into_iter().map(Into::into).collect();
        let mut result = MergeResult::default();
        let seen_before = self.sources_seen.contains(source);
        let mut current = self.pods.remove(source).unwrap_or_default();
        match op {
            PodOperation::Add | PodOperation::Update | PodOperation::Delete => {
                crate::vlog!(4, source, op = %op, pods = pods.len(), "Merging pods from source");
                let old = std::mem::take(&mut current);
                current = update_pods(pods, old, source, seen, &mut result, true);
            }
            PodOperation::Remove => {
                crate::vlog!(4, source, pods = pods.len(), "Removing pods from source");
                for pod in pods {
                    if let Some(existing) = current.remove(&uid(&pod)) {
                        result.removes.push(existing);
                    }
                }
            }
            PodOperation::Set => {
                crate::vlog!(4, source, pods = pods.len(), "Setting pods for source");
                self.sources_seen.insert(source.to_string());
                let old = std::mem::take(&mut current);
                current = update_pods(pods, old, source, seen, &mut result, false);
            }
            PodOperation::Reconcile => {
                tracing::info!(source, op = %op, "Received invalid update type");
            }
        }
        self.pods.insert(source.to_string(), current);
        result.first_set = !seen_before && self.sources_seen.contains(source);
        result
    }
}

/// Merges `new_pods` into the source's pods. With `keep_rest` (incremental
/// operations) pods not mentioned stay; otherwise (SET) they are removed.
/// A pod that did not change keeps its stored `Arc` (nothing is copied);
/// a changed one becomes a new object, so what the sync loop already holds
/// is never mutated under it.
fn update_pods(
    new_pods: Vec<Arc<Pod>>,
    mut old: HashMap<String, Arc<Pod>>,
    source: &str,
    seen: &str,
    result: &mut MergeResult,
    keep_rest: bool,
) -> HashMap<String, Arc<Pod>> {
    let mut pods = HashMap::new();
    for pod in filter_invalid_pods(new_pods, source) {
        let key = uid(&pod);
        if let Some(existing) = old.remove(&key) {
            let (change, merged) = check_and_update_pod(&existing, pod);
            match change {
                Change::Update => result.updates.push(merged.clone()),
                Change::Reconcile => result.reconciles.push(merged.clone()),
                Change::GracefulDelete => result.deletes.push(merged.clone()),
                Change::None => {}
            }
            pods.insert(key, merged);
            continue;
        }
        if let Some(existing) = pods.get_mut(&key) {
            // The same UID twice in one update: the later copy wins.
            let (_, merged) = check_and_update_pod(existing, pod);
            *existing = merged;
            continue;
        }
        crate::vlog!(4, pod = %get_pod_full_name(&pod), source, "Receiving a new pod");
        let mut pod = pod;
        let annotations = Arc::make_mut(&mut pod)
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        annotations.insert(CONFIG_SOURCE_ANNOTATION_KEY.to_string(), source.to_string());
        annotations.insert(
            CONFIG_FIRST_SEEN_ANNOTATION_KEY.to_string(),
            seen.to_string(),
        );
        result.adds.push(pod.clone());
        pods.insert(key, pod);
    }
    if keep_rest {
        pods.extend(old);
    } else {
        result.removes.extend(old.into_values());
    }
    pods
}

/// Drops pods whose full name repeats an earlier one in the same update.
fn filter_invalid_pods(pods: Vec<Arc<Pod>>, source: &str) -> Vec<Arc<Pod>> {
    let mut names = HashSet::new();
    pods.into_iter()
        .enumerate()
        .filter_map(|(i, pod)| {
            let name = get_pod_full_name(&pod);
            if names.insert(name.clone()) {
                Some(pod)
            } else {
                tracing::warn!(
                    index = i,
                    pod = %name,
                    source,
                    "Pod failed validation due to duplicate pod name, ignoring"
                );
                None
            }
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq)]
enum Change {
    None,
    Update,
    Reconcile,
    GracefulDelete,
}

/// Folds the source's new version of a pod into the stored one: the
/// change, and the pod to keep (the stored one itself when nothing
/// changed). From the new version come the spec, labels, deletion stamps,
/// status and annotations; the kubelet's local annotations and the rest of
/// the metadata stay the stored pod's.
fn check_and_update_pod(existing: &Arc<Pod>, new: Arc<Pod>) -> (Change, Arc<Pod>) {
    if !pods_differ_semantically(existing, &new) {
        if existing.status != new.status {
            // The kubelet owns pod status; the source's differs, so it is reconciled.
            let reconciled = Pod {
                metadata: existing.metadata.clone(),
                spec: existing.spec.clone(),
                status: new.status.clone(),
            };
            return (Change::Reconcile, Arc::new(reconciled));
        }
        return (Change::None, existing.clone());
    }
    let mut new = Arc::unwrap_or_clone(new);
    let mut metadata = existing.metadata.clone();
    metadata.labels = new.metadata.labels.take();
    metadata.deletion_timestamp = new.metadata.deletion_timestamp.take();
    metadata.deletion_grace_period_seconds = new.metadata.deletion_grace_period_seconds.take();
    let mut annotations = new.metadata.annotations.take().unwrap_or_default();
    for key in LOCAL_ANNOTATIONS {
        if let Some(v) = existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
        {
            annotations.insert(key.to_string(), v.clone());
        }
    }
    metadata.annotations = Some(annotations);
    let change = if metadata.deletion_timestamp.is_some() {
        Change::GracefulDelete
    } else {
        Change::Update
    };
    let updated = Pod {
        metadata,
        spec: new.spec.take(),
        status: new.status.take(),
    };
    (change, Arc::new(updated))
}

fn pods_differ_semantically(existing: &Pod, new: &Pod) -> bool {
    existing.spec != new.spec
        || existing.metadata.labels != new.metadata.labels
        || existing.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || existing.metadata.deletion_grace_period_seconds
            != new.metadata.deletion_grace_period_seconds
        || !annotations_equal(
            existing.metadata.annotations.as_ref(),
            new.metadata.annotations.as_ref(),
        )
}

/// Equal apart from the kubelet's local annotations.
fn annotations_equal(
    existing: Option<&BTreeMap<String, String>>,
    new: Option<&BTreeMap<String, String>>,
) -> bool {
    fn shared(m: Option<&BTreeMap<String, String>>) -> impl Iterator<Item = (&String, &String)> {
        m.into_iter()
            .flatten()
            .filter(|(k, _)| !LOCAL_ANNOTATIONS.contains(&k.as_str()))
    }
    shared(existing).eq(shared(new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn pod(uid: &str, name: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        p.spec = Some(PodSpec {
            hostname: Some("h".into()),
            ..Default::default()
        });
        p
    }

    fn uids(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut v: Vec<String> = pods.iter().map(|p| uid(p)).collect();
        v.sort();
        v
    }

    /// A source that keeps its pods (the API watch's cache) sends the same
    /// objects again with every SET: an unchanged pod is neither copied
    /// nor replaced, and a changed one becomes a new object while what the
    /// sync loop holds stays as it was.
    #[test]
    fn unchanged_pods_stay_shared_and_changed_ones_are_new_objects() {
        let mut s = PodStorage::default();
        let a = Arc::new(pod("a", "a"));
        let b = Arc::new(pod("b", "b"));
        let first = s.merge("api", PodOperation::Set, vec![a.clone(), b.clone()], "t1");
        let state = |s: &PodStorage| {
            let mut pods = s.merged_state();
            pods.sort_by_key(|p| uid(p));
            pods
        };
        let held = state(&s);
        // Annotating a pod the source still holds copies it once.
        assert!(!Arc::ptr_eq(&first.adds[0], &a));
        let again = s.merge("api", PodOperation::Set, vec![a.clone(), b.clone()], "t2");
        assert!(again.updates.is_empty() && again.reconciles.is_empty());
        for (before, after) in held.iter().zip(state(&s)) {
            assert!(Arc::ptr_eq(before, &after), "{:?} was copied", uid(before));
        }
        let mut relabelled = pod("b", "b");
        relabelled
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("k".into(), "v".into());
        let changed = s.merge(
            "api",
            PodOperation::Set,
            vec![a, Arc::new(relabelled)],
            "t3",
        );
        assert_eq!(uids(&changed.updates), ["b"]);
        let old_b = held.iter().find(|p| uid(p) == "b").unwrap();
        assert!(old_b.metadata.labels.is_none(), "the held pod was changed");
        let ann = changed.updates[0].metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[CONFIG_FIRST_SEEN_ANNOTATION_KEY], "t1");
    }

    #[test]
    fn set_semantics_per_change() {
        let mut s = PodStorage::default();
        let first = s.merge(
            "file",
            PodOperation::Set,
            vec![pod("a", "a"), pod("b", "b"), pod("c", "c")],
            "t1",
        );
        assert!(first.first_set);
        assert_eq!(uids(&first.adds), ["a", "b", "c"]);
        let a = &first.adds[0];
        let ann = a.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[CONFIG_SOURCE_ANNOTATION_KEY], "file");
        assert_eq!(ann[CONFIG_FIRST_SEEN_ANNOTATION_KEY], "t1");

        let mut changed = pod("b", "b");
        changed.spec.as_mut().unwrap().hostname = Some("other".into());
        let mut status_only = pod("c", "c");
        status_only.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        let second = s.merge(
            "file",
            PodOperation::Set,
            vec![changed, status_only, pod("d", "d")],
            "t2",
        );
        assert!(!second.first_set);
        assert_eq!(uids(&second.adds), ["d"]);
        assert_eq!(uids(&second.updates), ["b"]);
        assert_eq!(uids(&second.reconciles), ["c"]);
        assert_eq!(uids(&second.removes), ["a"]);
        assert!(second.deletes.is_empty());
        // The first-seen time of an updated pod is kept.
        let b = &second.updates[0];
        assert_eq!(
            b.metadata.annotations.as_ref().unwrap()[CONFIG_FIRST_SEEN_ANNOTATION_KEY],
            "t1"
        );
        assert_eq!(b.spec.as_ref().unwrap().hostname.as_deref(), Some("other"));

        let mut deleting = pod("d", "d");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let third = s.merge("api", PodOperation::Update, vec![deleting], "t3");
        // A different source knows no pod "d": it is an add there.
        assert_eq!(uids(&third.adds), ["d"]);

        let mut deleting = pod("d", "d");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let fourth = s.merge("file", PodOperation::Update, vec![deleting], "t4");
        assert_eq!(uids(&fourth.deletes), ["d"]);

        let unchanged = s.merge("file", PodOperation::Set, vec![pod("b2", "b2")], "t5");
        assert_eq!(uids(&unchanged.removes), ["b", "c", "d"]);
    }

    #[test]
    fn incremental_operations() {
        let mut s = PodStorage::default();
        let add = s.merge("api", PodOperation::Add, vec![pod("a", "a")], "t");
        assert_eq!(uids(&add.adds), ["a"]);
        assert!(!add.first_set, "only a SET marks a source as seen");
        assert!(!s.seen_sources(["api"].into_iter()));
        let add2 = s.merge("api", PodOperation::Add, vec![pod("b", "b")], "t");
        assert_eq!(uids(&add2.adds), ["b"]);
        assert!(add2.removes.is_empty(), "incremental adds keep other pods");
        let mut changed = pod("a", "a");
        changed.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
        let upd = s.merge("api", PodOperation::Update, vec![changed], "t");
        assert_eq!(uids(&upd.updates), ["a"]);
        let rm = s.merge(
            "api",
            PodOperation::Remove,
            vec![pod("a", "a"), pod("zzz", "zzz")],
            "t",
        );
        assert_eq!(uids(&rm.removes), ["a"]);
        assert_eq!(uids(&s.merged_state()), ["b"]);
        let set = s.merge("api", PodOperation::Set, vec![pod("b", "b")], "t");
        assert!(set.first_set);
        assert!(s.seen_sources(["api"].into_iter()));
        assert!(set.adds.is_empty() && set.removes.is_empty());
    }

    #[test]
    fn local_annotations_do_not_count_as_changes_and_duplicates_are_dropped() {
        let mut s = PodStorage::default();
        s.merge("file", PodOperation::Set, vec![pod("a", "a")], "t1");
        let mut same = pod("a", "a");
        same.metadata.annotations =
            Some([(CONFIG_MIRROR_ANNOTATION_KEY.to_string(), "x".to_string())].into());
        let r = s.merge("file", PodOperation::Set, vec![same], "t2");
        assert!(r.updates.is_empty() && r.adds.is_empty() && r.reconciles.is_empty());

        let mut other = pod("a", "a");
        other.metadata.annotations = Some([("user".to_string(), "x".to_string())].into());
        let r = s.merge("file", PodOperation::Set, vec![other], "t3");
        assert_eq!(uids(&r.updates), ["a"]);
        let ann = r.updates[0].metadata.annotations.as_ref().unwrap();
        assert_eq!(ann["user"], "x");
        assert_eq!(ann[CONFIG_SOURCE_ANNOTATION_KEY], "file");
        assert_eq!(ann[CONFIG_FIRST_SEEN_ANNOTATION_KEY], "t1");

        let dup = s.merge(
            "http",
            PodOperation::Set,
            vec![pod("x", "same"), pod("y", "same")],
            "t4",
        );
        assert_eq!(uids(&dup.adds), ["x"]);
    }
}
