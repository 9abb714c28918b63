//! pkg/kubelet/config: where the kubelet's desired pods come from.
//!
//! Pod sources ([`PodSource`]: the static pod directory or file, the static
//! pod URL, later the API server) each deliver snapshots or incremental
//! changes; [`PodConfig`] merges them into one stream of [`PodUpdate`]s with
//! Go's semantics (ADD, UPDATE, REMOVE, RECONCILE, DELETE per source) and
//! tells when every source has been heard from ([`SourcesReady`]).
//!
//! Static pods are decoded as the Go kubelet decodes them ([`decode`]):
//! YAML 1.1 or JSON, API defaults ([`defaults`]), static identity
//! ([`common`]) and create validation ([`validation`]).
//!
//! [`PodUpdate`]: crate::kubelet::types::PodUpdate

pub mod common;
pub mod decode;
pub mod defaults;
pub mod merge;
pub mod pod_config;
pub mod prune;
pub mod quantities;
pub mod queue;
pub mod validation;
pub mod yaml;

pub use pod_config::{PodConfig, PodSource, PodUpdates, SourceSender, SourcesReady};
pub mod error;
pub mod file;
pub mod file_watch;

pub use error::SourceError;
pub use file::FileSource;
pub mod http;

pub use http::HttpSource;
