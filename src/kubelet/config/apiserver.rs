//! The "api" pod source (Go's config/apiserver.go): every pod the API server
//! binds to this node (`fieldSelector=spec.nodeName=<node>`), watched with
//! list + watch, relisting after a 410 and backing off on errors. Like Go's
//! reflector feeding an UndeltaStore, every change sends the complete set of
//! the node's pods (a SET) to the pod config, which works out what was
//! added, updated, gracefully deleted or removed.
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
use crate::kubelet::types::API_SOURCE;

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

/// The reflector's store: the node's pods as last listed and watched,
/// shared with the pod config (a snapshot copies no pod).
#[derive(Default)]
struct UndeltaStore {
    pods: BTreeMap<String, Arc<Pod>>,
    /// Pods of a list in progress (between Init and InitDone).
    listing: Option<BTreeMap<String, Arc<Pod>>>,
}

/// What the kubelet keeps of a watched pod: everything but the field
/// managers' bookkeeping, which nothing in the kubelet reads and which is
/// often the largest part of the object.
fn trimmed(mut pod: Pod) -> Arc<Pod> {
    pod.metadata.managed_fields = None;
    Arc::new(pod)
}

impl UndeltaStore {
    /// Applies one watcher event; returns true when the set changed in a way
    /// that must be pushed (every write, as Go's UndeltaStore pushes).
    fn apply(&mut self, event: Event<Pod>) -> bool {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                false
            }
            Event::InitApply(pod) => {
                self.listing
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key(&pod), trimmed(pod));
                false
            }
            Event::InitDone => {
                self.pods = self.listing.take().unwrap_or_default();
                true
            }
            Event::Apply(pod) => {
                self.pods.insert(key(&pod), trimmed(pod));
                true
            }
            Event::Delete(pod) => {
                self.pods.remove(&key(&pod));
                true
            }
        }
    }

    fn snapshot(&self) -> Vec<Arc<Pod>> {
        self.pods.values().cloned().collect()
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
        let mut store = UndeltaStore::default();
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return,
                next = events.next() => next,
            };
            match next {
                Some(Ok(event)) => {
                    if store.apply(event) {
                        updates.set_shared(store.snapshot());
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

    fn pod(ns: &str, name: &str, uid: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(uid.into());
        p
    }

    fn uids(store: &UndeltaStore) -> Vec<String> {
        store
            .snapshot()
            .iter()
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn store_replaces_on_relist_and_pushes_every_write() {
        let mut s = UndeltaStore::default();
        assert!(!s.apply(Event::Init));
        assert!(!s.apply(Event::InitApply(pod("a", "x", "1"))));
        assert!(!s.apply(Event::InitApply(pod("b", "x", "2"))));
        assert!(
            uids(&s).is_empty(),
            "nothing visible before the list completes"
        );
        assert!(s.apply(Event::InitDone));
        assert_eq!(uids(&s), ["1", "2"]);
        // Recreated under the same name: the new object replaces the old.
        assert!(s.apply(Event::Apply(pod("a", "x", "3"))));
        assert_eq!(uids(&s), ["3", "2"]);
        assert!(s.apply(Event::Delete(pod("b", "x", "2"))));
        assert_eq!(uids(&s), ["3"]);
        // A relist drops what it does not list.
        s.apply(Event::Init);
        s.apply(Event::InitApply(pod("c", "y", "4")));
        assert!(s.apply(Event::InitDone));
        assert_eq!(uids(&s), ["4"]);
        s.apply(Event::Init);
        assert!(s.apply(Event::InitDone));
        assert!(uids(&s).is_empty());
    }
}
