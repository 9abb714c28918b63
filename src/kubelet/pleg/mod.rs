//! pkg/kubelet/pleg: the pod lifecycle event generator. It relists the
//! runtime, keeps the pod status cache fresh and tells the syncLoop which pods
//! changed. The event types below are the contract with the syncLoop.

pub mod events;
pub mod generic;

pub use events::{EventStream, PodLifecycleEvent, PodLifecycleEventType, event_stream};
pub use generic::{GenericPleg, PlegError};
