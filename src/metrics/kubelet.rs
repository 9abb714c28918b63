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

fn counter(cell: &'static OnceLock<Arc<CounterVec>>, desc: Desc) -> &'static CounterVec {
    cell.get_or_init(|| {
        let vec = Arc::new(CounterVec::new(desc));
        super::global().register(vec.clone());
        vec
    })
}

fn histogram(
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
