//! An in-memory CRI v1 runtime and image service for hollow nodes
//! (`kubelet hollow`): the same [`RuntimeService`](super::RuntimeService) /
//! [`ImageService`](super::ImageService) seams the gRPC clients implement,
//! so nothing above the CRI knows. Sandboxes and containers are records
//! with CRI's state transitions (created → running → exited, exit codes),
//! empty logs, zero stats; pulls record the image. Containers can be
//! scripted through pod annotations ([`script`]).

pub mod images;
pub mod runtime;
pub mod script;
pub mod state;

use std::sync::Arc;

pub use images::MemoryImages;
pub use runtime::MemoryRuntime;
pub use script::Script;

use super::{CriError, InstrumentedImageService, InstrumentedRuntimeService, RuntimeServices};
use crate::util::clock::Clock;

/// The endpoint errors name.
pub const ENDPOINT: &str = "memory://hollow";
/// The runtime's name in Version (and so in the Node's containerRuntimeVersion).
pub const RUNTIME_NAME: &str = "hollow";

pub(crate) fn not_found(rpc: &'static str, what: &str, id: &str) -> CriError {
    CriError::NotFound {
        endpoint: ENDPOINT.into(),
        rpc,
        message: format!("{what} {id:?} not found"),
    }
}

pub(crate) fn unimplemented(rpc: &'static str) -> CriError {
    CriError::Unimplemented {
        endpoint: ENDPOINT.into(),
        rpc,
        message: format!("{rpc} is not served by the hollow runtime"),
    }
}

/// Both services of hollow node `index`, wrapped with the runtime
/// operation metrics as the real clients are; the images' filesystem is
/// the one holding `fs_dir` (the node's own directory).
pub fn memory_runtime_services(
    index: u32,
    clock: Arc<dyn Clock>,
    fs_dir: std::path::PathBuf,
) -> RuntimeServices {
    RuntimeServices {
        runtime: Arc::new(InstrumentedRuntimeService::new(Arc::new(
            MemoryRuntime::new(index, clock.clone()),
        ))),
        image: Arc::new(InstrumentedImageService::new(Arc::new(MemoryImages::new(
            clock, fs_dir,
        )))),
    }
}
