//! BuildAuth with the API server's help: bearer tokens checked by
//! TokenReview and requests authorised by SubjectAccessReview through the
//! kubelet's API client, both cached; without a client (standalone) asking
//! for either is the Go error. Webhook calls retry transient failures with
//! the API server's default webhook backoff (500 ms, ×1.5, 20% jitter, 5
//! tries).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::authn::{AuthnParams, build_authenticator};
use super::authz::build_authorizer;
use super::webhook_authn::webhook_token_authenticator;
use super::webhook_authz::WebhookAuthorizer;
use super::x509::ClientCaBundle;
use super::{AuthError, KubeletAuth};
use crate::apis::config::types::KubeletConfiguration;

/// The webhook retry backoff.
#[derive(Debug, Clone, Copy)]
pub struct WebhookBackoff {
    pub initial: Duration,
    pub factor: f64,
    pub jitter: f64,
    pub steps: u32,
}

impl Default for WebhookBackoff {
    fn default() -> Self {
        WebhookBackoff {
            initial: Duration::from_millis(500),
            factor: 1.5,
            jitter: 0.2,
            steps: 5,
        }
    }
}

/// Whether a failed webhook call is worth another try: connection resets,
/// 500, 504 (timeout), 429 and answers that ask to retry later.
pub fn should_retry(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            matches!(s.code, 429 | 500 | 504)
                || s.details
                    .as_ref()
                    .is_some_and(|d| d.retry_after_seconds > 0)
        }
        other => other
            .to_string()
            .to_lowercase()
            .contains("connection reset"),
    }
}

/// Runs `call` until it succeeds, fails for good, or the tries run out.
pub async fn with_backoff<T, F, Fut>(backoff: WebhookBackoff, mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = backoff.initial;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < backoff.steps && should_retry(&e) => {
                let jitter = delay.mul_f64(backoff.jitter * rand::random::<f64>());
                tokio::time::sleep(delay + jitter).await;
                delay = delay.mul_f64(backoff.factor);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Go's BuildAuth: the authenticator chain and the authorizer of the main
/// server from the configuration; `client` is the kubelet's API client
/// (`None` standalone).
pub fn build_auth(
    node_name: &str,
    client: Option<kube::Client>,
    config: &KubeletConfiguration,
    client_ca: Option<Arc<ClientCaBundle>>,
) -> Result<KubeletAuth, AuthError> {
    let authn = &config.authentication;
    let token = match (&client, authn.webhook.enabled) {
        (Some(c), true) => Some(webhook_token_authenticator(
            c.clone(),
            authn.webhook.cache_ttl.to_std(),
        )),
        _ => None,
    };
    let authenticator = build_authenticator(
        &AuthnParams {
            anonymous: authn.anonymous.enabled,
            client_ca,
            webhook_enabled: authn.webhook.enabled,
        },
        token,
    )?;
    let authz = &config.authorization;
    let webhook = client.map(|c| {
        Arc::new(WebhookAuthorizer::new(
            c,
            authz.webhook.cache_authorized_ttl.to_std(),
            authz.webhook.cache_unauthorized_ttl.to_std(),
        )) as Arc<dyn super::Authorizer>
    });
    let authorizer = build_authorizer(&authz.mode, webhook)?;
    Ok(KubeletAuth::new(authenticator, authorizer, node_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, retry_after: i32) -> kube::Error {
        let mut s = kube::core::Status {
            code,
            ..Default::default()
        };
        if retry_after > 0 {
            s.details = Some(
                serde_json::from_value(serde_json::json!({"retryAfterSeconds": retry_after}))
                    .unwrap(),
            );
        }
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn retry_table() {
        let cases = [
            (status(500, 0), true),
            (status(504, 0), true),
            (status(429, 0), true),
            (status(403, 0), false),
            (status(409, 3), true),
            (
                kube::Error::Service("connection reset by peer".into()),
                true,
            ),
            (kube::Error::Service("connection refused".into()), false),
        ];
        for (e, want) in cases {
            assert_eq!(should_retry(&e), want, "{e}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_gives_up_after_five_tries() {
        let mut n = 0;
        let r: Result<(), _> = with_backoff(WebhookBackoff::default(), || {
            n += 1;
            async { Err(status(500, 0)) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(n, 5);
        let mut m = 0;
        let r: Result<(), _> = with_backoff(WebhookBackoff::default(), || {
            m += 1;
            async { Err(status(401, 0)) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(m, 1);
    }

    #[test]
    fn standalone_webhooks_are_refused() {
        let mut config = KubeletConfiguration::v1beta1_defaults();
        config.authentication.webhook.enabled = true;
        config.authorization.mode = "AlwaysAllow".into();
        let err = build_auth("n", None, &config, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no client provided, cannot use webhook authentication"
        );
        config.authentication.webhook.enabled = false;
        config.authentication.anonymous.enabled = true;
        config.authorization.mode = "Webhook".into();
        let err = build_auth("n", None, &config, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no client provided, cannot use webhook authorization"
        );
    }
}
