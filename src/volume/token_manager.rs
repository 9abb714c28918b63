//! Service account tokens for projected volumes (pkg/kubelet/token): a
//! cache in front of the TokenRequest API. A cached token is used until it
//! is older than 80% of its lifetime or 24 hours (less a jitter of up to
//! 10 s), then refreshed; if the refresh fails the old token keeps being
//! served while it is still valid. Expired tokens are dropped every minute
//! and a pod's tokens when its projected volumes are torn down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::TokenRequest;

use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet};

const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
const GC_PERIOD: Duration = Duration::from_secs(60);
const MAX_JITTER_SECS: u64 = 10;

/// A TokenRequest failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenError(pub String);

/// Issues tokens (`POST .../serviceaccounts/<name>/token`). Implemented
/// over the API client by the kubelet's API-backed managers.
#[async_trait]
pub trait ServiceAccountTokenGetter: Send + Sync {
    async fn create_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenError>;
}

/// What identifies a cached token: account, namespace, audiences,
/// lifetime and the object it is bound to. Safe to log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    pub name: String,
    pub namespace: String,
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    pub bound_kind: String,
    pub bound_name: String,
    pub bound_uid: String,
}

impl TokenKey {
    pub fn new(name: &str, namespace: &str, tr: &TokenRequest) -> Self {
        let r = tr.spec.bound_object_ref.clone().unwrap_or_default();
        TokenKey {
            name: name.to_string(),
            namespace: namespace.to_string(),
            audiences: tr.spec.audiences.clone(),
            expiration_seconds: tr.spec.expiration_seconds.unwrap_or(0),
            bound_kind: r.kind.unwrap_or_default(),
            bound_name: r.name.unwrap_or_default(),
            bound_uid: r.uid.unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}/{:?}/{:?}/{}/{}/{}/{}",
            self.name,
            self.namespace,
            self.audiences,
            self.expiration_seconds,
            self.bound_kind,
            self.bound_name,
            self.bound_uid
        )
    }
}

/// Picks the refresh jitter; random in real use, fixed in tests.
pub type JitterFn = Box<dyn Fn() -> Duration + Send + Sync>;

/// The token cache.
pub struct TokenManager {
    getter: Arc<dyn ServiceAccountTokenGetter>,
    clock: Arc<dyn Clock>,
    cache: Mutex<HashMap<TokenKey, TokenRequest>>,
    jitter: JitterFn,
}

fn expiration(tr: &TokenRequest) -> SystemTime {
    tr.status
        .as_ref()
        .map(|s| SystemTime::from(s.expiration_timestamp.0))
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

impl TokenManager {
    pub fn new(getter: Arc<dyn ServiceAccountTokenGetter>, clock: Arc<dyn Clock>) -> Self {
        Self::with_jitter(
            getter,
            clock,
            Box::new(|| Duration::from_secs(rand::random_range(0..MAX_JITTER_SECS))),
        )
    }

    pub fn with_jitter(
        getter: Arc<dyn ServiceAccountTokenGetter>,
        clock: Arc<dyn Clock>,
        jitter: JitterFn,
    ) -> Self {
        TokenManager {
            getter,
            clock,
            cache: Mutex::new(HashMap::new()),
            jitter,
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<TokenKey, TokenRequest>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A token for service account `name`: the cached one while fresh,
    /// else a new one; an old one that is still valid when refreshing
    /// fails.
    pub async fn get_service_account_token(
        &self,
        namespace: &str,
        name: &str,
        tr: &TokenRequest,
    ) -> Result<TokenRequest, TokenError> {
        let key = TokenKey::new(name, namespace, tr);
        let cached = self.cache().get(&key).cloned();
        if let Some(ctr) = &cached
            && !self.requires_refresh(ctr)
        {
            return Ok(ctr.clone());
        }
        match self.getter.create_token(namespace, name, tr).await {
            Ok(fresh) => {
                self.cache().insert(key, fresh.clone());
                Ok(fresh)
            }
            Err(e) => match cached {
                None => Err(TokenError(format!("failed to fetch token: {e}"))),
                Some(ctr) if self.expired(&ctr) => Err(TokenError(format!(
                    "token {key} expired and refresh failed: {e}"
                ))),
                Some(ctr) => {
                    tracing::error!(cache_key = %key, error = %e, "Couldn't update token");
                    Ok(ctr)
                }
            },
        }
    }

    /// Drops every token bound to the pod.
    pub fn delete_service_account_token(&self, pod_uid: &str) {
        self.cache().retain(|k, _| k.bound_uid != pod_uid);
    }

    /// Drops expired tokens.
    pub fn cleanup(&self) {
        let now = self.clock.now();
        self.cache().retain(|_, tr| now <= expiration(tr));
    }

    /// Number of cached tokens.
    pub fn len(&self) -> usize {
        self.cache().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Spawns the minute-by-minute cleanup.
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        let me = self.clone();
        tasks.spawn_periodic(
            "token-manager-gc",
            Period::sliding(GC_PERIOD),
            self.clock.clone(),
            move || {
                me.cleanup();
                std::future::ready(())
            },
        );
    }

    fn expired(&self, tr: &TokenRequest) -> bool {
        self.clock.now() > expiration(tr)
    }

    /// Older than 24 h, or within 20% of its lifetime of expiring (both
    /// moved earlier by the jitter).
    pub fn requires_refresh(&self, tr: &TokenRequest) -> bool {
        let Some(secs) = tr.spec.expiration_seconds else {
            tracing::error!("Expiration seconds was nil for token request");
            return false;
        };
        let now = self.clock.now();
        let exp = expiration(tr);
        let ttl = Duration::from_secs(secs.max(0) as u64);
        let iat = exp.checked_sub(ttl).unwrap_or(SystemTime::UNIX_EPOCH);
        let jitter = (self.jitter)();
        if now > (iat + MAX_TTL).checked_sub(jitter).unwrap_or(iat) {
            return true;
        }
        let window = Duration::from_secs((secs.max(0) as u64 * 20) / 100) + jitter;
        now > exp.checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

#[cfg(test)]
#[path = "token_manager_tests.rs"]
mod tests;
