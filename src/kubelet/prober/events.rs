//! Events the prober records (its reasons), through the kubelet's recorder.

/// Reason of a probe failure event.
pub const CONTAINER_UNHEALTHY: &str = "Unhealthy";
/// Reason of a probe that passed with a warning (a redirect it did not follow).
pub const CONTAINER_PROBE_WARNING: &str = "ProbeWarning";

/// The recorder seam, the event type and the references are the kubelet's
/// (kubelet::events).
pub use crate::kubelet::events::{EventRecorder, EventType, LoggingRecorder, container_ref};
