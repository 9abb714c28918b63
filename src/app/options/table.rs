//! The one flag table: every flag of the v1.25 kubelet with its value kind,
//! where it writes, its deprecation and its help text. Parsing, help,
//! precedence over the configuration file and the `FLAG:` log all read it.

use std::sync::LazyLock;

use super::values::{self, FlagValue};
use super::{CommandFlags, KubeletFlags};
use crate::apis::config::types::KubeletConfiguration;

/// Where a flag's value goes.
pub enum Target {
    /// A [`KubeletFlags`] field.
    Flags {
        set: fn(&mut KubeletFlags, &str, bool) -> Result<(), String>,
        get: fn(&KubeletFlags) -> String,
    },
    /// A configuration field: re-applied over a `--config` file.
    Config {
        set: fn(&mut KubeletConfiguration, &str, bool) -> Result<(), String>,
        get: fn(&KubeletConfiguration) -> String,
    },
    /// `--help`, `--version`.
    Command {
        set: fn(&mut CommandFlags, &str, bool) -> Result<(), String>,
        get: fn(&CommandFlags) -> String,
    },
}

/// One flag.
pub struct Flag {
    pub name: &'static str,
    pub short: Option<char>,
    /// The value type as help names it.
    pub type_name: &'static str,
    /// What a bare `--flag` means (bool-like flags); `None`: a value is required.
    pub no_opt: Option<&'static str>,
    /// Why the flag is deprecated; it still works, with a warning.
    pub deprecated: Option<&'static str>,
    pub usage: &'static str,
    pub target: Target,
}

impl Flag {
    /// Whether the flag writes a configuration field.
    pub fn is_config(&self) -> bool {
        matches!(self.target, Target::Config { .. })
    }

    /// The type shown after the flag name in help: a word quoted with
    /// backquotes in the usage, else the type (with `[=default]` for
    /// optional-value flags that are not bool).
    pub fn help_type(&self) -> String {
        if let Some(start) = self.usage.find('`')
            && let Some(len) = self.usage[start + 1..].find('`')
        {
            return self.usage[start + 1..start + 1 + len].to_string();
        }
        match self.no_opt {
            Some(v) if self.type_name != "bool" => format!("{}[={v}]", self.type_name),
            _ => self.type_name.to_string(),
        }
    }
}

/// Deprecation of configuration fields that are also flags.
pub const CONFIG_FILE: &str = "set it in the file given by --config instead (see https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/)";
const CADVISOR: &str =
    "it came from cAdvisor by mistake and will be removed after the usual deprecation period";
const KLOG: &str = "klog's own flags will be removed in a future release (see https://github.com/kubernetes/enhancements/tree/master/keps/sig-instrumentation/2845-deprecate-klog-specific-flags-in-k8s-components)";
const EVICTION: &str =
    "use --eviction-hard or --eviction-soft instead; it will be removed in a future version";
const FUTURE: &str = "it will be removed in a future version";
const PRE_CSI: &str = "it will be removed in 1.25 or later, in favour of CSI";
const CLOUD: &str =
    "it will be removed in 1.25 or later, together with the in-tree cloud providers";

macro_rules! flag {
    ($target:ident, $name:literal, $short:expr, $kind:ident, $($field:ident).+, $dep:expr, $usage:literal) => {
        Flag {
            name: $name,
            short: $short,
            type_name: <values::$kind as FlagValue>::TYPE,
            no_opt: <values::$kind as FlagValue>::NO_OPT,
            deprecated: $dep,
            usage: $usage,
            target: Target::$target {
                set: |t, v, first| <values::$kind as FlagValue>::set(&mut t.$($field).+, v, first),
                get: |t| <values::$kind as FlagValue>::get(&t.$($field).+),
            },
        }
    };
}

/// A KubeletFlags field.
macro_rules! kf {
    ($name:literal, $kind:ident, $($field:ident).+, $dep:expr, $usage:literal) => {
        flag!(Flags, $name, None, $kind, $($field).+, $dep, $usage)
    };
}

/// A configuration field, deprecated as a flag.
macro_rules! cf {
    ($name:literal, $kind:ident, $($field:ident).+, $usage:literal) => {
        flag!(Config, $name, None, $kind, $($field).+, Some(CONFIG_FILE), $usage)
    };
}

static FLAGS: LazyLock<Vec<Flag>> = LazyLock::new(build);

/// The flag table.
pub fn flag_table() -> &'static [Flag] {
    &FLAGS
}

/// Looks a flag up by its (normalised) long name.
pub fn lookup(name: &str) -> Option<(usize, &'static Flag)> {
    flag_table()
        .iter()
        .enumerate()
        .find(|(_, f)| f.name == name)
}

/// Looks a flag up by its one-letter form.
pub fn lookup_short(c: char) -> Option<(usize, &'static Flag)> {
    flag_table()
        .iter()
        .enumerate()
        .find(|(_, f)| f.short == Some(c))
}

fn build() -> Vec<Flag> {
    vec![
        // Command.
        flag!(
            Command,
            "help",
            Some('h'),
            Bool,
            help,
            None,
            "Print this help and exit."
        ),
        flag!(
            Command,
            "version",
            None,
            Version,
            version,
            None,
            "Print the version and exit; --version=raw prints every build detail."
        ),
        // Flag-only settings.
        kf!(
            "config",
            Str,
            kubelet_config_file,
            None,
            "Load the initial configuration from this KubeletConfiguration file (absolute, or relative to the working directory). Flags given on the command line override the file. Without it, the built-in defaults and the flags apply."
        ),
        kf!(
            "kubeconfig",
            Str,
            kubeconfig,
            None,
            "Kubeconfig file that says how to reach the API server. Without it the kubelet runs standalone."
        ),
        kf!(
            "bootstrap-kubeconfig",
            Str,
            bootstrap_kubeconfig,
            None,
            "Kubeconfig used to obtain a client certificate when the --kubeconfig file does not exist yet; the new credentials are written to --kubeconfig, the key and certificate under --cert-dir."
        ),
        kf!(
            "hostname-override",
            Str,
            hostname_override,
            None,
            "Use this name for the node instead of the machine's hostname."
        ),
        kf!(
            "node-ip",
            Str,
            node_ip,
            None,
            "The node's IP address, or two comma-separated addresses for dual-stack. Unset: the default IPv4 address, else the default IPv6 one; '::' prefers IPv6."
        ),
        kf!(
            "cert-dir",
            Str,
            cert_directory,
            None,
            "Directory of the kubelet's TLS certificates; unused when --tls-cert-file and --tls-private-key-file are given."
        ),
        kf!(
            "root-dir",
            Str,
            root_directory,
            None,
            "Directory for the kubelet's own files (pod directories, volume mounts, plugins, checkpoints)."
        ),
        kf!(
            "seccomp-default",
            Bool,
            seccomp_default,
            None,
            "Run every workload with the `RuntimeDefault` seccomp profile unless it asks for another."
        ),
        kf!(
            "container-runtime-endpoint",
            Str,
            remote_runtime_endpoint,
            None,
            "CRI runtime service endpoint, e.g. 'unix:///run/containerd/containerd.sock'."
        ),
        kf!(
            "image-service-endpoint",
            Str,
            remote_image_endpoint,
            None,
            "CRI image service endpoint; unset means the runtime endpoint."
        ),
        kf!(
            "node-labels",
            ConfigMap,
            node_labels,
            None,
            "Labels to put on the node when it registers, as key=value pairs separated by ','. Labels in the kubernetes.io and k8s.io namespaces must be ones a kubelet may set (kubelet.kubernetes.io/, node.kubernetes.io/, or the well-known topology, OS, architecture, instance-type and hostname labels)."
        ),
        kf!(
            "lock-file",
            Str,
            lock_file_path,
            None,
            "<Warning: Alpha feature> File the kubelet locks so that only one kubelet runs at a time."
        ),
        kf!(
            "exit-on-lock-contention",
            Bool,
            exit_on_lock_contention,
            None,
            "Exit when another process wants the --lock-file."
        ),
        kf!(
            "container-runtime",
            Str,
            container_runtime,
            Some("it will be removed in 1.27, as 'remote' is the only valid value"),
            "The container runtime kind; only 'remote' (a CRI runtime) exists."
        ),
        kf!(
            "runtime-cgroups",
            Str,
            runtime_cgroups,
            None,
            "Absolute name of the cgroup the container runtime is moved into, if any."
        ),
        kf!(
            "pod-infra-container-image",
            Str,
            pod_infra_container_image,
            None,
            "The pod sandbox image, which image garbage collection never removes. The runtime has its own setting for the image it actually uses."
        ),
        kf!(
            "image-credential-provider-config",
            Str,
            image_credential_provider_config,
            None,
            "Configuration file of the image credential provider plugins."
        ),
        kf!(
            "image-credential-provider-bin-dir",
            Str,
            image_credential_provider_bin_dir,
            None,
            "Directory holding the image credential provider plugin binaries."
        ),
        kf!(
            "azure-container-registry-config",
            Str,
            globals.azure_container_registry_config,
            None,
            "Path to the file with Azure container registry settings (in-tree Azure credential provider)."
        ),
        kf!(
            "cloud-provider",
            Str,
            cloud_provider,
            Some(CLOUD),
            "Cloud provider in use: empty for none, 'external' for an external one."
        ),
        kf!(
            "cloud-config",
            Str,
            cloud_config_file,
            Some(CLOUD),
            "Cloud provider configuration file; empty for none."
        ),
        kf!(
            "minimum-container-ttl-duration",
            Dur,
            minimum_gc_age,
            Some(EVICTION),
            "How long a finished container is kept before garbage collection may remove it, e.g. '300ms', '10s', '2h45m'."
        ),
        kf!(
            "maximum-dead-containers-per-container",
            Int32,
            max_per_pod_container_count,
            Some(EVICTION),
            "How many dead instances of each container to keep."
        ),
        kf!(
            "maximum-dead-containers",
            Int32,
            max_container_count,
            Some(EVICTION),
            "How many dead containers to keep on the node in total; negative means no limit."
        ),
        kf!(
            "master-service-namespace",
            Str,
            master_service_namespace,
            Some(FUTURE),
            "Namespace whose master services are injected into pods."
        ),
        kf!(
            "register-schedulable",
            Bool,
            register_schedulable,
            Some(FUTURE),
            "Register the node as schedulable; no effect when --register-node is false."
        ),
        kf!(
            "keep-terminated-pod-volumes",
            Bool,
            keep_terminated_pod_volumes,
            Some(FUTURE),
            "Leave the volumes of terminated pods mounted, for debugging."
        ),
        kf!(
            "experimental-mounter-path",
            Str,
            experimental_mounter_path,
            Some(PRE_CSI),
            "[Experimental] Mount binary to use; empty means the default mount."
        ),
        kf!(
            "experimental-allocatable-ignore-eviction",
            Bool,
            experimental_node_allocatable_ignore_eviction_threshold,
            Some("it will be removed in 1.25 or later"),
            "Leave hard eviction thresholds out of the node allocatable computation."
        ),
        // cAdvisor's flags.
        kf!(
            "housekeeping-interval",
            Dur,
            globals.housekeeping_interval,
            None,
            "How often container statistics are collected."
        ),
        kf!(
            "global-housekeeping-interval",
            Dur,
            globals.global_housekeeping_interval,
            Some(CADVISOR),
            "How often machine-wide housekeeping runs."
        ),
        kf!(
            "application-metrics-count-limit",
            Int,
            globals.application_metrics_count_limit,
            Some(CADVISOR),
            "Most application metrics stored per container."
        ),
        kf!(
            "boot-id-file",
            Str,
            globals.boot_id_file,
            Some(CADVISOR),
            "Comma-separated files to read the boot id from; the first that exists wins."
        ),
        kf!(
            "container-hints",
            Str,
            globals.container_hints,
            Some(CADVISOR),
            "File with container hints."
        ),
        kf!(
            "containerd",
            Str,
            globals.containerd,
            Some(CADVISOR),
            "containerd endpoint."
        ),
        kf!(
            "containerd-namespace",
            Str,
            globals.containerd_namespace,
            Some(CADVISOR),
            "containerd namespace."
        ),
        kf!(
            "enable-load-reader",
            Bool,
            globals.enable_load_reader,
            Some(CADVISOR),
            "Read CPU load."
        ),
        kf!(
            "event-storage-age-limit",
            Str,
            globals.event_storage_age_limit,
            Some(CADVISOR),
            "How long to keep events, per event type: type=duration pairs separated by commas, 'default' for all others."
        ),
        kf!(
            "event-storage-event-limit",
            Str,
            globals.event_storage_event_limit,
            Some(CADVISOR),
            "How many events to keep, per event type: type=count pairs separated by commas, 'default' for all others."
        ),
        kf!(
            "log-cadvisor-usage",
            Bool,
            globals.log_cadvisor_usage,
            Some(CADVISOR),
            "Log the usage of the statistics collector itself."
        ),
        kf!(
            "machine-id-file",
            Str,
            globals.machine_id_file,
            Some(CADVISOR),
            "Comma-separated files to read the machine id from; the first that exists wins."
        ),
        kf!(
            "storage-driver-buffer-duration",
            Dur,
            globals.storage_driver_buffer_duration,
            Some(CADVISOR),
            "How long writes to the storage driver are buffered."
        ),
        kf!(
            "storage-driver-db",
            Str,
            globals.storage_driver_db,
            Some(CADVISOR),
            "Storage driver database name."
        ),
        kf!(
            "storage-driver-host",
            Str,
            globals.storage_driver_host,
            Some(CADVISOR),
            "Storage driver database host:port."
        ),
        kf!(
            "storage-driver-password",
            Str,
            globals.storage_driver_password,
            Some(CADVISOR),
            "Storage driver database password."
        ),
        kf!(
            "storage-driver-secure",
            Bool,
            globals.storage_driver_secure,
            Some(CADVISOR),
            "Talk to the storage driver database over a secure connection."
        ),
        kf!(
            "storage-driver-table",
            Str,
            globals.storage_driver_table,
            Some(CADVISOR),
            "Storage driver table name."
        ),
        kf!(
            "storage-driver-user",
            Str,
            globals.storage_driver_user,
            Some(CADVISOR),
            "Storage driver database user name."
        ),
        // klog's flags.
        kf!(
            "add-dir-header",
            Bool,
            globals.klog.add_dir_header,
            Some(KLOG),
            "Put the source file's directory in log headers."
        ),
        kf!(
            "alsologtostderr",
            Bool,
            globals.klog.alsologtostderr,
            Some(KLOG),
            "Log to standard error as well as to files."
        ),
        kf!(
            "log-backtrace-at",
            TraceLocation,
            globals.klog.log_backtrace_at,
            Some(KLOG),
            "Emit a stack trace when logging reaches this file:line."
        ),
        kf!(
            "log-dir",
            Str,
            globals.klog.log_dir,
            Some(KLOG),
            "Write log files in this directory."
        ),
        kf!(
            "log-file",
            Str,
            globals.klog.log_file,
            Some(KLOG),
            "Write logs to this file."
        ),
        kf!(
            "log-file-max-size",
            Uint,
            globals.klog.log_file_max_size,
            Some(KLOG),
            "Largest size of a log file in megabytes; 0 means unlimited."
        ),
        kf!(
            "logtostderr",
            Bool,
            globals.klog.logtostderr,
            Some(KLOG),
            "Log to standard error instead of files."
        ),
        kf!(
            "one-output",
            Bool,
            globals.klog.one_output,
            Some(KLOG),
            "Write each entry only to its own severity's log."
        ),
        kf!(
            "skip-headers",
            Bool,
            globals.klog.skip_headers,
            Some(KLOG),
            "Leave the header off log lines."
        ),
        kf!(
            "skip-log-headers",
            Bool,
            globals.klog.skip_log_headers,
            Some(KLOG),
            "Leave headers out of log files."
        ),
        kf!(
            "stderrthreshold",
            Severity,
            globals.klog.stderrthreshold,
            Some(KLOG),
            "Entries at or above this severity also go to standard error."
        ),
        // Configuration fields.
        cf!(
            "enable-server",
            Bool,
            enable_server,
            "Serve the kubelet API."
        ),
        cf!(
            "fail-swap-on",
            Bool,
            fail_swap_on,
            "Refuse to start when swap is on."
        ),
        cf!(
            "pod-manifest-path",
            Str,
            static_pod_path,
            "Directory of static pod manifests, or a single manifest file; dot-files are ignored."
        ),
        cf!(
            "sync-frequency",
            Dur,
            sync_frequency,
            "Longest time between two syncs of running containers with their configuration."
        ),
        cf!(
            "file-check-frequency",
            Dur,
            file_check_frequency,
            "How often static pod files are read again."
        ),
        cf!(
            "http-check-frequency",
            Dur,
            http_check_frequency,
            "How often the static pod URL is fetched again."
        ),
        cf!(
            "manifest-url",
            Str,
            static_pod_url,
            "URL serving more static pod manifests."
        ),
        cf!(
            "manifest-url-header",
            ColonMultimap,
            static_pod_url_header,
            "HTTP headers for --manifest-url as 'name:value' pairs separated by commas; repeat the flag or a name to send several values, e.g. --manifest-url-header 'a:hello,b:again,c:world' --manifest-url-header 'b:beautiful'."
        ),
        cf!(
            "address",
            Ip,
            address,
            "Address the kubelet API listens on ('0.0.0.0' or '::' for every interface)."
        ),
        cf!("port", Int32, port, "Port of the kubelet API."),
        cf!(
            "read-only-port",
            Int32,
            read_only_port,
            "Port of the unauthenticated read-only API; 0 turns it off."
        ),
        cf!(
            "anonymous-auth",
            Bool,
            authentication.anonymous.enabled,
            "Treat requests no authenticator claimed as system:anonymous in group system:unauthenticated."
        ),
        cf!(
            "authentication-token-webhook",
            Bool,
            authentication.webhook.enabled,
            "Check bearer tokens with the TokenReview API."
        ),
        cf!(
            "authentication-token-webhook-cache-ttl",
            Dur,
            authentication.webhook.cache_ttl,
            "How long token review answers are cached."
        ),
        cf!(
            "client-ca-file",
            Str,
            authentication.x509.client_ca_file,
            "Accept client certificates signed by a CA in this file; the certificate's CommonName is the user."
        ),
        cf!(
            "authorization-mode",
            Str,
            authorization.mode,
            "How API requests are authorised: AlwaysAllow, or Webhook (SubjectAccessReview)."
        ),
        cf!(
            "authorization-webhook-cache-authorized-ttl",
            Dur,
            authorization.webhook.cache_authorized_ttl,
            "How long 'allowed' answers of the authorisation webhook are cached."
        ),
        cf!(
            "authorization-webhook-cache-unauthorized-ttl",
            Dur,
            authorization.webhook.cache_unauthorized_ttl,
            "How long 'denied' answers of the authorisation webhook are cached."
        ),
        cf!(
            "tls-cert-file",
            Str,
            tls_cert_file,
            "Serving certificate (intermediates appended). Without it and --tls-private-key-file, a self-signed pair is created in --cert-dir."
        ),
        cf!(
            "tls-private-key-file",
            Str,
            tls_private_key_file,
            "Private key of --tls-cert-file."
        ),
        cf!(
            "rotate-server-certificates",
            Bool,
            server_tls_bootstrap,
            "Request serving certificates from the API server and renew them before they expire (needs the RotateKubeletServerCertificate gate and approval of the CSRs)."
        ),
        cf!(
            "tls-cipher-suites",
            Strings,
            tls_cipher_suites,
            "Cipher suites the server allows, comma-separated; unset means the TLS library's defaults."
        ),
        cf!(
            "tls-min-version",
            Str,
            tls_min_version,
            "Lowest TLS version accepted: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13."
        ),
        cf!(
            "rotate-certificates",
            Bool,
            rotate_certificates,
            "Renew the client certificate from the API server before it expires."
        ),
        cf!(
            "registry-qps",
            Int32,
            registry_pull_qps,
            "Image pulls per second allowed (0: no limit)."
        ),
        cf!(
            "registry-burst",
            Int32,
            registry_burst,
            "Burst of image pulls allowed above --registry-qps."
        ),
        cf!(
            "event-qps",
            Int32,
            event_record_qps,
            "Events created per second allowed (0: no limit)."
        ),
        cf!(
            "event-burst",
            Int32,
            event_burst,
            "Burst of events allowed above --event-qps."
        ),
        cf!(
            "enable-debugging-handlers",
            Bool,
            enable_debugging_handlers,
            "Serve the log, exec, attach, port-forward and run endpoints."
        ),
        cf!(
            "contention-profiling",
            Bool,
            enable_contention_profiling,
            "Profile lock contention when profiling is on."
        ),
        cf!(
            "healthz-port",
            Int32,
            healthz_port,
            "Port of the local healthz endpoint; 0 turns it off."
        ),
        cf!(
            "healthz-bind-address",
            Ip,
            healthz_bind_address,
            "Address the healthz endpoint listens on ('0.0.0.0' or '::' for every interface)."
        ),
        cf!(
            "oom-score-adj",
            Int32,
            oom_score_adj,
            "OOM score adjustment of the kubelet process, in [-1000, 1000]."
        ),
        cf!(
            "cluster-domain",
            Str,
            cluster_domain,
            "Cluster DNS domain, added to containers' search domains."
        ),
        cf!(
            "volume-plugin-dir",
            Str,
            volume_plugin_dir,
            "Directory searched for third-party (flex) volume plugins."
        ),
        cf!(
            "cluster-dns",
            Strings,
            cluster_dns,
            "DNS server addresses for pods with dnsPolicy ClusterFirst, comma-separated; every server must answer the same records."
        ),
        cf!(
            "streaming-connection-idle-timeout",
            Dur,
            streaming_connection_idle_timeout,
            "Idle time after which exec/attach/port-forward connections close; 0 means never."
        ),
        cf!(
            "node-status-update-frequency",
            Dur,
            node_status_update_frequency,
            "How often node status is computed and, when it changed, posted."
        ),
        cf!(
            "minimum-image-ttl-duration",
            Dur,
            image_minimum_gc_age,
            "How long an unused image is kept before garbage collection may remove it."
        ),
        cf!(
            "image-gc-high-threshold",
            Int32,
            image_gc_high_threshold_percent,
            "Disk usage percentage at which image garbage collection always runs; 100 disables it."
        ),
        cf!(
            "image-gc-low-threshold",
            Int32,
            image_gc_low_threshold_percent,
            "Disk usage percentage image garbage collection frees down to; below --image-gc-high-threshold."
        ),
        cf!(
            "volume-stats-agg-period",
            Dur,
            volume_stats_agg_period,
            "How often volume disk usage is computed; 0 or negative disables it."
        ),
        cf!(
            "feature-gates",
            MapSB,
            feature_gates,
            "Feature gates to switch, as Name=true|false pairs separated by commas."
        ),
        cf!(
            "kubelet-cgroups",
            Str,
            kubelet_cgroups,
            "Absolute name of the cgroup the kubelet runs in."
        ),
        cf!(
            "system-cgroups",
            Str,
            system_cgroups,
            "Absolute name of the cgroup for non-kernel processes not yet in a cgroup under '/'; needs --cgroup-root."
        ),
        cf!(
            "provider-id",
            Str,
            provider_id,
            "The node's identity in the machine database (its cloud provider id)."
        ),
        cf!(
            "cgroups-per-qos",
            Bool,
            cgroups_per_qos,
            "Create the QoS class and pod cgroup hierarchy."
        ),
        cf!(
            "cgroup-driver",
            Str,
            cgroup_driver,
            "How the kubelet manages cgroups: 'cgroupfs' or 'systemd'."
        ),
        cf!(
            "cgroup-root",
            Str,
            cgroup_root,
            "Root cgroup for pods; empty means the runtime's default."
        ),
        cf!(
            "cpu-manager-policy",
            Str,
            cpu_manager_policy,
            "CPU manager policy: 'none' or 'static'."
        ),
        cf!(
            "cpu-manager-policy-options",
            MapSSNoSplit,
            cpu_manager_policy_options,
            "CPU manager policy options as key=value pairs."
        ),
        cf!(
            "cpu-manager-reconcile-period",
            Dur,
            cpu_manager_reconcile_period,
            "<Warning: Alpha feature> How often the CPU manager reconciles CPU assignments."
        ),
        cf!(
            "qos-reserved",
            MapSS,
            qos_reserved,
            "<Warning: Alpha feature> Percentage of requests reserved per QoS level, e.g. memory=50% (needs the QOSReserved gate)."
        ),
        cf!(
            "topology-manager-policy",
            Str,
            topology_manager_policy,
            "Topology manager policy: 'none', 'best-effort', 'restricted' or 'single-numa-node'."
        ),
        cf!(
            "runtime-request-timeout",
            Dur,
            runtime_request_timeout,
            "Timeout of runtime calls other than the long-running pull, logs, exec and attach."
        ),
        cf!(
            "hairpin-mode",
            Str,
            hairpin_mode,
            "How hairpin NAT is set up: 'promiscuous-bridge', 'hairpin-veth' or 'none'."
        ),
        cf!("max-pods", Int32, max_pods, "Most pods this kubelet runs."),
        cf!(
            "pod-cidr",
            Str,
            pod_cidr,
            "Pod address range in standalone mode; in a cluster the control plane assigns it."
        ),
        cf!(
            "pod-max-pids",
            Int,
            pod_pids_limit,
            "Most processes per pod; -1 means the node's allocatable pid count."
        ),
        cf!(
            "resolv-conf",
            Str,
            resolver_config,
            "Resolver configuration that container DNS settings start from."
        ),
        cf!(
            "runonce",
            Bool,
            run_once,
            "Start the pods of the static sources once and exit; excludes --enable-server."
        ),
        cf!(
            "cpu-cfs-quota",
            Bool,
            cpu_cfs_quota,
            "Enforce CPU limits with CFS quota."
        ),
        cf!(
            "cpu-cfs-quota-period",
            Dur,
            cpu_cfs_quota_period,
            "CFS quota period (cpu.cfs_period_us); other than 100ms needs the CustomCPUCFSQuotaPeriod gate."
        ),
        cf!(
            "enable-controller-attach-detach",
            Bool,
            enable_controller_attach_detach,
            "Leave volume attach/detach for this node to the attach/detach controller."
        ),
        cf!(
            "make-iptables-util-chains",
            Bool,
            make_iptables_util_chains,
            "Keep the iptables utility chains in place."
        ),
        cf!(
            "iptables-masquerade-bit",
            Int32,
            iptables_masquerade_bit,
            "Bit of the fwmark that marks packets for SNAT, in [0, 31]."
        ),
        cf!(
            "iptables-drop-bit",
            Int32,
            iptables_drop_bit,
            "Bit of the fwmark that marks packets to drop, in [0, 31]."
        ),
        cf!(
            "container-log-max-size",
            Str,
            container_log_max_size,
            "<Warning: Beta feature> Size (e.g. 10Mi) at which a container log is rotated."
        ),
        cf!(
            "container-log-max-files",
            Int32,
            container_log_max_files,
            "<Warning: Beta feature> Most log files kept per container; at least 2."
        ),
        cf!(
            "allowed-unsafe-sysctls",
            Strings,
            allowed_unsafe_sysctls,
            "Unsafe sysctls or sysctl patterns (ending in *) pods may set, comma-separated."
        ),
        cf!(
            "node-status-max-images",
            Int32,
            node_status_max_images,
            "Most images reported in the node status; -1 means all."
        ),
        cf!(
            "kernel-memcg-notification",
            Bool,
            kernel_memcg_notification,
            "Learn of memory thresholds from kernel memcg notifications instead of polling."
        ),
        cf!(
            "local-storage-capacity-isolation",
            Bool,
            local_storage_capacity_isolation,
            "Account and limit local ephemeral storage per pod."
        ),
        cf!(
            "max-open-files",
            Int,
            max_open_files,
            "Open file limit of the kubelet process."
        ),
        cf!(
            "kube-api-content-type",
            Str,
            content_type,
            "Content type of requests to the API server."
        ),
        cf!(
            "kube-api-qps",
            Int32,
            kube_api_qps,
            "Requests per second to the API server (events and heartbeats have their own limits)."
        ),
        cf!(
            "kube-api-burst",
            Int32,
            kube_api_burst,
            "Burst of requests to the API server above --kube-api-qps."
        ),
        cf!(
            "serialize-image-pulls",
            Bool,
            serialize_image_pulls,
            "Pull one image at a time."
        ),
        cf!(
            "eviction-hard",
            LangleMap,
            eviction_hard,
            "Thresholds that evict pods at once when crossed, e.g. memory.available<1Gi."
        ),
        cf!(
            "eviction-soft",
            LangleMap,
            eviction_soft,
            "Thresholds that evict pods when crossed for their grace period, e.g. memory.available<1.5Gi."
        ),
        cf!(
            "eviction-soft-grace-period",
            MapSS,
            eviction_soft_grace_period,
            "Grace periods of the soft thresholds, e.g. memory.available=1m30s."
        ),
        cf!(
            "eviction-pressure-transition-period",
            Dur,
            eviction_pressure_transition_period,
            "How long a pressure condition holds after the pressure ends."
        ),
        cf!(
            "eviction-max-pod-grace-period",
            Int32,
            eviction_max_pod_grace_period,
            "Longest grace period (seconds) given to pods evicted for a soft threshold; negative defers to the pod."
        ),
        cf!(
            "eviction-minimum-reclaim",
            MapSS,
            eviction_minimum_reclaim,
            "Least amount reclaimed once eviction starts for a resource, e.g. imagefs.available=2Gi."
        ),
        cf!(
            "pods-per-core",
            Int32,
            pods_per_core,
            "Pods per CPU core, capped by --max-pods; 0 means no per-core limit."
        ),
        cf!(
            "protect-kernel-defaults",
            Bool,
            protect_kernel_defaults,
            "Fail when kernel tunables differ from what the kubelet needs instead of changing them."
        ),
        cf!(
            "reserved-cpus",
            Str,
            reserved_system_cpus,
            "CPUs or ranges reserved for system and Kubernetes daemons, comma-separated; overrides the CPU counts of --system-reserved and --kube-reserved."
        ),
        cf!(
            "topology-manager-scope",
            Str,
            topology_manager_scope,
            "What topology hints apply to: 'container' or 'pod'."
        ),
        cf!(
            "system-reserved",
            MapSS,
            system_reserved,
            "Resources reserved for system daemons, e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000."
        ),
        cf!(
            "kube-reserved",
            MapSS,
            kube_reserved,
            "Resources reserved for Kubernetes daemons, e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000."
        ),
        cf!(
            "enforce-node-allocatable",
            Strings,
            enforce_node_allocatable,
            "Node allocatable levels to enforce: 'none', 'pods', 'system-reserved', 'kube-reserved'; the last two need their cgroup flags."
        ),
        cf!(
            "system-reserved-cgroup",
            Str,
            system_reserved_cgroup,
            "Absolute name of the cgroup --system-reserved is enforced on."
        ),
        cf!(
            "kube-reserved-cgroup",
            Str,
            kube_reserved_cgroup,
            "Absolute name of the cgroup --kube-reserved is enforced on."
        ),
        cf!(
            "logging-format",
            Str,
            logging.format,
            "Log format: 'text' or 'json'. The json format cannot honour klog's own flags."
        ),
        flag!(
            Config,
            "log-flush-frequency",
            None,
            Dur,
            logging.flush_frequency,
            None,
            "Longest time between log flushes."
        ),
        flag!(
            Config,
            "v",
            Some('v'),
            Level,
            logging.verbosity,
            None,
            "Log verbosity level."
        ),
        flag!(
            Config,
            "vmodule",
            None,
            VModule,
            logging.vmodule,
            None,
            "Per-file verbosity as pattern=N pairs separated by commas (text format only)."
        ),
        cf!(
            "log-json-split-stream",
            Bool,
            logging.options.json.split_stream,
            "[Alpha] With the json format, write errors to stderr and the rest to stdout (needs the LoggingAlphaOptions gate)."
        ),
        cf!(
            "log-json-info-buffer-size",
            QuantityValue,
            logging.options.json.info_buffer_size,
            "[Alpha] With the json format and split streams, bytes of info output to buffer, e.g. 512, 1K, 2Ki (needs the LoggingAlphaOptions gate)."
        ),
        cf!(
            "memory-manager-policy",
            Str,
            memory_manager_policy,
            "Memory manager policy: 'None' or 'Static'."
        ),
        cf!(
            "reserved-memory",
            ReservedMemory,
            reserved_memory,
            "Memory reserved per NUMA node, e.g. --reserved-memory 0:memory=1Gi,hugepages-1M=2Gi --reserved-memory 1:memory=2Gi."
        ),
        cf!(
            "register-node",
            Bool,
            register_node,
            "Register the node with the API server (needs --kubeconfig)."
        ),
        cf!(
            "register-with-taints",
            Taints,
            register_with_taints,
            "Taints to register the node with, as <key>=<value>:<effect> separated by commas; no effect without --register-node."
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_shorthands_are_unique() {
        let mut names = std::collections::HashSet::new();
        for f in flag_table() {
            assert!(names.insert(f.name), "{} twice", f.name);
            assert!(!f.name.contains('_'), "{}", f.name);
        }
        let shorts: Vec<char> = flag_table().iter().filter_map(|f| f.short).collect();
        assert_eq!(shorts, vec!['h', 'v']);
    }

    #[test]
    fn help_types_follow_pflag() {
        let ty = |name: &str| lookup(name).unwrap().1.help_type();
        assert_eq!(ty("seccomp-default"), "RuntimeDefault");
        assert_eq!(ty("version"), "version[=true]");
        assert_eq!(ty("fail-swap-on"), "bool");
        assert_eq!(ty("eviction-hard"), "mapStringString");
        assert_eq!(ty("max-open-files"), "int");
    }
}
