//! pkg/credentialprovider: the node's own registry credentials, used for
//! every pull after the pod's pull secrets (Go's default keyring). They
//! come from providers, asked in the order of their names on each lookup
//! and merged into one keyring:
//! - `.dockercfg`: the docker config files of the node ([`dockerconfig`]),
//!   re-read at most every five minutes.

pub mod dockerconfig;
pub mod url;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use super::keyring::{DockerConfig, Keyring};
use crate::cri::api::AuthConfig;
use crate::util::clock::Clock;

/// A source of docker configs (Go's DockerConfigProvider); `image` is the
/// repository being pulled, for providers whose answer depends on it.
#[async_trait]
pub trait DockerConfigProvider: Send + Sync {
    async fn provide(&self, image: &str) -> DockerConfig;
}

/// Credentials for a repository (Go's DockerKeyring), every match in the
/// order to try them.
#[async_trait]
pub trait DockerKeyring: Send + Sync {
    async fn lookup(&self, image: &str) -> Vec<AuthConfig>;
}

/// The keyring of the node's providers (providersDockerKeyring): each
/// lookup asks every provider, in the order of their names, and looks the
/// image up in the union of their configs.
#[derive(Default)]
pub struct ProvidersKeyring {
    providers: Vec<(String, Arc<dyn DockerConfigProvider>)>,
}

impl std::fmt::Debug for ProvidersKeyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.providers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ProvidersKeyring")
            .field("providers", &names)
            .finish()
    }
}

impl ProvidersKeyring {
    /// A keyring over named providers (NewDockerKeyring sorts them by
    /// name).
    pub fn new(mut providers: Vec<(String, Arc<dyn DockerConfigProvider>)>) -> Self {
        providers.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, _) in &providers {
            crate::vlog!(4, provider = %name, "Registering credential provider");
        }
        ProvidersKeyring { providers }
    }

    /// The providers' names, in the order they are asked.
    pub fn names(&self) -> Vec<&str> {
        self.providers.iter().map(|(n, _)| n.as_str()).collect()
    }
}

#[async_trait]
impl DockerKeyring for ProvidersKeyring {
    async fn lookup(&self, image: &str) -> Vec<AuthConfig> {
        let mut ring = Keyring::default();
        for (_, provider) in &self.providers {
            ring.add(&provider.provide(image).await);
        }
        ring.lookup(image)
    }
}

/// What the node keyring is built from.
pub struct NodeKeyringSettings {
    /// `--root-dir`, the first place docker config files are looked for.
    pub root_dir: PathBuf,
    /// The user's home directory (`$HOME`; empty when unset).
    pub home_dir: PathBuf,
    pub clock: Arc<dyn Clock>,
}

/// The node keyring (NewDockerKeyring): the docker config files.
pub fn node_keyring(s: NodeKeyringSettings) -> ProvidersKeyring {
    ProvidersKeyring::new(vec![(
        dockerconfig::PROVIDER_NAME.to_string(),
        Arc::new(dockerconfig::CachingDockerConfigProvider::new(
            Arc::new(dockerconfig::DefaultDockerConfigProvider::new(
                dockerconfig::SearchPaths::new(s.root_dir, s.home_dir),
            )),
            dockerconfig::CACHE_LIFETIME,
            s.clock.clone(),
        )),
    )])
}

#[cfg(test)]
mod dockerconfig_tests;
