//! Running a credential provider plugin (Go's execPlugin): the executable
//! `<bin-dir>/<name>` with the configured arguments, the kubelet's
//! environment plus the configured variables, a CredentialProviderRequest
//! on stdin and a CredentialProviderResponse of the same API version read
//! from stdout, within a minute.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::config::{CredentialProvider, ExecEnvVar};
use crate::apis::config::Duration as GoDuration;
use crate::apis::config::decode;

/// How long a plugin may run.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

const REQUEST_KIND: &str = "CredentialProviderRequest";
const RESPONSE_KIND: &str = "CredentialProviderResponse";

/// A plugin run that gave no usable response.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("error execing credential provider plugin {plugin} for image {image}: {source}")]
    Spawn {
        plugin: String,
        image: String,
        source: std::io::Error,
    },
    #[error(
        "error execing credential provider plugin {plugin} for image {image}: context deadline exceeded"
    )]
    Timeout { plugin: String, image: String },
    #[error("error execing credential provider plugin {plugin} for image {image}: {status}")]
    Failed {
        plugin: String,
        image: String,
        status: std::process::ExitStatus,
    },
    #[error("credential provider plugin {plugin}: error reading GVK from response: {reason}")]
    TypeMeta { plugin: String, reason: String },
    #[error(
        "credential provider plugin {plugin}: apiVersion from credential plugin response did not match expected apiVersion:{expected}, actual apiVersion:{actual}"
    )]
    ApiVersion {
        plugin: String,
        expected: String,
        actual: String,
    },
    /// The response's details are left out: they may hold credentials.
    #[error(
        "credential provider plugin {plugin}: error decoding credential provider plugin response from stdout"
    )]
    Decode { plugin: String },
}

/// What a response's credentials may be reused for (PluginCacheKeyType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheKeyType {
    /// This image (repository) only.
    Image,
    /// Every image of the image's registry host.
    Registry,
    /// Every image the plugin matches.
    Global,
}

impl CacheKeyType {
    /// The type a response names; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Image" => Some(CacheKeyType::Image),
            "Registry" => Some(CacheKeyType::Registry),
            "Global" => Some(CacheKeyType::Global),
            _ => None,
        }
    }
}

/// One set of credentials of a response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AuthConfig {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
}

/// A plugin's answer (both exec API versions have the same fields).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialProviderResponse {
    /// `Image`, `Registry` or `Global` (see [`CacheKeyType`]).
    #[serde(default)]
    pub cache_key_type: String,
    #[serde(default)]
    pub cache_duration: Option<GoDuration>,
    /// Credentials by image pattern (`registry.io`, `*.registry.io/team`).
    #[serde(default)]
    pub auth: BTreeMap<String, AuthConfig>,
}

/// Something that answers credential requests (Go's Plugin interface).
#[async_trait]
pub trait Plugin: Send + Sync {
    async fn exec(&self, image: &str) -> Result<CredentialProviderResponse, PluginError>;
}

/// A plugin executable.
#[derive(Debug, Clone)]
pub struct ExecPlugin {
    name: String,
    api_version: String,
    binary: PathBuf,
    args: Vec<String>,
    env: Vec<ExecEnvVar>,
    timeout: Duration,
}

impl ExecPlugin {
    pub fn new(bin_dir: &std::path::Path, provider: &CredentialProvider) -> Self {
        ExecPlugin {
            name: provider.name.clone(),
            api_version: provider.api_version.clone(),
            binary: bin_dir.join(&provider.name),
            args: provider.args.clone(),
            env: provider.env.clone(),
            timeout: EXEC_TIMEOUT,
        }
    }

    /// The same plugin with another run time limit.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The request, as the JSON encoder writes it.
    fn request(&self, image: &str) -> Vec<u8> {
        let mut body = serde_json::json!({
            "kind": REQUEST_KIND,
            "apiVersion": self.api_version,
            "image": image,
        })
        .to_string()
        .into_bytes();
        body.push(b'\n');
        body
    }

    async fn run(&self, image: &str) -> Result<Vec<u8>, PluginError> {
        let spawn_error = |source| PluginError::Spawn {
            plugin: self.name.clone(),
            image: image.to_string(),
            source,
        };
        let mut child = tokio::process::Command::new(&self.binary)
            .args(&self.args)
            .envs(self.env.iter().map(|v| (&v.name, &v.value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_error)?;
        let request = self.request(image);
        let stdin = child.stdin.take();
        let feed = async move {
            if let Some(mut stdin) = stdin {
                // A plugin that exits without reading its input is judged
                // by its exit status, as exec does (EPIPE is not an error).
                let _ = stdin.write_all(&request).await;
            }
        };
        let run = async {
            let ((), output) = tokio::join!(feed, child.wait_with_output());
            output
        };
        let output = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| PluginError::Timeout {
                plugin: self.name.clone(),
                image: image.to_string(),
            })?
            .map_err(spawn_error)?;
        if !output.status.success() {
            // stderr is not shown: it may hold credentials.
            return Err(PluginError::Failed {
                plugin: self.name.clone(),
                image: image.to_string(),
                status: output.status,
            });
        }
        Ok(output.stdout)
    }

    /// Checks the response's version and kind, then decodes it.
    pub fn decode_response(&self, data: &[u8]) -> Result<CredentialProviderResponse, PluginError> {
        let type_meta_error = |reason: String| PluginError::TypeMeta {
            plugin: self.name.clone(),
            reason,
        };
        let mut value: Value =
            serde_json::from_slice(data).map_err(|e| type_meta_error(e.to_string()))?;
        let Value::Object(map) = &mut value else {
            return Err(type_meta_error("the response is not a JSON object".into()));
        };
        let field = |name: &str| match map.get(name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(type_meta_error(format!("{name} is not a string"))),
        };
        let (api_version, kind) = (field("apiVersion")?, field("kind")?);
        if api_version != self.api_version {
            return Err(PluginError::ApiVersion {
                plugin: self.name.clone(),
                expected: self.api_version.clone(),
                actual: api_version,
            });
        }
        let decode_error = || PluginError::Decode {
            plugin: self.name.clone(),
        };
        if kind != RESPONSE_KIND {
            return Err(decode_error());
        }
        map.remove("apiVersion");
        map.remove("kind");
        decode::decode::<CredentialProviderResponse>(value)
            .map(|d| d.value)
            .map_err(|_| decode_error())
    }
}

#[async_trait]
impl Plugin for ExecPlugin {
    async fn exec(&self, image: &str) -> Result<CredentialProviderResponse, PluginError> {
        crate::vlog!(5, image, plugin = %self.name, "Getting image credentials from external exec plugin");
        let stdout = self.run(image).await?;
        self.decode_response(&stdout)
    }
}
