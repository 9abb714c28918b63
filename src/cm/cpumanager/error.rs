//! Errors of the CPU manager, worded as the Go kubelet words them.

use std::path::PathBuf;

use crate::cm::cpuset::CpuSet;

/// Everything the CPU manager can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CpuManagerError {
    /// `cpuManagerPolicy` names no policy.
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    /// The none policy was given `cpuManagerPolicyOptions`.
    #[error("new none policy error: None policy: received unsupported options={0}")]
    NoneWithOptions(String),
    /// The static policy could not be built.
    #[error("new static policy error: {0}")]
    NewStaticPolicy(#[source] Box<CpuManagerError>),
    /// The machine's CPUs could not be placed.
    #[error("{0}")]
    Topology(String),
    #[error("[cpumanager] unable to determine reserved CPU resources for static policy")]
    NoReservation,
    #[error(
        "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
    )]
    ZeroReservation,
    #[error(
        "[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal {wanted})"
    )]
    ReservationSize { reserved: CpuSet, wanted: usize },
    /// `reservedSystemCPUs` names CPUs the machine does not have.
    #[error("reserved-cpus: {reserved} is not a subset of online-cpus: {online}")]
    ReservedNotOnline { reserved: CpuSet, online: CpuSet },
    /// An option was refused (the field named, Go's reason after it).
    #[error("cpuManagerPolicyOptions (--cpu-manager-policy-options): {0}")]
    Options(#[source] Box<CpuManagerError>),
    /// A `cpuManagerPolicyOptions` key that no level knows.
    #[error("unknown CPU Manager Policy option: {0:?}")]
    UnknownOption(String),
    /// An option whose feature gate is off.
    #[error("CPU Manager Policy {level}-level Options not enabled, but option {option:?} provided")]
    OptionGateOff { level: &'static str, option: String },
    /// `align-by-socket` does not fit the machine or the topology policy.
    #[error("{0}")]
    AlignBySocket(String),
    /// An option value that is not a boolean.
    #[error("bad value for option {name:?}: strconv.ParseBool: parsing {value:?}: invalid syntax")]
    OptionValue { name: String, value: String },
    /// An option this port knows of but does not implement.
    #[error("unsupported cpumanager option: {name:?} ({value})")]
    UnsupportedOption { name: String, value: String },
    /// `full-pcpus-only`: the request is not whole cores.
    #[error(
        "SMT Alignment Error: requested {requested} cpus not multiple cpus per core = {cpus_per_core}"
    )]
    SmtAlignment {
        requested: usize,
        cpus_per_core: usize,
    },
    #[error("not enough cpus available to satisfy request")]
    NotEnoughCpus,
    #[error("failed to allocate cpus")]
    AllocationFailed,
    #[error("accounting error, {detail}, remaining: {remaining}")]
    Accounting {
        detail: &'static str,
        remaining: i64,
    },
    /// The restored state does not fit the machine or the reservation.
    #[error("{0}")]
    InvalidState(String),
    /// The checkpoint file could not be restored (start-up refuses).
    #[error(
        "could not restore state from checkpoint: {source}, please drain this node and delete the CPU manager checkpoint file {path:?} before restarting Kubelet"
    )]
    Restore {
        path: PathBuf,
        #[source]
        source: Box<CpuManagerError>,
    },
    #[error("configured policy {configured:?} differs from state checkpoint policy {checkpoint:?}")]
    PolicyMismatch {
        configured: String,
        checkpoint: String,
    },
    #[error("checkpoint is corrupted")]
    CorruptCheckpoint,
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("could not parse default cpu set {value:?}: {detail}")]
    ParseDefault { value: String, detail: String },
    #[error(
        "could not parse cpuset {value:?} for container {container:?} in pod {pod:?}: {detail}"
    )]
    ParseEntry {
        value: String,
        container: String,
        pod: String,
        detail: String,
    },
    #[error(
        "error migrating v1 checkpoint state to v2 checkpoint state: containerID '{0}' not found in initial containers list"
    )]
    Migrate(String),
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: crate::util::atomic_file::AtomicWriteError,
    },
    /// A blocking task of the manager was cancelled or panicked.
    #[error("cpu manager task failed: {0}")]
    Join(String),
    /// UpdateContainerResources failed.
    #[error("update container {container_id} cpuset: {source}")]
    Runtime {
        container_id: String,
        #[source]
        source: Box<crate::cri::CriError>,
    },
}

impl CpuManagerError {
    /// The admission reason: Go's typed errors name themselves, the rest
    /// are unexpected.
    pub fn admission_reason(&self) -> &'static str {
        match self {
            CpuManagerError::SmtAlignment { .. } => "SMTAlignmentError",
            _ => "UnexpectedAdmissionError",
        }
    }

    /// The admission message (Go's GetPodAdmitResult wording).
    pub fn admission_message(&self) -> String {
        match self {
            CpuManagerError::SmtAlignment { .. } => self.to_string(),
            _ => format!("Allocate failed due to {self}, which is unexpected"),
        }
    }
}
