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
const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CFG_TYPE: &str = "kubernetes.io/dockercfg";

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
/// credentials of every secret that named it.
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
/// BasicDockerKeyring.Add).
fn index_key(location: &str) -> Option<String> {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if host.is_empty() {
        return None;
    }
    let path = path
        .strip_prefix("/v2")
        .or_else(|| path.strip_prefix("/v1"))
        .filter(|p| p.starts_with('/'))
        .unwrap_or(path);
    Some(match path {
        "" | "/" => host.to_string(),
        p => format!("{host}{p}"),
    })
}

/// `host[:port]` and path of a schemeless location.
fn split_location(s: &str) -> (&str, &str) {
    match s.find('/') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// Host labels and port of `host[:port]`.
fn host_parts(host: &str) -> (Vec<&str>, &str) {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (n, p),
        _ => (host, ""),
    };
    (name.split('.').collect(), port)
}

/// Whether `target` (an image repository) falls under the credential key
/// `glob`: same port, same number of host labels each matching as a shell
/// glob (`*.example.com`), and the key's path a prefix of the target's
/// (Go's urlsMatch).
fn location_matches(glob: &str, target: &str) -> bool {
    let (glob_host, glob_path) = split_location(glob);
    let (target_host, target_path) = split_location(target);
    let (glob_labels, glob_port) = host_parts(glob_host);
    let (target_labels, target_port) = host_parts(target_host);
    glob_port == target_port
        && glob_labels.len() == target_labels.len()
        && target_path.starts_with(glob_path)
        && glob_labels
            .iter()
            .zip(&target_labels)
            .all(|(g, t)| glob_match(g, t))
}

/// Shell-style matching of one label: `*`, `?` and `[...]` classes (Go's
/// filepath.Match within a label, which has no separators).
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    fn class(p: &[char], c: char) -> Option<(bool, usize)> {
        // p starts after '['; returns (matched, length consumed incl. ']').
        let mut i = 0;
        let negate = matches!(p.first(), Some('^') | Some('!'));
        if negate {
            i += 1;
        }
        let mut matched = false;
        let mut first = true;
        while i < p.len() {
            if p[i] == ']' && !first {
                return Some((matched != negate, i + 1));
            }
            first = false;
            let lo = p[i];
            if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                if lo <= c && c <= p[i + 2] {
                    matched = true;
                }
                i += 3;
            } else {
                if lo == c {
                    matched = true;
                }
                i += 1;
            }
        }
        None
    }
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|k| go(&p[1..], &t[k..])),
            Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some('[') => match (t.first(), class(&p[1..], *t.first().unwrap_or(&'\0'))) {
                (Some(_), Some((true, used))) => go(&p[1 + used..], &t[1..]),
                _ => false,
            },
            Some('\\') if p.len() > 1 => t.first() == Some(&p[1]) && go(&p[2..], &t[1..]),
            Some(c) => t.first() == Some(c) && go(&p[1..], &t[1..]),
        }
    }
    go(&p, &t)
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
            for (location, entry) in auths {
                let Some(key) = index_key(&location) else {
                    continue;
                };
                ring.creds
                    .entry(key.clone())
                    .or_default()
                    .push(to_auth(entry));
                ring.index.push(key);
            }
        }
        ring.index.sort_unstable_by(|a, b| b.cmp(a));
        ring.index.dedup();
        ring
    }

    /// Credentials for `repository` (`docker.io/library/busybox`): every
    /// key matching it, in index order; Docker Hub's for an image of the
    /// default registry when nothing else matches.
    pub fn lookup(&self, repository: &str) -> Vec<AuthConfig> {
        let mut out: Vec<AuthConfig> = self
            .index
            .iter()
            .filter(|k| location_matches(k, repository))
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

    #[test]
    fn label_globs_as_shell_patterns() {
        let cases = [
            ("*", "anything", true),
            ("reg?", "reg1", true),
            ("reg?", "reg12", false),
            ("[a-c]x", "bx", true),
            ("[!a-c]x", "bx", false),
            ("[^a-c]x", "dx", true),
            ("a*b", "ab", true),
            ("a*b", "acccb", true),
            ("a*b", "acccd", false),
            ("[", "[", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(glob_match(pattern, text), want, "{pattern} {text}");
        }
    }
}
