//! The node's docker config files (Go's default `.dockercfg` provider):
//! `config.json` (`{"auths": {...}}`) looked for in the kubelet's root
//! directory, the working directory, `$HOME/.docker` and `/.docker`; when
//! none is readable, the legacy `.dockercfg` (a bare map of locations) in
//! the root directory, the working directory, `$HOME` and `/`. The first
//! readable file wins; missing, unreadable or malformed ones are skipped
//! with a log line. What was read is kept for five minutes.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use serde::Deserialize;
use tokio::time::Instant;

use super::DockerConfigProvider;
use crate::kubelet::images::keyring::{DockerConfig, DockerConfigEntry};
use crate::util::clock::Clock;

/// The provider's name among the node's providers (it sorts first).
pub const PROVIDER_NAME: &str = ".dockercfg";
/// How long a read of the files is used before they are read again.
pub const CACHE_LIFETIME: Duration = Duration::from_secs(5 * 60);

const CONFIG_JSON_FILE: &str = "config.json";
const DOCKERCFG_FILE: &str = ".dockercfg";

/// A docker config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    #[error("while trying to read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("couldn't get the config from {path}: {source}")]
    Parse { path: PathBuf, source: ParseError },
    #[error("couldn't find valid {file} after checking in {searched:?}")]
    NotFound {
        file: &'static str,
        searched: Vec<PathBuf>,
    },
}

/// Contents that are not a docker config.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("error occurred while trying to unmarshal json: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "entry {location:?}: unable to parse auth field, must be formatted as base64(username:password)"
    )]
    Auth { location: String },
}

/// An entry as written (Go's dockerConfigEntryWithAuth).
#[derive(Debug, Default, Deserialize)]
struct RawEntry {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawConfigJson {
    #[serde(default)]
    auths: Option<BTreeMap<String, Option<RawEntry>>>,
}

/// `user:password` from a base64 `auth` field, padded or not.
fn decode_auth(field: &str) -> Option<(String, String)> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let config = GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true);
    let padded = field.trim().ends_with('=');
    let engine = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        config.with_decode_padding_mode(if padded {
            DecodePaddingMode::RequireCanonical
        } else {
            DecodePaddingMode::RequireNone
        }),
    );
    let cleaned: String = field.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    let raw = engine.decode(cleaned).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn to_config(entries: BTreeMap<String, Option<RawEntry>>) -> Result<DockerConfig, ParseError> {
    entries
        .into_iter()
        .map(|(location, raw)| {
            let raw = raw.unwrap_or_default();
            let mut entry = DockerConfigEntry {
                username: raw.username.unwrap_or_default(),
                password: raw.password.unwrap_or_default(),
            };
            if let Some(auth) = raw.auth.filter(|a| !a.is_empty()) {
                let Some((u, p)) = decode_auth(&auth) else {
                    return Err(ParseError::Auth { location });
                };
                (entry.username, entry.password) = (u, p);
            }
            Ok((location, entry))
        })
        .collect()
}

/// A `config.json`: the `auths` map.
pub fn parse_config_json(contents: &[u8]) -> Result<DockerConfig, ParseError> {
    let raw: Option<RawConfigJson> = serde_json::from_slice(contents)?;
    to_config(raw.and_then(|r| r.auths).unwrap_or_default())
}

/// A legacy `.dockercfg`: the map itself.
pub fn parse_dockercfg(contents: &[u8]) -> Result<DockerConfig, ParseError> {
    let raw: Option<BTreeMap<String, Option<RawEntry>>> = serde_json::from_slice(contents)?;
    to_config(raw.unwrap_or_default())
}

/// Where the files are looked for. An empty directory is the working
/// directory, resolved at each read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPaths {
    root_dir: PathBuf,
    home_dir: PathBuf,
}

impl SearchPaths {
    pub fn new(root_dir: PathBuf, home_dir: PathBuf) -> Self {
        SearchPaths { root_dir, home_dir }
    }

    /// Directories holding `config.json` candidates, in order.
    pub fn config_json_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.root_dir.clone(),
            PathBuf::new(),
            self.home_dir.join(".docker"),
            PathBuf::from("/.docker"),
        ]
    }

    /// Directories holding `.dockercfg` candidates, in order.
    pub fn dockercfg_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.root_dir.clone(),
            PathBuf::new(),
            self.home_dir.clone(),
            PathBuf::from("/"),
        ]
    }

    /// The first usable `config.json`, else the first usable
    /// `.dockercfg` (ReadDockerConfigFile).
    pub async fn read(&self) -> Result<DockerConfig, DockerConfigError> {
        match read_first(
            &self.config_json_dirs(),
            CONFIG_JSON_FILE,
            parse_config_json,
        )
        .await
        {
            Ok(config) => Ok(config),
            Err(_) => read_first(&self.dockercfg_dirs(), DOCKERCFG_FILE, parse_dockercfg).await,
        }
    }
}

/// `dir/file` made absolute against the working directory.
fn candidate(dir: &Path, file: &str) -> io::Result<PathBuf> {
    std::path::absolute(dir.join(file))
}

/// The first of `dirs` whose `file` reads and parses.
async fn read_first(
    dirs: &[PathBuf],
    file: &'static str,
    parse: fn(&[u8]) -> Result<DockerConfig, ParseError>,
) -> Result<DockerConfig, DockerConfigError> {
    for dir in dirs {
        let path = match candidate(dir, file) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(path = %dir.display(), error = %e, "while trying to canonicalize a docker config path");
                continue;
            }
        };
        crate::vlog!(4, file, path = %path.display(), "looking for docker config");
        let contents = match tokio::fs::read(&path).await {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => {
                let e = DockerConfigError::Read { path, source };
                crate::vlog!(4, error = %e, "skipping docker config");
                continue;
            }
        };
        match parse(&contents) {
            Ok(config) => {
                crate::vlog!(4, path = %path.display(), "found valid docker config");
                return Ok(config);
            }
            Err(source) => {
                let e = DockerConfigError::Parse { path, source };
                crate::vlog!(4, error = %e, "skipping docker config");
            }
        }
    }
    Err(DockerConfigError::NotFound {
        file,
        searched: dirs.to_vec(),
    })
}

/// The files, read on every call (defaultDockerConfigProvider).
#[derive(Debug)]
pub struct DefaultDockerConfigProvider {
    paths: SearchPaths,
}

impl DefaultDockerConfigProvider {
    pub fn new(paths: SearchPaths) -> Self {
        DefaultDockerConfigProvider { paths }
    }
}

#[async_trait]
impl DockerConfigProvider for DefaultDockerConfigProvider {
    async fn provide(&self, _image: &str) -> DockerConfig {
        match self.paths.read().await {
            Ok(config) => config,
            Err(e) => {
                crate::vlog!(2, error = %e, "Docker config file not found");
                DockerConfig::new()
            }
        }
    }
}

/// Another provider's config, kept for `lifetime` after each read
/// (CachingDockerConfigProvider); callers during a read wait for it.
pub struct CachingDockerConfigProvider {
    inner: Arc<dyn DockerConfigProvider>,
    lifetime: Duration,
    clock: Arc<dyn Clock>,
    cached: tokio::sync::Mutex<Option<(Instant, DockerConfig)>>,
}

impl CachingDockerConfigProvider {
    pub fn new(
        inner: Arc<dyn DockerConfigProvider>,
        lifetime: Duration,
        clock: Arc<dyn Clock>,
    ) -> Self {
        CachingDockerConfigProvider {
            inner,
            lifetime,
            clock,
            cached: tokio::sync::Mutex::new(None),
        }
    }
}

#[async_trait]
impl DockerConfigProvider for CachingDockerConfigProvider {
    async fn provide(&self, image: &str) -> DockerConfig {
        let mut cached = self.cached.lock().await;
        if let Some((expires, config)) = cached.as_ref()
            && self.clock.monotonic() < *expires
        {
            return config.clone();
        }
        crate::vlog!(2, provider = PROVIDER_NAME, "Refreshing cache for provider");
        let config = self.inner.provide(image).await;
        *cached = Some((self.clock.monotonic() + self.lifetime, config.clone()));
        config
    }
}
