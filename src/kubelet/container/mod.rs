//! pkg/kubelet/container: the runtime-neutral view of pods and containers that
//! the PLEG, the pod workers and the status code share, whatever the runtime.

pub mod cache;
pub mod runtime;
pub mod sync_result;

pub use cache::PodCache;
pub use runtime::*;
pub use sync_result::*;
