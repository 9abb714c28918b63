//! Invalid configurations: each fails validation with the field named, and
//! every broken rule of one file is reported at once.

use super::pipeline::config_file;
use crate::app::command::{CommandError, Outcome, build};

fn errors(body: &str, flags: &[&str]) -> Vec<String> {
    let file = config_file(body);
    let path = file.path.to_string_lossy().into_owned();
    let mut args = vec!["--config", path.as_str()];
    args.extend_from_slice(flags);
    match build(args.iter().copied(), &mut Vec::new()) {
        Err(CommandError::Validation { errors, .. }) => errors,
        Ok(Outcome::Run { .. }) => Vec::new(),
        other => panic!("{body:?} {flags:?}: {other:?}"),
    }
}

#[test]
fn baseline_is_valid() {
    assert_eq!(errors("", &[]), Vec::<String>::new());
}

#[test]
fn invalid_configurations_name_their_field() {
    let gate = |g: &str| format!("featureGates: {{{g}}}\n");
    let cases: Vec<(String, &[&str], &str)> = vec![
        ("nodeLeaseDurationSeconds: -1\n".into(), &[], "nodeLeaseDurationSeconds"),
        ("cgroupsPerQOS: false\n".into(), &[], "enforceNodeAllocatable (--enforce-node-allocatable)"),
        ("systemCgroups: /system\n".into(), &[], "systemCgroups (--system-cgroups)"),
        ("eventBurst: -1\n".into(), &[], "eventBurst (--event-burst)"),
        ("eventRecordQPS: -1\n".into(), &[], "eventRecordQPS (--event-qps)"),
        ("healthzPort: 70000\n".into(), &[], "healthzPort (--healthz-port)"),
        ("cpuCFSQuotaPeriod: 50ms\n".into(), &[], "cpuCFSQuotaPeriod (--cpu-cfs-quota-period)"),
        (
            format!("cpuCFSQuotaPeriod: 2s\n{}", gate("CustomCPUCFSQuotaPeriod: true")),
            &[],
            "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) 2s must be between",
        ),
        ("imageGCHighThresholdPercent: 101\n".into(), &[], "imageGCHighThresholdPercent (--image-gc-high-threshold)"),
        ("imageGCLowThresholdPercent: -1\n".into(), &[], "imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between"),
        (
            "imageGCLowThresholdPercent: 90\nimageGCHighThresholdPercent: 80\n".into(),
            &[],
            "imageGCLowThresholdPercent (--image-gc-low-threshold) 90 must be less than",
        ),
        ("iptablesDropBit: 32\n".into(), &[], "iptablesDropBit (--iptables-drop-bit)"),
        ("iptablesMasqueradeBit: -1\n".into(), &[], "iptablesMasqueradeBit (--iptables-masquerade-bit)"),
        ("kubeAPIBurst: -1\n".into(), &[], "kubeAPIBurst (--kube-api-burst)"),
        ("kubeAPIQPS: -1\n".into(), &[], "kubeAPIQPS (--kube-api-qps)"),
        ("nodeStatusMaxImages: -2\n".into(), &[], "nodeStatusMaxImages (--node-status-max-images)"),
        ("maxOpenFiles: -1\n".into(), &[], "maxOpenFiles (--max-open-files)"),
        ("maxPods: -1\n".into(), &[], "maxPods (--max-pods)"),
        ("oomScoreAdj: 1001\n".into(), &[], "oomScoreAdj (--oom-score-adj)"),
        ("podsPerCore: -1\n".into(), &[], "podsPerCore (--pods-per-core)"),
        ("port: 70000\n".into(), &[], "port (--port)"),
        ("readOnlyPort: 70000\n".into(), &[], "readOnlyPort (--read-only-port)"),
        ("registryBurst: -1\n".into(), &[], "registryBurst (--registry-burst)"),
        ("registryPullQPS: -1\n".into(), &[], "registryPullQPS (--registry-qps)"),
        (
            format!("serverTLSBootstrap: true\n{}", gate("RotateKubeletServerCertificate: false")),
            &[],
            "serverTLSBootstrap",
        ),
        ("enforceNodeAllocatable: [system-reserved]\n".into(), &[], "systemReservedCgroup (--system-reserved-cgroup)"),
        ("enforceNodeAllocatable: [kube-reserved]\n".into(), &[], "kubeReservedCgroup (--kube-reserved-cgroup)"),
        ("enforceNodeAllocatable: [none, pods]\n".into(), &[], "enforceNodeAllocatable (--enforce-node-allocatable) may not"),
        ("enforceNodeAllocatable: [everything]\n".into(), &[], "\"everything\" specified for enforceNodeAllocatable"),
        ("hairpinMode: sideways\n".into(), &[], "hairpinMode (--hairpin-mode)"),
        (
            "reservedSystemCPUs: \"0-1\"\nsystemReservedCgroup: /system.slice\n".into(),
            &[],
            "reservedSystemCPUs (--reserved-cpus) cannot be used",
        ),
        ("reservedSystemCPUs: \"a-b\"\n".into(), &[], "unable to parse reservedSystemCPUs (--reserved-cpus)"),
        ("topologyManagerPolicy: always\n".into(), &[], "topologyManagerPolicy (--topology-manager-policy)"),
        ("topologyManagerScope: node\n".into(), &[], "topologyManagerScope (--topology-manager-scope)"),
        (
            format!("topologyManagerPolicy: best-effort\n{}", gate("TopologyManager: false")),
            &[],
            "topologyManagerPolicy best-effort requires feature gate TopologyManager",
        ),
        (
            "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n".into(),
            &[],
            "shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s",
        ),
        ("shutdownGracePeriod: 500ms\n".into(), &[], "shutdownGracePeriod 500ms must be either zero"),
        (
            format!("shutdownGracePeriod: 30s\n{}", gate("GracefulNodeShutdown: false")),
            &[],
            "requires feature gate GracefulNodeShutdown",
        ),
        (
            "shutdownGracePeriod: 30s\nshutdownGracePeriodByPodPriority: [{priority: 1, shutdownGracePeriodSeconds: 5}]\n".into(),
            &[],
            "shutdownGracePeriodByPodPriority and shutdownGracePeriod",
        ),
        ("memorySwap: {swapBehavior: LimitedSwap}\n".into(), &[], "memorySwap.swapBehavior cannot be set"),
        (
            format!("memorySwap: {{swapBehavior: Lots}}\n{}", gate("NodeSwap: true")),
            &[],
            "memorySwap.swapBehavior \"Lots\" must be one of",
        ),
        ("reservedMemory: [{numaNode: 0, limits: {cpu: 1}}]\n".into(), &[], "reservedMemory limit type \"cpu\""),
        ("reservedMemory: [{numaNode: 0, limits: {memory: 0}}]\n".into(), &[], "reservedMemory for NUMA node 0 and resource \"memory\" must not be zero"),
        ("showHiddenMetricsForVersion: \"1.20\"\n".into(), &[], "showHiddenMetricsForVersion (--show-hidden-metrics-for-version)"),
        ("logging: {format: xml}\n".into(), &[], "logging.format"),
        ("logging: {format: json, vmodule: [{filePattern: a, verbosity: 1}]}\n".into(), &[], "logging.vmodule"),
        ("logging: {options: {json: {splitStream: true}}}\n".into(), &[], "logging.options.json.splitStream"),
        ("tracing: {endpoint: \"localhost:4317\"}\n".into(), &[], "tracing cannot be configured"),
        (
            format!("tracing: {{samplingRatePerMillion: 2000000}}\n{}", gate("KubeletTracing: true")),
            &[],
            "tracing.samplingRatePerMillion",
        ),
        (
            format!("tracing: {{endpoint: \"http://collector:4317\"}}\n{}", gate("KubeletTracing: true")),
            &[],
            "tracing.endpoint",
        ),
        ("memoryThrottlingFactor: 1.5\n".into(), &[], "memoryThrottlingFactor 1.5"),
        (
            format!("seccompDefault: true\n{}", gate("SeccompDefault: false")),
            &[],
            "seccompDefault requires feature gate SeccompDefault",
        ),
        ("logging: {format: json}\n".into(), &["--log-file=/tmp/k.log"], "logging.format"),
        ("".into(), &["--max-pods=-5"], "maxPods (--max-pods) -5"),
        ("".into(), &["--healthz-port=-1"], "healthzPort (--healthz-port) -1"),
    ];
    assert!(cases.len() >= 30);
    for (body, flags, want) in &cases {
        let errs = errors(body, flags);
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "{body:?} {flags:?}: want {want:?} in {errs:#?}"
        );
    }
}

#[test]
fn every_broken_rule_is_reported_at_once() {
    let errs = errors(
        "port: 70000\nmaxPods: -1\noomScoreAdj: 5000\nhairpinMode: x\n",
        &["--event-burst=-2"],
    );
    for field in [
        "port (--port)",
        "maxPods (--max-pods)",
        "oomScoreAdj (--oom-score-adj)",
        "hairpinMode",
        "eventBurst",
    ] {
        assert!(
            errs.iter().any(|e| e.contains(field)),
            "{field} in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), 5, "{errs:#?}");
}
