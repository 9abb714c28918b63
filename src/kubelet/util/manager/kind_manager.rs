//! One object manager of a kind, built for a change detection strategy:
//! what the ConfigMap and Secret managers are.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::cache_based::{CacheBasedManager, ObjectStore};
use super::direct::DirectManager;
use super::error::ManagerError;
use super::fetch::{ApiFetcher, ManagedObject, ObjectFetcher};
use super::ttl_store::{GetObjectTtl, TtlStore};
use super::watch_store::WatchStore;
use super::{ChangeDetectionStrategy, ObjectManager, ReferencedNames};
use crate::kubelet::pod::PodObjectRegistrar;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

/// How long the `Cache` strategy keeps an object when the Node says nothing.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// A manager of one kind (ConfigMap or Secret).
pub struct KindManager<K> {
    strategy: ChangeDetectionStrategy,
    inner: Arc<dyn ObjectManager<K>>,
    watches: Option<Arc<WatchStore<K>>>,
}

impl<K: ManagedObject> KindManager<K> {
    /// Builds the manager for `strategy` (build phase: nothing runs until
    /// [`KindManager::start`]). `resync` is the kubelet's syncFrequency:
    /// watches nobody read for five of them pause. `get_ttl` reads the
    /// Node's TTL annotation for the `Cache` strategy.
    pub fn new(
        strategy: ChangeDetectionStrategy,
        client: kube::Client,
        clock: Arc<dyn Clock>,
        resync: Duration,
        get_ttl: GetObjectTtl,
        referenced: ReferencedNames,
    ) -> Self {
        let fetcher: Arc<dyn ObjectFetcher<K>> = Arc::new(ApiFetcher::new(client.clone()));
        match strategy {
            ChangeDetectionStrategy::Get => KindManager {
                strategy,
                inner: Arc::new(DirectManager::new(fetcher)),
                watches: None,
            },
            ChangeDetectionStrategy::Cache => {
                let store: Arc<dyn ObjectStore<K>> =
                    Arc::new(TtlStore::new(fetcher, clock, get_ttl, DEFAULT_TTL));
                KindManager {
                    strategy,
                    inner: Arc::new(CacheBasedManager::new(store, referenced)),
                    watches: None,
                }
            }
            ChangeDetectionStrategy::Watch => {
                let watches = WatchStore::new(client, clock, resync * 5);
                let store: Arc<dyn ObjectStore<K>> = watches.clone();
                KindManager {
                    strategy,
                    inner: Arc::new(CacheBasedManager::new(store, referenced)),
                    watches: Some(watches),
                }
            }
        }
    }

    /// The strategy this manager follows.
    pub fn strategy(&self) -> ChangeDetectionStrategy {
        self.strategy
    }

    /// Start phase: the `Watch` strategy's watches begin (and end with `tasks`).
    pub fn start(&self, tasks: &TaskSet) {
        if let Some(w) = &self.watches {
            w.start(tasks);
        }
    }

    /// Reads `namespace/name`.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<K, ManagerError> {
        self.inner.get_object(namespace, name).await
    }

    /// Whether a watch runs for the object (`Watch` strategy only).
    pub fn is_watching(&self, namespace: &str, name: &str) -> bool {
        self.watches
            .as_ref()
            .is_some_and(|w| w.is_watching(namespace, name))
    }

    pub fn register_pod(&self, pod: &Pod) {
        self.inner.register_pod(pod);
    }

    pub fn unregister_pod(&self, pod: &Pod) {
        self.inner.unregister_pod(pod);
    }
}

impl<K: ManagedObject> PodObjectRegistrar for KindManager<K> {
    fn register_pod(&self, pod: &Pod) {
        KindManager::register_pod(self, pod);
    }

    fn unregister_pod(&self, pod: &Pod) {
        KindManager::unregister_pod(self, pod);
    }
}
