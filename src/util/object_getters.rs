//! The seams through which container environments read ConfigMaps and
//! Secrets (implemented by the object managers of issue 6).

use std::fmt;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

/// Which kind of object a reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    ConfigMap,
    Secret,
}

impl ObjectKind {
    /// The resource name the kubelet's managers use in not-found errors.
    pub fn resource(&self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "configmap",
            ObjectKind::Secret => "secret",
        }
    }

    /// The kind as messages about missing keys spell it.
    pub fn kind(&self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "ConfigMap",
            ObjectKind::Secret => "Secret",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GetError {
    /// The object does not exist (optional references tolerate this).
    #[error("{} {name:?} not found", kind.resource())]
    NotFound { kind: ObjectKind, name: String },
    /// Any other failure (not registered, API errors, timeouts).
    #[error("{0}")]
    Other(String),
}

impl GetError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, GetError::NotFound { .. })
    }
}

/// Reads ConfigMaps for pods.
#[async_trait]
pub trait ConfigMapGetter: Send + Sync {
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, GetError>;
}

/// Reads Secrets for pods.
#[async_trait]
pub trait SecretGetter: Send + Sync {
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Secret, GetError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_message() {
        let e = GetError::NotFound {
            kind: ObjectKind::ConfigMap,
            name: "cfg".into(),
        };
        assert_eq!(e.to_string(), "configmap \"cfg\" not found");
        assert!(e.is_not_found());
        let e = GetError::NotFound {
            kind: ObjectKind::Secret,
            name: "s".into(),
        };
        assert_eq!(e.to_string(), "secret \"s\" not found");
    }
}
