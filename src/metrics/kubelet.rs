//! The kubelet's metric families (subsystem `kubelet`), with the names the Go
//! kubelet exports so dashboards and alerts keep working.

use std::sync::{Arc, OnceLock};

use super::vec::{CounterVec, Desc, HistogramVec, Stability, default_buckets, exponential_buckets};

/// Metric-name prefix of every family here.
pub const SUBSYSTEM: &str = "kubelet";

/// `kubelet_runtime_operations_total{operation_type}`.
pub const RUNTIME_OPERATIONS: &str = "kubelet_runtime_operations_total";
/// `kubelet_runtime_operations_errors_total{operation_type}`.
pub const RUNTIME_OPERATIONS_ERRORS: &str = "kubelet_runtime_operations_errors_total";
/// `kubelet_runtime_operations_duration_seconds{operation_type}` (histogram).
pub const RUNTIME_OPERATIONS_DURATION: &str = "kubelet_runtime_operations_duration_seconds";
/// `kubelet_run_podsandbox_duration_seconds{runtime_handler}` (histogram).
pub const RUN_PODSANDBOX_DURATION: &str = "kubelet_run_podsandbox_duration_seconds";
/// `kubelet_run_podsandbox_errors_total{runtime_handler}`.
pub const RUN_PODSANDBOX_ERRORS: &str = "kubelet_run_podsandbox_errors_total";

/// Label of the runtime operation families.
pub const OPERATION_TYPE: &str = "operation_type";
/// Label of the sandbox families.
pub const RUNTIME_HANDLER: &str = "runtime_handler";

pub(super) fn counter(cell: &'static OnceLock<Arc<CounterVec>>, desc: Desc) -> &'static CounterVec {
    cell.get_or_init(|| {
        let vec = Arc::new(CounterVec::new(desc));
        super::global().register(vec.clone());
        vec
    })
}

pub(super) fn histogram(
    cell: &'static OnceLock<Arc<HistogramVec>>,
    desc: Desc,
    buckets: Vec<f64>,
) -> &'static HistogramVec {
    cell.get_or_init(|| {
        let vec = Arc::new(HistogramVec::new(desc, buckets));
        super::global().register(vec.clone());
        vec
    })
}

/// Count of CRI calls, by operation.
pub fn runtime_operations() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            RUNTIME_OPERATIONS,
            "How many container runtime calls were made, per operation type.",
            &[OPERATION_TYPE],
            Stability::Alpha,
        ),
    )
}

/// Count of failed CRI calls, by operation.
pub fn runtime_operations_errors() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            RUNTIME_OPERATIONS_ERRORS,
            "How many container runtime calls failed, per operation type.",
            &[OPERATION_TYPE],
            Stability::Alpha,
        ),
    )
}

/// Latency of CRI calls, by operation: bounds 5 ms × 2.5^i, 14 of them.
pub fn runtime_operations_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            RUNTIME_OPERATIONS_DURATION,
            "Seconds each container runtime call took, per operation type.",
            &[OPERATION_TYPE],
            Stability::Alpha,
        ),
        exponential_buckets(0.005, 2.5, 14),
    )
}

/// Latency of RunPodSandbox, by runtime handler.
pub fn run_podsandbox_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            RUN_PODSANDBOX_DURATION,
            "Seconds each RunPodSandbox call took, per runtime handler.",
            &[RUNTIME_HANDLER],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// Count of failed RunPodSandbox calls, by runtime handler.
pub fn run_podsandbox_errors() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            RUN_PODSANDBOX_ERRORS,
            "How many RunPodSandbox calls failed, per runtime handler.",
            &[RUNTIME_HANDLER],
            Stability::Alpha,
        ),
    )
}

fn gauge(cell: &'static OnceLock<Arc<super::GaugeVec>>, desc: Desc) -> &'static super::GaugeVec {
    cell.get_or_init(|| {
        let vec = Arc::new(super::GaugeVec::new(desc));
        super::global().register(vec.clone());
        vec
    })
}

/// `kubelet_node_name{node}`: 1 for the node this kubelet runs.
pub fn node_name() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubelet_node_name",
            "The node this kubelet runs, as a label; the value is always 1.",
            &["node"],
            Stability::Alpha,
        ),
    )
}

/// `kubernetes_build_info{...}`: 1, with the build's identity as labels.
pub fn build_info() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubernetes_build_info",
            "The build of this binary, as labels; the value is always 1.",
            &[
                "build_date",
                "compiler",
                "git_commit",
                "git_tree_state",
                "git_version",
                "go_version",
                "major",
                "minor",
                "platform",
            ],
            Stability::Alpha,
        ),
    )
}

/// Registers the unlabeled families with their zero, so they render from
/// the start as the Go kubelet's do.
pub fn register_unlabeled() {
    for c in [pleg_discard_events(), started_pods(), started_pods_errors()] {
        c.add(&[], 0.0);
    }
    for g in [running_pods(), pleg_last_seen()] {
        g.add(&[], 0.0);
    }
    for h in [
        pleg_relist_duration(),
        pleg_relist_interval(),
        pod_start_duration(),
        pod_worker_start_duration(),
        containers_per_pod(),
    ] {
        h.touch(&[]);
    }
}

/// Records the node's name and the build, and registers the unlabeled
/// families (once, at start).
pub fn record_identity(node: &str) {
    register_unlabeled();
    node_name().set(&[node], 1.0);
    let version = crate::version::git_version();
    let (major, minor) = {
        let core = crate::version::KUBERNETES_VERSION.trim_start_matches('v');
        let mut parts = core.split('.');
        (
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().to_string(),
        )
    };
    let platform = format!("{}/{}", std::env::consts::OS, go_arch());
    build_info().set(
        &["", "rustc", "", "", &version, "", &major, &minor, &platform],
        1.0,
    );
}

/// The architecture as Go names it (GOARCH).
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// `kubelet_pleg_relist_duration_seconds`: how long a relist took.
pub fn pleg_relist_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_pleg_relist_duration_seconds",
            "Seconds the pod lifecycle event generator took to relist the runtime's pods.",
            &[],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_pleg_relist_interval_seconds`: time between relists.
pub fn pleg_relist_interval() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_pleg_relist_interval_seconds",
            "Seconds from the start of one relist of the pod lifecycle event generator to the start of the next.",
            &[],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_pleg_last_seen_seconds`: when the last relist happened.
pub fn pleg_last_seen() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubelet_pleg_last_seen_seconds",
            "Unix time, in seconds, of the last relist of the pod lifecycle event generator.",
            &[],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_pleg_discard_events`: events dropped for a full channel
/// (always 0 here: the event stream queues per pod instead of dropping).
pub fn pleg_discard_events() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            "kubelet_pleg_discard_events",
            "Pod lifecycle events dropped because their consumer was behind.",
            &[],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_running_pods`: pods with a running sandbox.
pub fn running_pods() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubelet_running_pods",
            "Pods whose sandbox is running.",
            &[],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_running_containers{container_state}`.
pub fn running_containers() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubelet_running_containers",
            "Containers the runtime reports, by state.",
            &["container_state"],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_pod_worker_duration_seconds{operation_type}`: from the update
/// reaching the kubelet to its sync finishing.
pub fn pod_worker_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_pod_worker_duration_seconds",
            "Seconds from a pod update reaching the kubelet to the pod worker finishing its sync, per update type.",
            &[OPERATION_TYPE],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_pod_worker_start_duration_seconds`: from the kubelet first
/// seeing a pod to its first sync.
pub fn pod_worker_start_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_pod_worker_start_duration_seconds",
            "Seconds from the kubelet first seeing a pod to its pod worker starting on it.",
            &[],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_pod_start_duration_seconds`: from the kubelet first seeing a
/// pod to the pod running.
pub fn pod_start_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_pod_start_duration_seconds",
            "Seconds from the kubelet first seeing a pod to the pod running.",
            &[],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_containers_per_pod_count`: containers of each new pod.
pub fn containers_per_pod() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_containers_per_pod_count",
            "How many containers each pod the kubelet starts has.",
            &[],
            Stability::Alpha,
        ),
        exponential_buckets(1.0, 2.0, 5),
    )
}

/// `kubelet_started_pods_total`: pod sandboxes the kubelet set out to start.
pub fn started_pods() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            "kubelet_started_pods_total",
            "Pods (sandboxes) the kubelet set out to start.",
            &[],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_started_pods_errors_total`.
pub fn started_pods_errors() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            "kubelet_started_pods_errors_total",
            "Pods (sandboxes) the kubelet failed to start.",
            &[],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_started_containers_total{container_type}`.
pub fn started_containers() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            "kubelet_started_containers_total",
            "Containers the kubelet set out to start, by type (container, init_container, ephemeral_container).",
            &["container_type"],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_started_containers_errors_total{code,container_type}`.
pub fn started_containers_errors() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            "kubelet_started_containers_errors_total",
            "Containers the kubelet failed to start, by gRPC code and type.",
            &["code", "container_type"],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_cgroup_manager_duration_seconds{operation_type}`: cgroup
/// create, update and destroy times.
pub fn cgroup_manager_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_cgroup_manager_duration_seconds",
            "Seconds the cgroup manager took to create, update or destroy a cgroup.",
            &[OPERATION_TYPE],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

/// `kubelet_graceful_shutdown_start_time_seconds`: when the last graceful
/// node shutdown began (Unix seconds; 0 before any).
pub fn graceful_shutdown_start_time() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubelet_graceful_shutdown_start_time_seconds",
            "Unix time, in seconds, at which the last graceful node shutdown began.",
            &[],
            Stability::Alpha,
        ),
    )
}

/// `kubelet_graceful_shutdown_end_time_seconds`: when the last graceful
/// node shutdown ended (Unix seconds; 0 before any, and while one runs).
pub fn graceful_shutdown_end_time() -> &'static super::GaugeVec {
    static CELL: OnceLock<Arc<super::GaugeVec>> = OnceLock::new();
    gauge(
        &CELL,
        Desc::new(
            "kubelet_graceful_shutdown_end_time_seconds",
            "Unix time, in seconds, at which the last graceful node shutdown ended.",
            &[],
            Stability::Alpha,
        ),
    )
}

pub const DEVICE_PLUGIN_REGISTRATION: &str = "kubelet_device_plugin_registration_total";
pub const DEVICE_PLUGIN_ALLOC_DURATION: &str = "kubelet_device_plugin_alloc_duration_seconds";
/// Label of the device plugin families.
pub const RESOURCE_NAME: &str = "resource_name";

/// Registrations of device plugins, by resource.
pub fn device_plugin_registration() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    counter(
        &CELL,
        Desc::new(
            DEVICE_PLUGIN_REGISTRATION,
            "How many times device plugins registered, per resource.",
            &[RESOURCE_NAME],
            Stability::Alpha,
        ),
    )
}

/// Latency of device plugin Allocate calls, by resource.
pub fn device_plugin_alloc_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            DEVICE_PLUGIN_ALLOC_DURATION,
            "Seconds each device plugin Allocate call took, per resource.",
            &[RESOURCE_NAME],
            Stability::Alpha,
        ),
        default_buckets(),
    )
}

#[cfg(test)]
mod identity_tests {
    use super::*;

    #[test]
    fn node_name_and_build_info_are_ones_with_labels() {
        record_identity("node-a");
        let text = crate::metrics::render_text();
        assert!(
            text.contains("kubelet_node_name{node=\"node-a\"} 1\n"),
            "{text}"
        );
        let line = text
            .lines()
            .find(|l| l.starts_with("kubernetes_build_info{"))
            .expect("build info");
        assert!(line.contains("major=\"1\",minor=\"25\""), "{line}");
        assert!(line.contains("platform=\"linux/amd64\"") || !cfg!(target_arch = "x86_64"));
        assert!(line.ends_with("} 1"));
        for zero in [
            "kubelet_started_pods_errors_total 0\n",
            "kubelet_pleg_discard_events 0\n",
            "kubelet_pod_start_duration_seconds_count ",
            "kubelet_containers_per_pod_count_bucket{le=\"16\"} ",
        ] {
            assert!(text.contains(zero), "{zero}");
        }
    }
}
