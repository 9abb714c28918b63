//! Errors of the volume manager's states, populator and reconstruction.

use std::io;
use std::path::PathBuf;

use crate::volume::error::VolumeError;

/// Why a volume could not be added, recorded or rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum VolumeManagerError {
    #[error("no volume with the name {0:?} exists in the list of attached volumes")]
    NotAttached(String),
    #[error("failed to get Plugin from volumeSpec for volume {volume:?} err={source}")]
    NoPlugin { volume: String, source: VolumeError },
    #[error(
        "error processing PVC {0:?}: PersistentVolumeClaim volumes are not supported by this kubelet"
    )]
    ClaimUnsupported(String),
    #[error(
        "error processing volume {0:?}: generic ephemeral volumes are not supported by this kubelet"
    )]
    EphemeralUnsupported(String),
    #[error(transparent)]
    Plugin(#[from] VolumeError),
    #[error("volume: {0:?} is not mounted")]
    NotMounted(String),
    #[error(transparent)]
    ReadPodDir(io::Error),
    #[error("fail to check mount point {:?}: {source}", .path.display().to_string())]
    MountPoint { path: PathBuf, source: io::Error },
}
