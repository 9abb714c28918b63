//! pkg/kubelet/prober: liveness, readiness and startup probes.
//!
//! - [`manager::ProberManager`]: one worker task per probe per container
//!   (`add_pod`, `remove_pod`, `cleanup_pods`, `stop_liveness_and_startup`),
//!   and `update_pod_status`, which sets `started` and `ready` in API pod
//!   status from the results.
//! - [`worker`]: the per-probe loop (start-up jitter, period, initial delay,
//!   thresholds, on-hold after a liveness/startup failure, reset when the
//!   container is replaced).
//! - [`probe::Prober`]: runs one probe (exec, httpGet, tcpSocket, grpc) and
//!   records `Unhealthy` / `ProbeWarning` events.
//! - [`results`]: the three results caches with their change streams, read by
//!   the syncLoop (all three), the status code (readiness, startup) and the
//!   runtime manager (liveness, startup decide restarts).

pub mod error;
pub mod events;
pub mod exec;
pub mod grace;
pub mod grpc;
pub mod http;
pub mod manager;
pub mod metrics;
pub mod probe;
pub mod results;
pub mod status;
pub mod tcp;
pub mod worker;

mod net;
#[cfg(test)]
mod testutil;

pub use error::ProberError;
pub use events::{EventRecorder, EventType, LoggingRecorder, container_ref};
pub use exec::{CommandRunner, CriCommandRunner, RunError};
pub use grace::probe_termination_grace_period;
pub use manager::{ProberDeps, ProberManager, ProberOptions, ResultStreams};
pub use probe::{Outcome, ProbeGates, ProbeType, Prober};
pub use results::{ProbeResult, ResultUpdate, ResultsManager};
pub use status::PodStatusProvider;

/// `kube-probe/<major>.<minor>`: the User-Agent of HTTP and gRPC probes,
/// from the Kubernetes release this kubelet follows.
pub fn user_agent() -> String {
    let v = crate::version::KUBERNETES_VERSION.trim_start_matches('v');
    let mut parts = v.split('.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    format!("kube-probe/{major}.{minor}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_agent_names_major_and_minor() {
        assert_eq!(super::user_agent(), "kube-probe/1.25");
    }
}
