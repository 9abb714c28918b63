//! The flags that set [`KubeletFlags`](super::super::KubeletFlags) fields,
//! including those the Go kubelet took over from cAdvisor and klog, and the
//! command's own `--help` and `--version`.

use super::super::values::{self, FlagValue};
use super::{CADVISOR, CLOUD, EVICTION, FUTURE, Flag, KLOG, PRE_CSI, Target};

pub(super) fn flags() -> Vec<Flag> {
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
    ]
}
