//! Runtime-neutral helpers over pod and container specs (kubecontainer's
//! helpers): port mappings, `$(VAR)` expansion of command, args and
//! subPathExpr, and a few pod predicates.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    Container, EphemeralContainer, Pod, SecurityContext, VolumeMount,
};

use super::options::{EnvVar, PortMapping};
use super::runtime::{ContainerId, ContainerState, PodStatus, RunningContainer, RunningPod};
use crate::cri::api::PodSandboxState;
use crate::kubelet::expansion;

/// Errors from expanding a `subPathExpr`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("missing value for {0}")]
    MissingValue(String),
}

/// The container's ports as port mappings, dropping entries whose name (or,
/// unnamed, whose family/protocol/hostIP/ports tuple) repeats an earlier one.
pub fn make_port_mappings(container: &Container) -> Vec<PortMapping> {
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    for p in container.ports.iter().flatten() {
        let protocol = p.protocol.clone().unwrap_or_default();
        let host_ip = p.host_ip.clone().unwrap_or_default();
        let host_port = p.host_port.unwrap_or(0);
        let family = if host_ip.is_empty() {
            "any"
        } else if is_ipv6_string(&host_ip) {
            "v6"
        } else {
            "v4"
        };
        let name = match p.name.as_deref().filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => format!(
                "{family}-{protocol}-{host_ip}:{}:{host_port}",
                p.container_port
            ),
        };
        if !names.insert(name.clone()) {
            crate::vlog!(
                2,
                port_name = %name,
                container = %container.name,
                "port name conflicted, it is defined more than once"
            );
            continue;
        }
        out.push(PortMapping {
            host_port,
            container_port: p.container_port,
            protocol,
            host_ip,
        });
    }
    out
}

/// Whether `s` parses as an IPv6 address that is not an IPv4-mapped one.
pub fn is_ipv6_string(s: &str) -> bool {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_none(),
        _ => false,
    }
}

/// Whether `s` parses as an IPv4 address (or an IPv4-mapped IPv6 one).
pub fn is_ipv4_string(s: &str) -> bool {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => true,
        Ok(IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_some(),
        Err(_) => false,
    }
}

/// The env list as a map; later entries win.
pub fn env_vars_to_map(envs: &[EnvVar]) -> HashMap<String, String> {
    envs.iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect()
}

/// The container's command and args with `$(VAR)` references expanded from
/// its environment. Empty lists stay empty.
pub fn expand_container_command_and_args(
    container: &Container,
    envs: &[EnvVar],
) -> (Vec<String>, Vec<String>) {
    let map = env_vars_to_map(envs);
    let contexts = [&map];
    let expand_all = |items: Option<&Vec<String>>| -> Vec<String> {
        items
            .map(|v| {
                v.iter()
                    .map(|s| expansion::expand(s, expansion::mapping_for(&contexts)))
                    .collect()
            })
            .unwrap_or_default()
    };
    (
        expand_all(container.command.as_ref()),
        expand_all(container.args.as_ref()),
    )
}

/// Expands a mount's `subPathExpr`; every referenced variable must be set
/// and non-empty.
pub fn expand_container_volume_mount(
    mount: &VolumeMount,
    envs: &[EnvVar],
) -> Result<String, ExpandError> {
    let map = env_vars_to_map(envs);
    let mut missing = BTreeSet::new();
    let expr = mount.sub_path_expr.as_deref().unwrap_or("");
    let expanded = expansion::expand(expr, |key| match map.get(key) {
        Some(v) if !v.is_empty() => v.clone(),
        other => {
            missing.insert(key.to_string());
            other.cloned().unwrap_or_default()
        }
    });
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(ExpandError::MissingValue(
            missing.into_iter().collect::<Vec<_>>().join(", "),
        ))
    }
}

/// An ephemeral container as the container it is run as (its common part;
/// the target container name is the caller's to use).
pub fn ephemeral_as_container(ec: &EphemeralContainer) -> Container {
    let ec = ec.clone();
    Container {
        args: ec.args,
        command: ec.command,
        env: ec.env,
        env_from: ec.env_from,
        image: ec.image,
        image_pull_policy: ec.image_pull_policy,
        lifecycle: ec.lifecycle,
        liveness_probe: ec.liveness_probe,
        name: ec.name,
        ports: ec.ports,
        readiness_probe: ec.readiness_probe,
        resize_policy: ec.resize_policy,
        resources: ec.resources,
        restart_policy: ec.restart_policy,
        security_context: ec.security_context,
        startup_probe: ec.startup_probe,
        stdin: ec.stdin,
        stdin_once: ec.stdin_once,
        termination_message_path: ec.termination_message_path,
        termination_message_policy: ec.termination_message_policy,
        tty: ec.tty,
        volume_devices: ec.volume_devices,
        volume_mounts: ec.volume_mounts,
        working_dir: ec.working_dir,
    }
}

/// Calls `f` on every container of the pod: init, regular, then ephemeral
/// ones (as containers), as Go's VisitContainers with AllContainers.
pub fn visit_containers(pod: &Pod, mut f: impl FnMut(&Container)) {
    let Some(spec) = pod.spec.as_ref() else {
        return;
    };
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        f(c);
    }
    for ec in spec.ephemeral_containers.iter().flatten() {
        f(&ephemeral_as_container(ec));
    }
}

/// Whether the pod runs in the host's network namespace.
pub fn is_host_network_pod(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

fn privileged(sc: Option<&SecurityContext>) -> bool {
    sc.and_then(|s| s.privileged).unwrap_or(false)
}

/// Whether any init, regular or ephemeral container asks to be privileged.
pub fn has_privileged_container(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .any(|c| privileged(c.security_context.as_ref()))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| privileged(c.security_context.as_ref()))
}

/// A sandbox's state as a container state (ready = running, not ready =
/// exited).
pub fn sandbox_to_container_state(state: i32) -> ContainerState {
    match PodSandboxState::try_from(state) {
        Ok(PodSandboxState::SandboxReady) => ContainerState::Running,
        Ok(PodSandboxState::SandboxNotready) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

/// The runtime's view of what runs of a pod, from its status: the running
/// containers and every sandbox (ConvertPodStatusToRunningPod).
pub fn convert_pod_status_to_running_pod(runtime_name: &str, status: &PodStatus) -> RunningPod {
    RunningPod {
        id: status.id.clone(),
        name: status.name.clone(),
        namespace: status.namespace.clone(),
        containers: status
            .running_container_statuses()
            .map(|c| RunningContainer {
                id: c.id.clone(),
                name: c.name.clone(),
                image: c.image.clone(),
                image_id: c.image_id.clone(),
                hash: c.hash,
                state: c.state,
            })
            .collect(),
        sandboxes: status
            .sandbox_statuses
            .iter()
            .map(|s| RunningContainer {
                id: ContainerId::new(runtime_name, s.id.clone()),
                name: String::new(),
                image: String::new(),
                image_id: String::new(),
                hash: 0,
                state: sandbox_to_container_state(s.state),
            })
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    fn container(json: serde_json::Value) -> Container {
        serde_json::from_value(json).expect("container")
    }

    #[test]
    fn port_mappings_table() {
        let cases: Vec<(&str, serde_json::Value, Vec<(i32, i32, &str, &str)>)> = vec![
            (
                "named ports deduplicated by name",
                serde_json::json!([
                    {"name": "http", "containerPort": 80, "protocol": "TCP"},
                    {"name": "http", "containerPort": 81, "protocol": "TCP"}]),
                vec![(0, 80, "TCP", "")],
            ),
            (
                "same port on v4 and v6 host IPs kept",
                serde_json::json!([
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "hostIP": "10.0.0.1"},
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "hostIP": "fd00::1"}]),
                vec![(8080, 80, "TCP", "10.0.0.1"), (8080, 80, "TCP", "fd00::1")],
            ),
            (
                "unnamed duplicates dropped",
                serde_json::json!([
                    {"containerPort": 53, "protocol": "UDP"},
                    {"containerPort": 53, "protocol": "UDP"},
                    {"containerPort": 53, "protocol": "TCP"}]),
                vec![(0, 53, "UDP", ""), (0, 53, "TCP", "")],
            ),
        ];
        for (name, ports, want) in cases {
            let c = container(serde_json::json!({"name": "c", "ports": ports}));
            let got: Vec<(i32, i32, String, String)> = make_port_mappings(&c)
                .into_iter()
                .map(|p| (p.host_port, p.container_port, p.protocol, p.host_ip))
                .collect();
            let want: Vec<(i32, i32, String, String)> = want
                .into_iter()
                .map(|(h, c, p, ip)| (h, c, p.to_string(), ip.to_string()))
                .collect();
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn command_and_args_expansion() {
        let c = container(serde_json::json!({"name": "c",
            "command": ["echo", "$(A)", "$(MISSING)"], "args": ["$$(A)", "x$(B)"]}));
        let envs = vec![EnvVar::new("A", "a"), EnvVar::new("B", "b")];
        let (cmd, args) = expand_container_command_and_args(&c, &envs);
        assert_eq!(cmd, vec!["echo", "a", "$(MISSING)"]);
        assert_eq!(args, vec!["$(A)", "xb"]);

        let empty = container(serde_json::json!({"name": "c"}));
        let (cmd, args) = expand_container_command_and_args(&empty, &envs);
        assert!(cmd.is_empty() && args.is_empty());
    }

    #[test]
    fn sub_path_expr_table() {
        let envs = vec![EnvVar::new("POD", "p1"), EnvVar::new("EMPTY", "")];
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("logs/$(POD)", Ok("logs/p1")),
            ("$(POD)/$(POD)", Ok("p1/p1")),
            ("plain", Ok("plain")),
            ("$(NOPE)/$(EMPTY)", Err("missing value for EMPTY, NOPE")),
        ];
        for (expr, want) in cases {
            let m: VolumeMount = serde_json::from_value(serde_json::json!({
                "name": "v", "mountPath": "/m", "subPathExpr": expr
            }))
            .expect("mount");
            let got = expand_container_volume_mount(&m, &envs).map_err(|e| e.to_string());
            assert_eq!(
                got,
                want.map(str::to_string).map_err(str::to_string),
                "{expr}"
            );
        }
    }

    #[test]
    fn privileged_detection_covers_all_container_kinds() {
        let mk = |field: &str| -> Pod {
            let mut spec = serde_json::json!({"containers": [{"name": "a"}]});
            let priv_c =
                serde_json::json!([{"name": "p", "securityContext": {"privileged": true}}]);
            spec[field] = priv_c;
            if field != "containers" {
                spec["containers"] = serde_json::json!([{"name": "a"}]);
            }
            serde_json::from_value(serde_json::json!({"spec": spec})).expect("pod")
        };
        assert!(has_privileged_container(&mk("containers")));
        assert!(has_privileged_container(&mk("initContainers")));
        assert!(has_privileged_container(&mk("ephemeralContainers")));
        let none: Pod =
            serde_json::from_value(serde_json::json!({"spec": {"containers": [{"name": "a",
                "securityContext": {"privileged": false}}]}}))
            .expect("pod");
        assert!(!has_privileged_container(&none));
    }

    #[test]
    fn ephemeral_container_conversion() {
        let ec: EphemeralContainer = serde_json::from_value(serde_json::json!({
            "name": "dbg", "image": "busybox", "targetContainerName": "app",
            "command": ["sh"], "stdin": true, "tty": true
        }))
        .expect("ephemeral");
        let c = ephemeral_as_container(&ec);
        assert_eq!(c.name, "dbg");
        assert_eq!(c.command, Some(vec!["sh".to_string()]));
        assert_eq!((c.stdin, c.tty), (Some(true), Some(true)));
    }

    #[test]
    fn ip_family_helpers() {
        assert!(is_ipv6_string("fd00::1"));
        assert!(!is_ipv6_string("::ffff:10.0.0.1"));
        assert!(is_ipv4_string("::ffff:10.0.0.1"));
        assert!(is_ipv4_string("10.0.0.1"));
        assert!(!is_ipv4_string("x"));
        assert!(!is_ipv6_string("x"));
    }
}
