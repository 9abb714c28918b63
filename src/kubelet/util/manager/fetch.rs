//! How the stores read objects from the API server.

use std::fmt::Debug;

use async_trait::async_trait;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, GetParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ManagerError;

/// An object kind the managers handle (ConfigMap, Secret).
pub trait ManagedObject:
    kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    /// The resource name errors use ("configmap", "secret").
    const RESOURCE: &'static str;
    /// Whether the object is marked immutable.
    fn is_immutable(&self) -> bool;
}

impl ManagedObject for k8s_openapi::api::core::v1::ConfigMap {
    const RESOURCE: &'static str = "configmap";
    fn is_immutable(&self) -> bool {
        self.immutable == Some(true)
    }
}

impl ManagedObject for k8s_openapi::api::core::v1::Secret {
    const RESOURCE: &'static str = "secret";
    fn is_immutable(&self) -> bool {
        self.immutable == Some(true)
    }
}

/// Reads one object.
#[async_trait]
pub trait ObjectFetcher<K>: Send + Sync {
    /// GET `namespace/name`; `from_cache` allows the API server to answer
    /// from its watch cache (resourceVersion=0), as periodic refreshes do.
    async fn get(&self, namespace: &str, name: &str, from_cache: bool) -> Result<K, ManagerError>;
}

/// Reads objects with a kube client.
#[derive(Clone)]
pub struct ApiFetcher {
    client: kube::Client,
}

impl ApiFetcher {
    pub fn new(client: kube::Client) -> Self {
        ApiFetcher { client }
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

/// Maps a kube error of a read of `namespace/name`.
pub(crate) fn api_error<K: ManagedObject>(
    namespace: &str,
    name: &str,
    err: kube::Error,
) -> ManagerError {
    match &err {
        kube::Error::Api(status) if status.is_not_found() => ManagerError::NotFound {
            resource: K::RESOURCE,
            name: name.to_string(),
        },
        _ => ManagerError::Api {
            resource: K::RESOURCE,
            namespace: namespace.to_string(),
            name: name.to_string(),
            source: Box::new(err),
        },
    }
}

#[async_trait]
impl<K: ManagedObject> ObjectFetcher<K> for ApiFetcher {
    async fn get(&self, namespace: &str, name: &str, from_cache: bool) -> Result<K, ManagerError> {
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let params = if from_cache {
            GetParams::any()
        } else {
            GetParams::default()
        };
        api.get_with(name, &params)
            .await
            .map_err(|e| api_error::<K>(namespace, name, e))
    }
}
