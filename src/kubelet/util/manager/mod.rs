//! The object managers behind the ConfigMap and Secret managers (Go's
//! pkg/kubelet/util/manager): pods register the objects they reference, and
//! reads are answered according to `configMapAndSecretChangeDetectionStrategy`:
//!
//! - `Watch`: one watch per referenced object, started when the first pod
//!   references it and stopped when the last one goes ([`WatchStore`]); idle
//!   watches (nobody read the object for 5 × syncFrequency) are paused and
//!   resumed on the next read; immutable objects are not watched further.
//! - `Cache`: a TTL cache, invalidated when a pod referencing the object is
//!   (re)registered ([`TtlStore`]); the TTL comes from the Node's
//!   `node.alpha.kubernetes.io/ttl` annotation, else one minute.
//! - `Get`: a plain GET for every read ([`DirectManager`]).

mod cache_based;
mod direct;
mod error;
mod fetch;
mod kind_manager;
mod ttl_store;
mod watch_store;

use std::collections::BTreeSet;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

pub use cache_based::{CacheBasedManager, ObjectStore};
pub use direct::DirectManager;
pub use error::ManagerError;
pub use fetch::{ApiFetcher, ManagedObject, ObjectFetcher};
pub use kind_manager::{DEFAULT_TTL, KindManager};
pub use ttl_store::{GetObjectTtl, OBJECT_TTL_ANNOTATION_KEY, TtlStore, ttl_from_node};
pub use watch_store::WatchStore;

/// Reads objects for the pods registered with it.
#[async_trait]
pub trait ObjectManager<K>: Send + Sync {
    /// The object `namespace/name`, as fresh as the strategy promises.
    async fn get_object(&self, namespace: &str, name: &str) -> Result<K, ManagerError>;
    /// A pod (new or changed) that may reference objects.
    fn register_pod(&self, pod: &Pod);
    /// A pod that no longer needs its objects.
    fn unregister_pod(&self, pod: &Pod);
}

/// `configMapAndSecretChangeDetectionStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeDetectionStrategy {
    Watch,
    Cache,
    Get,
}

impl ChangeDetectionStrategy {
    /// Parses the configuration value.
    pub fn parse(value: &str) -> Result<Self, ManagerError> {
        match value {
            "Watch" => Ok(Self::Watch),
            "Cache" => Ok(Self::Cache),
            "Get" => Ok(Self::Get),
            other => Err(ManagerError::UnknownStrategy(other.to_string())),
        }
    }
}

/// Names a pod references, collected by a visitor.
pub type ReferencedNames = fn(&Pod) -> BTreeSet<String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies() {
        assert_eq!(
            ChangeDetectionStrategy::parse("Watch").unwrap(),
            ChangeDetectionStrategy::Watch
        );
        assert_eq!(
            ChangeDetectionStrategy::parse("Cache").unwrap(),
            ChangeDetectionStrategy::Cache
        );
        assert_eq!(
            ChangeDetectionStrategy::parse("Get").unwrap(),
            ChangeDetectionStrategy::Get
        );
        assert_eq!(
            ChangeDetectionStrategy::parse("Poll")
                .unwrap_err()
                .to_string(),
            "unknown configmap and secret manager mode: Poll"
        );
    }
}
