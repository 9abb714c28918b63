//! Authorization by SubjectAccessReview (authorization.k8s.io/v1): the
//! request's user and node attributes are sent to the API server; allowed
//! answers are cached for `cacheAuthorizedTTL`, denials for
//! `cacheUnauthorizedTTL`, keyed by the review spec.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};

use super::webhook::{WebhookBackoff, with_backoff};
use super::webhook_cache::ExpiringCache;
use super::{Attributes, AuthError, Authorizer, Decision};

const CACHE_SIZE: usize = 8192;
/// Requests with attributes longer than this are not cached.
const MAX_CONTROLLED_ATTR_CACHE_SIZE: usize = 10_000;

/// The SubjectAccessReview authorizer.
pub struct WebhookAuthorizer {
    client: kube::Client,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    cache: ExpiringCache<String, SubjectAccessReviewStatus>,
    backoff: WebhookBackoff,
}

impl WebhookAuthorizer {
    pub fn new(client: kube::Client, authorized_ttl: Duration, unauthorized_ttl: Duration) -> Self {
        WebhookAuthorizer {
            client,
            authorized_ttl,
            unauthorized_ttl,
            cache: ExpiringCache::new(CACHE_SIZE),
            backoff: WebhookBackoff::default(),
        }
    }
}

/// The review spec for `a`.
pub fn review_spec(a: &Attributes) -> SubjectAccessReviewSpec {
    let opt = |v: &[String]| (!v.is_empty()).then(|| v.to_vec());
    let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
    let mut spec = SubjectAccessReviewSpec {
        user: s(&a.user.name),
        uid: s(&a.user.uid),
        groups: opt(&a.user.groups),
        extra: (!a.user.extra.is_empty()).then(|| a.user.extra.clone().into_iter().collect()),
        ..Default::default()
    };
    if a.resource_request {
        spec.resource_attributes = Some(ResourceAttributes {
            namespace: s(&a.namespace),
            verb: s(&a.verb),
            group: s(&a.api_group),
            version: s(&a.api_version),
            resource: s(&a.resource),
            subresource: s(&a.subresource),
            name: s(&a.name),
            ..Default::default()
        });
    } else {
        spec.non_resource_attributes = Some(NonResourceAttributes {
            path: s(&a.path),
            verb: s(&a.verb),
        });
    }
    spec
}

fn should_cache(a: &Attributes) -> bool {
    let size = a.namespace.len()
        + a.verb.len()
        + a.api_group.len()
        + a.api_version.len()
        + a.resource.len()
        + a.subresource.len()
        + a.name.len()
        + a.path.len();
    size < MAX_CONTROLLED_ATTR_CACHE_SIZE
}

#[async_trait::async_trait]
impl Authorizer for WebhookAuthorizer {
    async fn authorize(&self, attrs: &Attributes) -> Result<(Decision, String), AuthError> {
        let spec = review_spec(attrs);
        let key = serde_json::to_string(&spec).map_err(AuthError::ReviewKey)?;
        let status = match self.cache.get(&key) {
            Some(s) => s,
            None => {
                let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
                let review = SubjectAccessReview {
                    spec,
                    ..Default::default()
                };
                let pp = PostParams::default();
                let result = with_backoff(self.backoff, || api.create(&pp, &review)).await;
                let status = match result {
                    Ok(r) => r.status.unwrap_or_default(),
                    Err(e) => {
                        tracing::error!(error = %e, "Failed to make webhook authorizer request");
                        return Err(AuthError::SubjectAccessReview(e));
                    }
                };
                if should_cache(attrs) {
                    let ttl = if status.allowed {
                        self.authorized_ttl
                    } else {
                        self.unauthorized_ttl
                    };
                    self.cache.put(key, status.clone(), ttl);
                }
                status
            }
        };
        let reason = status.reason.clone().unwrap_or_default();
        let denied = status.denied.unwrap_or(false);
        match (status.allowed, denied) {
            (true, true) => Err(AuthError::AllowedAndDenied),
            (_, true) => Ok((Decision::Deny, reason)),
            (true, false) => Ok((Decision::Allow, reason)),
            (false, false) => Ok((Decision::NoOpinion, reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::server::auth::{UserInfo, node_request_attributes};

    #[test]
    fn spec_of_a_node_request() {
        let user = UserInfo {
            name: "alice".into(),
            uid: "42".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
        };
        let spec = review_spec(&node_request_attributes(
            user,
            "GET",
            "/stats/summary",
            "n1",
        ));
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            serde_json::json!({
                "user": "alice", "uid": "42",
                "groups": ["dev", "system:authenticated"],
                "extra": {"scopes": ["a"]},
                "resourceAttributes": {"verb": "get", "version": "v1", "resource": "nodes", "subresource": "stats", "name": "n1"}
            })
        );
        let non_resource = Attributes {
            verb: "get".into(),
            path: "/healthz".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(review_spec(&non_resource)).unwrap(),
            serde_json::json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
        );
    }
}
