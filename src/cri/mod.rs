//! CRI v1: the generated API, and the kubelet's clients of the container
//! runtime's RuntimeService and ImageService.
//!
//! - [`service`]: the `RuntimeService` / `ImageService` traits (the seams).
//! - [`remote_runtime`], [`remote_image`]: gRPC over a unix socket, each call
//!   bounded by runtimeRequestTimeout except the long-running ones.
//! - [`instrumented`]: the same traits with `kubelet_runtime_operations_*`
//!   metrics recorded around every call.
//! - [`cgroup_driver`]: the runtime's cgroup driver, where it can tell.

/// Messages and gRPC clients generated from proto/api.proto at build time.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod api {
    tonic::include_proto!("runtime.v1");
}

pub mod cgroup_driver;
pub mod connection;
pub mod error;
pub mod instrumented;
pub mod log_reduction;
pub mod memory;
pub mod remote_image;
pub mod remote_runtime;
pub mod service;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

pub use cgroup_driver::{CgroupDriver, runtime_cgroup_driver};
pub use connection::{DEFAULT_RUNTIME_ENDPOINT, MAX_MSG_SIZE, image_endpoint_or_runtime};
pub use error::{CriError, ERR_IMAGE_PULL};
pub use instrumented::{InstrumentedImageService, InstrumentedRuntimeService};
pub use remote_image::RemoteImageService;
pub use remote_runtime::{KUBE_RUNTIME_API_VERSION, RemoteRuntimeService};
pub use service::{ExecSyncOutput, ImageService, RuntimeService};

/// Both CRI clients, as the rest of the kubelet holds them.
#[derive(Clone)]
pub struct RuntimeServices {
    /// Sandboxes and containers.
    pub runtime: Arc<dyn RuntimeService>,
    /// Images.
    pub image: Arc<dyn ImageService>,
}

impl std::fmt::Debug for RuntimeServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeServices").finish_non_exhaustive()
    }
}

/// Connects both clients at start-up: the image endpoint defaults to the
/// runtime endpoint, each service must answer as CRI v1 within
/// `request_timeout`, and both come wrapped with metrics.
pub async fn connect_runtime_services(
    runtime_endpoint: &str,
    image_endpoint: &str,
    request_timeout: Duration,
) -> Result<RuntimeServices, CriError> {
    let image_endpoint = image_endpoint_or_runtime(image_endpoint, runtime_endpoint);
    let runtime = RemoteRuntimeService::connect(runtime_endpoint, request_timeout).await?;
    let image = RemoteImageService::connect(image_endpoint, request_timeout).await?;
    Ok(RuntimeServices {
        runtime: Arc::new(InstrumentedRuntimeService::new(Arc::new(runtime))),
        image: Arc::new(InstrumentedImageService::new(Arc::new(image))),
    })
}
