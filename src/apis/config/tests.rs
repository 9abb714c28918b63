//! Decoding, defaulting and strictness of configuration files.

use std::path::Path;

use serde_json::json;

use super::duration::Duration;
use super::loader::{LoadError, decode_document, load_config_file, resolve_relative_paths};
use super::types::KubeletConfiguration;

const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

fn decode(body: &str) -> Result<super::loader::Loaded, LoadError> {
    decode_document(Path::new("/etc/kubelet.yaml"), &format!("{HEAD}{body}"))
}

fn config(body: &str) -> KubeletConfiguration {
    decode(body).unwrap().config
}

/// A file that sets every v1beta1 field of the v1.25 line.
const EVERY_FIELD: &str = r#"
enableServer: false
staticPodPath: /etc/kubernetes/manifests
syncFrequency: 30s
fileCheckFrequency: 10s
httpCheckFrequency: 15s
staticPodURL: http://example.com/pods
staticPodURLHeader: {a: [b, c]}
address: 10.0.0.1
port: 10260
readOnlyPort: 10265
tlsCertFile: /a.crt
tlsPrivateKeyFile: /a.key
tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
tlsMinVersion: VersionTLS12
rotateCertificates: true
serverTLSBootstrap: true
authentication:
  x509: {clientCAFile: /ca.crt}
  webhook: {enabled: false, cacheTTL: 1m}
  anonymous: {enabled: true}
authorization:
  mode: AlwaysAllow
  webhook: {cacheAuthorizedTTL: 1m, cacheUnauthorizedTTL: 2s}
registryPullQPS: 1
registryBurst: 2
eventRecordQPS: 3
eventBurst: 4
enableDebuggingHandlers: false
enableContentionProfiling: true
healthzPort: 0
healthzBindAddress: 0.0.0.0
oomScoreAdj: -500
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
streamingConnectionIdleTimeout: 1h
nodeStatusUpdateFrequency: 20s
nodeStatusReportFrequency: 1m
nodeLeaseDurationSeconds: 60
imageMinimumGCAge: 5m
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
volumeStatsAggPeriod: 2m
kubeletCgroups: /kubelet
systemCgroups: /system
cgroupRoot: /
cgroupsPerQOS: true
cgroupDriver: systemd
cpuManagerPolicy: static
cpuManagerPolicyOptions: {full-pcpus-only: "true"}
cpuManagerReconcilePeriod: 5s
memoryManagerPolicy: Static
topologyManagerPolicy: best-effort
topologyManagerScope: pod
qosReserved: {memory: 50%}
runtimeRequestTimeout: 10m
hairpinMode: hairpin-veth
maxPods: 250
podCIDR: 10.244.0.0/24
podPidsLimit: 4096
resolvConf: /run/systemd/resolve/resolv.conf
runOnce: false
cpuCFSQuota: false
cpuCFSQuotaPeriod: 50ms
nodeStatusMaxImages: -1
maxOpenFiles: 500000
contentType: application/json
kubeAPIQPS: 50
kubeAPIBurst: 100
serializeImagePulls: false
evictionHard: {memory.available: 200Mi}
evictionSoft: {memory.available: 300Mi}
evictionSoftGracePeriod: {memory.available: 1m30s}
evictionPressureTransitionPeriod: 30s
evictionMaxPodGracePeriod: 60
evictionMinimumReclaim: {memory.available: 0Mi}
podsPerCore: 10
enableControllerAttachDetach: false
protectKernelDefaults: true
makeIPTablesUtilChains: false
iptablesMasqueradeBit: 13
iptablesDropBit: 16
featureGates: {NodeSwap: true}
failSwapOn: false
memorySwap: {swapBehavior: LimitedSwap}
containerLogMaxSize: 50Mi
containerLogMaxFiles: 3
configMapAndSecretChangeDetectionStrategy: Cache
systemReserved: {cpu: 100m}
kubeReserved: {memory: 1Gi}
reservedSystemCPUs: "0-1"
showHiddenMetricsForVersion: "1.24"
systemReservedCgroup: /system.slice
kubeReservedCgroup: /kube.slice
enforceNodeAllocatable: [pods]
allowedUnsafeSysctls: [net.core.somaxconn]
volumePluginDir: /var/lib/kubelet/volumeplugins
providerID: aws:///i-1
kernelMemcgNotification: true
logging:
  format: json
  flushFrequency: 1000000000
  verbosity: 3
  vmodule: [{filePattern: sync*, verbosity: 5}]
  options: {json: {splitStream: true, infoBufferSize: 1Ki}}
enableSystemLogHandler: false
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
shutdownGracePeriodByPodPriority: [{priority: 100, shutdownGracePeriodSeconds: 10}]
reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]
enableProfilingHandler: false
enableDebugFlagsHandler: false
seccompDefault: true
memoryThrottlingFactor: 0.5
registerWithTaints: [{key: dedicated, value: infra, effect: NoSchedule}]
registerNode: false
tracing: {endpoint: "localhost:4317", samplingRatePerMillion: 100}
localStorageCapacityIsolation: false
"#;

#[test]
fn every_v1beta1_field_is_known_and_read() {
    let loaded = decode(EVERY_FIELD).unwrap();
    assert_eq!(loaded.strict_errors, Vec::<String>::new());
    let c = loaded.config;
    assert!(!c.enable_server);
    assert_eq!(c.sync_frequency, Duration::from_secs(30));
    assert_eq!(c.static_pod_url_header["a"], vec!["b", "c"]);
    assert_eq!(c.healthz_port, 0, "an explicit 0 is kept");
    assert_eq!(c.authentication.x509.client_ca_file, "/ca.crt");
    assert!(c.authentication.anonymous.enabled);
    assert!(!c.authentication.webhook.enabled);
    assert_eq!(c.cpu_cfs_quota_period, Duration::from_millis(50));
    assert_eq!(c.node_status_max_images, -1);
    assert_eq!(c.logging.format, "json");
    assert_eq!(c.logging.flush_frequency, Duration::from_secs(1));
    assert_eq!(c.logging.vmodule[0].file_pattern, "sync*");
    assert_eq!(c.logging.options.json.info_buffer_size.value(), 1024);
    assert_eq!(c.memory_throttling_factor, 0.5);
    assert_eq!(c.register_with_taints[0].key, "dedicated");
    assert_eq!(c.reserved_memory[0].limits["memory"].value(), 1 << 30);
    assert_eq!(
        c.tracing.as_ref().unwrap().sampling_rate_per_million,
        Some(100)
    );
    assert!(!c.local_storage_capacity_isolation);
    assert_eq!(c.reserved_system_cpus, "0-1");
    // Everything that was read is printed back under the same names.
    let printed = c.to_configz_json();
    let source = crate::util::yaml::to_json(EVERY_FIELD).unwrap().value;
    for key in source.as_object().unwrap().keys() {
        if matches!(key.as_str(), "runOnce") {
            continue; // false: left out as Go's omitempty does
        }
        assert!(printed.get(key).is_some(), "{key} not printed");
    }
}

#[test]
fn yaml_1_1_values_in_a_configuration_golden() {
    type Check = fn(&KubeletConfiguration) -> bool;
    let cases: &[(&str, Check)] = &[
        ("failSwapOn: no", |c| !c.fail_swap_on),
        ("failSwapOn: off", |c| !c.fail_swap_on),
        ("registerNode: n", |c| !c.register_node),
        ("cgroupsPerQOS: Yes", |c| c.cgroups_per_qos),
        ("serializeImagePulls: OFF", |c| !c.serialize_image_pulls),
        ("port: 0x2800", |c| c.port == 10240),
        ("maxPods: 0144", |c| c.max_pods == 100),
        ("maxPods: 1_000", |c| c.max_pods == 1000),
        ("oomScoreAdj: -0100", |c| c.oom_score_adj == -64),
        ("port: 1e4", |c| c.port == 10000),
        ("memoryThrottlingFactor: .5", |c| {
            c.memory_throttling_factor == 0.5
        }),
        ("featureGates: {NodeSwap: yes}", |c| {
            c.feature_gates.get("NodeSwap") == Some(&true)
        }),
        ("evictionHard: {memory.available: 100Mi}", |c| {
            c.eviction_hard.len() == 1
        }),
        ("staticPodPath: '0755'", |c| c.static_pod_path == "0755"),
        ("syncFrequency: 1m30s", |c| {
            c.sync_frequency == Duration::from_secs(90)
        }),
        ("clusterDomain: ~", |c| c.cluster_domain.is_empty()),
    ];
    for (line, check) in cases {
        let c = config(&format!("{line}\n"));
        assert!(check(&c), "{line}");
    }
}

#[test]
fn yaml_1_1_values_that_change_type_are_errors_naming_the_field() {
    let cases = [
        ("cgroupDriver: yes", "cgroupDriver"),
        ("hairpinMode: on", "hairpinMode"),
        ("staticPodPath: 0755", "staticPodPath"),
        ("providerID: 12", "providerID"),
        ("clusterDNS: [10]", "clusterDNS[0]"),
        ("systemReserved: {cpu: 1}", "systemReserved.cpu"),
    ];
    for (line, field) in cases {
        match decode(&format!("{line}\n")) {
            Err(LoadError::Field { source, .. }) => assert_eq!(source.path, field, "{line}"),
            other => panic!("{line}: {other:?}"),
        }
    }
}

#[test]
fn malformed_documents() {
    let path = Path::new("/etc/k.yaml");
    let cases: &[(&str, &str)] = &[
        ("", "was empty"),
        ("port: 1\n", "field kind is missing"),
        (
            "kind: KubeletConfiguration\nport: 1\n",
            "field apiVersion is missing",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n",
            "field apiVersion: \"kubelet.config.k8s.io/v1\" is not supported",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
            "field kind: \"KubeProxyConfiguration\" is not supported",
        ),
        ("- a\n- b\n", "must be a mapping"),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: [1\n",
            "error converting YAML to JSON",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: abc\n",
            "field port: invalid type: string \"abc\", expected i32",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: 10\n",
            "field syncFrequency",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: 10x\n",
            "field syncFrequency: time: unknown unit \"x\" in duration \"10x\"",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication: {webhook: {cacheTTL: true}}\n",
            "field authentication.webhook.cacheTTL",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nlogging: {flushFrequency: 5s}\n",
            "field logging.flushFrequency",
        ),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 99999999999\n",
            "field port",
        ),
        (
            "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\", \"kind\": \"KubeletConfiguration\", \"maxPods\": 1.5}",
            "field maxPods",
        ),
    ];
    for (text, want) in cases {
        let err = decode_document(path, text).unwrap_err().to_string();
        assert!(err.contains(want), "{text:?}: {err}");
        assert!(
            err.contains("/etc/k.yaml"),
            "{text:?}: the file is named: {err}"
        );
    }
}

#[test]
fn unknown_and_repeated_fields_are_tolerated_and_reported() {
    let loaded =
        decode("port: 1\nport: 10251\nnoSuchField: 1\nlogging: {sanitization: true}\nPort: 3\n")
            .unwrap();
    assert_eq!(loaded.config.port, 10251, "the last repeated key wins");
    assert_eq!(loaded.strict_errors.len(), 4, "{:?}", loaded.strict_errors);
    assert!(loaded.strict_errors[0].contains("\"port\""));
    assert!(
        loaded
            .strict_errors
            .iter()
            .any(|e| e.contains("logging.sanitization"))
    );
    assert!(
        loaded.strict_errors.iter().any(|e| e.contains("\"Port\"")),
        "field names are case-sensitive"
    );
}

#[test]
fn json_files_are_read() {
    let text = r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "port": 10260, "failSwapOn": false, "evictionHard": {}}"#;
    let c = decode_document(Path::new("/k.json"), text).unwrap().config;
    assert_eq!(c.port, 10260);
    assert!(!c.fail_swap_on);
    assert!(
        c.eviction_hard.is_empty(),
        "an empty map turns hard eviction off"
    );
}

#[test]
fn relative_paths_resolve_against_the_file_directory() {
    let mut c = config(
        "staticPodPath: manifests\ntlsCertFile: ../pki/a.crt\ntlsPrivateKeyFile: /abs/a.key\nauthentication: {x509: {clientCAFile: ./ca.crt}}\nresolvConf: \"\"\nvolumePluginDir: plugins/\n",
    );
    resolve_relative_paths(&mut c, Path::new("/etc/kubernetes"));
    assert_eq!(c.static_pod_path, "/etc/kubernetes/manifests");
    assert_eq!(c.tls_cert_file, "/etc/pki/a.crt");
    assert_eq!(c.tls_private_key_file, "/abs/a.key");
    assert_eq!(
        c.authentication.x509.client_ca_file,
        "/etc/kubernetes/ca.crt"
    );
    assert_eq!(c.resolver_config, "", "an empty path stays empty");
    assert_eq!(c.volume_plugin_dir, "/etc/kubernetes/plugins");
    // Fields that are not paths are left alone.
    let mut other = config("cgroupRoot: kubepods\n");
    resolve_relative_paths(&mut other, Path::new("/etc"));
    assert_eq!(other.cgroup_root, "kubepods");
}

#[test]
fn loading_from_disk_uses_the_file_directory() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("conf");
    std::fs::create_dir(&sub).unwrap();
    let file = sub.join("kubelet.yaml");
    std::fs::write(&file, format!("{HEAD}staticPodPath: manifests\n")).unwrap();
    let loaded = load_config_file(&file).unwrap();
    assert_eq!(
        loaded.config.static_pod_path,
        sub.join("manifests").to_string_lossy()
    );
    let missing = load_config_file(&dir.path().join("nope.yaml")).unwrap_err();
    assert!(matches!(missing, LoadError::Read { .. }), "{missing}");
    assert!(missing.to_string().contains("nope.yaml"));
}

#[test]
fn defaults_of_a_file_that_sets_nothing() {
    let c = config("");
    assert_eq!(c, KubeletConfiguration::v1beta1_defaults());
    let json = c.to_configz_json();
    assert_eq!(
        json["readOnlyPort"],
        serde_json::Value::Null,
        "0 is left out"
    );
    assert_eq!(
        json["authentication"]["anonymous"],
        json!({"enabled": false})
    );
    assert_eq!(json["authorization"]["mode"], "Webhook");
    assert_eq!(json["evictionHard"]["memory.available"], "100Mi");
    assert_eq!(json["logging"]["flushFrequency"], 5_000_000_000i64);
    assert_eq!(json["localStorageCapacityIsolation"], true);
}
