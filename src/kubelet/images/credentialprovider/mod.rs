//! pkg/credentialprovider: the node's own registry credentials, used for
//! every pull after the pod's pull secrets (Go's default keyring). They
//! come from providers, asked in the order of their names on each lookup
//! and merged into one keyring:
//! - `.dockercfg`: the docker config files of the node ([`dockerconfig`]),
//!   re-read at most every five minutes;
//! - the image credential provider plugins named in
//!   `--image-credential-provider-config` ([`config`], [`register`]),
//!   executables in `--image-credential-provider-bin-dir` that answer a
//!   CredentialProviderRequest with credentials ([`exec`], [`plugin`]),
//!   cached as they say ([`cache`]).

pub mod cache;
pub mod config;
pub mod dockerconfig;
pub mod exec;
pub mod plugin;
pub mod register;
mod singleflight;
pub mod url;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use super::keyring::{DockerConfig, Keyring};
use crate::cri::api::AuthConfig;
use crate::util::clock::Clock;

pub use register::RegisterError;

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

/// The credential plugin flags, when the KubeletCredentialProviders gate
/// lets them count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFlags {
    /// `--image-credential-provider-config`.
    pub config_file: PathBuf,
    /// `--image-credential-provider-bin-dir`.
    pub bin_dir: PathBuf,
}

/// What the node keyring is built from.
pub struct NodeKeyringSettings {
    /// `--root-dir`, the first place docker config files are looked for.
    pub root_dir: PathBuf,
    /// The user's home directory (`$HOME`; empty when unset).
    pub home_dir: PathBuf,
    pub plugins: Option<PluginFlags>,
    pub clock: Arc<dyn Clock>,
}

/// The node keyring (NewDockerKeyring after the plugins registered): the
/// docker config files, then the plugins, by name. A plugin configuration
/// that cannot be used is an error: the kubelet does not start.
pub async fn node_keyring(s: NodeKeyringSettings) -> Result<ProvidersKeyring, RegisterError> {
    let mut providers: Vec<(String, Arc<dyn DockerConfigProvider>)> = vec![(
        dockerconfig::PROVIDER_NAME.to_string(),
        Arc::new(dockerconfig::CachingDockerConfigProvider::new(
            Arc::new(dockerconfig::DefaultDockerConfigProvider::new(
                dockerconfig::SearchPaths::new(s.root_dir, s.home_dir),
            )),
            dockerconfig::CACHE_LIFETIME,
            s.clock.clone(),
        )),
    )];
    if let Some(flags) = &s.plugins {
        for (name, plugin) in register::register_plugins(flags, s.clock.clone()).await? {
            if providers.iter().any(|(n, _)| *n == name) {
                return Err(RegisterError::RegisteredTwice { name });
            }
            providers.push((name, plugin));
        }
    }
    Ok(ProvidersKeyring::new(providers))
}

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod dockerconfig_tests;
#[cfg(test)]
mod plugin_tests;
#[cfg(test)]
mod tests;
