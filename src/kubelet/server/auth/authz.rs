//! Authorizers and the choice among them by `authorization.mode`.

use std::sync::Arc;

use super::{Attributes, AuthError, Authorizer, Decision};

/// Allows everything (`authorization.mode: AlwaysAllow`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysAllowAuthorizer;

#[async_trait::async_trait]
impl Authorizer for AlwaysAllowAuthorizer {
    async fn authorize(&self, _attrs: &Attributes) -> Result<(Decision, String), AuthError> {
        Ok((Decision::Allow, String::new()))
    }
}

/// Has no opinion on anything, so every request is forbidden. Not a kubelet
/// mode; useful where a refusing authorizer is needed.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysDenyAuthorizer;

#[async_trait::async_trait]
impl Authorizer for AlwaysDenyAuthorizer {
    async fn authorize(&self, _attrs: &Attributes) -> Result<(Decision, String), AuthError> {
        Ok((Decision::NoOpinion, "Everything is forbidden.".to_string()))
    }
}

/// The kubelet's authorization modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthzMode {
    AlwaysAllow,
    Webhook,
}

impl AuthzMode {
    /// Parses `authorization.mode`.
    pub fn parse(mode: &str) -> Result<Self, AuthError> {
        match mode {
            "AlwaysAllow" => Ok(AuthzMode::AlwaysAllow),
            "Webhook" => Ok(AuthzMode::Webhook),
            "" => Err(AuthError::NoAuthorizationMode),
            other => Err(AuthError::UnknownAuthorizationMode(other.to_string())),
        }
    }
}

/// Picks the authorizer for `mode`; `webhook` is the SubjectAccessReview
/// authorizer (issue 6), required in Webhook mode.
pub fn build_authorizer(
    mode: &str,
    webhook: Option<Arc<dyn Authorizer>>,
) -> Result<Arc<dyn Authorizer>, AuthError> {
    match AuthzMode::parse(mode)? {
        AuthzMode::AlwaysAllow => Ok(Arc::new(AlwaysAllowAuthorizer)),
        AuthzMode::Webhook => webhook.ok_or(AuthError::NoClientForWebhookAuthz),
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn build_table() {
        let deny: Arc<dyn Authorizer> = Arc::new(AlwaysDenyAuthorizer);
        let cases: Vec<(&str, Option<Arc<dyn Authorizer>>, Result<Decision, &str>)> = vec![
            ("AlwaysAllow", None, Ok(Decision::Allow)),
            ("Webhook", Some(deny.clone()), Ok(Decision::NoOpinion)),
            (
                "Webhook",
                None,
                Err("no client provided, cannot use webhook authorization"),
            ),
            ("", None, Err("no authorization mode specified")),
            ("RBAC", None, Err("unknown authorization mode RBAC")),
        ];
        for (mode, webhook, want) in cases {
            let got = match build_authorizer(mode, webhook) {
                Ok(a) => a.authorize(&Attributes::default()).await.map(|(d, _)| d),
                Err(e) => Err(e),
            };
            match (got, want) {
                (Ok(d), Ok(w)) => assert_eq!(d, w, "{mode}"),
                (Err(e), Err(w)) => assert_eq!(e.to_string(), w, "{mode}"),
                (g, w) => panic!("{mode}: got {g:?}, want {w:?}"),
            }
        }
    }
}
