//! Registry credentials matched against the repository being pulled as
//! the kubelet's keyring matches them (Go's BasicDockerKeyring): by
//! registry host, then by the longest path prefix. A keyring is filled from
//! docker configs: a pod's image pull secrets
//! (`kubernetes.io/dockerconfigjson` and `kubernetes.io/dockercfg`) here,
//! the node's config files and credential plugins in
//! [`super::credentialprovider`].

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use super::credentialprovider::url::{parse_schemeless, urls_match_str};
use crate::cri::api::AuthConfig;

const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const DOCKER_CFG_KEY: &str = ".dockercfg";
const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CFG_TYPE: &str = "kubernetes.io/dockercfg";

/// One location's credentials in a docker config (Go's DockerConfigEntry;
/// the email is not used for pulls).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerConfigEntry {
    pub username: String,
    pub password: String,
}

/// Credentials by registry location (`registry.io`, `*.corp.io:5000/team`,
/// `https://index.docker.io/v1/`), Go's DockerConfig.
pub type DockerConfig = BTreeMap<String, DockerConfigEntry>;

#[derive(Debug, Default, Deserialize)]
struct Entry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
    #[serde(default)]
    email: String,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

/// Credentials for image pulls, indexed by location key (Go's
/// BasicDockerKeyring): keys in reverse lexical order, each with the
/// credentials of every config that named it, in the order added.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    index: Vec<String>,
    creds: BTreeMap<String, Vec<AuthConfig>>,
}

/// Docker Hub's key, whose credentials also serve images without a
/// registry host.
const DEFAULT_REGISTRY_KEY: &str = "index.docker.io";

/// The index key of a config entry: `host[:port][/path]` with the scheme
/// dropped and a `/v1/` or `/v2/` path meaning the registry itself (Go's
/// BasicDockerKeyring.Add); `None` for a location that is not a URL.
fn index_key(location: &str) -> Option<String> {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let url = match parse_schemeless(rest) {
        Ok(u) => u,
        Err(e) => {
            tracing::error!(entry = location, error = %e, "Entry in dockercfg invalid, ignoring");
            return None;
        }
    };
    if url.host.is_empty() {
        return None;
    }
    let path = url.path.as_str();
    let path = path
        .strip_prefix("/v2")
        .or_else(|| path.strip_prefix("/v1"))
        .filter(|p| p.starts_with('/'))
        .unwrap_or(path);
    Some(match path {
        "" | "/" => url.host,
        p => format!("{}{p}", url.host),
    })
}

/// Whether an image without a registry host means Docker Hub (Go's
/// isDefaultRegistryMatch).
fn is_default_registry(image: &str) -> bool {
    let first = image.split('/').next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    !image.contains('/')
        || first == "docker.io"
        || first == "index.docker.io"
        || !first.contains(['.', ':'])
}

/// The credentials of one secret entry: `auth` (base64 `user:password`),
/// when present and readable, wins over `username`/`password`.
fn to_entry(e: Entry) -> DockerConfigEntry {
    let (mut username, mut password) = (e.username, e.password);
    if !e.auth.is_empty()
        && let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(e.auth.trim())
        && let Ok(text) = String::from_utf8(raw)
        && let Some((u, p)) = text.split_once(':')
    {
        username = u.to_string();
        password = p.to_string();
    }
    let _ = e.email;
    DockerConfigEntry { username, password }
}

impl Keyring {
    /// The credentials in `secrets`; secrets of other types, and unreadable
    /// ones, are skipped with a log line.
    pub fn from_pull_secrets(secrets: &[Secret]) -> Self {
        let mut ring = Keyring::default();
        for s in secrets {
            let data = s.data.as_ref();
            let kind = s.type_.as_deref().unwrap_or_default();
            let json = data.and_then(|d| d.get(DOCKER_CONFIG_JSON_KEY));
            let cfg = data.and_then(|d| d.get(DOCKER_CFG_KEY));
            let parsed: Option<BTreeMap<String, Entry>> = match (kind, json, cfg) {
                (DOCKER_CONFIG_JSON_TYPE, Some(b), _) if !b.0.is_empty() => {
                    serde_json::from_slice::<ConfigJson>(&b.0)
                        .ok()
                        .map(|c| c.auths)
                }
                (DOCKER_CFG_TYPE, _, Some(b)) if !b.0.is_empty() => {
                    serde_json::from_slice::<BTreeMap<String, Entry>>(&b.0).ok()
                }
                _ => None,
            };
            let Some(auths) = parsed else {
                crate::vlog!(
                    4,
                    secret = s.metadata.name.as_deref().unwrap_or(""),
                    "pull secret holds no readable docker config"
                );
                continue;
            };
            let config: DockerConfig = auths
                .into_iter()
                .map(|(location, entry)| (location, to_entry(entry)))
                .collect();
            ring.add(&config);
        }
        ring
    }

    /// Adds a docker config's credentials (Add). The server address is
    /// left empty as Go's keyring leaves it: the runtime matches
    /// credentials to the registry it resolved, and containerd refuses an
    /// address without a scheme.
    pub fn add(&mut self, config: &DockerConfig) {
        for (location, entry) in config {
            let Some(key) = index_key(location) else {
                continue;
            };
            self.creds.entry(key.clone()).or_default().push(AuthConfig {
                username: entry.username.clone(),
                password: entry.password.clone(),
                auth: String::new(),
                server_address: String::new(),
                identity_token: String::new(),
                registry_token: String::new(),
            });
            self.index.push(key);
        }
        self.index.sort_unstable_by(|a, b| b.cmp(a));
        self.index.dedup();
    }

    /// Credentials for `repository` (`docker.io/library/busybox`): every
    /// key matching it, in index order; Docker Hub's for an image of the
    /// default registry when nothing else matches.
    pub fn lookup(&self, repository: &str) -> Vec<AuthConfig> {
        let mut out: Vec<AuthConfig> = self
            .index
            .iter()
            .filter(|k| urls_match_str(k, repository))
            .flat_map(|k| self.creds.get(k).into_iter().flatten().cloned())
            .collect();
        if out.is_empty() && is_default_registry(repository) {
            out = self
                .creds
                .get(DEFAULT_REGISTRY_KEY)
                .cloned()
                .unwrap_or_default();
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.creds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(key: &str, json: serde_json::Value) -> Secret {
        let kind = match key {
            ".dockerconfigjson" => DOCKER_CONFIG_JSON_TYPE,
            _ => DOCKER_CFG_TYPE,
        };
        Secret {
            type_: Some(kind.into()),
            data: Some(
                [(key.to_string(), ByteString(json.to_string().into_bytes()))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn lookup_matches_host_and_path_prefixes() {
        let auth = base64::engine::general_purpose::STANDARD.encode("bob:secret");
        let mut untyped = secret(
            ".dockerconfigjson",
            serde_json::json!({"auths": {"untyped.io": {"username": "n", "password": "n"}}}),
        );
        untyped.type_ = Some("Opaque".into());
        let ring = Keyring::from_pull_secrets(&[
            secret(
                ".dockerconfigjson",
                serde_json::json!({"auths": {
                    "https://index.docker.io/v1/": {"auth": auth},
                    "registry.local:5000": {"username": "u", "password": "p"},
                    "registry.local:5000/team": {"username": "t", "password": "q"},
                    "*.corp.io": {"username": "w", "password": "w"},
                    "https://other.io/v2/": {"username": "o2", "password": "x"}
                }}),
            ),
            secret(
                ".dockercfg",
                serde_json::json!({"other.io": {"username": "o", "password": "x"}}),
            ),
            untyped,
            Secret::default(),
        ]);
        let users = |repo: &str| -> Vec<String> {
            ring.lookup(repo).into_iter().map(|a| a.username).collect()
        };
        let cases: &[(&str, &[&str])] = &[
            ("docker.io/library/busybox", &["bob"]),
            ("busybox", &["bob"]),
            ("registry.local:5000/team/app", &["t", "u"]),
            ("registry.local:5000/teams/app", &["t", "u"]),
            ("registry.local:5000/app", &["u"]),
            ("registry.local:50001/app", &[]),
            ("other.io/a", &["o2", "o"]),
            ("a.corp.io/x", &["w"]),
            ("corp.io/x", &[]),
            ("a.b.corp.io/x", &[]),
            ("untyped.io/x", &[]),
        ];
        for (repo, want) in cases {
            assert_eq!(users(repo), *want, "{repo}");
        }
        for a in ring.lookup("registry.local:5000/app") {
            assert_eq!(a.server_address, "", "left empty as Go's keyring does");
        }
        assert!(Keyring::from_pull_secrets(&[]).is_empty());
    }
}
