//! The CredentialProviderConfig file of `--image-credential-provider-config`
//! (kubelet.config.k8s.io v1alpha1 or v1beta1, YAML or JSON) and its
//! validation: which plugins to run for which images, with what arguments,
//! environment, exec API version and default cache duration.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::url::parse_schemeless;
use crate::apis::config::Duration;
use crate::apis::config::decode::{self, FieldError};
use crate::util::yaml::{self, YamlError};

/// The kind the file must have.
pub const KIND: &str = "CredentialProviderConfig";
/// The file's API versions.
pub const CONFIG_API_VERSIONS: [&str; 2] = [
    "kubelet.config.k8s.io/v1alpha1",
    "kubelet.config.k8s.io/v1beta1",
];
/// The exec API versions a plugin may speak.
pub const EXEC_API_VERSIONS: [&str; 2] = [
    "credentialprovider.kubelet.k8s.io/v1alpha1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
];

/// Other kinds of the kubelet's API groups: a file holding one of these is
/// of the wrong kind rather than unknown.
const OTHER_KINDS: [(&str, &str); 4] = [
    ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"),
    (
        "kubelet.config.k8s.io/v1beta1",
        "SerializedNodeConfigSource",
    ),
    (
        "credentialprovider.kubelet.k8s.io/",
        "CredentialProviderRequest",
    ),
    (
        "credentialprovider.kubelet.k8s.io/",
        "CredentialProviderResponse",
    ),
];

/// The plugins to enable.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialProviderConfig {
    #[serde(default)]
    pub providers: Vec<CredentialProvider>,
}

/// One exec plugin: `<bin-dir>/<name>`, run for images matching
/// `matchImages`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialProvider {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub match_images: Vec<String>,
    #[serde(default)]
    pub default_cache_duration: Option<Duration>,
    /// The exec API version of the request and the expected response.
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<ExecEnvVar>,
}

/// An environment variable set for the plugin, on top of the kubelet's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ExecEnvVar {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// A file that could not be read as a CredentialProviderConfig.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("credential provider config path is empty")]
    EmptyPath,
    #[error(
        "unable to read external registry credential provider configuration from {path:?}: {source}"
    )]
    Read { path: PathBuf, source: io::Error },
    #[error("error decoding config {path}: {source}")]
    Decode { path: PathBuf, source: DecodeError },
}

/// Contents that are not a CredentialProviderConfig.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the file is not UTF-8 text")]
    NotText,
    #[error(transparent)]
    Yaml(#[from] YamlError),
    #[error("Object 'Kind' is missing")]
    MissingKind,
    #[error("Object 'apiVersion' is missing")]
    MissingApiVersion,
    #[error("no kind {kind:?} is registered for version {api_version:?}")]
    NotRegistered { kind: String, api_version: String },
    #[error("failed to decode {0:?} (wrong Kind)")]
    WrongKind(String),
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// Reads and decodes the file (readCredentialProviderConfigFile); unknown
/// fields are ignored.
pub async fn load(path: &Path) -> Result<CredentialProviderConfig, ConfigError> {
    if path.as_os_str().is_empty() {
        return Err(ConfigError::EmptyPath);
    }
    let data = tokio::fs::read(path)
        .await
        .map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    decode_config(&data).map_err(|source| ConfigError::Decode {
        path: path.to_path_buf(),
        source,
    })
}

/// A string field of the document's type meta, `""` when absent.
fn type_meta(map: &serde_json::Map<String, Value>, field: &str) -> String {
    map.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Decodes a document (YAML or JSON).
pub fn decode_config(data: &[u8]) -> Result<CredentialProviderConfig, DecodeError> {
    let text = std::str::from_utf8(data).map_err(|_| DecodeError::NotText)?;
    let mut value = yaml::to_json(text)?.value;
    let Value::Object(map) = &mut value else {
        return Err(DecodeError::MissingKind);
    };
    let (kind, api_version) = (type_meta(map, "kind"), type_meta(map, "apiVersion"));
    if kind.is_empty() {
        return Err(DecodeError::MissingKind);
    }
    if api_version.is_empty() {
        return Err(DecodeError::MissingApiVersion);
    }
    if kind != KIND || !CONFIG_API_VERSIONS.contains(&api_version.as_str()) {
        let other_kind = OTHER_KINDS
            .iter()
            .any(|(v, k)| *k == kind && api_version.starts_with(v));
        return Err(if other_kind {
            DecodeError::WrongKind(kind)
        } else {
            DecodeError::NotRegistered { kind, api_version }
        });
    }
    map.remove("kind");
    map.remove("apiVersion");
    let decoded = decode::decode::<CredentialProviderConfig>(value)?;
    if !decoded.unknown_fields.is_empty() {
        crate::vlog!(2, fields = ?decoded.unknown_fields, "ignoring unknown fields of the credential provider config");
    }
    Ok(decoded.value)
}

/// What is wrong with one field (Go's field.Error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldIssue {
    Required {
        field: String,
        detail: String,
    },
    /// `value` as Go shows it (strings quoted).
    Invalid {
        field: String,
        value: String,
        detail: String,
    },
    NotSupported {
        field: String,
        value: String,
        supported: Vec<String>,
    },
    Duplicate {
        field: String,
        value: String,
    },
}

impl fmt::Display for FieldIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldIssue::Required { field, detail } => {
                write!(f, "{field}: Required value: {detail}")
            }
            FieldIssue::Invalid {
                field,
                value,
                detail,
            } => write!(f, "{field}: Invalid value: {value}: {detail}"),
            FieldIssue::NotSupported {
                field,
                value,
                supported,
            } => {
                let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                write!(
                    f,
                    "{field}: Unsupported value: {value:?}: supported values: {}",
                    quoted.join(", ")
                )
            }
            FieldIssue::Duplicate { field, value } => {
                write!(f, "{field}: Duplicate value: {value:?}")
            }
        }
    }
}

/// Every problem of a configuration, shown as Go aggregates them (one
/// alone, several in brackets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FieldIssues(pub Vec<FieldIssue>);

impl fmt::Display for FieldIssues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        match all.as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

/// Checks a configuration (validateCredentialProviderConfig). Field paths
/// carry the provider's index. A name given twice is refused here (Go
/// refuses it when registering the second).
pub fn validate(config: &CredentialProviderConfig) -> Result<(), FieldIssues> {
    let mut issues = Vec::new();
    if config.providers.is_empty() {
        issues.push(FieldIssue::Required {
            field: "providers".into(),
            detail: "at least 1 item in plugins is required".into(),
        });
    }
    for (i, p) in config.providers.iter().enumerate() {
        let field = |name: &str| format!("providers[{i}].{name}");
        let invalid_name = |detail: &str| FieldIssue::Invalid {
            field: field("name"),
            value: format!("{:?}", p.name),
            detail: detail.into(),
        };
        if p.name.contains('/') {
            issues.push(invalid_name("provider name cannot contain '/'"));
        }
        if p.name.contains(' ') {
            issues.push(invalid_name("provider name cannot contain spaces"));
        }
        if p.name == "." {
            issues.push(invalid_name("provider name cannot be '.'"));
        }
        if p.name == ".." {
            issues.push(invalid_name("provider name cannot be '..'"));
        }
        if config.providers[..i].iter().any(|q| q.name == p.name) {
            issues.push(FieldIssue::Duplicate {
                field: field("name"),
                value: p.name.clone(),
            });
        }
        if p.api_version.is_empty() {
            issues.push(FieldIssue::Required {
                field: field("apiVersion"),
                detail: "apiVersion is required".into(),
            });
        } else if !EXEC_API_VERSIONS.contains(&p.api_version.as_str()) {
            issues.push(FieldIssue::NotSupported {
                field: field("apiVersion"),
                value: p.api_version.clone(),
                supported: EXEC_API_VERSIONS.iter().map(|v| v.to_string()).collect(),
            });
        }
        if p.match_images.is_empty() {
            issues.push(FieldIssue::Required {
                field: field("matchImages"),
                detail: "at least 1 item in matchImages is required".into(),
            });
        }
        for image in &p.match_images {
            if let Err(e) = parse_schemeless(image) {
                issues.push(FieldIssue::Invalid {
                    field: field("matchImages"),
                    value: format!("{image:?}"),
                    detail: format!("match image is invalid: {e}"),
                });
            }
        }
        match p.default_cache_duration {
            None => issues.push(FieldIssue::Required {
                field: field("defaultCacheDuration"),
                detail: "defaultCacheDuration is required".into(),
            }),
            Some(d) if d.is_negative() => issues.push(FieldIssue::Invalid {
                field: field("defaultCacheDuration"),
                value: d.to_string(),
                detail: "defaultCacheDuration must be greater than or equal to 0".into(),
            }),
            Some(_) => {}
        }
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(FieldIssues(issues))
    }
}
