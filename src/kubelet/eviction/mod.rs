//! pkg/kubelet/eviction: eviction signals and thresholds (the eviction
//! manager itself lands with a later issue).

pub mod threshold;
