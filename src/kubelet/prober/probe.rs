//! Runs one probe of a container (Go's prober.go): picks the handler (exec,
//! httpGet, tcpSocket, grpc), retries a probe that could not be carried out,
//! and records `Unhealthy` (failure or error) and `ProbeWarning` events.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::error::ProberError;
use super::events::{
    CONTAINER_PROBE_WARNING, CONTAINER_UNHEALTHY, EventRecorder, EventType, container_ref,
};
use super::exec::{CommandRunner, ExecProber};
use super::grpc::GrpcProber;
use super::http::{HttpProber, ProbeUrl};
use super::results::ProbeResult;
use super::tcp;
use crate::kubelet::container::{ContainerId, format_pod};
use crate::vlog;

/// Tries of a probe that could not be carried out, before giving up.
const MAX_PROBE_RETRIES: usize = 3;

/// Which probe of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeType {
    /// The name used in events, logs and the `probe_type` metric label.
    pub fn as_str(&self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The container's probe of this type.
    pub fn spec(self, container: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => container.liveness_probe.as_ref(),
            ProbeType::Readiness => container.readiness_probe.as_ref(),
            ProbeType::Startup => container.startup_probe.as_ref(),
        }
    }
}

impl std::fmt::Display for ProbeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one run of a handler found (Go's probe.Result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Healthy, but worth telling the user (a redirect that was not followed).
    Warning,
    Failure,
    Unknown,
}

/// Feature gates of the v1.25 line the probers consult.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeGates {
    /// ExecProbeTimeout (GA default on): an exec probe that runs past its
    /// timeout fails; off, the timeout only makes the probe an error.
    pub exec_probe_timeout: bool,
    /// GRPCContainerProbe (beta, on): gRPC probes run at all.
    pub grpc_container_probe: bool,
}

impl Default for ProbeGates {
    fn default() -> Self {
        Self {
            exec_probe_timeout: true,
            grpc_container_probe: true,
        }
    }
}

impl ProbeGates {
    /// The gates as `gate` sets them (`--feature-gates`).
    pub fn from_gate(gate: &crate::features::FeatureGate) -> Self {
        Self {
            exec_probe_timeout: gate.enabled(crate::features::EXEC_PROBE_TIMEOUT),
            grpc_container_probe: gate.enabled(crate::features::GRPC_CONTAINER_PROBE),
        }
    }
}

/// Runs probes and records their events.
pub struct Prober {
    exec: ExecProber,
    http: HttpProber,
    grpc: GrpcProber,
    gates: ProbeGates,
    recorder: Arc<dyn EventRecorder>,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("gates", &self.gates)
            .finish_non_exhaustive()
    }
}

impl Prober {
    pub fn new(
        runner: Arc<dyn CommandRunner>,
        recorder: Arc<dyn EventRecorder>,
        gates: ProbeGates,
    ) -> Self {
        Self {
            exec: ExecProber::new(runner, gates.exec_probe_timeout),
            // Redirects to another host are reported, never followed.
            http: HttpProber::new(false),
            grpc: GrpcProber::new(),
            gates,
            recorder,
        }
    }

    fn record(&self, pod: &Pod, container: &Container, kind: EventType, reason: &str, msg: &str) {
        self.recorder
            .event(&container_ref(pod, &container.name), kind, reason, msg);
    }

    /// Probes the container once (with retries of errors) and turns the
    /// outcome into a result: `Success` (warnings included) or `Failure`.
    /// An error means the probe could not be carried out; the caller keeps
    /// its previous result.
    pub async fn probe(
        &self,
        probe_type: ProbeType,
        pod: &Pod,
        status: &PodStatus,
        container: &Container,
        container_id: &ContainerId,
    ) -> Result<ProbeResult, ProberError> {
        let pod_key = pod_key(pod);
        let Some(spec) = probe_type.spec(container) else {
            tracing::info!(probe_type = %probe_type, pod = %pod_key, container = %container.name, "Probe is nil");
            return Ok(ProbeResult::Success);
        };
        let (outcome, output) = match self
            .run_with_retries(probe_type, spec, pod, status, container, container_id)
            .await
        {
            Ok(r) => r,
            Err(err) => {
                vlog!(1, probe_type = %probe_type, pod = %pod_key, container = %container.name, error = %err, "Probe errored");
                self.record(
                    pod,
                    container,
                    EventType::Warning,
                    CONTAINER_UNHEALTHY,
                    &format!("{probe_type} probe errored: {err}"),
                );
                return Err(err);
            }
        };
        match outcome {
            Outcome::Success => {
                vlog!(3, probe_type = %probe_type, pod = %pod_key, container = %container.name, "Probe succeeded");
                Ok(ProbeResult::Success)
            }
            Outcome::Warning => {
                self.record(
                    pod,
                    container,
                    EventType::Warning,
                    CONTAINER_PROBE_WARNING,
                    &format!("{probe_type} probe warning: {output}"),
                );
                vlog!(3, probe_type = %probe_type, pod = %pod_key, container = %container.name, output = %output, "Probe succeeded with a warning");
                Ok(ProbeResult::Success)
            }
            Outcome::Failure | Outcome::Unknown => {
                vlog!(1, probe_type = %probe_type, pod = %pod_key, container = %container.name, probe_result = ?outcome, output = %output, "Probe failed");
                self.record(
                    pod,
                    container,
                    EventType::Warning,
                    CONTAINER_UNHEALTHY,
                    &format!("{probe_type} probe failed: {output}"),
                );
                Ok(ProbeResult::Failure)
            }
        }
    }

    async fn run_with_retries(
        &self,
        probe_type: ProbeType,
        spec: &Probe,
        pod: &Pod,
        status: &PodStatus,
        container: &Container,
        container_id: &ContainerId,
    ) -> Result<(Outcome, String), ProberError> {
        let mut last = None;
        for _ in 0..MAX_PROBE_RETRIES {
            match self
                .run(probe_type, spec, pod, status, container, container_id)
                .await
            {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ProberError::MissingHandler {
            pod: format_pod(pod),
            container: container.name.clone(),
        }))
    }

    /// One run of the probe's handler.
    async fn run(
        &self,
        probe_type: ProbeType,
        spec: &Probe,
        pod: &Pod,
        status: &PodStatus,
        container: &Container,
        container_id: &ContainerId,
    ) -> Result<(Outcome, String), ProberError> {
        let timeout =
            Duration::from_secs(u64::try_from(spec.timeout_seconds.unwrap_or(1)).unwrap_or(0));
        let pod_ip = status.pod_ip.clone().unwrap_or_default();
        let pod_key = pod_key(pod);
        if let Some(exec) = &spec.exec {
            let command = expand_static(exec.command.as_deref().unwrap_or_default(), container);
            vlog!(4, pod = %pod_key, container = %container.name, command = ?command, "Exec-Probe runProbe");
            return self.exec.probe(container_id, &command, timeout).await;
        }
        if let Some(get) = &spec.http_get {
            let scheme = get.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
            let host = get
                .host
                .as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(&pod_ip)
                .to_string();
            let port = extract_port(&get.port, container)?;
            let path = get.path.as_deref().unwrap_or("");
            let url = ProbeUrl::new(&scheme, &host, port, path);
            let headers: Vec<(String, String)> = get
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect();
            // One client serves every probe type: connections are never
            // pooled, so probes of a container cannot collide on one.
            vlog!(4, probe_type = %probe_type, scheme = %scheme, host = %host, port, path, timeout = ?timeout, headers = ?headers, "HTTP-Probe");
            return self.http.probe(&url, &headers, timeout).await;
        }
        if let Some(sock) = &spec.tcp_socket {
            let port = extract_port(&sock.port, container)?;
            let host = sock
                .host
                .as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(&pod_ip)
                .to_string();
            vlog!(4, host = %host, port, timeout = ?timeout, "TCP-Probe");
            return Ok(tcp::probe(&host, port, timeout).await);
        }
        if let Some(grpc) = spec
            .grpc
            .as_ref()
            .filter(|_| self.gates.grpc_container_probe)
        {
            let service = grpc.service.clone().unwrap_or_default();
            vlog!(4, host = %pod_ip, service = %service, port = grpc.port, timeout = ?timeout, "GRPC-Probe");
            return Ok(self.grpc.probe(&pod_ip, &service, grpc.port, timeout).await);
        }
        tracing::info!(container = %container.name, "Failed to find probe builder for container");
        Err(ProberError::MissingHandler {
            pod: format_pod(pod),
            container: container.name.clone(),
        })
    }
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The probe command with `$(VAR)` references expanded from the container's
/// literal env values only (references to `valueFrom` entries expand to "").
pub fn expand_static(command: &[String], container: &Container) -> Vec<String> {
    let map: std::collections::HashMap<String, String> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    let contexts = [&map];
    command
        .iter()
        .map(|c| {
            crate::kubelet::expansion::expand(c, crate::kubelet::expansion::mapping_for(&contexts))
        })
        .collect()
}

/// The port a probe targets: a number, a container port name, or a number
/// written as a string; it must be in 1..=65535.
pub fn extract_port(param: &IntOrString, container: &Container) -> Result<u16, ProberError> {
    let port_err = |message: String| ProberError::Port {
        container: container.name.clone(),
        message,
    };
    let port: i64 = match param {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => match find_port_by_name(container, name) {
            Some(p) => i64::from(p),
            None => parse_go_int(name).map_err(|e| port_err(e.to_string()))?,
        },
    };
    u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| port_err(format!("invalid port number: {port}")))
}

fn find_port_by_name(container: &Container, name: &str) -> Option<i32> {
    container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(name))
        .map(|p| p.container_port)
}

/// Why a port string is not a decimal integer (Go's `strconv.Atoi` texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AtoiError {
    #[error("strconv.Atoi: parsing {}: invalid syntax", go_quote(.0))]
    Syntax(String),
    #[error("strconv.Atoi: parsing {}: value out of range", go_quote(.0))]
    Range(String),
}

/// Parses a decimal integer as Go's `strconv.Atoi` does.
fn parse_go_int(s: &str) -> Result<i64, AtoiError> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AtoiError::Syntax(s.to_string()));
    }
    s.parse::<i64>()
        .map_err(|_| AtoiError::Range(s.to_string()))
}

/// A string quoted as Go's `%q` does for printable text.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;
