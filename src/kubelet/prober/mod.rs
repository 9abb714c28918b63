//! pkg/kubelet/prober: liveness, readiness and startup probes.

pub mod results;
