//! The credentials a plugin returned, kept until they expire (Go's
//! expiration store of the plugin provider): keyed by image, by registry
//! host or globally as the response's cacheKeyType says, looked up in that
//! order; an expired entry is dropped when it is looked up, and every
//! fifteen minutes all expired entries are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::exec::CacheKeyType;
use crate::kubelet::images::keyring::DockerConfig;
use crate::util::clock::Clock;

/// The key of credentials good for every image.
pub const GLOBAL_CACHE_KEY: &str = "global";
/// How often expired entries are swept out.
pub const PURGE_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// The registry host of an image (`registry.io:5000` of
/// `registry.io:5000/team/app`).
pub fn registry_of(image: &str) -> &str {
    image.split('/').next().unwrap_or(image)
}

/// The cache key for `image`'s response.
pub fn cache_key(key_type: CacheKeyType, image: &str) -> String {
    match key_type {
        CacheKeyType::Image => image.to_string(),
        CacheKeyType::Registry => registry_of(image).to_string(),
        CacheKeyType::Global => GLOBAL_CACHE_KEY.to_string(),
    }
}

struct Entry {
    credentials: DockerConfig,
    expires_at: Instant,
}

struct State {
    entries: HashMap<String, Entry>,
    last_purge: Instant,
}

/// A plugin's cached credentials.
pub struct CredentialCache {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl std::fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache").finish_non_exhaustive()
    }
}

impl CredentialCache {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let now = clock.monotonic();
        CredentialCache {
            clock,
            state: Mutex::new(State {
                entries: HashMap::new(),
                last_purge: now,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Credentials for `image`: cached for the image, else for its
    /// registry, else globally. An entry is good up to and including its
    /// expiry instant.
    pub fn get(&self, image: &str) -> Option<DockerConfig> {
        let now = self.clock.monotonic();
        let mut state = self.state();
        if now > state.last_purge + PURGE_INTERVAL {
            state.entries.retain(|_, e| now <= e.expires_at);
            state.last_purge = now;
        }
        for key in [image, registry_of(image), GLOBAL_CACHE_KEY] {
            match state.entries.get(key) {
                Some(e) if now <= e.expires_at => return Some(e.credentials.clone()),
                Some(_) => {
                    state.entries.remove(key);
                }
                None => {}
            }
        }
        None
    }

    /// Keeps `credentials` under `key` for `ttl` from now.
    pub fn add(&self, key: String, credentials: DockerConfig, ttl: Duration) {
        let expires_at = self.clock.monotonic() + ttl;
        self.state().entries.insert(
            key,
            Entry {
                credentials,
                expires_at,
            },
        );
    }

    /// How many entries are held, expired or not.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
