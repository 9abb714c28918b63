//! The seams through which container environments read ConfigMaps and
//! Secrets (implemented by the object managers of issue 6).

use std::fmt;
use std::sync::Arc;

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
#[derive(Debug, Clone, thiserror::Error)]
pub enum GetError {
    /// The object does not exist (optional references tolerate this).
    #[error("{} {name:?} not found", kind.resource())]
    NotFound { kind: ObjectKind, name: String },
    /// The getter failed otherwise (not registered, API errors, timeouts):
    /// its own error, kept with its sources.
    #[error(transparent)]
    Getter(Arc<dyn std::error::Error + Send + Sync>),
}

/// Equal when the same object is missing, or the getters' errors read the
/// same (errors that embed a `GetError` compare in tests).
impl PartialEq for GetError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (GetError::NotFound { kind, name }, GetError::NotFound { kind: k2, name: n2 }) => {
                kind == k2 && name == n2
            }
            (GetError::Getter(a), GetError::Getter(b)) => a.to_string() == b.to_string(),
            _ => false,
        }
    }
}

impl Eq for GetError {}

impl GetError {
    /// Wraps a getter's own error.
    pub fn getter(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        GetError::Getter(Arc::new(e))
    }
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
