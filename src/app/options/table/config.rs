//! The flags that set configuration fields: deprecated in favour of the
//! `--config` file except the logging verbosity ones, and re-applied over the
//! file's values when given (flag precedence).

use super::super::values::{self, FlagValue};
use super::{CONFIG_FILE, Flag, Target};

pub(super) fn flags() -> Vec<Flag> {
    vec![
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
