//! Errors of the pod sources.

use std::path::PathBuf;

use super::decode::DecodeError;

/// Largest manifest (file or HTTP body) the sources read: 10 MiB.
pub const MAX_CONFIG_LENGTH: usize = 10 << 20;

/// Why a source could not read or use a manifest.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("reading {path:?}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path:?}: the read limit is reached ({limit} bytes)")]
    TooLarge { path: PathBuf, limit: usize },
    /// The bytes were an object of kind Pod that defaulting or validation refused.
    #[error("{path:?}: {source}")]
    InvalidPod {
        path: PathBuf,
        #[source]
        source: DecodeError,
    },
    /// The bytes were not a pod at all.
    #[error("{path:?}: couldn't parse as pod({source}), please check config file")]
    NotAPod {
        path: PathBuf,
        #[source]
        source: DecodeError,
    },
    #[error("path {0:?} does not exist, ignoring")]
    PathNotFound(PathBuf),
    #[error("path {0:?} is not a directory or file")]
    NotDirOrFile(PathBuf),
    #[error("invalid static pod URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("invalid static pod URL header {name:?}: {reason}")]
    BadHeader { name: String, reason: String },
    #[error("{url}: {source}")]
    Http {
        url: String,
        #[source]
        source: super::http::FetchError,
    },
    #[error(
        "{url}: received '{body}', but couldn't parse as single ({single}) or multiple pods ({multiple})"
    )]
    Unparseable {
        url: String,
        body: String,
        single: Box<DecodeError>,
        multiple: Box<DecodeError>,
    },
    #[error("{url}: {source}")]
    InvalidUrlPod {
        url: String,
        #[source]
        source: DecodeError,
    },
}
