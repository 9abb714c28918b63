//! Enabling the plugins of `--image-credential-provider-config` at start-up
//! (Go's RegisterCredentialProviderPlugins): the bin directory must exist,
//! the file must decode and validate, and every plugin's executable must
//! be in the bin directory. Any failure stops the kubelet.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::config::{self, ConfigError, FieldIssues};
use super::exec::ExecPlugin;
use super::plugin::PluginProvider;
use super::{DockerConfigProvider, PluginFlags};
use crate::util::clock::Clock;

/// Why the credential provider plugins could not be enabled.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("plugin binary directory {} did not exist", .0.display())]
    BinDirMissing(PathBuf),
    #[error("error inspecting binary directory {}: {source}", path.display())]
    BinDirInspect { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("failed to validate credential provider config {}: {issues}", path.display())]
    Invalid { path: PathBuf, issues: FieldIssues },
    #[error("plugin binary executable {} did not exist (credential provider {name:?})", path.display())]
    BinaryMissing { name: String, path: PathBuf },
    #[error("error inspecting binary executable {} (credential provider {name:?}): {source}", path.display())]
    BinaryInspect {
        name: String,
        path: PathBuf,
        source: io::Error,
    },
    #[error("plugin binary executable {} (credential provider {name:?}) is a directory", path.display())]
    BinaryIsDirectory { name: String, path: PathBuf },
    #[error("credential provider {name:?} was registered twice")]
    RegisteredTwice { name: String },
}

/// The configured plugins as named providers.
pub async fn register_plugins(
    flags: &PluginFlags,
    clock: Arc<dyn Clock>,
) -> Result<Vec<(String, Arc<dyn DockerConfigProvider>)>, RegisterError> {
    let bin_dir = &flags.bin_dir;
    if let Err(source) = tokio::fs::metadata(bin_dir).await {
        return Err(match source.kind() {
            io::ErrorKind::NotFound => RegisterError::BinDirMissing(bin_dir.clone()),
            _ => RegisterError::BinDirInspect {
                path: bin_dir.clone(),
                source,
            },
        });
    }
    let cfg = config::load(&flags.config_file).await?;
    config::validate(&cfg).map_err(|issues| RegisterError::Invalid {
        path: flags.config_file.clone(),
        issues,
    })?;
    let mut out: Vec<(String, Arc<dyn DockerConfigProvider>)> = Vec::new();
    for provider in &cfg.providers {
        let path = bin_dir.join(&provider.name);
        let name = provider.name.clone();
        match tokio::fs::metadata(&path).await {
            Ok(m) if m.is_dir() => return Err(RegisterError::BinaryIsDirectory { name, path }),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RegisterError::BinaryMissing { name, path });
            }
            Err(source) => {
                return Err(RegisterError::BinaryInspect { name, path, source });
            }
        }
        let plugin = ExecPlugin::new(bin_dir, provider);
        let default_cache_duration = provider
            .default_cache_duration
            .map(|d| d.to_std())
            .unwrap_or_default();
        crate::vlog!(4, provider = %name, "Registered credential provider");
        out.push((
            name.clone(),
            Arc::new(PluginProvider::new(
                name,
                provider.match_images.clone(),
                default_cache_duration,
                Arc::new(plugin),
                clock.clone(),
            )),
        ));
    }
    Ok(out)
}
