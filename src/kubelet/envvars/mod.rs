//! Container environments (pkg/kubelet/envvars and the environment part of
//! kubelet_pods.go): service variables, downward API fields and resources,
//! ConfigMap and Secret references, and the assembly in the kubelet's order.

pub mod error;
pub use crate::util::fieldpath;
pub use crate::util::object_getters as getters;
pub mod pod_env;
pub use crate::util::resource;
pub mod services;

#[cfg(test)]
mod pod_env_tests;

pub use error::{CREATE_CONTAINER_CONFIG_ERROR, EnvError};
pub use getters::{ConfigMapGetter, GetError, ObjectKind, SecretGetter};
pub use pod_env::{EnvContext, EnvEvent, ResolvedEnv, make_environment_variables, sort_pod_ips};
pub use services::{DEFAULT_MASTER_SERVICE_NAMESPACE, from_services, service_env_vars};
