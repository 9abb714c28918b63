//! The kubelet's flag-only settings (node-specific, or fixed for a node's
//! life) as values; the flag table that parses them is `app::options`.

use std::collections::BTreeMap;

use crate::apis::config::duration::Duration;

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
