//! pkg/kubelet/status and the status half of kubelet_pods.go: the API pod
//! status the kubelet computes for each pod ([`generate::StatusGenerator`]),
//! the manager that keeps the latest one per pod ([`manager::StatusManager`]),
//! the conditions the kubelet owns ([`conditions`]), the reasons of failed
//! container starts ([`reason_cache::ReasonCache`]) and the active deadline
//! ([`deadline::ActiveDeadline`]); the API half that writes the statuses to
//! the API server and deletes finished pods ([`sync::StatusSyncer`]).

pub mod conditions;
pub mod deadline;
pub mod generate;
pub mod manager;
pub mod reason_cache;
pub mod sync;

#[cfg(test)]
mod generate_tests;
#[cfg(test)]
mod manager_tests;

pub use deadline::ActiveDeadline;
pub use generate::{ApiPodStatus, ContainerProbeStatus, StatusGenerator, get_phase};
pub use manager::{StatusManager, StatusUpdate, VersionedPodStatus};
pub use reason_cache::ReasonCache;
