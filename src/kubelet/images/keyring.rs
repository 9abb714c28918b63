//! Registry credentials from a pod's image pull secrets
//! (`kubernetes.io/dockerconfigjson` and `kubernetes.io/dockercfg`), matched
//! against the repository being pulled as the kubelet's keyring matches
//! them: by registry host, then by the longest path prefix.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::cri::api::AuthConfig;

const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const DOCKER_CFG_KEY: &str = ".dockercfg";

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

/// One registry's credentials, keyed by the location they apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Credential {
    /// `host[:port][/path]`, scheme and trailing slash removed.
    location: String,
    auth: AuthConfig,
}

/// Credentials for image pulls.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    creds: Vec<Credential>,
}

/// Strips the scheme and a trailing `/v1/`-style suffix Docker writes for
/// its index, leaving `host[:port][/path]`.
fn normalize_location(key: &str) -> String {
    let k = key
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let k = match k {
        "index.docker.io/v1" | "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    };
    k.to_string()
}

/// The credentials of one entry: `auth` (base64 `user:password`), when
/// present, wins over `username`/`password` as in Go's config decoding.
/// The server address is left empty as Go's keyring leaves it: the runtime
/// matches credentials to the registry it resolved, and containerd refuses
/// an address without a scheme.
fn to_auth(e: Entry) -> AuthConfig {
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
    AuthConfig {
        username,
        password,
        auth: String::new(),
        server_address: String::new(),
        identity_token: String::new(),
        registry_token: String::new(),
    }
}

impl Keyring {
    /// The credentials in `secrets`; secrets of other types, and unreadable
    /// ones, are skipped with a log line.
    pub fn from_pull_secrets(secrets: &[Secret]) -> Self {
        let mut creds = Vec::new();
        for s in secrets {
            let data = s.data.as_ref();
            let parsed: Option<BTreeMap<String, Entry>> =
                if let Some(b) = data.and_then(|d| d.get(DOCKER_CONFIG_JSON_KEY)) {
                    serde_json::from_slice::<ConfigJson>(&b.0)
                        .ok()
                        .map(|c| c.auths)
                } else if let Some(b) = data.and_then(|d| d.get(DOCKER_CFG_KEY)) {
                    serde_json::from_slice::<BTreeMap<String, Entry>>(&b.0).ok()
                } else {
                    None
                };
            match parsed {
                Some(auths) => {
                    for (key, entry) in auths {
                        let location = normalize_location(&key);
                        creds.push(Credential {
                            auth: to_auth(entry),
                            location,
                        });
                    }
                }
                None => {
                    crate::vlog!(
                        4,
                        secret = s.metadata.name.as_deref().unwrap_or(""),
                        "pull secret holds no readable docker config"
                    );
                }
            }
        }
        Keyring { creds }
    }

    /// Credentials for `repository` (`docker.io/library/busybox`), most
    /// specific location first.
    pub fn lookup(&self, repository: &str) -> Vec<AuthConfig> {
        let mut matches: Vec<&Credential> = self
            .creds
            .iter()
            .filter(|c| {
                repository == c.location
                    || repository
                        .strip_prefix(c.location.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .collect();
        matches.sort_by_key(|c| std::cmp::Reverse(c.location.len()));
        matches.into_iter().map(|c| c.auth.clone()).collect()
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
        Secret {
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
        let ring = Keyring::from_pull_secrets(&[
            secret(
                ".dockerconfigjson",
                serde_json::json!({"auths": {
                    "https://index.docker.io/v1/": {"auth": auth},
                    "registry.local:5000": {"username": "u", "password": "p"},
                    "registry.local:5000/team": {"username": "t", "password": "q"}
                }}),
            ),
            secret(
                ".dockercfg",
                serde_json::json!({"other.io": {"username": "o", "password": "x"}}),
            ),
            Secret::default(),
        ]);
        let users = |repo: &str| -> Vec<String> {
            ring.lookup(repo).into_iter().map(|a| a.username).collect()
        };
        assert_eq!(users("docker.io/library/busybox"), vec!["bob"]);
        assert_eq!(users("registry.local:5000/team/app"), vec!["t", "u"]);
        assert_eq!(users("registry.local:5000/app"), vec!["u"]);
        assert_eq!(users("registry.local:50001/app"), Vec::<String>::new());
        assert_eq!(users("other.io/a"), vec!["o"]);
        assert!(Keyring::from_pull_secrets(&[]).is_empty());
    }
}
