//! The `Get` strategy: every read is a GET to the API server, and pods need
//! not register anything (Go's simple managers).

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::ObjectManager;
use super::error::ManagerError;
use super::fetch::ObjectFetcher;

/// Reads straight from the API server.
pub struct DirectManager<K> {
    fetcher: Arc<dyn ObjectFetcher<K>>,
    _kind: PhantomData<fn() -> K>,
}

impl<K> DirectManager<K> {
    pub fn new(fetcher: Arc<dyn ObjectFetcher<K>>) -> Self {
        DirectManager {
            fetcher,
            _kind: PhantomData,
        }
    }
}

#[async_trait]
impl<K: Send + Sync + 'static> ObjectManager<K> for DirectManager<K> {
    async fn get_object(&self, namespace: &str, name: &str) -> Result<K, ManagerError> {
        self.fetcher.get(namespace, name, false).await
    }

    fn register_pod(&self, _pod: &Pod) {}

    fn unregister_pod(&self, _pod: &Pod) {}
}
