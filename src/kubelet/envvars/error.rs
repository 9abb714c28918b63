//! Errors computing a container's environment. All of them stop the
//! container from being created with reason `CreateContainerConfigError`.

use super::fieldpath::FieldPathError;
use super::getters::{GetError, ObjectKind};
use super::resource::ResourceFieldError;

/// The kubelet reason these errors surface with in container status.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("pod.spec.enableServiceLinks is unset, cannot construct the environment")]
    NilEnableServiceLinks,
    #[error("services have not yet been read at least once, cannot construct envvars")]
    ServicesNotSynced,
    #[error("couldn't get {} {namespace}/{name}, no kubeClient defined", match kind {
        ObjectKind::ConfigMap => "configMap",
        ObjectKind::Secret => "secret",
    })]
    NoClient {
        kind: ObjectKind,
        namespace: String,
        name: String,
    },
    #[error(transparent)]
    Get(#[from] GetError),
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey {
        kind: ObjectKind,
        key: String,
        namespace: String,
        name: String,
    },
    #[error(transparent)]
    FieldRef(#[from] FieldPathError),
    #[error(transparent)]
    ResourceFieldRef(#[from] ResourceFieldError),
    #[error("host IP unknown; known addresses: []")]
    HostIpUnknown,
}

impl EnvError {
    /// The reason string for container status.
    pub fn reason(&self) -> &'static str {
        CREATE_CONTAINER_CONFIG_ERROR
    }
}
