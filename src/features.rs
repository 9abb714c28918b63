//! Feature gates known to the kubelet of the v1.25 line, with their defaults,
//! maturity and lock state, and the gate set that `--feature-gates` and the
//! configuration file's `featureGates` adjust.
//!
//! The known set is what a v1.25 kubelet binary registers: the Kubernetes
//! gates, the generic API server gates it links, and the logging gates.
//! Setting an unknown gate, or a locked gate away from its default, is an
//! error; `AllAlpha`/`AllBeta` switch every gate of that maturity that was not
//! set explicitly.
//!
//! Other modules ask the process-wide gate set: `features::enabled(features::SECCOMP_DEFAULT)`.
//! `app::command` installs the merged set once before anything starts.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// Maturity of a gate, as the help text prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreRelease {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

impl PreRelease {
    fn label(self) -> &'static str {
        match self {
            PreRelease::Alpha => "ALPHA",
            PreRelease::Beta => "BETA",
            PreRelease::Ga => "",
            PreRelease::Deprecated => "DEPRECATED",
        }
    }
}

/// A gate's default, maturity and whether it is locked to its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    pub default: bool,
    pub pre_release: PreRelease,
    pub locked: bool,
}

/// A gate's name, as written in `--feature-gates` and `featureGates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Feature(pub &'static str);

impl Feature {
    pub fn name(&self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

const fn spec(default: bool, pre_release: PreRelease) -> FeatureSpec {
    FeatureSpec {
        default,
        pre_release,
        locked: false,
    }
}

const fn locked(default: bool, pre_release: PreRelease) -> FeatureSpec {
    FeatureSpec {
        default,
        pre_release,
        locked: true,
    }
}

use PreRelease::{Alpha, Beta, Deprecated, Ga};

/// Every gate the v1.25 kubelet knows, in alphabetical order.
static KNOWN: &[(&str, FeatureSpec)] = &[
    ("APIListChunking", spec(true, Beta)),
    ("APIPriorityAndFairness", spec(true, Beta)),
    ("APIResponseCompression", spec(true, Beta)),
    ("APIServerIdentity", spec(false, Alpha)),
    ("APIServerTracing", spec(false, Alpha)),
    ("AdvancedAuditing", spec(true, Ga)),
    ("AllAlpha", spec(false, Alpha)),
    ("AllBeta", spec(false, Beta)),
    ("AnyVolumeDataSource", spec(true, Beta)),
    ("AppArmor", spec(true, Beta)),
    ("CPUManager", spec(true, Beta)),
    ("CPUManagerPolicyAlphaOptions", spec(false, Alpha)),
    ("CPUManagerPolicyBetaOptions", spec(true, Beta)),
    ("CPUManagerPolicyOptions", spec(true, Beta)),
    ("CSIInlineVolume", locked(true, Ga)),
    ("CSIMigration", locked(true, Ga)),
    ("CSIMigrationAWS", locked(true, Ga)),
    ("CSIMigrationAzureDisk", locked(true, Ga)),
    ("CSIMigrationAzureFile", spec(true, Beta)),
    ("CSIMigrationGCE", locked(true, Ga)),
    ("CSIMigrationPortworx", spec(false, Beta)),
    ("CSIMigrationRBD", spec(false, Alpha)),
    ("CSIMigrationvSphere", spec(true, Beta)),
    ("CSINodeExpandSecret", spec(false, Alpha)),
    ("CSIStorageCapacity", locked(true, Ga)),
    ("CSIVolumeHealth", spec(false, Alpha)),
    ("ContainerCheckpoint", spec(false, Alpha)),
    ("ContextualLogging", spec(false, Alpha)),
    ("ControllerManagerLeaderMigration", locked(true, Ga)),
    ("CronJobTimeZone", spec(true, Beta)),
    ("CustomCPUCFSQuotaPeriod", spec(false, Alpha)),
    ("CustomResourceValidationExpressions", spec(true, Beta)),
    ("DaemonSetUpdateSurge", locked(true, Ga)),
    ("DefaultPodTopologySpread", locked(true, Ga)),
    ("DelegateFSGroupToCSIDriver", spec(true, Beta)),
    ("DevicePlugins", spec(true, Beta)),
    ("DisableAcceleratorUsageMetrics", locked(true, Ga)),
    ("DisableCloudProviders", spec(false, Alpha)),
    ("DisableKubeletCloudCredentialProviders", spec(false, Alpha)),
    ("DownwardAPIHugePages", spec(true, Beta)),
    ("DryRun", spec(true, Ga)),
    ("DynamicKubeletConfig", spec(false, Deprecated)),
    ("EfficientWatchResumption", locked(true, Ga)),
    ("EndpointSliceTerminatingCondition", spec(true, Beta)),
    ("EphemeralContainers", locked(true, Ga)),
    ("ExecProbeTimeout", spec(true, Ga)),
    ("ExpandCSIVolumes", spec(true, Ga)),
    ("ExpandInUsePersistentVolumes", spec(true, Ga)),
    ("ExpandPersistentVolumes", spec(true, Ga)),
    ("ExpandedDNSConfig", spec(false, Alpha)),
    ("ExperimentalHostUserNamespaceDefaulting", spec(false, Beta)),
    ("GRPCContainerProbe", spec(true, Beta)),
    ("GracefulNodeShutdown", spec(true, Beta)),
    ("GracefulNodeShutdownBasedOnPodPriority", spec(true, Beta)),
    ("HPAContainerMetrics", spec(false, Alpha)),
    ("HPAScaleToZero", spec(false, Alpha)),
    ("HonorPVReclaimPolicy", spec(false, Alpha)),
    ("IPTablesOwnershipCleanup", spec(false, Alpha)),
    ("IdentifyPodOS", locked(true, Ga)),
    ("InTreePluginAWSUnregister", spec(false, Alpha)),
    ("InTreePluginAzureDiskUnregister", spec(false, Alpha)),
    ("InTreePluginAzureFileUnregister", spec(false, Alpha)),
    ("InTreePluginGCEUnregister", spec(false, Alpha)),
    ("InTreePluginPortworxUnregister", spec(false, Alpha)),
    ("InTreePluginRBDUnregister", spec(false, Alpha)),
    ("InTreePluginvSphereUnregister", spec(false, Alpha)),
    ("IndexedJob", locked(true, Ga)),
    ("JobMutableNodeSchedulingDirectives", spec(true, Beta)),
    ("JobPodFailurePolicy", spec(false, Alpha)),
    ("JobReadyPods", spec(true, Beta)),
    ("JobTrackingWithFinalizers", spec(true, Beta)),
    ("KMSv2", spec(false, Alpha)),
    ("KubeletCredentialProviders", spec(true, Beta)),
    ("KubeletInUserNamespace", spec(false, Alpha)),
    ("KubeletPodResources", spec(true, Beta)),
    ("KubeletPodResourcesGetAllocatable", spec(true, Beta)),
    ("KubeletTracing", spec(false, Alpha)),
    (
        "LegacyServiceAccountTokenNoAutoGeneration",
        spec(true, Beta),
    ),
    ("LocalStorageCapacityIsolation", locked(true, Ga)),
    (
        "LocalStorageCapacityIsolationFSQuotaMonitoring",
        spec(false, Alpha),
    ),
    ("LogarithmicScaleDown", spec(true, Beta)),
    ("LoggingAlphaOptions", spec(false, Alpha)),
    ("LoggingBetaOptions", spec(true, Beta)),
    ("MatchLabelKeysInPodTopologySpread", spec(false, Alpha)),
    ("MaxUnavailableStatefulSet", spec(false, Alpha)),
    ("MemoryManager", spec(true, Beta)),
    ("MemoryQoS", spec(false, Alpha)),
    ("MinDomainsInPodTopologySpread", spec(false, Beta)),
    ("MixedProtocolLBService", spec(true, Beta)),
    ("MultiCIDRRangeAllocator", spec(false, Alpha)),
    ("NetworkPolicyEndPort", locked(true, Ga)),
    ("NetworkPolicyStatus", spec(false, Alpha)),
    ("NodeInclusionPolicyInPodTopologySpread", spec(false, Alpha)),
    ("NodeOutOfServiceVolumeDetach", spec(false, Alpha)),
    ("NodeSwap", spec(false, Alpha)),
    ("NonPreemptingPriority", locked(true, Ga)),
    ("OpenAPIEnums", spec(true, Beta)),
    ("OpenAPIV3", spec(true, Beta)),
    ("PodAffinityNamespaceSelector", locked(true, Ga)),
    ("PodAndContainerStatsFromCRI", spec(false, Alpha)),
    ("PodDeletionCost", spec(true, Beta)),
    ("PodDisruptionConditions", spec(false, Alpha)),
    ("PodHasNetworkCondition", spec(false, Alpha)),
    ("PodOverhead", locked(true, Ga)),
    ("PodSecurity", locked(true, Ga)),
    ("PreferNominatedNode", locked(true, Ga)),
    ("ProbeTerminationGracePeriod", spec(true, Beta)),
    ("ProcMountType", spec(false, Alpha)),
    ("ProxyTerminatingEndpoints", spec(false, Alpha)),
    ("QOSReserved", spec(false, Alpha)),
    ("ReadWriteOncePod", spec(false, Alpha)),
    ("RecoverVolumeExpansionFailure", spec(false, Alpha)),
    ("RemainingItemCount", spec(true, Beta)),
    ("RemoveSelfLink", locked(true, Ga)),
    ("RetroactiveDefaultStorageClass", spec(false, Alpha)),
    ("RotateKubeletServerCertificate", spec(true, Beta)),
    ("SELinuxMountReadWriteOncePod", spec(false, Alpha)),
    ("SeccompDefault", spec(true, Beta)),
    ("ServerSideApply", spec(true, Ga)),
    ("ServerSideFieldValidation", spec(true, Beta)),
    ("ServiceIPStaticSubrange", spec(true, Beta)),
    ("ServiceInternalTrafficPolicy", spec(true, Beta)),
    ("ServiceLBNodePortControl", locked(true, Ga)),
    ("ServiceLoadBalancerClass", locked(true, Ga)),
    ("SizeMemoryBackedVolumes", spec(true, Beta)),
    ("StatefulSetAutoDeletePVC", spec(false, Alpha)),
    ("StatefulSetMinReadySeconds", locked(true, Ga)),
    ("StorageVersionAPI", spec(false, Alpha)),
    ("StorageVersionHash", spec(true, Beta)),
    ("SuspendJob", locked(true, Ga)),
    ("TopologyAwareHints", spec(true, Beta)),
    ("TopologyManager", spec(true, Beta)),
    ("UnauthenticatedHTTP2DOSMitigation", spec(false, Beta)),
    ("UserNamespacesStatelessPodsSupport", spec(false, Alpha)),
    ("VolumeCapacityPriority", spec(false, Alpha)),
    ("WatchBookmark", locked(true, Ga)),
    ("WinDSR", spec(false, Alpha)),
    ("WinOverlay", spec(true, Beta)),
    ("WindowsHostProcessContainers", spec(true, Beta)),
];

/// The two gates that switch a whole maturity level.
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

// The gates the kubelet itself consults.
pub const CPU_CFS_QUOTA_PERIOD: Feature = Feature("CustomCPUCFSQuotaPeriod");
pub const CPU_MANAGER: Feature = Feature("CPUManager");
pub const CPU_MANAGER_POLICY_OPTIONS: Feature = Feature("CPUManagerPolicyOptions");
pub const CPU_MANAGER_POLICY_ALPHA_OPTIONS: Feature = Feature("CPUManagerPolicyAlphaOptions");
pub const CPU_MANAGER_POLICY_BETA_OPTIONS: Feature = Feature("CPUManagerPolicyBetaOptions");
pub const CONTAINER_CHECKPOINT: Feature = Feature("ContainerCheckpoint");
pub const DEVICE_PLUGINS: Feature = Feature("DevicePlugins");
pub const DOWNWARD_API_HUGE_PAGES: Feature = Feature("DownwardAPIHugePages");
pub const DYNAMIC_KUBELET_CONFIG: Feature = Feature("DynamicKubeletConfig");
pub const EXEC_PROBE_TIMEOUT: Feature = Feature("ExecProbeTimeout");
pub const EXPANDED_DNS_CONFIG: Feature = Feature("ExpandedDNSConfig");
pub const GRACEFUL_NODE_SHUTDOWN: Feature = Feature("GracefulNodeShutdown");
pub const GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY: Feature =
    Feature("GracefulNodeShutdownBasedOnPodPriority");
pub const GRPC_CONTAINER_PROBE: Feature = Feature("GRPCContainerProbe");
pub const KUBELET_CREDENTIAL_PROVIDERS: Feature = Feature("KubeletCredentialProviders");
pub const KUBELET_IN_USER_NAMESPACE: Feature = Feature("KubeletInUserNamespace");
pub const KUBELET_POD_RESOURCES: Feature = Feature("KubeletPodResources");
pub const KUBELET_POD_RESOURCES_GET_ALLOCATABLE: Feature =
    Feature("KubeletPodResourcesGetAllocatable");
pub const KUBELET_TRACING: Feature = Feature("KubeletTracing");
pub const LOCAL_STORAGE_CAPACITY_ISOLATION: Feature = Feature("LocalStorageCapacityIsolation");
pub const LOCAL_STORAGE_CAPACITY_ISOLATION_FS_QUOTA_MONITORING: Feature =
    Feature("LocalStorageCapacityIsolationFSQuotaMonitoring");
pub const LOGGING_ALPHA_OPTIONS: Feature = Feature("LoggingAlphaOptions");
pub const LOGGING_BETA_OPTIONS: Feature = Feature("LoggingBetaOptions");
pub const MEMORY_MANAGER: Feature = Feature("MemoryManager");
pub const MEMORY_QOS: Feature = Feature("MemoryQoS");
pub const NODE_SWAP: Feature = Feature("NodeSwap");
pub const POD_AND_CONTAINER_STATS_FROM_CRI: Feature = Feature("PodAndContainerStatsFromCRI");
pub const POD_DISRUPTION_CONDITIONS: Feature = Feature("PodDisruptionConditions");
pub const POD_HAS_NETWORK_CONDITION: Feature = Feature("PodHasNetworkCondition");
pub const PROBE_TERMINATION_GRACE_PERIOD: Feature = Feature("ProbeTerminationGracePeriod");
pub const PROC_MOUNT_TYPE: Feature = Feature("ProcMountType");
pub const QOS_RESERVED: Feature = Feature("QOSReserved");
pub const ROTATE_KUBELET_SERVER_CERTIFICATE: Feature = Feature("RotateKubeletServerCertificate");
pub const SECCOMP_DEFAULT: Feature = Feature("SeccompDefault");
pub const SIZE_MEMORY_BACKED_VOLUMES: Feature = Feature("SizeMemoryBackedVolumes");
pub const TOPOLOGY_MANAGER: Feature = Feature("TopologyManager");
pub const USER_NAMESPACES_STATELESS_PODS_SUPPORT: Feature =
    Feature("UserNamespacesStatelessPodsSupport");

/// Every gate name this module defines a constant for, for the self-test.
#[cfg(test)]
const USED: &[Feature] = &[
    CPU_CFS_QUOTA_PERIOD,
    CPU_MANAGER,
    CPU_MANAGER_POLICY_OPTIONS,
    CPU_MANAGER_POLICY_ALPHA_OPTIONS,
    CPU_MANAGER_POLICY_BETA_OPTIONS,
    CONTAINER_CHECKPOINT,
    DEVICE_PLUGINS,
    DOWNWARD_API_HUGE_PAGES,
    DYNAMIC_KUBELET_CONFIG,
    EXEC_PROBE_TIMEOUT,
    EXPANDED_DNS_CONFIG,
    GRACEFUL_NODE_SHUTDOWN,
    GRACEFUL_NODE_SHUTDOWN_BASED_ON_POD_PRIORITY,
    GRPC_CONTAINER_PROBE,
    KUBELET_CREDENTIAL_PROVIDERS,
    KUBELET_IN_USER_NAMESPACE,
    KUBELET_POD_RESOURCES,
    KUBELET_POD_RESOURCES_GET_ALLOCATABLE,
    KUBELET_TRACING,
    LOCAL_STORAGE_CAPACITY_ISOLATION,
    LOCAL_STORAGE_CAPACITY_ISOLATION_FS_QUOTA_MONITORING,
    LOGGING_ALPHA_OPTIONS,
    LOGGING_BETA_OPTIONS,
    MEMORY_MANAGER,
    MEMORY_QOS,
    NODE_SWAP,
    POD_AND_CONTAINER_STATS_FROM_CRI,
    POD_DISRUPTION_CONDITIONS,
    POD_HAS_NETWORK_CONDITION,
    PROBE_TERMINATION_GRACE_PERIOD,
    PROC_MOUNT_TYPE,
    QOS_RESERVED,
    ROTATE_KUBELET_SERVER_CERTIFICATE,
    SECCOMP_DEFAULT,
    SIZE_MEMORY_BACKED_VOLUMES,
    TOPOLOGY_MANAGER,
    USER_NAMESPACES_STATELESS_PODS_SUPPORT,
];

/// Why a gate setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error("unrecognized feature gate: {0}")]
    Unknown(String),
    #[error("cannot set feature gate {name} to {value}, feature is locked to {default}")]
    Locked {
        name: String,
        value: bool,
        default: bool,
    },
    #[error("missing bool value for {0}")]
    MissingValue(String),
    #[error("invalid value of {key}={value}, err: {source}")]
    BadValue {
        key: String,
        value: String,
        source: crate::util::strconv::ParseBoolError,
    },
}

/// A set of gate values: the known gates with explicit settings layered on
/// their defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGate {
    enabled: BTreeMap<&'static str, bool>,
}

fn lookup(name: &str) -> Option<(&'static str, FeatureSpec)> {
    KNOWN
        .binary_search_by(|(known, _)| (*known).cmp(name))
        .ok()
        .map(|i| KNOWN[i])
}

impl FeatureGate {
    /// Every gate at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a gate is on. A name the kubelet does not know reads as off
    /// (the constants in this module are all known; a self-test checks it).
    pub fn enabled(&self, feature: Feature) -> bool {
        if let Some(v) = self.enabled.get(feature.0) {
            return *v;
        }
        lookup(feature.0).is_some_and(|(_, spec)| spec.default)
    }

    /// Applies explicit settings, as `featureGates` or `--feature-gates` give
    /// them. Unknown names and locked gates moved off their default fail the
    /// whole call; nothing is applied then. GA and deprecated gates warn.
    pub fn set_from_map(
        &mut self,
        settings: &BTreeMap<String, bool>,
    ) -> Result<(), FeatureGateError> {
        let mut next = self.enabled.clone();
        let mut specials = Vec::new();
        for (name, value) in settings {
            let (key, spec) =
                lookup(name).ok_or_else(|| FeatureGateError::Unknown(name.clone()))?;
            if spec.locked && spec.default != *value {
                return Err(FeatureGateError::Locked {
                    name: name.clone(),
                    value: *value,
                    default: spec.default,
                });
            }
            next.insert(key, *value);
            match spec.pre_release {
                PreRelease::Deprecated => tracing::warn!(
                    target: crate::logs::PRINTF_TARGET,
                    "Setting deprecated feature gate {}={}. It will be removed in a future release.",
                    key,
                    value
                ),
                PreRelease::Ga => tracing::warn!(
                    target: crate::logs::PRINTF_TARGET,
                    "Setting GA feature gate {}={}. It will be removed in a future release.",
                    key,
                    value
                ),
                _ => {}
            }
            if key == ALL_ALPHA || key == ALL_BETA {
                specials.push((key, *value));
            }
        }
        // AllAlpha/AllBeta fill in only the gates nobody set by name.
        for (key, value) in specials {
            let level = if key == ALL_ALPHA {
                PreRelease::Alpha
            } else {
                PreRelease::Beta
            };
            for (name, spec) in KNOWN {
                if spec.pre_release == level && !next.contains_key(name) {
                    next.insert(name, value);
                }
            }
        }
        self.enabled = next;
        Ok(())
    }

    /// Parses and applies `Name=bool,Name=bool` (the gate set's own text form).
    pub fn set(&mut self, text: &str) -> Result<(), FeatureGateError> {
        let mut settings = BTreeMap::new();
        for item in text.split(',').filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => return Err(FeatureGateError::MissingValue(item.trim().to_string())),
            };
            let parsed = crate::util::strconv::parse_go_bool(value).map_err(|source| {
                FeatureGateError::BadValue {
                    key: key.to_string(),
                    value: value.to_string(),
                    source,
                }
            })?;
            settings.insert(key.to_string(), parsed);
        }
        self.set_from_map(&settings)
    }

    /// The explicit settings, sorted by name.
    pub fn explicit(&self) -> &BTreeMap<&'static str, bool> {
        &self.enabled
    }

    /// The explicit settings as Go prints the gate set
    /// (`&{map[MemoryQoS:false NodeSwap:true]}`).
    pub fn go_string(&self) -> String {
        let pairs: Vec<String> = self
            .enabled
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        format!("&{{map[{}]}}", pairs.join(" "))
    }

    /// The gates an operator may still choose, one `Name=true|false (MATURITY - default=x)`
    /// line each, sorted; GA and deprecated gates are left out as Go does.
    pub fn known_features() -> Vec<String> {
        KNOWN
            .iter()
            .filter(|(_, s)| !matches!(s.pre_release, PreRelease::Ga | PreRelease::Deprecated))
            .map(|(name, s)| {
                format!(
                    "{name}=true|false ({} - default={})",
                    s.pre_release.label(),
                    s.default
                )
            })
            .collect()
    }

    /// The spec of a known gate.
    pub fn spec(feature: &str) -> Option<FeatureSpec> {
        lookup(feature).map(|(_, s)| s)
    }
}

impl std::fmt::Display for FeatureGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pairs: Vec<String> = self
            .enabled
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&pairs.join(","))
    }
}

static GLOBAL: RwLock<Option<Arc<FeatureGate>>> = RwLock::new(None);

/// Installs the process-wide gate set (done once by `app::command`).
pub fn set_default_feature_gate(gate: FeatureGate) {
    let mut slot = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    *slot = Some(Arc::new(gate));
}

/// The process-wide gate set; every gate at its default until installed.
pub fn default_feature_gate() -> Arc<FeatureGate> {
    let slot = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    slot.clone().unwrap_or_default()
}

/// Whether a gate is on in the process-wide gate set.
pub fn enabled(feature: Feature) -> bool {
    let slot = GLOBAL.read().unwrap_or_else(|e| e.into_inner());
    match slot.as_ref() {
        Some(gate) => gate.enabled(feature),
        None => lookup(feature.0).is_some_and(|(_, s)| s.default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn table_is_sorted_and_unique() {
        for pair in KNOWN.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} !< {}", pair[0].0, pair[1].0);
        }
    }

    #[test]
    fn every_constant_is_known() {
        for f in USED {
            assert!(lookup(f.0).is_some(), "{f} missing from the table");
        }
    }

    /// A gate named by a literal elsewhere (rather than by its constant)
    /// must still name a known gate: a typo would read as "off".
    #[test]
    fn literal_gate_names_in_the_sources_are_known() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let mut files = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let needle = concat!("Feature", "(\"");
        for file in files.iter().filter(|f| !f.ends_with("features.rs")) {
            let text = std::fs::read_to_string(file).unwrap();
            for (i, _) in text.match_indices(needle) {
                let rest = &text[i + needle.len()..];
                let name = &rest[..rest.find('"').unwrap()];
                assert!(
                    lookup(name).is_some(),
                    "{}: unknown gate {name:?}",
                    file.display()
                );
            }
        }
    }

    #[test]
    fn v125_defaults() {
        let gate = FeatureGate::new();
        let cases = [
            (SECCOMP_DEFAULT, true),
            (GRACEFUL_NODE_SHUTDOWN, true),
            (NODE_SWAP, false),
            (CPU_CFS_QUOTA_PERIOD, false),
            (LOCAL_STORAGE_CAPACITY_ISOLATION, true),
            (KUBELET_TRACING, false),
            (LOGGING_BETA_OPTIONS, true),
            (MEMORY_QOS, false),
            (TOPOLOGY_MANAGER, true),
            (Feature("NoSuchGate"), false),
        ];
        for (f, want) in cases {
            assert_eq!(gate.enabled(f), want, "{f}");
        }
    }

    #[test]
    fn set_from_map_table() {
        struct Case {
            name: &'static str,
            settings: &'static [(&'static str, bool)],
            err: Option<&'static str>,
            checks: &'static [(Feature, bool)],
        }
        let cases = [
            Case {
                name: "explicit alpha on",
                settings: &[("NodeSwap", true)],
                err: None,
                checks: &[(NODE_SWAP, true), (MEMORY_QOS, false)],
            },
            Case {
                name: "unknown gate",
                settings: &[("DoesNotExist", true)],
                err: Some("unrecognized feature gate: DoesNotExist"),
                checks: &[],
            },
            Case {
                name: "locked gate off",
                settings: &[("LocalStorageCapacityIsolation", false)],
                err: Some(
                    "cannot set feature gate LocalStorageCapacityIsolation to false, feature is locked to true",
                ),
                checks: &[],
            },
            Case {
                name: "locked gate at default",
                settings: &[("LocalStorageCapacityIsolation", true)],
                err: None,
                checks: &[(LOCAL_STORAGE_CAPACITY_ISOLATION, true)],
            },
            Case {
                name: "AllAlpha spares explicit settings",
                settings: &[("AllAlpha", true), ("NodeSwap", false)],
                err: None,
                checks: &[
                    (NODE_SWAP, false),
                    (MEMORY_QOS, true),
                    (SECCOMP_DEFAULT, true),
                ],
            },
            Case {
                name: "AllBeta off",
                settings: &[("AllBeta", false)],
                err: None,
                checks: &[
                    (SECCOMP_DEFAULT, false),
                    (NODE_SWAP, false),
                    (EXEC_PROBE_TIMEOUT, true),
                ],
            },
        ];
        for case in cases {
            let mut gate = FeatureGate::new();
            let result = gate.set_from_map(&map(case.settings));
            match case.err {
                Some(msg) => {
                    assert_eq!(result.unwrap_err().to_string(), msg, "{}", case.name);
                    assert_eq!(gate, FeatureGate::new(), "{}: nothing applied", case.name);
                }
                None => assert!(result.is_ok(), "{}: {result:?}", case.name),
            }
            for (f, want) in case.checks {
                assert_eq!(gate.enabled(*f), *want, "{}: {f}", case.name);
            }
        }
    }

    #[test]
    fn text_form() {
        let mut gate = FeatureGate::new();
        gate.set("NodeSwap=true, MemoryQoS = false,").unwrap();
        assert!(gate.enabled(NODE_SWAP));
        assert_eq!(gate.to_string(), "MemoryQoS=false,NodeSwap=true");
        assert_eq!(gate.go_string(), "&{map[MemoryQoS:false NodeSwap:true]}");
        assert_eq!(FeatureGate::new().go_string(), "&{map[]}");
        assert_eq!(
            gate.set("NodeSwap").unwrap_err().to_string(),
            "missing bool value for NodeSwap"
        );
        assert!(
            gate.set("NodeSwap=maybe")
                .unwrap_err()
                .to_string()
                .starts_with("invalid value of NodeSwap=maybe")
        );
    }

    #[test]
    fn known_features_lists_only_choosable_gates() {
        let known = FeatureGate::known_features();
        assert!(known.contains(&"NodeSwap=true|false (ALPHA - default=false)".to_string()));
        assert!(known.contains(&"SeccompDefault=true|false (BETA - default=true)".to_string()));
        assert!(!known.iter().any(|l| l.starts_with("DryRun=")));
        assert!(!known.iter().any(|l| l.starts_with("DynamicKubeletConfig=")));
    }
}
