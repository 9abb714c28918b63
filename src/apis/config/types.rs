//! KubeletConfiguration (kubelet.config.k8s.io/v1beta1, fields of the v1.25
//! line) in two shapes generated from one field list:
//!
//! - [`KubeletConfiguration`]: what the kubelet runs with. Every field has a
//!   value (defaults applied); it serialises to the v1beta1 JSON that /configz
//!   shows, with Go's `omitempty` rules (zero values of plain fields left out,
//!   optional fields always present once defaulted).
//! - [`V1Beta1KubeletConfiguration`]: the file as read. Fields that are
//!   pointers (or nil-able lists and maps) in Go are `Option`s here, so that
//!   defaulting can tell "absent" from "set to zero" (`healthzPort: 0`
//!   disables healthz, `evictionHard: {}` disables hard eviction).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde::{Deserialize, Serialize};

use super::duration::Duration;
use crate::logs::config::LoggingConfiguration;
use crate::util::quantity::Quantity;

/// The API group/version of the file format.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The kind of the file format.
pub const KIND: &str = "KubeletConfiguration";

/// A nested type whose file form differs from its runtime form.
pub trait Versioned {
    type V1Beta1: Default;
    fn from_v1beta1(v: Self::V1Beta1) -> Self;
}

macro_rules! versioned_type {
    (pointer $ty:ty) => { Option<$ty> };
    (plain $ty:ty) => { $ty };
    (nested $ty:ty) => { <$ty as Versioned>::V1Beta1 };
}

macro_rules! from_versioned {
    (pointer $ty:ty, $e:expr) => {
        $e.unwrap_or_default()
    };
    (plain $ty:ty, $e:expr) => {
        $e
    };
    (nested $ty:ty, $e:expr) => {
        <$ty as Versioned>::from_v1beta1($e)
    };
}

/// Declares both shapes from one list. Each line: serde attributes (shared;
/// `skip_serializing_if` only affects the runtime shape's output), the field,
/// its runtime type and how the file form holds it (`plain`, `pointer`:
/// optional in the file, or `nested`: a struct with its own file form).
macro_rules! kubelet_configuration {
    ($(
        $(#[$attr:meta])*
        $field:ident : $ty:ty = $kind:ident;
    )*) => {
        /// The kubelet's configuration, defaults applied. Serialises to the
        /// v1beta1 JSON shape /configz prints.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(rename_all = "camelCase")]
        pub struct KubeletConfiguration {
            $( $(#[$attr])* pub $field: $ty, )*
        }

        /// The configuration file's content as decoded, before defaulting.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(default, rename_all = "camelCase")]
        pub struct V1Beta1KubeletConfiguration {
            $( $(#[$attr])* pub $field: versioned_type!($kind $ty), )*
        }

        impl From<V1Beta1KubeletConfiguration> for KubeletConfiguration {
            fn from(v: V1Beta1KubeletConfiguration) -> Self {
                KubeletConfiguration {
                    $( $field: from_versioned!($kind $ty, v.$field), )*
                }
            }
        }
    };
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

kubelet_configuration! {
    /// Serve the kubelet API (10250).
    enable_server: bool = pointer;
    /// Directory or file of static pod manifests.
    #[serde(skip_serializing_if = "String::is_empty")]
    static_pod_path: String = plain;
    sync_frequency: Duration = plain;
    file_check_frequency: Duration = plain;
    http_check_frequency: Duration = plain;
    #[serde(rename = "staticPodURL", skip_serializing_if = "String::is_empty")]
    static_pod_url: String = plain;
    #[serde(rename = "staticPodURLHeader", skip_serializing_if = "BTreeMap::is_empty")]
    static_pod_url_header: BTreeMap<String, Vec<String>> = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    address: String = plain;
    #[serde(skip_serializing_if = "is_zero_i32")]
    port: i32 = plain;
    /// 0 disables the read-only port.
    #[serde(skip_serializing_if = "is_zero_i32")]
    read_only_port: i32 = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    tls_cert_file: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    tls_private_key_file: String = plain;
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tls_cipher_suites: Vec<String> = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    tls_min_version: String = plain;
    #[serde(skip_serializing_if = "is_false")]
    rotate_certificates: bool = plain;
    #[serde(rename = "serverTLSBootstrap", skip_serializing_if = "is_false")]
    server_tls_bootstrap: bool = plain;
    authentication: KubeletAuthentication = nested;
    authorization: KubeletAuthorization = nested;
    #[serde(rename = "registryPullQPS")]
    registry_pull_qps: i32 = pointer;
    #[serde(skip_serializing_if = "is_zero_i32")]
    registry_burst: i32 = plain;
    #[serde(rename = "eventRecordQPS")]
    event_record_qps: i32 = pointer;
    #[serde(skip_serializing_if = "is_zero_i32")]
    event_burst: i32 = plain;
    enable_debugging_handlers: bool = pointer;
    #[serde(skip_serializing_if = "is_false")]
    enable_contention_profiling: bool = plain;
    /// 0 disables healthz.
    healthz_port: i32 = pointer;
    #[serde(skip_serializing_if = "String::is_empty")]
    healthz_bind_address: String = plain;
    oom_score_adj: i32 = pointer;
    #[serde(skip_serializing_if = "String::is_empty")]
    cluster_domain: String = plain;
    #[serde(rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    cluster_dns: Vec<String> = plain;
    streaming_connection_idle_timeout: Duration = plain;
    node_status_update_frequency: Duration = plain;
    node_status_report_frequency: Duration = plain;
    #[serde(skip_serializing_if = "is_zero_i32")]
    node_lease_duration_seconds: i32 = plain;
    #[serde(rename = "imageMinimumGCAge")]
    image_minimum_gc_age: Duration = plain;
    #[serde(rename = "imageGCHighThresholdPercent")]
    image_gc_high_threshold_percent: i32 = pointer;
    #[serde(rename = "imageGCLowThresholdPercent")]
    image_gc_low_threshold_percent: i32 = pointer;
    volume_stats_agg_period: Duration = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    kubelet_cgroups: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    system_cgroups: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    cgroup_root: String = plain;
    #[serde(rename = "cgroupsPerQOS")]
    cgroups_per_qos: bool = pointer;
    /// `cgroupfs` or `systemd`.
    #[serde(skip_serializing_if = "String::is_empty")]
    cgroup_driver: String = plain;
    #[serde(rename = "cpuManagerPolicy", skip_serializing_if = "String::is_empty")]
    cpu_manager_policy: String = plain;
    #[serde(rename = "cpuManagerPolicyOptions", skip_serializing_if = "BTreeMap::is_empty")]
    cpu_manager_policy_options: BTreeMap<String, String> = plain;
    #[serde(rename = "cpuManagerReconcilePeriod")]
    cpu_manager_reconcile_period: Duration = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    memory_manager_policy: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    topology_manager_policy: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    topology_manager_scope: String = plain;
    #[serde(rename = "qosReserved", skip_serializing_if = "BTreeMap::is_empty")]
    qos_reserved: BTreeMap<String, String> = plain;
    runtime_request_timeout: Duration = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    hairpin_mode: String = plain;
    #[serde(skip_serializing_if = "is_zero_i32")]
    max_pods: i32 = plain;
    #[serde(rename = "podCIDR", skip_serializing_if = "String::is_empty")]
    pod_cidr: String = plain;
    pod_pids_limit: i64 = pointer;
    #[serde(rename = "resolvConf")]
    resolver_config: String = pointer;
    #[serde(skip_serializing_if = "is_false")]
    run_once: bool = plain;
    #[serde(rename = "cpuCFSQuota")]
    cpu_cfs_quota: bool = pointer;
    #[serde(rename = "cpuCFSQuotaPeriod")]
    cpu_cfs_quota_period: Duration = pointer;
    node_status_max_images: i32 = pointer;
    #[serde(skip_serializing_if = "is_zero_i64")]
    max_open_files: i64 = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    content_type: String = plain;
    #[serde(rename = "kubeAPIQPS")]
    kube_api_qps: i32 = pointer;
    #[serde(rename = "kubeAPIBurst", skip_serializing_if = "is_zero_i32")]
    kube_api_burst: i32 = plain;
    serialize_image_pulls: bool = pointer;
    /// Signal → threshold (`memory.available` → `100Mi`); `{}` in the file
    /// means no hard eviction at all.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    eviction_hard: BTreeMap<String, String> = pointer;
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    eviction_soft: BTreeMap<String, String> = plain;
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    eviction_soft_grace_period: BTreeMap<String, String> = plain;
    eviction_pressure_transition_period: Duration = plain;
    #[serde(skip_serializing_if = "is_zero_i32")]
    eviction_max_pod_grace_period: i32 = plain;
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    eviction_minimum_reclaim: BTreeMap<String, String> = plain;
    #[serde(skip_serializing_if = "is_zero_i32")]
    pods_per_core: i32 = plain;
    enable_controller_attach_detach: bool = pointer;
    #[serde(skip_serializing_if = "is_false")]
    protect_kernel_defaults: bool = plain;
    #[serde(rename = "makeIPTablesUtilChains")]
    make_iptables_util_chains: bool = pointer;
    iptables_masquerade_bit: i32 = pointer;
    iptables_drop_bit: i32 = pointer;
    /// The gates this configuration sets (merged with the flags' gates).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    feature_gates: BTreeMap<String, bool> = plain;
    fail_swap_on: bool = pointer;
    memory_swap: MemorySwapConfiguration = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    container_log_max_size: String = plain;
    container_log_max_files: i32 = pointer;
    #[serde(skip_serializing_if = "String::is_empty")]
    config_map_and_secret_change_detection_strategy: String = plain;
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    system_reserved: BTreeMap<String, String> = plain;
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    kube_reserved: BTreeMap<String, String> = plain;
    #[serde(rename = "reservedSystemCPUs", skip_serializing_if = "String::is_empty")]
    reserved_system_cpus: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    show_hidden_metrics_for_version: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    system_reserved_cgroup: String = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    kube_reserved_cgroup: String = plain;
    /// `[]` in the file means no enforcement; absent means `[pods]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    enforce_node_allocatable: Vec<String> = pointer;
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed_unsafe_sysctls: Vec<String> = plain;
    #[serde(skip_serializing_if = "String::is_empty")]
    volume_plugin_dir: String = plain;
    #[serde(rename = "providerID", skip_serializing_if = "String::is_empty")]
    provider_id: String = plain;
    #[serde(skip_serializing_if = "is_false")]
    kernel_memcg_notification: bool = plain;
    logging: LoggingConfiguration = plain;
    enable_system_log_handler: bool = pointer;
    shutdown_grace_period: Duration = plain;
    shutdown_grace_period_critical_pods: Duration = plain;
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shutdown_grace_period_by_pod_priority: Vec<ShutdownGracePeriodByPodPriority> = plain;
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reserved_memory: Vec<MemoryReservation> = plain;
    enable_profiling_handler: bool = pointer;
    enable_debug_flags_handler: bool = pointer;
    seccomp_default: bool = pointer;
    memory_throttling_factor: f64 = pointer;
    #[serde(skip_serializing_if = "Vec::is_empty")]
    register_with_taints: Vec<Taint> = plain;
    register_node: bool = pointer;
    #[serde(skip_serializing_if = "Option::is_none")]
    tracing: Option<TracingConfiguration> = plain;
    local_storage_capacity_isolation: bool = pointer;
}

/// How requests to the kubelet API are authenticated.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KubeletAuthentication {
    pub x509: KubeletX509Authentication,
    pub webhook: KubeletWebhookAuthentication,
    pub anonymous: KubeletAnonymousAuthentication,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct KubeletX509Authentication {
    /// Client certificates signed by this CA are accepted.
    #[serde(rename = "clientCAFile", skip_serializing_if = "String::is_empty")]
    pub client_ca_file: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletWebhookAuthentication {
    /// Bearer tokens are checked with TokenReview.
    pub enabled: bool,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KubeletAnonymousAuthentication {
    pub enabled: bool,
}

/// The file form of [`KubeletAuthentication`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct V1Beta1KubeletAuthentication {
    pub x509: KubeletX509Authentication,
    pub webhook: V1Beta1KubeletWebhookAuthentication,
    pub anonymous: V1Beta1KubeletAnonymousAuthentication,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct V1Beta1KubeletWebhookAuthentication {
    pub enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct V1Beta1KubeletAnonymousAuthentication {
    pub enabled: Option<bool>,
}

impl Versioned for KubeletAuthentication {
    type V1Beta1 = V1Beta1KubeletAuthentication;

    fn from_v1beta1(v: Self::V1Beta1) -> Self {
        KubeletAuthentication {
            x509: v.x509,
            webhook: KubeletWebhookAuthentication {
                enabled: v.webhook.enabled.unwrap_or_default(),
                cache_ttl: v.webhook.cache_ttl,
            },
            anonymous: KubeletAnonymousAuthentication {
                enabled: v.anonymous.enabled.unwrap_or_default(),
            },
        }
    }
}

/// How requests to the kubelet API are authorised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KubeletAuthorization {
    /// `AlwaysAllow` or `Webhook`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mode: String,
    pub webhook: KubeletWebhookAuthorization,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KubeletWebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: Duration,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: Duration,
}

impl Versioned for KubeletAuthorization {
    type V1Beta1 = KubeletAuthorization;

    fn from_v1beta1(v: Self::V1Beta1) -> Self {
        v
    }
}

/// Authorization modes.
pub const AUTHORIZATION_MODE_ALWAYS_ALLOW: &str = "AlwaysAllow";
pub const AUTHORIZATION_MODE_WEBHOOK: &str = "Webhook";

/// How workloads may use swap (NodeSwap feature).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MemorySwapConfiguration {
    /// `""`, `LimitedSwap` or `UnlimitedSwap`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub swap_behavior: String,
}

/// Shutdown grace for pods at or above a priority.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ShutdownGracePeriodByPodPriority {
    pub priority: i32,
    pub shutdown_grace_period_seconds: i64,
}

/// Memory reserved on one NUMA node (memory manager).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryReservation {
    pub numa_node: i32,
    /// Resource name (`memory`, `hugepages-<size>`) → quantity.
    #[serde(with = "super::quantity_serde::map")]
    pub limits: BTreeMap<String, Quantity>,
}

/// Where the kubelet sends its traces (KubeletTracing feature).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TracingConfiguration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling_rate_per_million: Option<i32>,
}

impl KubeletConfiguration {
    /// The v1beta1 defaults: what a file that sets nothing gives.
    pub fn v1beta1_defaults() -> Self {
        let mut v = V1Beta1KubeletConfiguration::default();
        super::defaults::set_defaults(&mut v);
        v.into()
    }

    /// The baseline before any flag is read when no `--config` is given:
    /// the v1beta1 defaults with the legacy command-line defaults on top
    /// (anonymous auth on, webhook authentication off, `AlwaysAllow`,
    /// read-only port 10255).
    pub fn legacy_flag_defaults() -> Self {
        let mut c = Self::v1beta1_defaults();
        super::defaults::apply_legacy_defaults(&mut c);
        c
    }

    /// The configuration as /configz shows it (the v1beta1 JSON form).
    pub fn to_configz_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The fields that hold filesystem paths, which a configuration file may
    /// give relative to its own directory.
    pub fn path_refs_mut(&mut self) -> [&mut String; 6] {
        [
            &mut self.static_pod_path,
            &mut self.authentication.x509.client_ca_file,
            &mut self.tls_cert_file,
            &mut self.tls_private_key_file,
            &mut self.resolver_config,
            &mut self.volume_plugin_dir,
        ]
    }
}
