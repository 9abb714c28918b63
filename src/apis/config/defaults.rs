//! Defaulting of the file form, field by field as the v1.25 line's
//! SetDefaults_KubeletConfiguration does it, and the legacy command-line
//! defaults that apply when no configuration file is given.

use std::collections::BTreeMap;

use super::duration::Duration;
use super::types::{
    AUTHORIZATION_MODE_ALWAYS_ALLOW, AUTHORIZATION_MODE_WEBHOOK, KubeletConfiguration,
    V1Beta1KubeletConfiguration,
};

/// The kubelet API port.
pub const KUBELET_PORT: i32 = 10250;
/// The read-only port, on by default only without a configuration file.
pub const KUBELET_READ_ONLY_PORT: i32 = 10255;
/// The kubelet's own OOM score adjustment.
pub const KUBELET_OOM_SCORE_ADJ: i32 = -999;
pub const DEFAULT_IPTABLES_MASQUERADE_BIT: i32 = 14;
pub const DEFAULT_IPTABLES_DROP_BIT: i32 = 15;
pub const DEFAULT_VOLUME_PLUGIN_DIR: &str = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/";
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";
pub const DEFAULT_MEMORY_THROTTLING_FACTOR: f64 = 0.8;

/// The hard eviction thresholds used when none are configured.
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    [
        ("memory.available", "100Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
        ("imagefs.available", "15%"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn or_default<T>(slot: &mut Option<T>, value: T) {
    if slot.is_none() {
        *slot = Some(value);
    }
}

fn zero_or(slot: &mut Duration, value: Duration) {
    if slot.is_zero() {
        *slot = value;
    }
}

fn empty_or(slot: &mut String, value: &str) {
    if slot.is_empty() {
        *slot = value.to_string();
    }
}

fn zero_i32_or(slot: &mut i32, value: i32) {
    if *slot == 0 {
        *slot = value;
    }
}

/// Fills in every field the file left unset.
pub fn set_defaults(obj: &mut V1Beta1KubeletConfiguration) {
    or_default(&mut obj.enable_server, true);
    zero_or(&mut obj.sync_frequency, Duration::from_mins(1));
    zero_or(&mut obj.file_check_frequency, Duration::from_secs(20));
    zero_or(&mut obj.http_check_frequency, Duration::from_secs(20));
    empty_or(&mut obj.address, "0.0.0.0");
    zero_i32_or(&mut obj.port, KUBELET_PORT);
    or_default(&mut obj.authentication.anonymous.enabled, false);
    or_default(&mut obj.authentication.webhook.enabled, true);
    zero_or(
        &mut obj.authentication.webhook.cache_ttl,
        Duration::from_mins(2),
    );
    empty_or(&mut obj.authorization.mode, AUTHORIZATION_MODE_WEBHOOK);
    zero_or(
        &mut obj.authorization.webhook.cache_authorized_ttl,
        Duration::from_mins(5),
    );
    zero_or(
        &mut obj.authorization.webhook.cache_unauthorized_ttl,
        Duration::from_secs(30),
    );
    or_default(&mut obj.registry_pull_qps, 5);
    zero_i32_or(&mut obj.registry_burst, 10);
    or_default(&mut obj.event_record_qps, 5);
    zero_i32_or(&mut obj.event_burst, 10);
    or_default(&mut obj.enable_debugging_handlers, true);
    or_default(&mut obj.healthz_port, 10248);
    empty_or(&mut obj.healthz_bind_address, "127.0.0.1");
    or_default(&mut obj.oom_score_adj, KUBELET_OOM_SCORE_ADJ);
    zero_or(
        &mut obj.streaming_connection_idle_timeout,
        Duration::from_hours(4),
    );
    if obj.node_status_report_frequency.is_zero() {
        // An explicitly set update frequency doubles as the report frequency.
        obj.node_status_report_frequency = if obj.node_status_update_frequency.is_zero() {
            Duration::from_mins(5)
        } else {
            obj.node_status_update_frequency
        };
    }
    zero_or(
        &mut obj.node_status_update_frequency,
        Duration::from_secs(10),
    );
    zero_i32_or(&mut obj.node_lease_duration_seconds, 40);
    zero_or(&mut obj.image_minimum_gc_age, Duration::from_mins(2));
    or_default(&mut obj.image_gc_high_threshold_percent, 85);
    or_default(&mut obj.image_gc_low_threshold_percent, 80);
    zero_or(&mut obj.volume_stats_agg_period, Duration::from_mins(1));
    or_default(&mut obj.cgroups_per_qos, true);
    empty_or(&mut obj.cgroup_driver, "cgroupfs");
    empty_or(&mut obj.cpu_manager_policy, "none");
    zero_or(
        &mut obj.cpu_manager_reconcile_period,
        Duration::from_secs(10),
    );
    empty_or(&mut obj.memory_manager_policy, "None");
    empty_or(&mut obj.topology_manager_policy, "none");
    empty_or(&mut obj.topology_manager_scope, "container");
    zero_or(&mut obj.runtime_request_timeout, Duration::from_mins(2));
    empty_or(&mut obj.hairpin_mode, "promiscuous-bridge");
    zero_i32_or(&mut obj.max_pods, 110);
    // A negative limit means "the node's allocatable pid count", spelt -1.
    if obj.pod_pids_limit.is_none_or(|v| v < 0) {
        obj.pod_pids_limit = Some(-1);
    }
    or_default(&mut obj.resolver_config, DEFAULT_RESOLV_CONF.to_string());
    or_default(&mut obj.cpu_cfs_quota, true);
    or_default(&mut obj.cpu_cfs_quota_period, Duration::from_millis(100));
    or_default(&mut obj.node_status_max_images, 50);
    if obj.max_open_files == 0 {
        obj.max_open_files = 1_000_000;
    }
    empty_or(&mut obj.content_type, "application/vnd.kubernetes.protobuf");
    or_default(&mut obj.kube_api_qps, 5);
    zero_i32_or(&mut obj.kube_api_burst, 10);
    or_default(&mut obj.serialize_image_pulls, true);
    or_default(&mut obj.eviction_hard, default_eviction_hard());
    zero_or(
        &mut obj.eviction_pressure_transition_period,
        Duration::from_mins(5),
    );
    or_default(&mut obj.enable_controller_attach_detach, true);
    or_default(&mut obj.make_iptables_util_chains, true);
    or_default(
        &mut obj.iptables_masquerade_bit,
        DEFAULT_IPTABLES_MASQUERADE_BIT,
    );
    or_default(&mut obj.iptables_drop_bit, DEFAULT_IPTABLES_DROP_BIT);
    or_default(&mut obj.fail_swap_on, true);
    empty_or(&mut obj.container_log_max_size, "10Mi");
    or_default(&mut obj.container_log_max_files, 5);
    empty_or(
        &mut obj.config_map_and_secret_change_detection_strategy,
        "Watch",
    );
    or_default(&mut obj.enforce_node_allocatable, vec!["pods".to_string()]);
    empty_or(&mut obj.volume_plugin_dir, DEFAULT_VOLUME_PLUGIN_DIR);
    obj.logging.set_recommended();
    or_default(&mut obj.enable_system_log_handler, true);
    or_default(&mut obj.enable_profiling_handler, true);
    or_default(&mut obj.enable_debug_flags_handler, true);
    or_default(&mut obj.seccomp_default, false);
    or_default(
        &mut obj.memory_throttling_factor,
        DEFAULT_MEMORY_THROTTLING_FACTOR,
    );
    or_default(&mut obj.register_node, true);
    or_default(&mut obj.local_storage_capacity_isolation, true);
}

/// The command line's historical defaults, kept for kubelets started
/// without a configuration file.
pub fn apply_legacy_defaults(c: &mut KubeletConfiguration) {
    c.authentication.anonymous.enabled = true;
    c.authentication.webhook.enabled = false;
    c.authorization.mode = AUTHORIZATION_MODE_ALWAYS_ALLOW.to_string();
    c.read_only_port = KUBELET_READ_ONLY_PORT;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_frequency_follows_an_explicit_update_frequency() {
        let cases = [
            (
                Duration::ZERO,
                Duration::ZERO,
                Duration::from_secs(10),
                Duration::from_mins(5),
            ),
            (
                Duration::from_secs(20),
                Duration::ZERO,
                Duration::from_secs(20),
                Duration::from_secs(20),
            ),
            (
                Duration::from_secs(20),
                Duration::from_mins(1),
                Duration::from_secs(20),
                Duration::from_mins(1),
            ),
        ];
        for (update, report, want_update, want_report) in cases {
            let mut v = V1Beta1KubeletConfiguration {
                node_status_update_frequency: update,
                node_status_report_frequency: report,
                ..Default::default()
            };
            set_defaults(&mut v);
            assert_eq!(v.node_status_update_frequency, want_update);
            assert_eq!(v.node_status_report_frequency, want_report);
        }
    }

    #[test]
    fn explicit_zero_and_empty_survive_where_go_keeps_them() {
        let mut v = V1Beta1KubeletConfiguration {
            healthz_port: Some(0),
            registry_pull_qps: Some(0),
            eviction_hard: Some(BTreeMap::new()),
            enforce_node_allocatable: Some(Vec::new()),
            pod_pids_limit: Some(-5),
            port: 0,
            ..Default::default()
        };
        set_defaults(&mut v);
        let c: KubeletConfiguration = v.into();
        assert_eq!(c.healthz_port, 0);
        assert_eq!(c.registry_pull_qps, 0);
        assert!(c.eviction_hard.is_empty());
        assert!(c.enforce_node_allocatable.is_empty());
        assert_eq!(c.pod_pids_limit, -1);
        assert_eq!(c.port, KUBELET_PORT, "a zero plain field is defaulted");
    }

    #[test]
    fn legacy_defaults_differ_only_where_the_command_line_did() {
        let file = KubeletConfiguration::v1beta1_defaults();
        let flags = KubeletConfiguration::legacy_flag_defaults();
        assert_eq!(file.read_only_port, 0);
        assert_eq!(flags.read_only_port, 10255);
        assert!(flags.authentication.anonymous.enabled);
        assert!(!flags.authentication.webhook.enabled);
        assert_eq!(flags.authorization.mode, "AlwaysAllow");
        let mut back = flags.clone();
        back.authentication = file.authentication.clone();
        back.authorization = file.authorization.clone();
        back.read_only_port = 0;
        assert_eq!(back, file);
    }
}
