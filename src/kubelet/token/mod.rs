//! pkg/kubelet/token, the API half: service account tokens requested from
//! the API server (TokenRequest, `POST
//! /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`), for the token
//! cache of projected volumes.
//!
//! The cache itself (keyed by account, namespace, audiences, lifetime and
//! bound object; refreshed at 80% of the lifetime or after 24 h) is the
//! volume plugins' [`TokenManager`]; [`ApiTokenRequester`] is the
//! [`ServiceAccountTokenGetter`] it asks ([`new_token_manager`] wires both).

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use tokio::sync::OnceCell;

use crate::util::clock::Clock;
use crate::volume::{ServiceAccountTokenGetter, TokenError, TokenManager};

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum TokenRequestError {
    /// The API server has no TokenRequest endpoint.
    #[error("the API server does not have TokenRequest endpoints enabled")]
    NotSupported,
    /// The API server refused or could not be reached.
    #[error("{0}")]
    Api(#[from] kube::Error),
}

/// Issues tokens through the API server.
#[async_trait]
pub trait TokenRequester: Send + Sync {
    /// A token for service account `namespace/name` as `request` asks
    /// (audiences, expirationSeconds, bound object).
    async fn create_token(
        &self,
        namespace: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenRequestError>;
}

/// TokenRequest over a kube client.
pub struct ApiTokenRequester {
    client: kube::Client,
    /// Whether discovery lists `serviceaccounts/token` (asked once, only
    /// after a 404, to tell a missing endpoint from a missing account).
    supported: OnceCell<bool>,
}

impl ApiTokenRequester {
    pub fn new(client: kube::Client) -> Self {
        ApiTokenRequester {
            client,
            supported: OnceCell::new(),
        }
    }

    async fn token_requests_supported(&self) -> bool {
        *self
            .supported
            .get_or_init(|| async {
                match self.client.list_core_api_resources("v1").await {
                    Ok(list) => list
                        .resources
                        .iter()
                        .any(|r| r.name == "serviceaccounts/token"),
                    Err(_) => false,
                }
            })
            .await
    }
}

#[async_trait]
impl TokenRequester for ApiTokenRequester {
    async fn create_token(
        &self,
        namespace: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenRequestError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        match api
            .create_subresource::<TokenRequest, TokenRequest>(
                "token",
                name,
                &PostParams::default(),
                request,
            )
            .await
        {
            Err(kube::Error::Api(status))
                if status.is_not_found() && !self.token_requests_supported().await =>
            {
                Err(TokenRequestError::NotSupported)
            }
            other => other.map_err(TokenRequestError::Api),
        }
    }
}

#[async_trait]
impl ServiceAccountTokenGetter for ApiTokenRequester {
    async fn create_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenError> {
        TokenRequester::create_token(self, namespace, service_account, request)
            .await
            .map_err(|e| TokenError(e.to_string()))
    }
}

/// The kubelet's token manager: the volume plugins' cache over TokenRequest
/// through `client` (build phase; `start(&tasks)` runs its cleanup).
pub fn new_token_manager(client: kube::Client, clock: Arc<dyn Clock>) -> Arc<TokenManager> {
    Arc::new(TokenManager::new(
        Arc::new(ApiTokenRequester::new(client)),
        clock,
    ))
}

/// A TokenRequest for a pod's projected token: audiences, lifetime, and the
/// pod it is bound to (the token dies with the pod).
pub fn pod_token_request(
    audiences: Vec<String>,
    expiration_seconds: i64,
    pod_name: &str,
    pod_uid: &str,
) -> TokenRequest {
    use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequestSpec};
    TokenRequest {
        spec: TokenRequestSpec {
            audiences,
            expiration_seconds: Some(expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("Pod".to_string()),
                name: Some(pod_name.to_string()),
                uid: Some(pod_uid.to_string()),
            }),
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_bound_request_shape() {
        let tr = pod_token_request(vec!["api".into()], 3607, "web", "u-1");
        let v = serde_json::to_value(&tr).unwrap();
        assert_eq!(v["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(v["kind"], "TokenRequest");
        assert_eq!(v["spec"]["expirationSeconds"], 3607);
        assert_eq!(v["spec"]["audiences"][0], "api");
        assert_eq!(
            v["spec"]["boundObjectRef"],
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-1"})
        );
    }
}
