//! A manager keeping a store of the objects registered pods reference (Go's
//! cacheBasedManager): registering a pod adds a reference to each object it
//! names (and drops the references of its previous version), unregistering
//! drops them; reads go to the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::error::ManagerError;
use super::{ObjectManager, ReferencedNames};

/// Reference-counted objects and their current values.
#[async_trait]
pub trait ObjectStore<K>: Send + Sync {
    /// One more pod needs `namespace/name`. Must be cheap: it runs for every
    /// pod update.
    fn add_reference(&self, namespace: &str, name: &str);
    /// One pod fewer needs `namespace/name`.
    fn delete_reference(&self, namespace: &str, name: &str);
    /// The object's current value.
    async fn get(&self, namespace: &str, name: &str) -> Result<K, ManagerError>;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PodKey {
    namespace: String,
    name: String,
    uid: String,
}

fn pod_key(pod: &Pod) -> PodKey {
    PodKey {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Registered pods and the store of the objects they reference. Of each
/// pod only the names it referenced are kept (what unregistering or the
/// next version must release), not a copy of the pod.
pub struct CacheBasedManager<K> {
    store: Arc<dyn ObjectStore<K>>,
    referenced: ReferencedNames,
    registered: Mutex<HashMap<PodKey, Vec<String>>>,
}

impl<K> CacheBasedManager<K> {
    pub fn new(store: Arc<dyn ObjectStore<K>>, referenced: ReferencedNames) -> Self {
        CacheBasedManager {
            store,
            referenced,
            registered: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PodKey, Vec<String>>> {
        self.registered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many pods are registered.
    pub fn registered_pods(&self) -> usize {
        self.lock().len()
    }
}

#[async_trait]
impl<K: Send + Sync + 'static> ObjectManager<K> for CacheBasedManager<K> {
    async fn get_object(&self, namespace: &str, name: &str) -> Result<K, ManagerError> {
        self.store.get(namespace, name).await
    }

    fn register_pod(&self, pod: &Pod) {
        let names: Vec<String> = (self.referenced)(pod).into_iter().collect();
        let key = pod_key(pod);
        let mut registered = self.lock();
        for name in &names {
            self.store.add_reference(&key.namespace, name);
        }
        // References of the previous version go after the new ones are
        // added, so objects named by both never drop to zero. The key holds
        // the namespace, the same for every version of the pod.
        let namespace = key.namespace.clone();
        if let Some(prev) = registered.insert(key, names) {
            for name in &prev {
                self.store.delete_reference(&namespace, name);
            }
        }
    }

    fn unregister_pod(&self, pod: &Pod) {
        let key = pod_key(pod);
        let mut registered = self.lock();
        if let Some(prev) = registered.remove(&key) {
            for name in &prev {
                self.store.delete_reference(&key.namespace, name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Default)]
    struct Counting(Mutex<BTreeMap<String, i32>>);

    #[async_trait]
    impl ObjectStore<String> for Counting {
        fn add_reference(&self, namespace: &str, name: &str) {
            *self
                .0
                .lock()
                .unwrap()
                .entry(format!("{namespace}/{name}"))
                .or_default() += 1;
        }
        fn delete_reference(&self, namespace: &str, name: &str) {
            let mut m = self.0.lock().unwrap();
            let key = format!("{namespace}/{name}");
            if let Some(c) = m.get_mut(&key) {
                *c -= 1;
                if *c == 0 {
                    m.remove(&key);
                }
            }
        }
        async fn get(&self, namespace: &str, name: &str) -> Result<String, ManagerError> {
            Ok(format!("{namespace}/{name}"))
        }
    }

    fn names(pod: &Pod) -> BTreeSet<String> {
        pod.metadata
            .labels
            .iter()
            .flat_map(|l| l.keys().cloned())
            .collect()
    }

    fn pod(uid: &str, refs: &[&str]) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("ns".into());
        p.metadata.name = Some(format!("pod-{uid}"));
        p.metadata.uid = Some(uid.into());
        p.metadata.labels = Some(
            refs.iter()
                .map(|r| (r.to_string(), String::new()))
                .collect(),
        );
        p
    }

    #[tokio::test]
    async fn references_follow_pod_versions() {
        let store = Arc::new(Counting::default());
        let m = CacheBasedManager::new(store.clone() as Arc<dyn ObjectStore<String>>, names);
        let counts = |s: &Counting| s.0.lock().unwrap().clone();
        m.register_pod(&pod("1", &["a", "b"]));
        m.register_pod(&pod("2", &["b"]));
        assert_eq!(
            counts(&store),
            [("ns/a".into(), 1), ("ns/b".into(), 2)].into()
        );
        // An update swaps a for c without b ever dropping to zero.
        m.register_pod(&pod("1", &["b", "c"]));
        assert_eq!(
            counts(&store),
            [("ns/b".into(), 2), ("ns/c".into(), 1)].into()
        );
        m.unregister_pod(&pod("1", &[]));
        assert_eq!(counts(&store), [("ns/b".into(), 1)].into());
        m.unregister_pod(&pod("1", &[]));
        m.unregister_pod(&pod("2", &["b"]));
        assert!(counts(&store).is_empty());
        assert_eq!(m.registered_pods(), 0);
        assert_eq!(m.get_object("ns", "x").await.unwrap(), "ns/x");
    }
}
