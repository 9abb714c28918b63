//! The rules of the v1.25 line's ValidateKubeletConfiguration. Every rule
//! is checked and every failure reported; each message names the field (and
//! its flag, where it has one) in Go's spelling.

use crate::apis::config::duration::Duration;
use crate::apis::config::types::KubeletConfiguration;
use crate::features::{self, FeatureGate};
use crate::version;

/// Configuration that failed validation: one message per broken rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.join("\n"))]
pub struct ValidationError {
    pub errors: Vec<String>,
}

fn invalid(msg: impl std::fmt::Display) -> String {
    format!("invalid configuration: {msg}")
}

fn port_ok(p: i32) -> bool {
    (1..=65535).contains(&p)
}

/// The node allocatable enforcement keys.
pub const ENFORCE_PODS: &str = "pods";
pub const ENFORCE_SYSTEM_RESERVED: &str = "system-reserved";
pub const ENFORCE_KUBE_RESERVED: &str = "kube-reserved";
pub const ENFORCE_NONE: &str = "none";

/// Checks `kc` against the gates it will run with (`gate` merged with the
/// configuration's own `featureGates`).
pub fn validate_kubelet_configuration(
    kc: &KubeletConfiguration,
    gate: &FeatureGate,
) -> Result<(), ValidationError> {
    let mut local = gate.clone();
    if let Err(e) = local.set_from_map(&kc.feature_gates) {
        return Err(ValidationError {
            errors: vec![e.to_string()],
        });
    }
    let gate = &local;
    let mut errs: Vec<String> = Vec::new();

    if kc.node_lease_duration_seconds <= 0 {
        errs.push(invalid(format!(
            "nodeLeaseDurationSeconds {} must be greater than 0",
            kc.node_lease_duration_seconds
        )));
    }
    if !kc.cgroups_per_qos && !kc.enforce_node_allocatable.is_empty() {
        errs.push(invalid(
            "enforceNodeAllocatable (--enforce-node-allocatable) needs cgroupsPerQOS (--cgroups-per-qos) set to true",
        ));
    }
    if !kc.system_cgroups.is_empty() && kc.cgroup_root.is_empty() {
        errs.push(invalid(
            "systemCgroups (--system-cgroups) is set but cgroupRoot (--cgroup-root) is not",
        ));
    }
    if kc.event_burst < 0 {
        errs.push(invalid(format!(
            "eventBurst (--event-burst) {} must not be negative",
            kc.event_burst
        )));
    }
    if kc.event_record_qps < 0 {
        errs.push(invalid(format!(
            "eventRecordQPS (--event-qps) {} must not be negative",
            kc.event_record_qps
        )));
    }
    if kc.healthz_port != 0 && !port_ok(kc.healthz_port) {
        errs.push(invalid(format!(
            "healthzPort (--healthz-port) {} must be between 1 and 65535, inclusive",
            kc.healthz_port
        )));
    }
    let custom_period = gate.enabled(features::CPU_CFS_QUOTA_PERIOD);
    if !custom_period && kc.cpu_cfs_quota_period != Duration::from_millis(100) {
        errs.push(invalid(format!(
            "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {} requires feature gate {}",
            kc.cpu_cfs_quota_period,
            features::CPU_CFS_QUOTA_PERIOD
        )));
    }
    if custom_period
        && !(Duration::from_nanos(1_000)..=Duration::from_secs(1))
            .contains(&kc.cpu_cfs_quota_period)
    {
        errs.push(invalid(format!(
            "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {} must be between 1us and 1s, inclusive",
            kc.cpu_cfs_quota_period
        )));
    }
    for (name, flag, value) in [
        (
            "imageGCHighThresholdPercent",
            "image-gc-high-threshold",
            kc.image_gc_high_threshold_percent,
        ),
        (
            "imageGCLowThresholdPercent",
            "image-gc-low-threshold",
            kc.image_gc_low_threshold_percent,
        ),
    ] {
        if !(0..=100).contains(&value) {
            errs.push(invalid(format!(
                "{name} (--{flag}) {value} must be between 0 and 100, inclusive"
            )));
        }
    }
    if kc.image_gc_low_threshold_percent >= kc.image_gc_high_threshold_percent {
        errs.push(invalid(format!(
            "imageGCLowThresholdPercent (--image-gc-low-threshold) {} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {}",
            kc.image_gc_low_threshold_percent, kc.image_gc_high_threshold_percent
        )));
    }
    for (name, flag, value) in [
        ("iptablesDropBit", "iptables-drop-bit", kc.iptables_drop_bit),
        (
            "iptablesMasqueradeBit",
            "iptables-masquerade-bit",
            kc.iptables_masquerade_bit,
        ),
    ] {
        if !(0..=31).contains(&value) {
            errs.push(invalid(format!(
                "{name} (--{flag}) {value} must be between 0 and 31, inclusive"
            )));
        }
    }
    let non_negative: [(&str, &str, i64); 7] = [
        ("kubeAPIBurst", "kube-api-burst", kc.kube_api_burst.into()),
        ("kubeAPIQPS", "kube-api-qps", kc.kube_api_qps.into()),
        ("maxOpenFiles", "max-open-files", kc.max_open_files),
        ("maxPods", "max-pods", kc.max_pods.into()),
        ("podsPerCore", "pods-per-core", kc.pods_per_core.into()),
        ("registryBurst", "registry-burst", kc.registry_burst.into()),
        (
            "registryPullQPS",
            "registry-qps",
            kc.registry_pull_qps.into(),
        ),
    ];
    for (name, flag, value) in non_negative {
        if value < 0 {
            errs.push(invalid(format!(
                "{name} (--{flag}) {value} must not be negative"
            )));
        }
    }
    if kc.node_status_max_images < -1 {
        errs.push(invalid(format!(
            "nodeStatusMaxImages (--node-status-max-images) {} must be -1 or greater",
            kc.node_status_max_images
        )));
    }
    if !(-1000..=1000).contains(&kc.oom_score_adj) {
        errs.push(invalid(format!(
            "oomScoreAdj (--oom-score-adj) {} must be between -1000 and 1000, inclusive",
            kc.oom_score_adj
        )));
    }
    if !port_ok(kc.port) {
        errs.push(invalid(format!(
            "port (--port) {} must be between 1 and 65535, inclusive",
            kc.port
        )));
    }
    if kc.read_only_port != 0 && !port_ok(kc.read_only_port) {
        errs.push(invalid(format!(
            "readOnlyPort (--read-only-port) {} must be between 0 and 65535, inclusive",
            kc.read_only_port
        )));
    }
    if kc.server_tls_bootstrap && !gate.enabled(features::ROTATE_KUBELET_SERVER_CERTIFICATE) {
        errs.push(invalid(format!(
            "serverTLSBootstrap {} requires feature gate {}",
            kc.server_tls_bootstrap,
            features::ROTATE_KUBELET_SERVER_CERTIFICATE
        )));
    }
    if kc.seccomp_default && !gate.enabled(features::SECCOMP_DEFAULT) {
        errs.push(invalid(format!(
            "seccompDefault requires feature gate {}",
            features::SECCOMP_DEFAULT
        )));
    }
    validate_topology(kc, gate, &mut errs);
    validate_shutdown(kc, gate, &mut errs);
    validate_swap(kc, gate, &mut errs);
    validate_node_allocatable(kc, &mut errs);
    if !matches!(
        kc.hairpin_mode.as_str(),
        "none" | "hairpin-veth" | "promiscuous-bridge"
    ) {
        errs.push(invalid(format!(
            "option {:?} specified for hairpinMode (--hairpin-mode); valid options are \"none\", \"hairpin-veth\" or \"promiscuous-bridge\"",
            kc.hairpin_mode
        )));
    }
    if !kc.reserved_system_cpus.is_empty() {
        if !kc.system_reserved_cgroup.is_empty() || !kc.kube_reserved_cgroup.is_empty() {
            errs.push(invalid(
                "reservedSystemCPUs (--reserved-cpus) cannot be used with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)",
            ));
        }
        if let Err(e) = crate::util::cpuset::parse_cpu_list(&kc.reserved_system_cpus) {
            errs.push(invalid(format!(
                "unable to parse reservedSystemCPUs (--reserved-cpus) {:?}: {e}",
                kc.reserved_system_cpus
            )));
        }
    }
    validate_reserved_memory(kc, &mut errs);
    if let Some(e) = validate_show_hidden_metrics(&kc.show_hidden_metrics_for_version) {
        errs.push(e);
    }
    errs.extend(kc.logging.validate(gate, &[]));
    validate_tracing(kc, gate, &mut errs);
    if !(kc.memory_throttling_factor > 0.0 && kc.memory_throttling_factor <= 1.0) {
        errs.push(invalid(format!(
            "memoryThrottlingFactor {} must be greater than 0 and less than or equal to 1.0",
            kc.memory_throttling_factor
        )));
    }

    if errs.is_empty() {
        Ok(())
    } else {
        Err(ValidationError { errors: errs })
    }
}

fn validate_topology(kc: &KubeletConfiguration, gate: &FeatureGate, errs: &mut Vec<String>) {
    let enabled = gate.enabled(features::TOPOLOGY_MANAGER);
    if kc.topology_manager_policy != "none" && !enabled {
        errs.push(invalid(format!(
            "topologyManagerPolicy {} requires feature gate {}",
            kc.topology_manager_policy,
            features::TOPOLOGY_MANAGER
        )));
    }
    if kc.topology_manager_scope != "container" && !enabled {
        errs.push(invalid(format!(
            "topologyManagerScope {} requires feature gate {}",
            kc.topology_manager_scope,
            features::TOPOLOGY_MANAGER
        )));
    }
    if !matches!(
        kc.topology_manager_policy.as_str(),
        "none" | "best-effort" | "restricted" | "single-numa-node"
    ) {
        errs.push(invalid(format!(
            "topologyManagerPolicy (--topology-manager-policy) {:?} must be one of \"none\", \"best-effort\", \"restricted\" or \"single-numa-node\"",
            kc.topology_manager_policy
        )));
    }
    if !matches!(kc.topology_manager_scope.as_str(), "container" | "pod") {
        errs.push(invalid(format!(
            "topologyManagerScope (--topology-manager-scope) {:?} must be one of \"container\" or \"pod\"",
            kc.topology_manager_scope
        )));
    }
}

fn validate_shutdown(kc: &KubeletConfiguration, gate: &FeatureGate, errs: &mut Vec<String>) {
    let grace = kc.shutdown_grace_period;
    let critical = kc.shutdown_grace_period_critical_pods;
    let one_second = Duration::from_secs(1);
    if gate.enabled(features::GRACEFUL_NODE_SHUTDOWN) {
        if critical > grace {
            errs.push(invalid(format!(
                "shutdownGracePeriodCriticalPods {critical} must be <= shutdownGracePeriod {grace}"
            )));
        }
        if grace.is_negative() || (!grace.is_zero() && grace < one_second) {
            errs.push(invalid(format!(
                "shutdownGracePeriod {grace} must be either zero or otherwise >= 1s"
            )));
        }
        if critical.is_negative() || (!critical.is_zero() && critical < one_second) {
            errs.push(invalid(format!(
                "shutdownGracePeriodCriticalPods {critical} must be either zero or otherwise >= 1s"
            )));
        }
    } else if grace > Duration::ZERO || critical > Duration::ZERO {
        errs.push(invalid(format!(
            "shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate {}",
            features::GRACEFUL_NODE_SHUTDOWN
        )));
    }
    let by_priority = !kc.shutdown_grace_period_by_pod_priority.is_empty();
    if gate.enabled(features::GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY) {
        if by_priority && (grace > Duration::ZERO || critical > Duration::ZERO) {
            errs.push(invalid(
                "shutdownGracePeriodByPodPriority and shutdownGracePeriod cannot both be set",
            ));
        }
    } else if by_priority {
        errs.push(invalid(format!(
            "shutdownGracePeriodByPodPriority requires feature gate {}",
            features::GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY
        )));
    }
}

fn validate_swap(kc: &KubeletConfiguration, gate: &FeatureGate, errs: &mut Vec<String>) {
    let behavior = kc.memory_swap.swap_behavior.as_str();
    if gate.enabled(features::NODE_SWAP) {
        if !matches!(behavior, "" | "LimitedSwap" | "UnlimitedSwap") {
            errs.push(invalid(format!(
                "memorySwap.swapBehavior {behavior:?} must be one of \"\", \"LimitedSwap\" or \"UnlimitedSwap\""
            )));
        }
    } else if !behavior.is_empty() {
        errs.push(invalid(format!(
            "memorySwap.swapBehavior cannot be set unless feature gate {} is enabled",
            features::NODE_SWAP
        )));
    }
}

fn validate_node_allocatable(kc: &KubeletConfiguration, errs: &mut Vec<String>) {
    for value in &kc.enforce_node_allocatable {
        match value.as_str() {
            ENFORCE_PODS => {}
            ENFORCE_SYSTEM_RESERVED if kc.system_reserved_cgroup.is_empty() => errs.push(invalid(
                "systemReservedCgroup (--system-reserved-cgroup) must be set when \"system-reserved\" is in enforceNodeAllocatable (--enforce-node-allocatable)",
            )),
            ENFORCE_KUBE_RESERVED if kc.kube_reserved_cgroup.is_empty() => errs.push(invalid(
                "kubeReservedCgroup (--kube-reserved-cgroup) must be set when \"kube-reserved\" is in enforceNodeAllocatable (--enforce-node-allocatable)",
            )),
            ENFORCE_SYSTEM_RESERVED | ENFORCE_KUBE_RESERVED => {}
            ENFORCE_NONE => {
                if kc.enforce_node_allocatable.len() > 1 {
                    errs.push(invalid(
                        "enforceNodeAllocatable (--enforce-node-allocatable) may not list other enforcements together with \"none\"",
                    ));
                }
            }
            other => errs.push(invalid(format!(
                "option {other:?} specified for enforceNodeAllocatable (--enforce-node-allocatable); valid options are \"pods\", \"system-reserved\", \"kube-reserved\" or \"none\""
            ))),
        }
    }
}

fn validate_reserved_memory(kc: &KubeletConfiguration, errs: &mut Vec<String>) {
    let mut seen: std::collections::BTreeSet<(i32, &str)> = Default::default();
    for reservation in &kc.reserved_memory {
        let node = reservation.numa_node;
        for (resource, quantity) in &reservation.limits {
            if resource != "memory" && !resource.starts_with("hugepages-") {
                errs.push(invalid(format!(
                    "reservedMemory limit type {resource:?} for NUMA node {node} is not supported; only \"memory\" and \"hugepages-<size>\" are"
                )));
            }
            if quantity.is_zero() {
                errs.push(invalid(format!(
                    "reservedMemory for NUMA node {node} and resource {resource:?} must not be zero"
                )));
            }
            if !seen.insert((node, resource.as_str())) {
                errs.push(invalid(format!(
                    "reservedMemory lists NUMA node {node} and resource {resource:?} more than once"
                )));
            }
        }
    }
}

/// `--show-hidden-metrics-for-version` may only name the previous minor.
fn validate_show_hidden_metrics(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let core = version::KUBERNETES_VERSION.trim_start_matches('v');
    let mut parts = core.split('.');
    let major = parts.next().unwrap_or("1");
    let minor: i64 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    let allowed = format!("{major}.{}", minor - 1);
    (value != allowed).then(|| {
        format!(
            "showHiddenMetricsForVersion (--show-hidden-metrics-for-version) must be omitted or {allowed:?}: only the previous minor version is allowed"
        )
    })
}

fn validate_tracing(kc: &KubeletConfiguration, gate: &FeatureGate, errs: &mut Vec<String>) {
    let Some(tracing) = &kc.tracing else {
        return;
    };
    if !gate.enabled(features::KUBELET_TRACING) {
        errs.push(invalid(format!(
            "tracing cannot be configured unless feature gate {} is enabled",
            features::KUBELET_TRACING
        )));
        return;
    }
    if let Some(rate) = tracing.sampling_rate_per_million {
        if rate < 0 {
            errs.push(format!(
                "tracing.samplingRatePerMillion: Invalid value: {rate}: the sampling rate must not be negative"
            ));
        }
        if rate > 1_000_000 {
            errs.push(format!(
                "tracing.samplingRatePerMillion: Invalid value: {rate}: the sampling rate must be at most one million"
            ));
        }
    }
    if let Some(endpoint) = &tracing.endpoint {
        let full = if endpoint.contains("//") {
            endpoint.clone()
        } else {
            format!("dns://{endpoint}")
        };
        match url::Url::parse(&full) {
            Err(e) => errs.push(format!("tracing.endpoint: Invalid value: {full:?}: {e}")),
            Ok(u) if !matches!(u.scheme(), "dns" | "unix" | "unix-abstract") => errs.push(format!(
                "tracing.endpoint: Invalid value: {full:?}: unsupported scheme {:?} (dns, unix or unix-abstract)",
                u.scheme()
            )),
            Ok(_) => {}
        }
    }
}
