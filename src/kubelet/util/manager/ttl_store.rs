//! The `Cache` strategy's store (Go's objectStore): objects fetched on
//! demand and kept for a TTL; a new reference invalidates the cached value
//! so a pod (re)registered always sees a fresh object.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

use super::cache_based::ObjectStore;
use super::error::ManagerError;
use super::fetch::{ManagedObject, ObjectFetcher};
use crate::util::clock::Clock;

/// The Node annotation giving the TTL of cached objects, in seconds.
pub const OBJECT_TTL_ANNOTATION_KEY: &str = "node.alpha.kubernetes.io/ttl";

/// The TTL to use now, if something (the Node) says one.
pub type GetObjectTtl = Arc<dyn Fn() -> Option<Duration> + Send + Sync>;

/// The TTL from the Node's annotation (Go's GetObjectTTLFromNodeFunc).
pub fn ttl_from_node<F, E>(get_node: F) -> GetObjectTtl
where
    F: Fn() -> Result<Node, E> + Send + Sync + 'static,
{
    Arc::new(move || {
        let node = get_node().ok()?;
        let value = node
            .metadata
            .annotations
            .as_ref()?
            .get(OBJECT_TTL_ANNOTATION_KEY)?
            .parse::<u64>()
            .ok()?;
        Some(Duration::from_secs(value))
    })
}

/// The last fetch of one object.
struct Data<K> {
    /// The object, or None when it was not found.
    object: Option<K>,
    /// A fetch has completed (successfully or as not found).
    fetched: bool,
    last_update: Option<Instant>,
}

impl<K> Default for Data<K> {
    fn default() -> Self {
        Data {
            object: None,
            fetched: false,
            last_update: None,
        }
    }
}

struct Item<K> {
    ref_count: usize,
    /// None after a new reference: the next read fetches.
    data: Option<Arc<tokio::sync::Mutex<Data<K>>>>,
}

/// A TTL cache of referenced objects.
pub struct TtlStore<K> {
    fetcher: Arc<dyn ObjectFetcher<K>>,
    clock: Arc<dyn Clock>,
    default_ttl: Duration,
    get_ttl: GetObjectTtl,
    items: Mutex<HashMap<(String, String), Item<K>>>,
}

fn resource_version<K: ManagedObject>(k: &K) -> u64 {
    k.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl<K: ManagedObject> TtlStore<K> {
    pub fn new(
        fetcher: Arc<dyn ObjectFetcher<K>>,
        clock: Arc<dyn Clock>,
        get_ttl: GetObjectTtl,
        default_ttl: Duration,
    ) -> Self {
        TtlStore {
            fetcher,
            clock,
            default_ttl,
            get_ttl,
            items: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Item<K>>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_fresh(&self, data: &Data<K>) -> bool {
        let ttl = (self.get_ttl)().unwrap_or(self.default_ttl);
        data.last_update
            .is_some_and(|t| self.clock.monotonic() < t + ttl)
    }
}

#[async_trait]
impl<K: ManagedObject> ObjectStore<K> for TtlStore<K> {
    fn add_reference(&self, namespace: &str, name: &str) {
        let mut items = self.lock();
        let item = items
            .entry((namespace.to_string(), name.to_string()))
            .or_insert(Item {
                ref_count: 0,
                data: None,
            });
        item.ref_count += 1;
        item.data = None;
    }

    fn delete_reference(&self, namespace: &str, name: &str) {
        let mut items = self.lock();
        let key = (namespace.to_string(), name.to_string());
        if let Some(item) = items.get_mut(&key) {
            item.ref_count = item.ref_count.saturating_sub(1);
            if item.ref_count == 0 {
                items.remove(&key);
            }
        }
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<K, ManagerError> {
        let data = {
            let mut items = self.lock();
            let Some(item) = items.get_mut(&(namespace.to_string(), name.to_string())) else {
                return Err(ManagerError::NotRegistered {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                });
            };
            item.data.get_or_insert_with(Default::default).clone()
        };
        // One fetch at a time per object; concurrent readers share it.
        let mut data = data.lock().await;
        if !data.fetched || !self.is_fresh(&data) {
            // A refresh of an object we have may be served from the API
            // server's cache.
            let from_cache = data.object.is_some();
            match self.fetcher.get(namespace, name, from_cache).await {
                Ok(object) => {
                    let older = data
                        .object
                        .as_ref()
                        .is_some_and(|old| resource_version(&object) < resource_version(old));
                    if !older {
                        data.object = Some(object);
                        data.fetched = true;
                        data.last_update = Some(self.clock.monotonic());
                    }
                }
                Err(e) if e.is_not_found() => {
                    data.object = None;
                    data.fetched = true;
                    data.last_update = Some(self.clock.monotonic());
                }
                // Nothing cached to fall back to: the caller sees the error.
                Err(e) if !data.fetched => return Err(e),
                Err(e) => {
                    crate::vlog!(4, namespace, name, err = %e, "Refresh failed; serving the cached object");
                }
            }
        }
        data.object.clone().ok_or_else(|| ManagerError::NotFound {
            resource: K::RESOURCE,
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::SystemTime;

    /// Answers GETs from a script; counts them.
    #[derive(Default)]
    struct Script {
        answers: Mutex<VecDeque<Result<ConfigMap, ManagerError>>>,
        calls: AtomicUsize,
        from_cache: Mutex<Vec<bool>>,
    }

    fn cm(rv: &str, value: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("cfg".into());
        c.metadata.resource_version = Some(rv.into());
        c.data = Some([("k".to_string(), value.to_string())].into());
        c
    }

    fn not_found() -> ManagerError {
        ManagerError::NotFound {
            resource: "configmap",
            name: "cfg".into(),
        }
    }

    fn unavailable() -> ManagerError {
        ManagerError::SyncTimeout {
            resource: "configmap",
        }
    }

    #[async_trait]
    impl ObjectFetcher<ConfigMap> for Script {
        async fn get(&self, _: &str, _: &str, from_cache: bool) -> Result<ConfigMap, ManagerError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.from_cache.lock().unwrap().push(from_cache);
            self.answers
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| Err(unavailable()))
        }
    }

    struct TestClock;

    impl Clock for TestClock {
        fn now(&self) -> SystemTime {
            SystemTime::now()
        }
        fn monotonic(&self) -> Instant {
            Instant::now()
        }
    }

    fn value(r: &Result<ConfigMap, ManagerError>) -> String {
        match r {
            Ok(c) => c.data.as_ref().unwrap()["k"].clone(),
            Err(e) => e.to_string(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_cache_semantics() {
        let script = Arc::new(Script::default());
        script.answers.lock().unwrap().extend([
            Ok(cm("5", "one")),
            Ok(cm("4", "older")),
            Ok(cm("7", "two")),
            Err(unavailable()),
            Err(unavailable()),
            Err(not_found()),
        ]);
        let ttl_override = Arc::new(Mutex::new(None::<Duration>));
        let t = ttl_override.clone();
        let store = TtlStore::new(
            script.clone() as Arc<dyn ObjectFetcher<ConfigMap>>,
            Arc::new(TestClock),
            Arc::new(move || *t.lock().unwrap()),
            Duration::from_secs(60),
        );
        assert_eq!(
            value(&store.get("ns", "cfg").await),
            "object \"ns\"/\"cfg\" not registered"
        );
        store.add_reference("ns", "cfg");
        assert_eq!(value(&store.get("ns", "cfg").await), "one");
        assert_eq!(value(&store.get("ns", "cfg").await), "one", "fresh: cached");
        assert_eq!(script.calls.load(Ordering::SeqCst), 1);

        // Expired: refetched; an older resourceVersion never replaces a
        // newer one (and leaves the value stale, so the next read retries).
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(value(&store.get("ns", "cfg").await), "one");
        assert_eq!(value(&store.get("ns", "cfg").await), "two");

        // The node's TTL annotation shortens the TTL; a failed refresh keeps
        // serving the cached object.
        *ttl_override.lock().unwrap() = Some(Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(value(&store.get("ns", "cfg").await), "two");

        // A new reference invalidates the value: with nothing cached, a
        // failed fetch is the caller's error; not found is cached.
        store.add_reference("ns", "cfg");
        assert_eq!(
            value(&store.get("ns", "cfg").await),
            "failed to sync configmap cache: timed out waiting for the condition"
        );
        assert_eq!(
            value(&store.get("ns", "cfg").await),
            "configmap \"cfg\" not found"
        );
        assert_eq!(
            value(&store.get("ns", "cfg").await),
            "configmap \"cfg\" not found"
        );
        assert_eq!(script.calls.load(Ordering::SeqCst), 6);
        assert_eq!(
            *script.from_cache.lock().unwrap(),
            [false, true, true, true, false, false]
        );
        store.delete_reference("ns", "cfg");
        store.delete_reference("ns", "cfg");
        assert!(matches!(
            store.get("ns", "cfg").await,
            Err(ManagerError::NotRegistered { .. })
        ));
    }
}
