//! Runtime-neutral container helpers (pkg/kubelet/container): the container
//! hash, the Go-compatible JSON it is computed over, pod and container keys,
//! the options handed to the runtime manager, and spec helpers.

pub mod gojson;
pub mod hash;
pub mod helpers;
pub mod options;
pub mod refs;
pub mod validation;

pub use hash::{hash_container, hash_container_hex};
pub use options::{
    Annotation, DeviceInfo, EnvVar, EtcHostsFile, Mount, PortMapping, RunContainerOptions,
    SubPathMount,
};
pub use refs::{ContainerId, build_pod_full_name, format_pod, parse_pod_full_name};
