//! pkg/kubelet/container: the runtime-neutral view of pods and containers that
//! the PLEG, the pod workers and the status code share, whatever the runtime;
//! and the runtime-neutral helpers the runtime manager uses: the container
//! hash over Go-compatible JSON, pod keys, the options handed to the runtime
//! manager, and spec helpers.

pub mod cache;
pub mod gojson;
pub mod hash;
pub mod helpers;
pub mod options;
pub mod refs;
pub mod runtime;
pub mod sync_result;
pub mod validation;

pub use cache::PodCache;
pub use hash::{hash_container, hash_container_hex};
pub use options::{
    Annotation, DeviceInfo, EnvVar, EtcHostsFile, Mount, PortMapping, RunContainerOptions,
    SubPathMount,
};
pub use refs::{build_pod_full_name, format_pod, parse_pod_full_name};
pub use runtime::*;
pub use sync_result::*;
