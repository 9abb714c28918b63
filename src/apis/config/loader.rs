//! Loading `--config`: read the file, decode kubelet.config.k8s.io/v1beta1
//! (YAML as YAML 1.1, or JSON), default it, and resolve relative paths
//! against the file's directory.
//!
//! Strictness follows the v1.25 kubelet codec: a file is first decoded
//! strictly; if the only problems are unknown or repeated fields, it is
//! decoded leniently instead (repeated keys: the last wins; unknown fields:
//! ignored) and a warning names them. Any other problem fails the load.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::decode::{self, FieldError};
use super::defaults;
use super::types::{API_VERSION, KIND, KubeletConfiguration, V1Beta1KubeletConfiguration};
use crate::util::path::clean_path;
use crate::util::yaml::{self, YamlError};

/// Why a configuration file could not be loaded. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("failed to read kubelet config file {path:?}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("kubelet config file {path:?} was empty")]
    Empty { path: PathBuf },
    #[error("failed to decode kubelet config file {path:?}: {source}")]
    Syntax { path: PathBuf, source: YamlError },
    #[error("failed to decode kubelet config file {path:?}: {source}")]
    TypeMeta {
        path: PathBuf,
        source: TypeMetaError,
    },
    #[error("failed to decode kubelet config file {path:?}: {source}")]
    Field { path: PathBuf, source: FieldError },
}

/// A decoded file: the configuration and the strictness problems that were
/// tolerated (for the caller to log).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: KubeletConfiguration,
    pub strict_errors: Vec<String>,
}

/// Decodes a configuration document (no path handling).
pub fn decode_document(path: &Path, text: &str) -> Result<Loaded, LoadError> {
    if text.is_empty() {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    let converted = yaml::to_json(text).map_err(|source| LoadError::Syntax {
        path: path.to_path_buf(),
        source,
    })?;
    let mut value = converted.value;
    check_type_meta(&mut value).map_err(|source| LoadError::TypeMeta {
        path: path.to_path_buf(),
        source,
    })?;
    let decoded = decode::decode::<V1Beta1KubeletConfiguration>(value).map_err(|source| {
        LoadError::Field {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let mut strict_errors: Vec<String> = converted.duplicates;
    strict_errors.extend(
        decoded
            .unknown_fields
            .iter()
            .map(|f| format!("unknown field {f:?}")),
    );
    let mut versioned = decoded.value;
    defaults::set_defaults(&mut versioned);
    Ok(Loaded {
        config: versioned.into(),
        strict_errors,
    })
}

/// What is wrong with a document's `apiVersion` and `kind`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeMetaError {
    #[error("the document must be a mapping with apiVersion: {API_VERSION} and kind: {KIND}")]
    NotAMapping,
    #[error("field {field}: expected a string, got {value}")]
    NotAString { field: &'static str, value: String },
    #[error("field {field} is missing; it must be {want}")]
    Missing {
        field: &'static str,
        want: &'static str,
    },
    #[error("field {field}: {value:?} is not supported; the kubelet reads {want}")]
    Unsupported {
        field: &'static str,
        value: String,
        want: &'static str,
    },
}

/// Checks and removes `apiVersion` and `kind`.
fn check_type_meta(value: &mut Value) -> Result<(), TypeMetaError> {
    let Value::Object(map) = value else {
        return Err(TypeMetaError::NotAMapping);
    };
    let text = |map: &serde_json::Map<String, Value>, field: &'static str| match map.get(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(TypeMetaError::NotAString {
            field,
            value: other.to_string(),
        }),
    };
    let api_version = text(map, "apiVersion")?;
    let kind = text(map, "kind")?;
    for (field, value, want) in [
        ("kind", &kind, KIND),
        ("apiVersion", &api_version, API_VERSION),
    ] {
        if value.is_empty() {
            return Err(TypeMetaError::Missing { field, want });
        }
    }
    for (field, value, want) in [
        ("apiVersion", &api_version, API_VERSION),
        ("kind", &kind, KIND),
    ] {
        if value != want {
            return Err(TypeMetaError::Unsupported {
                field,
                value: value.clone(),
                want,
            });
        }
    }
    map.remove("apiVersion");
    map.remove("kind");
    Ok(())
}

/// Makes `path` absolute against the current directory, as Go's
/// `filepath.Abs` does (lexically, without resolving symlinks).
pub fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    Ok(clean_path(&joined))
}

/// Resolves the configuration's relative path fields against `dir`.
pub fn resolve_relative_paths(config: &mut KubeletConfiguration, dir: &Path) {
    for field in config.path_refs_mut() {
        if !field.is_empty() && !Path::new(field.as_str()).is_absolute() {
            *field = clean_path(&dir.join(field.as_str()))
                .to_string_lossy()
                .into_owned();
        }
    }
}

/// Loads `--config`: reads, decodes, defaults, resolves relative paths.
pub fn load_config_file(name: &Path) -> Result<Loaded, LoadError> {
    let path = absolute(name).map_err(|source| LoadError::Read {
        path: name.to_path_buf(),
        source,
    })?;
    let bytes = std::fs::read(&path).map_err(|source| LoadError::Read {
        path: path.clone(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut loaded = decode_document(&path, &text)?;
    let dir = path
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .to_path_buf();
    resolve_relative_paths(&mut loaded.config, &dir);
    Ok(loaded)
}
