//! What the device manager fails with. Messages follow the Go kubelet's
//! wording where a user sees them (registration replies, admission).

use std::path::PathBuf;

/// Everything the device manager can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DeviceManagerError {
    /// A plugin registered with an API version the kubelet does not speak.
    #[error(
        "requested API version {version:?} is not supported by kubelet. Supported version is [{supported:?}]"
    )]
    UnsupportedVersion {
        version: String,
        supported: &'static str,
    },
    /// A plugin registered a resource name that is no extended resource.
    #[error("the ResourceName {0:?} is invalid")]
    InvalidResourceName(String),
    /// The plugin's socket could not be dialled.
    #[error("failed to dial device plugin: {path:?}: {reason}")]
    Dial { path: PathBuf, reason: String },
    /// The plugin's endpoint is gone.
    #[error("endpoint {0} has been stopped")]
    EndpointStopped(String),
    /// A container already has devices of the resource, a different number.
    #[error(
        "pod {pod_uid:?} container {container:?} changed request for resource {resource:?} from {from} to {to}"
    )]
    ChangedRequest {
        pod_uid: String,
        container: String,
        resource: String,
        from: usize,
        to: usize,
    },
    #[error("can't allocate unregistered device {0}")]
    Unregistered(String),
    #[error(
        "requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}"
    )]
    Unavailable {
        resource: String,
        requested: usize,
        available: usize,
    },
    #[error(
        "unexpectedly allocated less resources than required. Requested: {requested}, Got: {got}"
    )]
    ShortAllocation { requested: usize, got: usize },
    #[error("unknown Device Plugin {0}")]
    UnknownPlugin(String),
    #[error("endpoint not found in cache for a registered resource: {0}")]
    EndpointNotFound(String),
    #[error("device plugin GetPreferredAllocation rpc failed with err: {0}")]
    PreferredAllocation(String),
    #[error("device plugin PreStartContainer rpc failed with err: {0}")]
    PreStartContainer(String),
    /// The Allocate call failed (the gRPC error as Go prints it).
    #[error("{0}")]
    Allocate(String),
    #[error("no containers return in allocation response {0}")]
    EmptyAllocateResponse(String),
    #[error(
        "no devices found allocated in local cache for pod {pod_uid}, container {container}, resource {resource}"
    )]
    NoDevicesInCache {
        pod_uid: String,
        container: String,
        resource: String,
    },
    #[error("failed to write checkpoint file \"kubelet_internal_checkpoint\": {0}")]
    WriteCheckpoint(#[source] crate::util::atomic_file::AtomicWriteError),
    #[error("checkpoint is corrupted")]
    CorruptCheckpoint,
    #[error("checkpoint is not found")]
    CheckpointNotFound,
    #[error("invalid checkpoint: {0}")]
    ParseCheckpoint(#[from] serde_json::Error),
    #[error("read {path:?}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {path:?}: {source}")]
    Socket {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A blocking part of the manager could not run.
    #[error("device manager task failed: {0}")]
    Join(String),
}

/// A gRPC error as Go prints it.
pub fn rpc_error(status: &tonic::Status) -> String {
    format!(
        "rpc error: code = {:?} desc = {}",
        status.code(),
        status.message()
    )
}

impl DeviceManagerError {
    /// Admission reason: every device manager error is unexpected (Go's
    /// GetPodAdmitResult has no typed device errors).
    pub fn admission_reason(&self) -> &'static str {
        crate::cm::admission::REASON_UNEXPECTED
    }

    /// Admission message in Go's wording.
    pub fn admission_message(&self) -> String {
        format!("Allocate failed due to {self}, which is unexpected")
    }
}
