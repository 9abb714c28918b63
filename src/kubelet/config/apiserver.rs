//! The "api" pod source (Go's config/apiserver.go): every pod the API server
//! binds to this node (`fieldSelector=spec.nodeName=<node>`), watched with
//! list + watch, relisting after a 410 and backing off on errors. Like Go's
//! reflector feeding an UndeltaStore, the pod config learns every change:
//! a list is the complete set (SET); a watched change names its one pod
//! (UPDATE, or REMOVE once deleted), and the pod config works out what was
//! added, updated, gracefully deleted or removed. The source keeps no pod
//! of its own.
//!
//! The watch starts only once the kubelet's view of its Node has synced, as
//! Go waits for the node informer, so that admission sees the Node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio_util::sync::CancellationToken;

use super::pod_config::{PodSource, SourceSender};
use crate::kubelet::types::{API_SOURCE, PodOperation};

/// How often the source checks whether the node has synced.
pub const WAIT_FOR_API_SERVER_SYNC_PERIOD: Duration = Duration::from_secs(1);

/// Whether the kubelet's view of its Node has synced with the API server.
pub type NodeHasSynced = Arc<dyn Fn() -> bool + Send + Sync>;

/// Pods bound to this node in the API server.
pub struct ApiserverSource {
    client: kube::Client,
    node_name: String,
    node_has_synced: NodeHasSynced,
}

impl ApiserverSource {
    /// A source for the pods bound to `node_name`, watched once
    /// `node_has_synced` says so.
    pub fn new(client: kube::Client, node_name: &str, node_has_synced: NodeHasSynced) -> Self {
        ApiserverSource {
            client,
            node_name: node_name.to_string(),
            node_has_synced,
        }
    }

    /// The field selector of the watch.
    pub fn field_selector(&self) -> String {
        format!("spec.nodeName={}", self.node_name)
    }
}

/// Pods keyed as Go's MetaNamespaceKeyFunc keys them.
fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// What the source remembers between watch events: the uid of each pod it
/// listed or watched, by key. Not the pods: the pod config keeps the only
/// copy, so each change goes out as an operation on the pods it names
/// (Go's UndeltaStore sends the whole set each time; the merge then finds
/// the same adds, updates, deletions and removals).
#[derive(Default)]
struct WatchedPods {
    uids: BTreeMap<String, String>,
    /// Pods of a list in progress (between Init and InitDone).
    listing: Option<Vec<Arc<Pod>>>,
}

/// What the kubelet keeps of a watched pod: everything but the field
/// managers' bookkeeping, which nothing in the kubelet reads and which is
/// often the largest part of the object.
fn trimmed(mut pod: Pod) -> Arc<Pod> {
    pod.metadata.managed_fields = None;
    Arc::new(pod)
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// A pod that names only its uid: enough for the merge to remove it.
fn by_uid(uid: String) -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.uid = Some(uid);
    Arc::new(pod)
}

impl WatchedPods {
    /// The operations one watcher event asks of the pod config, in order.
    fn apply(&mut self, event: Event<Pod>) -> Vec<(PodOperation, Vec<Arc<Pod>>)> {
        match event {
            Event::Init => {
                self.listing = Some(Vec::new());
                Vec::new()
            }
            Event::InitApply(pod) => {
                self.listing.get_or_insert_with(Vec::new).push(trimmed(pod));
                Vec::new()
            }
            Event::InitDone => {
                // A (re)list: the complete set, so what it does not name goes.
                let pods = self.listing.take().unwrap_or_default();
                self.uids = pods.iter().map(|p| (key(p), uid(p))).collect();
                vec![(PodOperation::Set, pods)]
            }
            Event::Apply(pod) => {
                let pod = trimmed(pod);
                let mut ops = Vec::new();
                let new_uid = uid(&pod);
                if let Some(old) = self.uids.insert(key(&pod), new_uid.clone())
                    && old != new_uid
                {
                    // Recreated under the same name: the old one is gone.
                    ops.push((PodOperation::Remove, vec![by_uid(old)]));
                }
                ops.push((PodOperation::Update, vec![pod]));
                ops
            }
            Event::Delete(pod) => match self.uids.remove(&key(&pod)) {
                Some(old) => vec![(PodOperation::Remove, vec![by_uid(old)])],
                None => Vec::new(),
            },
        }
    }
}

#[async_trait::async_trait]
impl PodSource for ApiserverSource {
    fn name(&self) -> &'static str {
        API_SOURCE
    }

    async fn run(self: Box<Self>, updates: SourceSender, stop: CancellationToken) {
        tracing::info!("Waiting for node sync before watching apiserver pods");
        while !(self.node_has_synced)() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(WAIT_FOR_API_SERVER_SYNC_PERIOD) => {}
            }
            crate::vlog!(4, "node sync has not completed yet");
        }
        crate::vlog!(4, "node sync completed");
        tracing::info!("Watching apiserver");

        let api: Api<Pod> = Api::all(self.client.clone());
        // Lists start from the API server's cache (resourceVersion=0), as
        // Go's reflector does.
        let config = watcher::Config::default()
            .fields(&self.field_selector())
            .any_semantic();
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        let mut watched = WatchedPods::default();
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return,
                next = events.next() => next,
            };
            match next {
                Some(Ok(event)) => {
                    for (op, pods) in watched.apply(event) {
                        updates.send_shared(op, pods);
                    }
                }
                Some(Err(watcher::Error::WatchError(status))) if status.code == 410 => {
                    crate::vlog!(4, err = %status.message, "Watch of pods closed with too old resource version; relisting");
                }
                Some(Err(err)) => {
                    tracing::warn!(err = %err, field_selector = %self.field_selector(), "Failed to watch pods");
                }
                None => {
                    tracing::warn!("Pod watch ended");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::config::merge::PodStorage;

    fn pod(ns: &str, name: &str, uid: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(uid.into());
        p
    }

    fn uids(pods: &[Arc<Pod>]) -> Vec<String> {
        let mut u: Vec<String> = pods.iter().map(|p| uid(p)).collect();
        u.sort();
        u
    }

    /// Feeds the events through the merge; what the pod config then holds,
    /// and the uids the last event added and removed.
    struct Fed {
        watched: WatchedPods,
        storage: PodStorage,
    }

    impl Fed {
        fn new() -> Self {
            Fed {
                watched: WatchedPods::default(),
                storage: PodStorage::default(),
            }
        }

        fn event(&mut self, e: Event<Pod>) -> (Vec<String>, Vec<String>) {
            let (mut added, mut removed) = (Vec::new(), Vec::new());
            for (op, pods) in self.watched.apply(e) {
                let r = self.storage.merge(API_SOURCE, op, pods, "t");
                added.extend(uids(&r.adds));
                removed.extend(uids(&r.removes));
            }
            (added, removed)
        }

        fn held(&self) -> Vec<String> {
            uids(&self.storage.merged_state())
        }
    }

    #[test]
    fn lists_set_and_watch_events_name_their_pod() {
        let mut f = Fed::new();
        assert_eq!(f.event(Event::Init), (vec![], vec![]));
        f.event(Event::InitApply(pod("a", "x", "1")));
        f.event(Event::InitApply(pod("b", "x", "2")));
        assert!(f.held().is_empty(), "nothing before the list completes");
        assert_eq!(
            f.event(Event::InitDone),
            (vec!["1".into(), "2".into()], vec![])
        );
        assert!(f.storage.seen_sources([API_SOURCE].into_iter()));
        // Recreated under the same name: the new object replaces the old.
        assert_eq!(
            f.event(Event::Apply(pod("a", "x", "3"))),
            (vec!["3".into()], vec!["1".into()])
        );
        assert_eq!(f.held(), ["2", "3"]);
        assert_eq!(
            f.event(Event::Delete(pod("b", "x", "2"))),
            (vec![], vec!["2".into()])
        );
        assert_eq!(f.held(), ["3"]);
        // Deleting what was never seen changes nothing.
        assert_eq!(f.event(Event::Delete(pod("z", "z", "9"))), (vec![], vec![]));
        // A relist drops what it does not list.
        f.event(Event::Init);
        f.event(Event::InitApply(pod("c", "y", "4")));
        assert_eq!(
            f.event(Event::InitDone),
            (vec!["4".into()], vec!["3".into()])
        );
        assert_eq!(f.held(), ["4"]);
        f.event(Event::Init);
        assert_eq!(f.event(Event::InitDone), (vec![], vec!["4".into()]));
        assert!(f.held().is_empty());
    }

    #[test]
    fn the_pod_config_holds_the_only_copy_of_a_watched_pod() {
        let mut f = Fed::new();
        f.event(Event::Init);
        f.event(Event::InitDone);
        f.event(Event::Apply(pod("a", "x", "1")));
        let held = f.storage.merged_state();
        // This test's handle and the storage's: the source kept none.
        assert_eq!(Arc::strong_count(&held[0]), 2);
        assert!(
            held[0].metadata.annotations.as_ref().is_some_and(
                |a| a.contains_key(crate::kubelet::types::CONFIG_SOURCE_ANNOTATION_KEY)
            )
        );
    }
}
