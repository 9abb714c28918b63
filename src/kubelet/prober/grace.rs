//! Probe-level `terminationGracePeriodSeconds`: when a liveness or startup
//! failure is why a container is killed, the probe's own grace period (if
//! set, and the ProbeTerminationGracePeriod gate is on) replaces the pod's.
//! The runtime manager asks here when it kills for a probe failure.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::probe::ProbeType;
use crate::vlog;

/// The grace period to kill `container` with after its `probe_type` probe
/// failed, when the probe sets one: `None` means the pod's own period
/// applies. Readiness failures never kill, so they never have one.
pub fn probe_termination_grace_period(
    pod: &Pod,
    container: &Container,
    probe_type: ProbeType,
    gate_enabled: bool,
) -> Option<i64> {
    if !gate_enabled || probe_type == ProbeType::Readiness {
        return None;
    }
    let seconds = probe_type
        .spec(container)?
        .termination_grace_period_seconds?;
    let pod_seconds = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds);
    if pod_seconds.is_some_and(|p| seconds > p) {
        vlog!(
            4,
            pod = %format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or("")),
            container = %container.name,
            probe_type = %probe_type,
            probe_grace_period = seconds,
            pod_grace_period = ?pod_seconds,
            "Using probe-level grace period that is greater than the pod-level grace period"
        );
    }
    Some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(liveness: Option<i64>, startup: Option<i64>) -> (Pod, Container) {
        let probe = |g: Option<i64>| serde_json::json!({"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": g});
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "terminationGracePeriodSeconds": 30,
                "containers": [{
                    "name": "c",
                    "livenessProbe": probe(liveness),
                    "startupProbe": probe(startup),
                    "readinessProbe": probe(Some(5)),
                }]
            }
        }))
        .expect("pod");
        let c = pod.spec.as_ref().expect("spec").containers[0].clone();
        (pod, c)
    }

    #[test]
    fn probe_grace_period_table() {
        let cases = [
            // (liveness, startup, probe, gate, want)
            (Some(5), None, ProbeType::Liveness, true, Some(5)),
            (Some(60), None, ProbeType::Liveness, true, Some(60)),
            (None, None, ProbeType::Liveness, true, None),
            (None, Some(7), ProbeType::Startup, true, Some(7)),
            (Some(5), Some(7), ProbeType::Startup, false, None),
            (Some(5), Some(7), ProbeType::Readiness, true, None),
        ];
        for (l, s, t, gate, want) in cases {
            let (p, c) = pod(l, s);
            assert_eq!(
                probe_termination_grace_period(&p, &c, t, gate),
                want,
                "{l:?} {s:?} {t} {gate}"
            );
        }
    }
}
