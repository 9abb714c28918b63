//! Why an object manager could not answer.

/// Errors of the object managers.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No registered pod references the object.
    #[error("object {namespace:?}/{name:?} not registered")]
    NotRegistered { namespace: String, name: String },
    /// The object does not exist.
    #[error("{resource} {name:?} not found")]
    NotFound {
        resource: &'static str,
        name: String,
    },
    /// The object's watch has not delivered its first list in time.
    #[error("failed to sync {resource} cache: timed out waiting for the condition")]
    SyncTimeout { resource: &'static str },
    /// The API server answered with an error, or could not be reached.
    #[error("{source}")]
    Api {
        resource: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    /// `configMapAndSecretChangeDetectionStrategy` is none of Watch, Cache, Get.
    #[error("unknown configmap and secret manager mode: {0}")]
    UnknownStrategy(String),
}

impl ManagerError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ManagerError::NotFound { .. })
    }
}
