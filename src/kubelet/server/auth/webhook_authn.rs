//! Bearer token authentication by TokenReview (authentication.k8s.io/v1):
//! tokens from the `Authorization: Bearer` header or, for websocket
//! requests, the `base64url.bearer.authorization.k8s.io.` subprotocol;
//! answers cached for `authentication.webhook.cacheTTL` (failures too,
//! errors not), keyed by a salted hash of the token.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http::request::Parts;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::Digest;

use super::authn::UnionAuthenticator;
use super::webhook::{WebhookBackoff, with_backoff};
use super::webhook_cache::ExpiringCache;
use super::{AuthError, Authenticator, UserInfo};

const BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";
/// How long one token lookup may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);
const CACHE_SIZE: usize = 4096;

/// The cached outcome of a token review.
#[derive(Clone, Debug)]
struct Record {
    user: Option<UserInfo>,
    error: Option<ReviewFailure>,
}

/// Why a token review gave no user.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ReviewFailure {
    /// The TokenReview could not be created.
    #[error(transparent)]
    Request(Arc<kube::Error>),
    /// The API server's answer: not authenticated, with its error.
    #[error("{0}")]
    Refused(String),
    /// The review took longer than the lookup timeout.
    #[error("context deadline exceeded")]
    Timeout,
}

/// A bearer token in a websocket subprotocol that cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WebsocketTokenError {
    #[error("multiple base64.bearer.authorization tokens specified")]
    Multiple,
    #[error("invalid base64.bearer.authorization token encoding")]
    Encoding,
    #[error("invalid base64.bearer.authorization token")]
    NotUtf8,
    #[error("missing additional subprotocol")]
    NoOtherSubprotocol,
}

/// Checks tokens with TokenReview, with a cache.
pub struct CachedTokenReviewer {
    client: kube::Client,
    ttl: Duration,
    salt: [u8; 32],
    cache: ExpiringCache<[u8; 32], Record>,
    backoff: WebhookBackoff,
}

impl CachedTokenReviewer {
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        CachedTokenReviewer {
            client,
            ttl,
            salt: rand::random(),
            cache: ExpiringCache::new(CACHE_SIZE),
            backoff: WebhookBackoff::default(),
        }
    }

    fn key(&self, token: &str) -> [u8; 32] {
        let mut h = sha2::Sha256::new();
        h.update(self.salt);
        h.update((token.len() as u32).to_be_bytes());
        h.update(token.as_bytes());
        h.update(0u32.to_be_bytes());
        h.finalize().into()
    }

    async fn review(&self, token: &str) -> Record {
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let pp = PostParams::default();
        let result = with_backoff(self.backoff, || api.create(&pp, &review)).await;
        let status = match result {
            Ok(r) => r.status.unwrap_or_default(),
            Err(e) => {
                tracing::error!(error = %e, "Failed to make webhook authenticator request");
                return Record {
                    user: None,
                    error: Some(ReviewFailure::Request(Arc::new(e))),
                };
            }
        };
        if !status.authenticated.unwrap_or(false) {
            return Record {
                user: None,
                error: status
                    .error
                    .filter(|e| !e.is_empty())
                    .map(ReviewFailure::Refused),
            };
        }
        let u = status.user.unwrap_or_default();
        Record {
            user: Some(UserInfo {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default().into_iter().collect(),
            }),
            error: None,
        }
    }

    /// `Ok(Some(user))`, `Ok(None)` (not authenticated, no error given) or
    /// the error.
    pub async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
        let key = self.key(token);
        let record = match self.cache.get(&key) {
            Some(r) => r,
            None => {
                let r = match tokio::time::timeout(LOOKUP_TIMEOUT, self.review(token)).await {
                    Ok(r) => r,
                    Err(_) => Record {
                        user: None,
                        error: Some(ReviewFailure::Timeout),
                    },
                };
                // Answers (yes or no) are cached, errors are not.
                if r.error.is_none() {
                    self.cache.put(key, r.clone(), self.ttl);
                }
                r
            }
        };
        match (record.user, record.error) {
            (Some(u), _) => Ok(Some(u)),
            (None, Some(e)) => Err(AuthError::TokenReview(e)),
            (None, None) => Ok(None),
        }
    }
}

/// Tokens from `Authorization: Bearer <token>`.
struct BearerToken(Arc<CachedTokenReviewer>);

#[async_trait::async_trait]
impl Authenticator for BearerToken {
    async fn authenticate(&self, req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        let Some(h) = req.headers.get(http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        let auth = h.to_str().unwrap_or("").trim();
        let mut parts = auth.splitn(3, ' ');
        let (Some(scheme), Some(token)) = (parts.next(), parts.next()) else {
            return Ok(None);
        };
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Ok(None);
        }
        match self.0.authenticate_token(token).await? {
            Some(u) => Ok(Some(u)),
            None => Err(AuthError::InvalidToken),
        }
    }
}

/// Tokens of websocket requests, in a `Sec-WebSocket-Protocol` entry.
struct WebsocketProtocolToken(Arc<CachedTokenReviewer>);

fn is_websocket(req: &Parts) -> bool {
    let has = |name: http::HeaderName, want: &str| {
        req.headers.get_all(name).iter().any(|v| {
            v.to_str()
                .unwrap_or("")
                .split(',')
                .any(|p| p.trim().eq_ignore_ascii_case(want))
        })
    };
    has(http::header::CONNECTION, "upgrade") && has(http::header::UPGRADE, "websocket")
}

#[async_trait::async_trait]
impl Authenticator for WebsocketProtocolToken {
    async fn authenticate(&self, req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        if !is_websocket(req) {
            return Ok(None);
        }
        let mut token = String::new();
        let mut saw = false;
        let mut others = 0;
        for h in req.headers.get_all(http::header::SEC_WEBSOCKET_PROTOCOL) {
            for p in h.to_str().unwrap_or("").split(',') {
                let p = p.trim();
                let Some(encoded) = p.strip_prefix(BEARER_PROTOCOL_PREFIX) else {
                    others += 1;
                    continue;
                };
                if saw {
                    return Err(WebsocketTokenError::Multiple.into());
                }
                saw = true;
                let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(encoded)
                    .map_err(|_| WebsocketTokenError::Encoding)?;
                token = String::from_utf8(decoded).map_err(|_| WebsocketTokenError::NotUtf8)?;
            }
        }
        if !token.is_empty() && others == 0 {
            return Err(WebsocketTokenError::NoOtherSubprotocol.into());
        }
        if token.is_empty() {
            return Ok(None);
        }
        match self.0.authenticate_token(&token).await? {
            Some(u) => Ok(Some(u)),
            None => Err(AuthError::InvalidToken),
        }
    }
}

/// The token authenticator for `authentication.webhook.enabled`: bearer
/// header, then websocket subprotocol, over one cached reviewer.
pub fn webhook_token_authenticator(
    client: kube::Client,
    cache_ttl: Duration,
) -> Arc<dyn Authenticator> {
    let reviewer = Arc::new(CachedTokenReviewer::new(client, cache_ttl));
    UnionAuthenticator::combine(vec![
        Arc::new(BearerToken(reviewer.clone())),
        Arc::new(WebsocketProtocolToken(reviewer)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_detection() {
        let cases = [
            (
                vec![("connection", "Upgrade"), ("upgrade", "websocket")],
                true,
            ),
            (
                vec![
                    ("connection", "keep-alive, Upgrade"),
                    ("upgrade", "WebSocket"),
                ],
                true,
            ),
            (vec![("upgrade", "websocket")], false),
            (vec![("connection", "Upgrade"), ("upgrade", "h2c")], false),
        ];
        for (headers, want) in cases {
            let mut b = http::Request::get("/exec");
            for (k, v) in &headers {
                b = b.header(*k, *v);
            }
            let (parts, _) = b.body(()).unwrap().into_parts();
            assert_eq!(is_websocket(&parts), want, "{headers:?}");
        }
    }

    /// Websocket subprotocol tokens refused before any review is made.
    #[tokio::test]
    async fn websocket_tokens_refused_before_review() {
        use base64::Engine;
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("url"),
        ))
        .expect("client");
        let auth = WebsocketProtocolToken(Arc::new(CachedTokenReviewer::new(
            client,
            Duration::from_secs(60),
        )));
        let enc = |b: &[u8]| {
            format!(
                "{BEARER_PROTOCOL_PREFIX}{}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
            )
        };
        let ws = [("connection", "Upgrade"), ("upgrade", "websocket")];
        // (websocket, subprotocols, expected error; None: no opinion)
        let cases: Vec<(bool, Vec<String>, Option<WebsocketTokenError>)> = vec![
            (false, vec![enc(b"t"), "v4.channel.k8s.io".into()], None),
            (true, vec!["v4.channel.k8s.io".into()], None),
            (
                true,
                vec![enc(b"a"), enc(b"b"), "v4.channel.k8s.io".into()],
                Some(WebsocketTokenError::Multiple),
            ),
            (
                true,
                vec![
                    format!("{BEARER_PROTOCOL_PREFIX}!!"),
                    "v4.channel.k8s.io".into(),
                ],
                Some(WebsocketTokenError::Encoding),
            ),
            (
                true,
                vec![enc(&[0xff, 0xfe]), "v4.channel.k8s.io".into()],
                Some(WebsocketTokenError::NotUtf8),
            ),
            (
                true,
                vec![enc(b"t")],
                Some(WebsocketTokenError::NoOtherSubprotocol),
            ),
        ];
        for (websocket, protocols, want) in cases {
            let mut b = http::Request::get("/exec/ns/p/c");
            if websocket {
                for (k, v) in ws {
                    b = b.header(k, v);
                }
            }
            b = b.header("sec-websocket-protocol", protocols.join(", "));
            let (parts, _) = b.body(()).expect("request").into_parts();
            let got = auth.authenticate(&parts).await;
            match (&got, want) {
                (Ok(None), None) => {}
                (Err(AuthError::WebsocketToken(e)), Some(w)) if *e == w => {}
                _ => panic!("{protocols:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
