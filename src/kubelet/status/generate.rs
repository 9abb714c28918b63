//! generateAPIPodStatus: the API pod status from the pod, what the runtime
//! reports and the previous status (kubelet_pods.go v1.25): the phase
//! (getPhase), container and init container statuses with the waiting
//! reasons of failed starts, conditions, pod IPs and QoS class.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod, PodIP, PodSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions;
use super::deadline::ActiveDeadline;
use super::manager::StatusManager;
use super::reason_cache::ReasonCache;
use crate::kubelet::container::helpers::ephemeral_as_container;
use crate::kubelet::container::{self as kubecontainer, ContainerState as RuntimeState};
use crate::kubelet::qos::get_pod_qos;

/// The API pod status.
pub type ApiPodStatus = k8s_openapi::api::core::v1::PodStatus;

pub const PENDING: &str = "Pending";
pub const RUNNING: &str = "Running";
pub const SUCCEEDED: &str = "Succeeded";
pub const FAILED: &str = "Failed";

/// Waiting reason of containers whose pod has init containers to run first.
pub const POD_INITIALIZING: &str = "PodInitializing";
/// Waiting reason of containers being created.
pub const CONTAINER_CREATING: &str = "ContainerCreating";

/// Whether a phase is Succeeded or Failed.
pub fn is_terminal_phase(phase: Option<&str>) -> bool {
    matches!(phase, Some(SUCCEEDED) | Some(FAILED))
}

/// Sets `ready` and `started` of container statuses from the probes
/// (implemented by the prober manager).
pub trait ContainerProbeStatus: Send + Sync + 'static {
    fn update_pod_status(&self, pod_uid: &str, status: &mut ApiPodStatus);
}

/// Wall-clock time as the API's `Time` (seconds are what it serializes).
pub fn meta_time(t: SystemTime) -> Time {
    Time(jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

fn opt_time(t: Option<SystemTime>) -> Option<Time> {
    t.map(meta_time)
}

fn state_of(s: &ContainerStatus) -> ContainerState {
    s.state.clone().unwrap_or_default()
}

fn last_state_of(s: &ContainerStatus) -> ContainerState {
    s.last_state.clone().unwrap_or_default()
}

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// The pod phase from its spec and the container statuses (getPhase).
pub fn get_phase(spec: &PodSpec, info: &[ContainerStatus]) -> &'static str {
    let restart_policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let mut pending_initialization = 0;
    let mut failed_initialization = 0;
    for container in spec.init_containers.iter().flatten() {
        let Some(status) = find(info, &container.name) else {
            pending_initialization += 1;
            continue;
        };
        let state = state_of(status);
        let last = last_state_of(status);
        if state.running.is_some() {
            pending_initialization += 1;
        } else if let Some(t) = &state.terminated {
            if t.exit_code != 0 {
                failed_initialization += 1;
            }
        } else if state.waiting.is_some() {
            match &last.terminated {
                Some(t) if t.exit_code != 0 => failed_initialization += 1,
                Some(_) => {}
                None => pending_initialization += 1,
            }
        } else {
            pending_initialization += 1;
        }
    }

    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for container in &spec.containers {
        let Some(status) = find(info, &container.name) else {
            unknown += 1;
            continue;
        };
        let state = state_of(status);
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = &state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if last_state_of(status).terminated.is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }

    if failed_initialization > 0 && restart_policy == "Never" {
        return FAILED;
    }
    if pending_initialization > 0 || waiting > 0 {
        return PENDING;
    }
    if running > 0 && unknown == 0 {
        return RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if restart_policy == "Always" {
            return RUNNING;
        }
        if stopped == succeeded {
            return SUCCEEDED;
        }
        if restart_policy == "Never" {
            return FAILED;
        }
        return RUNNING;
    }
    PENDING
}

/// Whether the container would be (re)started by the next sync
/// (kubecontainer.ShouldContainerBeRestarted).
pub fn should_container_be_restarted(
    container: &Container,
    pod: &Pod,
    status: &kubecontainer::PodStatus,
) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(s) = status.find_container_status_by_name(&container.name) else {
        return true;
    };
    match s.state {
        RuntimeState::Running => return false,
        RuntimeState::Unknown | RuntimeState::Created => return true,
        RuntimeState::Exited => {}
    }
    match pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
    {
        "Never" => false,
        "OnFailure" => s.exit_code != 0,
        _ => true,
    }
}

fn convert_container_status(cs: &kubecontainer::ContainerStatus) -> ContainerStatus {
    let cid = cs.id.to_string();
    let state = match cs.state {
        RuntimeState::Running => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: opt_time(cs.started_at),
            }),
            ..Default::default()
        },
        // A created container that was never started reads as exited: the
        // worker starts what it creates in the same sync.
        RuntimeState::Created | RuntimeState::Exited => ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: cs.exit_code,
                reason: (!cs.reason.is_empty()).then(|| cs.reason.clone()),
                message: (!cs.message.is_empty()).then(|| cs.message.clone()),
                started_at: opt_time(cs.started_at),
                finished_at: opt_time(cs.finished_at),
                container_id: Some(cid.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        RuntimeState::Unknown => ContainerState {
            waiting: Some(ContainerStateWaiting::default()),
            ..Default::default()
        },
    };
    ContainerStatus {
        name: cs.name.clone(),
        restart_count: cs.restart_count,
        image: cs.image.clone(),
        image_id: cs.image_id.clone(),
        container_id: Some(cid),
        state: Some(state),
        last_state: Some(ContainerState::default()),
        ..Default::default()
    }
}

/// What one container-status conversion works from.
pub struct ContainerStatusInput<'a> {
    pub pod: &'a Pod,
    pub runtime: &'a kubecontainer::PodStatus,
    pub previous: &'a [ContainerStatus],
    pub containers: &'a [Container],
    pub has_init_containers: bool,
    pub is_init_container: bool,
    pub reasons: &'a ReasonCache,
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: None,
        }),
        ..Default::default()
    }
}

/// The API statuses of one list of containers (convertToAPIContainerStatuses).
pub fn convert_to_api_container_statuses(input: &ContainerStatusInput<'_>) -> Vec<ContainerStatus> {
    let uid = input.pod.metadata.uid.as_deref().unwrap_or_default();
    let old: HashMap<&str, &ContainerStatus> = input
        .previous
        .iter()
        .map(|s| (s.name.as_str(), s))
        .collect();
    let default_reason = if input.has_init_containers {
        POD_INITIALIZING
    } else {
        CONTAINER_CREATING
    };

    let mut statuses: HashMap<String, ContainerStatus> = HashMap::new();
    for c in input.containers {
        let mut status = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting(default_reason)),
            last_state: Some(ContainerState::default()),
            ..Default::default()
        };
        if let Some(o) = old.get(c.name.as_str()) {
            if state_of(o).terminated.is_some() {
                status = (*o).clone();
            } else {
                status.restart_count = o.restart_count;
                status.last_state = Some(last_state_of(o));
            }
        }
        statuses.insert(c.name.clone(), status);
    }

    // A container that was running and vanished from the runtime is shown
    // as stopped with an unknown status rather than waiting, so the pod does
    // not fall back to Pending.
    for c in input.containers {
        if input
            .runtime
            .container_statuses
            .iter()
            .any(|s| s.name == c.name)
        {
            continue;
        }
        let Some(o) = old.get(c.name.as_str()) else {
            continue;
        };
        let old_state = state_of(o);
        if old_state.terminated.is_some() || old_state.running.is_none() {
            continue;
        }
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        let is_default_waiting = state_of(status)
            .waiting
            .is_some_and(|w| w.reason.as_deref() == Some(default_reason));
        if !is_default_waiting || last_state_of(status).terminated.is_some() {
            continue;
        }
        status.last_state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                reason: Some("ContainerStatusUnknown".into()),
                message: Some(
                    "The container could not be located when the pod was deleted.  The container used to be Running"
                        .into(),
                ),
                exit_code: 137,
                ..Default::default()
            }),
            ..Default::default()
        });
        if input.pod.metadata.deletion_timestamp.is_none() {
            status.restart_count += 1;
        }
    }

    // Newest first; the newest instance is the state, the one before it the
    // last state.
    let mut runtime_statuses: Vec<&kubecontainer::ContainerStatus> =
        input.runtime.container_statuses.iter().collect();
    runtime_statuses.sort_by_key(|s| std::cmp::Reverse(s.created_at));
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for cs in runtime_statuses {
        if !statuses.contains_key(&cs.name) {
            continue;
        }
        let count = seen.entry(cs.name.as_str()).or_insert(0);
        if *count >= 2 {
            continue;
        }
        let converted = convert_container_status(cs);
        if *count == 0 {
            statuses.insert(cs.name.clone(), converted);
        } else if let Some(s) = statuses.get_mut(&cs.name) {
            s.last_state = converted.state;
        }
        *count += 1;
    }

    // Containers the next sync would (re)start show why their last start failed.
    for c in input.containers {
        if input.is_init_container
            && input
                .runtime
                .find_container_status_by_name(&c.name)
                .is_some_and(|s| s.state == RuntimeState::Exited && s.exit_code == 0)
        {
            continue;
        }
        if !should_container_be_restarted(c, input.pod, input.runtime) {
            continue;
        }
        let Some(reason) = input.reasons.get(uid, &c.name) else {
            continue;
        };
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        if state_of(status).terminated.is_some() {
            status.last_state = status.state.clone();
        }
        status.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.reason),
                message: (!reason.message.is_empty()).then_some(reason.message),
            }),
            ..Default::default()
        });
    }

    if input.is_init_container {
        return input
            .containers
            .iter()
            .filter_map(|c| statuses.remove(&c.name))
            .collect();
    }
    let mut out: Vec<ContainerStatus> = statuses.into_values().collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Pod IPs ordered by the node's IP family: at most one of the primary
/// family (the node IP's, IPv4 by default), then one of the other.
pub fn sort_pod_ips(ips: &[String], node_ips: &[IpAddr]) -> Vec<String> {
    let primary_v4 = node_ips.first().is_none_or(IpAddr::is_ipv4);
    let family = |s: &String| s.parse::<IpAddr>().map(|ip| ip.is_ipv4()).ok();
    let mut out = Vec::with_capacity(2);
    for want_v4 in [primary_v4, !primary_v4] {
        out.extend(ips.iter().find(|ip| family(ip) == Some(want_v4)).cloned());
    }
    out
}

fn none_if_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// Host IPs for `status.hostIP` (and host-network pod IPs). Only a kubelet
/// with an API server reports them, as in Go; standalone has none.
pub type HostIpsFn = Arc<dyn Fn() -> Vec<IpAddr> + Send + Sync>;

/// Builds API pod statuses.
pub struct StatusGenerator {
    pub status_manager: Arc<StatusManager>,
    pub reasons: Arc<ReasonCache>,
    pub probes: Arc<dyn ContainerProbeStatus>,
    pub deadline: Arc<ActiveDeadline>,
    /// `--node-ip` values, for the pod IP family order.
    pub node_ips: Vec<IpAddr>,
    pub host_ips: Option<HostIpsFn>,
}

impl StatusGenerator {
    fn convert(
        &self,
        pod: &Pod,
        runtime: &kubecontainer::PodStatus,
        old: &ApiPodStatus,
    ) -> ApiPodStatus {
        let mut s = ApiPodStatus::default();
        let ips = sort_pod_ips(&runtime.ips, &self.node_ips);
        s.pod_ip = ips.first().cloned();
        s.pod_ips = none_if_empty(ips.into_iter().map(|ip| PodIP { ip }).collect());
        s.qos_class = Some(get_pod_qos(pod).as_str().to_string());
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec.init_containers.clone().unwrap_or_default();
        let has_init = !init.is_empty();
        let input =
            |previous: &Option<Vec<ContainerStatus>>, containers: &[Container], is_init: bool| {
                let previous = previous.as_deref().unwrap_or_default();
                convert_to_api_container_statuses(&ContainerStatusInput {
                    pod,
                    runtime,
                    previous,
                    containers,
                    has_init_containers: has_init,
                    is_init_container: is_init,
                    reasons: &self.reasons,
                })
            };
        s.container_statuses =
            none_if_empty(input(&old.container_statuses, &spec.containers, false));
        s.init_container_statuses = none_if_empty(input(&old.init_container_statuses, &init, true));
        let ephemeral: Vec<Container> = spec
            .ephemeral_containers
            .iter()
            .flatten()
            .map(ephemeral_as_container)
            .collect();
        s.ephemeral_container_statuses =
            none_if_empty(input(&old.ephemeral_container_statuses, &ephemeral, false));
        s
    }

    /// The pod's API status now (generateAPIPodStatus).
    pub fn generate(&self, pod: &Pod, runtime: &kubecontainer::PodStatus) -> ApiPodStatus {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        crate::vlog!(3, pod = %kubecontainer::format_pod(pod), "Generating pod status");
        let api_status = pod.status.clone().unwrap_or_default();
        let old = self
            .status_manager
            .get_pod_status(uid)
            .unwrap_or_else(|| api_status.clone());
        let mut s = self.convert(pod, runtime, &old);
        let spec = pod.spec.clone().unwrap_or_default();

        let mut all: Vec<ContainerStatus> = s.container_statuses.clone().unwrap_or_default();
        all.extend(s.init_container_statuses.clone().unwrap_or_default());
        let mut phase = get_phase(&spec, &all).to_string();
        crate::vlog!(4, pod = %kubecontainer::format_pod(pod), old_phase = ?old.phase, phase = %phase, "Got phase for pod");

        if !is_terminal_phase(Some(&phase)) {
            if is_terminal_phase(old.phase.as_deref()) {
                phase = old.phase.clone().unwrap_or_default();
            } else if is_terminal_phase(api_status.phase.as_deref()) {
                phase = api_status.phase.clone().unwrap_or_default();
            }
        }
        if Some(phase.as_str()) == old.phase.as_deref() {
            s.reason = old
                .reason
                .clone()
                .filter(|r| !r.is_empty())
                .or(api_status.reason.clone());
            s.message = old
                .message
                .clone()
                .filter(|m| !m.is_empty())
                .or(api_status.message.clone());
        }
        if let Some((reason, message)) = self.deadline.should_evict(pod) {
            phase = FAILED.to_string();
            s.reason = Some(reason.to_string());
            s.message = Some(message.to_string());
        }
        if is_terminal_phase(api_status.phase.as_deref())
            && Some(phase.as_str()) != api_status.phase.as_deref()
        {
            tracing::error!(pod = %kubecontainer::format_pod(pod), original_status_phase = ?api_status.phase, api_status_phase = %phase, "Pod attempted illegal phase transition");
            phase = api_status.phase.clone().unwrap_or_default();
        }
        s.phase = Some(phase.clone());

        self.probes.update_pod_status(uid, &mut s);

        let mut conds: Vec<_> = api_status
            .conditions
            .iter()
            .flatten()
            .filter(|c| !conditions::is_kubelet_owned(&c.type_))
            .cloned()
            .collect();
        conds.push(conditions::pod_initialized(
            &spec,
            s.init_container_statuses.as_deref().or(Some(&[])),
            &phase,
        ));
        let ready = conditions::pod_ready(
            &spec,
            &conds,
            s.container_statuses.as_deref().or(Some(&[])),
            &phase,
        );
        conds.push(ready);
        conds.push(conditions::containers_ready(
            &spec,
            s.container_statuses.as_deref().or(Some(&[])),
            &phase,
        ));
        conds.push(conditions::pod_scheduled());
        s.conditions = Some(conds);

        if let Some(host_ips) = &self.host_ips {
            let ips = host_ips();
            if let Some(first) = ips.first() {
                s.host_ip = Some(first.to_string());
                let host_network = crate::kubelet::container::helpers::is_host_network_pod(pod);
                if host_network && s.pod_ip.as_deref().unwrap_or_default().is_empty() {
                    s.pod_ip = Some(first.to_string());
                    s.pod_ips = Some(
                        ips.iter()
                            .take(2)
                            .map(|ip| PodIP { ip: ip.to_string() })
                            .collect(),
                    );
                }
            }
        }
        s
    }
}
