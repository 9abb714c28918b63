//! A credential provider plugin as a source of docker configs (Go's
//! pluginProvider): images outside its matchImages get nothing; cached
//! credentials are used while they last; otherwise the plugin runs, once
//! for concurrent lookups of the same image, and its response is cached by
//! its cacheKeyType for its cacheDuration (the plugin's default when the
//! response names none; zero means not at all).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::DockerConfigProvider;
use super::cache::{CredentialCache, cache_key};
use super::exec::{CacheKeyType, CredentialProviderResponse, Plugin, PluginError};
use super::singleflight::SingleFlight;
use super::url::urls_match_str;
use crate::kubelet::images::keyring::{DockerConfig, DockerConfigEntry};
use crate::util::clock::Clock;

type Outcome = Result<Arc<CredentialProviderResponse>, Arc<PluginError>>;

/// One configured plugin with its cache.
pub struct PluginProvider {
    name: String,
    match_images: Vec<String>,
    default_cache_duration: Duration,
    plugin: Arc<dyn Plugin>,
    cache: CredentialCache,
    flights: SingleFlight<Outcome>,
}

impl std::fmt::Debug for PluginProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginProvider")
            .field("name", &self.name)
            .field("match_images", &self.match_images)
            .field("default_cache_duration", &self.default_cache_duration)
            .finish_non_exhaustive()
    }
}

impl PluginProvider {
    pub fn new(
        name: String,
        match_images: Vec<String>,
        default_cache_duration: Duration,
        plugin: Arc<dyn Plugin>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        PluginProvider {
            name,
            match_images,
            default_cache_duration,
            plugin,
            cache: CredentialCache::new(clock),
            flights: SingleFlight::default(),
        }
    }

    /// Whether `image` is one of the plugin's (isImageAllowed).
    pub fn is_image_allowed(&self, image: &str) -> bool {
        self.match_images.iter().any(|m| urls_match_str(m, image))
    }

    /// How long to keep a response: `None` not at all.
    fn ttl(&self, response: &CredentialProviderResponse) -> Option<Duration> {
        match response.cache_duration {
            Some(d) if d.is_zero() || d.is_negative() => None,
            Some(d) => Some(d.to_std()),
            None if self.default_cache_duration.is_zero() => None,
            None => Some(self.default_cache_duration),
        }
    }
}

#[async_trait]
impl DockerConfigProvider for PluginProvider {
    async fn provide(&self, image: &str) -> DockerConfig {
        if !self.is_image_allowed(image) {
            return DockerConfig::new();
        }
        if let Some(cached) = self.cache.get(image) {
            return cached;
        }
        let plugin = self.plugin.clone();
        let outcome = self
            .flights
            .run(image, || async move {
                plugin.exec(image).await.map(Arc::new).map_err(Arc::new)
            })
            .await;
        let response = match outcome {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(plugin = %self.name, image, error = %e, "Failed getting credential from external registry credential provider");
                return DockerConfig::new();
            }
        };
        let Some(key_type) = CacheKeyType::parse(&response.cache_key_type) else {
            tracing::error!(
                plugin = %self.name,
                cache_key_type = %response.cache_key_type,
                "credential provider plugin did not return a valid cacheKeyType"
            );
            return DockerConfig::new();
        };
        let config: DockerConfig = response
            .auth
            .iter()
            .map(|(pattern, auth)| {
                (
                    pattern.clone(),
                    DockerConfigEntry {
                        username: auth.username.clone(),
                        password: auth.password.clone(),
                    },
                )
            })
            .collect();
        if let Some(ttl) = self.ttl(&response) {
            self.cache
                .add(cache_key(key_type, image), config.clone(), ttl);
        }
        config
    }
}
