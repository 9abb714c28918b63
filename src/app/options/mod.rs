//! Command-line flags: [`KubeletFlags`] (settings that exist only as flags:
//! they are node-specific or cannot change over a node's life) and the
//! configuration fields that are also flags, all declared in one table
//! ([`table`]) and parsed with pflag's semantics ([`parse`]).

pub mod help;
pub mod labels;
pub mod parse;
pub mod table;
pub mod values;

use std::collections::BTreeMap;

use crate::apis::config::duration::Duration;
use crate::features::{self, FeatureGate};

pub use parse::{Occurrence, ParseError, parse_args};
pub use table::{Flag, Target, flag_table};
pub use values::VersionRequest;

/// The directory the kubelet keeps its state in unless `--root-dir` says otherwise.
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";
/// The sandbox image of the v1.25 line.
pub const DEFAULT_POD_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.8";
/// The CRI endpoint used unless `--container-runtime-endpoint` says otherwise.
pub const DEFAULT_RUNTIME_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// Flag-only settings of the kubelet.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletFlags {
    /// `--kubeconfig`; empty means standalone mode.
    pub kubeconfig: String,
    pub bootstrap_kubeconfig: String,
    /// Node name instead of the hostname (lower-cased by run()).
    pub hostname_override: String,
    /// One IP, or two comma-separated for dual-stack.
    pub node_ip: String,
    /// Always `remote` in the v1.25 line (deprecated flag).
    pub container_runtime: String,
    pub runtime_cgroups: String,
    /// The sandbox image, kept from image garbage collection.
    pub pod_infra_container_image: String,
    pub image_credential_provider_config: String,
    pub image_credential_provider_bin_dir: String,
    /// CRI runtime service endpoint (`unix:///…`).
    pub remote_runtime_endpoint: String,
    /// CRI image service endpoint; empty means the runtime endpoint.
    pub remote_image_endpoint: String,
    pub cert_directory: String,
    pub cloud_provider: String,
    pub cloud_config_file: String,
    pub root_directory: String,
    /// `--config`.
    pub kubelet_config_file: String,
    pub experimental_mounter_path: String,
    pub experimental_node_allocatable_ignore_eviction_threshold: bool,
    /// `--node-labels`, applied when the node registers.
    pub node_labels: BTreeMap<String, String>,
    pub lock_file_path: String,
    pub exit_on_lock_contention: bool,
    /// `--seccomp-default`; the effective setting is this or the
    /// configuration's `seccompDefault`.
    pub seccomp_default: bool,
    // Deprecated flags, still honoured.
    pub minimum_gc_age: Duration,
    pub max_per_pod_container_count: i32,
    pub max_container_count: i32,
    pub master_service_namespace: String,
    pub register_schedulable: bool,
    pub keep_terminated_pod_volumes: bool,
    /// Flags that libraries registered globally in the Go kubelet.
    pub globals: GlobalFlags,
}

/// Flags the Go kubelet inherited from cAdvisor and klog. All but
/// `--housekeeping-interval` are deprecated there and here.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalFlags {
    /// The in-tree Azure image credential provider's settings file.
    pub azure_container_registry_config: String,
    pub housekeeping_interval: Duration,
    pub global_housekeeping_interval: Duration,
    pub application_metrics_count_limit: i64,
    pub boot_id_file: String,
    pub container_hints: String,
    pub containerd: String,
    pub containerd_namespace: String,
    pub enable_load_reader: bool,
    pub event_storage_age_limit: String,
    pub event_storage_event_limit: String,
    pub log_cadvisor_usage: bool,
    pub machine_id_file: String,
    pub storage_driver_buffer_duration: Duration,
    pub storage_driver_db: String,
    pub storage_driver_host: String,
    pub storage_driver_password: String,
    pub storage_driver_secure: bool,
    pub storage_driver_table: String,
    pub storage_driver_user: String,
    pub klog: LegacyLogFlags,
}

/// klog's own flags (deprecated; a non-text log format refuses them).
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyLogFlags {
    pub add_dir_header: bool,
    pub alsologtostderr: bool,
    pub log_backtrace_at: String,
    pub log_dir: String,
    pub log_file: String,
    pub log_file_max_size: u64,
    pub logtostderr: bool,
    pub one_output: bool,
    pub skip_headers: bool,
    pub skip_log_headers: bool,
    pub stderrthreshold: String,
}

impl Default for LegacyLogFlags {
    fn default() -> Self {
        LegacyLogFlags {
            add_dir_header: false,
            alsologtostderr: false,
            log_backtrace_at: ":0".into(),
            log_dir: String::new(),
            log_file: String::new(),
            log_file_max_size: 1800,
            logtostderr: true,
            one_output: false,
            skip_headers: false,
            skip_log_headers: false,
            stderrthreshold: "2".into(),
        }
    }
}

impl Default for GlobalFlags {
    fn default() -> Self {
        GlobalFlags {
            azure_container_registry_config: String::new(),
            housekeeping_interval: Duration::from_secs(10),
            global_housekeeping_interval: Duration::from_mins(1),
            application_metrics_count_limit: 100,
            boot_id_file: "/proc/sys/kernel/random/boot_id".into(),
            container_hints: "/etc/cadvisor/container_hints.json".into(),
            containerd: "/run/containerd/containerd.sock".into(),
            containerd_namespace: "k8s.io".into(),
            enable_load_reader: false,
            event_storage_age_limit: "default=0".into(),
            event_storage_event_limit: "default=0".into(),
            log_cadvisor_usage: false,
            machine_id_file: "/etc/machine-id,/var/lib/dbus/machine-id".into(),
            storage_driver_buffer_duration: Duration::from_mins(1),
            storage_driver_db: "cadvisor".into(),
            storage_driver_host: "localhost:8086".into(),
            storage_driver_password: "root".into(),
            storage_driver_secure: false,
            storage_driver_table: "stats".into(),
            storage_driver_user: "root".into(),
            klog: LegacyLogFlags::default(),
        }
    }
}

impl Default for KubeletFlags {
    fn default() -> Self {
        KubeletFlags {
            kubeconfig: String::new(),
            bootstrap_kubeconfig: String::new(),
            hostname_override: String::new(),
            node_ip: String::new(),
            container_runtime: "remote".into(),
            runtime_cgroups: String::new(),
            pod_infra_container_image: DEFAULT_POD_SANDBOX_IMAGE.into(),
            image_credential_provider_config: String::new(),
            image_credential_provider_bin_dir: String::new(),
            remote_runtime_endpoint: DEFAULT_RUNTIME_ENDPOINT.into(),
            remote_image_endpoint: String::new(),
            cert_directory: "/var/lib/kubelet/pki".into(),
            cloud_provider: String::new(),
            cloud_config_file: String::new(),
            root_directory: DEFAULT_ROOT_DIR.into(),
            kubelet_config_file: String::new(),
            experimental_mounter_path: String::new(),
            experimental_node_allocatable_ignore_eviction_threshold: false,
            node_labels: BTreeMap::new(),
            lock_file_path: String::new(),
            exit_on_lock_contention: false,
            seccomp_default: false,
            minimum_gc_age: Duration::ZERO,
            max_per_pod_container_count: 1,
            max_container_count: -1,
            master_service_namespace: "default".into(),
            register_schedulable: true,
            keep_terminated_pod_volumes: false,
            globals: GlobalFlags::default(),
        }
    }
}

/// `--help` and `--version`, which stop the command before it does anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandFlags {
    pub help: bool,
    pub version: VersionRequest,
}

/// Flag values that failed ValidateKubeletFlags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagValidationError(pub String);

/// The v1.25 line's ValidateKubeletFlags: node labels must be well formed,
/// reserved-namespace labels must be ones a kubelet may set, and
/// `--seccomp-default` needs its feature gate.
pub fn validate_kubelet_flags(
    f: &KubeletFlags,
    gate: &FeatureGate,
) -> Result<(), FlagValidationError> {
    let mut unknown: Vec<&str> = Vec::new();
    let mut invalid: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (k, v) in &f.node_labels {
        if labels::is_kubernetes_label(k) && !labels::is_kubelet_label(k) {
            unknown.push(k);
        }
        if let Err(e) = labels::is_qualified_name(k) {
            invalid.entry(k).or_default().push(e.to_string());
        }
        if let Err(e) = labels::is_valid_label_value(v) {
            invalid.entry(v).or_default().push(e.to_string());
        }
    }
    if !unknown.is_empty() {
        return Err(FlagValidationError(format!(
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) or be in the specifically allowed set ({})",
            unknown.join(" "),
            labels::KUBELET_LABEL_NAMESPACES.join(", "),
            labels::KUBELET_LABELS.join(", ")
        )));
    }
    if !invalid.is_empty() {
        let parts: Vec<String> = invalid
            .iter()
            .map(|(k, errs)| format!("'{k}' - {}", errs.join(", ")))
            .collect();
        return Err(FlagValidationError(format!(
            "invalid node labels: {}",
            parts.join("; ")
        )));
    }
    if f.seccomp_default && !gate.enabled(features::SECCOMP_DEFAULT) {
        return Err(FlagValidationError(format!(
            "--seccomp-default needs the {} feature gate",
            features::SECCOMP_DEFAULT
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_validation_table() {
        let mut seccomp_off = FeatureGate::new();
        seccomp_off
            .set_from_map(
                &[("SeccompDefault".to_string(), false)]
                    .into_iter()
                    .collect(),
            )
            .unwrap();
        let defaults = FeatureGate::default();
        type Mutate = fn(&mut KubeletFlags);
        let cases: Vec<(&str, Mutate, &FeatureGate, Option<&str>)> = vec![
            ("defaults", |_| {}, &defaults, None),
            (
                "allowed labels",
                |f| {
                    f.node_labels
                        .insert("node.kubernetes.io/pool".into(), "a".into());
                    f.node_labels.insert("example.com/team".into(), "b".into());
                },
                &defaults,
                None,
            ),
            (
                "reserved label",
                |f| {
                    f.node_labels
                        .insert("node-role.kubernetes.io/master".into(), "".into());
                },
                &defaults,
                Some(
                    "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/master]",
                ),
            ),
            (
                "bad key",
                |f| {
                    f.node_labels.insert("bad key".into(), "v".into());
                },
                &defaults,
                Some("invalid node labels: 'bad key'"),
            ),
            (
                "bad value",
                |f| {
                    f.node_labels.insert("k".into(), "-v".into());
                },
                &defaults,
                Some("invalid node labels: '-v'"),
            ),
            (
                "seccomp default without its gate",
                |f| f.seccomp_default = true,
                &seccomp_off,
                Some("--seccomp-default needs the SeccompDefault feature gate"),
            ),
        ];
        for (name, mutate, gate, want) in cases {
            let mut f = KubeletFlags::default();
            mutate(&mut f);
            match (validate_kubelet_flags(&f, gate), want) {
                (Ok(()), None) => {}
                (Err(e), Some(prefix)) => assert!(e.0.starts_with(prefix), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
