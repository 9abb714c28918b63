//! Authentication and authorization of requests to the main (10250) server,
//! as the Go kubelet's server auth filter does it: authenticate (401
//! `Unauthorized` on error or no identity), map the request to node
//! attributes, authorize (500 on error, 403 `Forbidden (...)` unless allowed).
//!
//! The seams are [`Authenticator`] and [`Authorizer`]; with an API client
//! the webhook TokenReview and SubjectAccessReview implementations plug in
//! ([`build_auth`]).

mod attributes;
mod authn;
mod authz;
mod webhook;
pub mod webhook_authn;
mod webhook_authz;
mod webhook_cache;
mod x509;

use std::collections::BTreeMap;
use std::sync::Arc;

use http::StatusCode;
use http::request::Parts;

pub use attributes::node_request_attributes;
pub use authn::{
    AnonymousAuthenticator, AuthenticatedGroupAdder, AuthnParams, UnionAuthenticator,
    build_authenticator,
};
pub use authz::{AlwaysAllowAuthorizer, AlwaysDenyAuthorizer, AuthzMode, build_authorizer};
pub use webhook::{WebhookBackoff, build_auth};
pub use webhook_authn::{CachedTokenReviewer, webhook_token_authenticator};
pub use webhook_authz::WebhookAuthorizer;
pub use x509::{CA_RELOAD_PERIOD, ClientCaBundle, X509Authenticator, certificate_user};

use super::router::{ResponseBody, text};

/// The anonymous user's name.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of every unauthenticated request.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group added to every authenticated user.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";

/// Who made a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request asks to do, in API terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    pub verb: String,
    pub namespace: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub resource_request: bool,
    pub path: String,
}

/// An authorizer's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Deny,
    Allow,
    NoOpinion,
}

/// Errors from building or running authentication and authorization.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("verifying certificate {identifier} failed: {reason}")]
    CertificateVerification {
        identifier: String,
        #[source]
        reason: x509::CertificateError,
    },
    #[error("{}", aggregate(.0))]
    Aggregate(Vec<String>),
    #[error("unable to load client CA file {path:?}: {reason}")]
    ClientCa {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("no client provided, cannot use webhook authentication")]
    NoClientForWebhookAuthn,
    #[error("no client provided, cannot use webhook authorization")]
    NoClientForWebhookAuthz,
    #[error("no authorization mode specified")]
    NoAuthorizationMode,
    #[error("unknown authorization mode {0}")]
    UnknownAuthorizationMode(String),
    /// The token review gave no user, and said why.
    #[error(transparent)]
    TokenReview(#[from] webhook_authn::ReviewFailure),
    /// The token review did not authenticate the token (and gave no error).
    #[error("invalid bearer token")]
    InvalidToken,
    #[error(transparent)]
    WebsocketToken(#[from] webhook_authn::WebsocketTokenError),
    /// The SubjectAccessReview could not be created.
    #[error("{0}")]
    SubjectAccessReview(#[source] kube::Error),
    /// The access review's spec could not be encoded as the cache key.
    #[error("encoding the subject access review: {0}")]
    ReviewKey(#[source] serde_json::Error),
    #[error("webhook subject access review returned both allow and deny response")]
    AllowedAndDenied,
}

fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Identifies the requester. `Ok(None)`: this authenticator has no opinion
/// (no credentials it understands); `Err`: credentials were presented and
/// are bad.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync + 'static {
    async fn authenticate(&self, req: &Parts) -> Result<Option<UserInfo>, AuthError>;
}

/// Decides whether the attributes are allowed; the string is a reason.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync + 'static {
    async fn authorize(&self, attrs: &Attributes) -> Result<(Decision, String), AuthError>;
}

/// The main server's auth filter: authenticator, node attributes, authorizer.
#[derive(Clone)]
pub struct KubeletAuth {
    authenticator: Arc<dyn Authenticator>,
    authorizer: Arc<dyn Authorizer>,
    node_name: String,
}

impl std::fmt::Debug for KubeletAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletAuth")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl KubeletAuth {
    pub fn new(
        authenticator: Arc<dyn Authenticator>,
        authorizer: Arc<dyn Authorizer>,
        node_name: impl Into<String>,
    ) -> Self {
        Self {
            authenticator,
            authorizer,
            node_name: node_name.into(),
        }
    }

    /// The attributes a request is authorized with.
    pub fn request_attributes(&self, user: UserInfo, parts: &Parts, path: &str) -> Attributes {
        node_request_attributes(user, parts.method.as_str(), path, &self.node_name)
    }

    /// Runs the filter on a request whose (decoded) path is `path`: the user
    /// when the request may proceed, else the response to send.
    pub async fn filter(
        &self,
        parts: &Parts,
        path: &str,
    ) -> Result<UserInfo, http::Response<ResponseBody>> {
        let user = match self.authenticator.authenticate(parts).await {
            Ok(Some(user)) => user,
            Ok(None) => return Err(text(StatusCode::UNAUTHORIZED, "Unauthorized")),
            Err(err) => {
                tracing::error!(error = %err, "Unable to authenticate the request due to an error");
                return Err(text(StatusCode::UNAUTHORIZED, "Unauthorized"));
            }
        };
        let attrs = self.request_attributes(user, parts, path);
        let describe = |attrs: &Attributes| {
            format!(
                "(user={}, verb={}, resource={}, subresource={})",
                attrs.user.name, attrs.verb, attrs.resource, attrs.subresource
            )
        };
        match self.authorizer.authorize(&attrs).await {
            Ok((Decision::Allow, _)) => Ok(attrs.user),
            Ok((_, reason)) => {
                crate::vlog!(
                    2,
                    user = %attrs.user.name,
                    verb = %attrs.verb,
                    resource = %attrs.resource,
                    subresource = %attrs.subresource,
                    reason = %reason,
                    "Forbidden"
                );
                Err(text(
                    StatusCode::FORBIDDEN,
                    format!("Forbidden {}", describe(&attrs)),
                ))
            }
            Err(err) => {
                tracing::error!(
                    error = %err,
                    user = %attrs.user.name,
                    verb = %attrs.verb,
                    resource = %attrs.resource,
                    subresource = %attrs.subresource,
                    "Authorization error"
                );
                Err(text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Authorization error {}", describe(&attrs)),
                ))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// Authentication answering this (`Err`: fails with this message).
    struct Fixed(Result<Option<UserInfo>, &'static str>);

    #[async_trait::async_trait]
    impl Authenticator for Fixed {
        async fn authenticate(&self, _req: &Parts) -> Result<Option<UserInfo>, AuthError> {
            self.0.clone().map_err(|e| {
                AuthError::TokenReview(webhook_authn::ReviewFailure::Refused(e.into()))
            })
        }
    }

    /// Authorization answering this (`Err`: fails with this message).
    struct FixedAuthz(Result<Decision, &'static str>);

    #[async_trait::async_trait]
    impl Authorizer for FixedAuthz {
        async fn authorize(&self, _attrs: &Attributes) -> Result<(Decision, String), AuthError> {
            self.0.map(|d| (d, String::new())).map_err(|e| {
                AuthError::TokenReview(webhook_authn::ReviewFailure::Refused(e.into()))
            })
        }
    }

    fn alice() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn filter_table() {
        let cases: Vec<(
            &str,
            Result<Option<UserInfo>, &'static str>,
            Result<Decision, &'static str>,
            &str,
            Option<(u16, &str)>,
        )> = vec![
            (
                "allowed",
                Ok(Some(alice())),
                Ok(Decision::Allow),
                "/healthz",
                None,
            ),
            (
                "no identity",
                Ok(None),
                Ok(Decision::Allow),
                "/healthz",
                Some((401, "Unauthorized")),
            ),
            (
                "authn error",
                Err("bad cert"),
                Ok(Decision::Allow),
                "/healthz",
                Some((401, "Unauthorized")),
            ),
            (
                "denied",
                Ok(Some(alice())),
                Ok(Decision::Deny),
                "/stats/summary",
                Some((
                    403,
                    "Forbidden (user=alice, verb=get, resource=nodes, subresource=stats)",
                )),
            ),
            (
                "no opinion is a denial",
                Ok(Some(alice())),
                Ok(Decision::NoOpinion),
                "/configz",
                Some((
                    403,
                    "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)",
                )),
            ),
            (
                "authz error",
                Ok(Some(alice())),
                Err("webhook down"),
                "/metrics",
                Some((
                    500,
                    "Authorization error (user=alice, verb=get, resource=nodes, subresource=metrics)",
                )),
            ),
        ];
        for (name, authn, authz, path, want) in cases {
            let auth = KubeletAuth::new(
                Arc::new(Fixed(authn)),
                Arc::new(FixedAuthz(authz)),
                "node-a",
            );
            let (parts, _) = http::Request::get(path).body(()).unwrap().into_parts();
            match (auth.filter(&parts, path).await, want) {
                (Ok(user), None) => assert_eq!(user.name, "alice", "{name}"),
                (Err(resp), Some((status, body))) => {
                    assert_eq!(resp.status().as_u16(), status, "{name}");
                    let got = resp.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(std::str::from_utf8(&got).unwrap(), body, "{name}");
                }
                (got, want) => panic!("{name}: got ok={}, want {want:?}", got.is_ok()),
            }
        }
    }

    #[test]
    fn aggregate_formatting() {
        assert_eq!(AuthError::Aggregate(vec!["a".into()]).to_string(), "a");
        assert_eq!(
            AuthError::Aggregate(vec!["a".into(), "b".into()]).to_string(),
            "[a, b]"
        );
    }
}
