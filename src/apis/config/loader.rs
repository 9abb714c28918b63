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
    #[error("failed to decode kubelet config file {path:?}: {message}")]
    TypeMeta { path: PathBuf, message: String },
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
    check_type_meta(&mut value).map_err(|message| LoadError::TypeMeta {
        path: path.to_path_buf(),
        message,
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

/// Checks and removes `apiVersion` and `kind`.
fn check_type_meta(value: &mut Value) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "the document must be a mapping with apiVersion: {API_VERSION} and kind: {KIND}"
        ));
    };
    let field = |map: &serde_json::Map<String, Value>, name: &str| -> Result<String, String> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("field {name}: expected a string, got {other}")),
        }
    };
    let api_version = field(map, "apiVersion")?;
    let kind = field(map, "kind")?;
    if kind.is_empty() {
        return Err(format!("field kind is missing; it must be {KIND}"));
    }
    if api_version.is_empty() {
        return Err(format!(
            "field apiVersion is missing; it must be {API_VERSION}"
        ));
    }
    if api_version != API_VERSION {
        return Err(format!(
            "field apiVersion: {api_version:?} is not supported; the kubelet reads {API_VERSION}"
        ));
    }
    if kind != KIND {
        return Err(format!(
            "field kind: {kind:?} is not supported; the kubelet reads {KIND}"
        ));
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
    Ok(clean(&joined))
}

/// Lexical clean-up as Go's `filepath.Clean`: drops `.`, folds `..`.
pub fn clean(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// Resolves the configuration's relative path fields against `dir`.
pub fn resolve_relative_paths(config: &mut KubeletConfiguration, dir: &Path) {
    for field in config.path_refs_mut() {
        if !field.is_empty() && !Path::new(field.as_str()).is_absolute() {
            *field = clean(&dir.join(field.as_str()))
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
