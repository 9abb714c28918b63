//! pkg/kubelet/config: where the kubelet's desired pods come from.
//!
//! Pod sources ([`PodSource`]: [`FileSource`] for staticPodPath,
//! [`HttpSource`] for staticPodURL, later the API server) deliver complete
//! sets (SET) or incremental changes through a [`SourceSender`];
//! [`PodConfig`] merges them into one stream of [`PodUpdate`]s with Go's
//! semantics (ADD, UPDATE, REMOVE, RECONCILE, DELETE per source) and tells
//! when every source has been heard from ([`SourcesReady`]).
//!
//! Wiring (build → start → sync loop):
//! ```text
//! let (config, mut updates) = PodConfig::new(clock);      // build
//! config.add_source(Box::new(FileSource::new(path, node, file_check_frequency)));
//! let ready = config.sources_ready();
//! config.start(&tasks);                                   // start
//! while let Some(u) = updates.recv().await {              // sync loop
//!     ready.add_source(&u.source);
//!     match u.op { PodOperation::Add => ..., ... }
//! }
//! ```
//! An API-server source implements [`PodSource`] too: after its first list it
//! sends a SET (which marks it seen), then either SETs or incremental
//! ADD/UPDATE/DELETE/REMOVE from its watch; pods with a deletion timestamp
//! come out as DELETE.
//!
//! Static pods are decoded as the Go kubelet decodes them ([`decode`]):
//! YAML 1.1 or JSON ([`crate::util::yaml`]), fields newer than v1.25 dropped ([`prune`]),
//! quantities normalized ([`quantities`]), API defaults ([`defaults`]),
//! static identity ([`common`]) and create validation ([`validation`]).
//!
//! [`PodUpdate`]: crate::kubelet::types::PodUpdate
//! [`PodOperation`]: crate::kubelet::types::PodOperation

pub mod apiserver;
pub mod common;
pub mod decode;
pub mod defaults;
pub mod error;
pub mod file;
pub mod file_watch;
pub mod http;
pub mod merge;
pub mod pod_config;
pub mod prune;
pub mod quantities;
pub mod queue;
pub mod validation;

pub use apiserver::ApiserverSource;
pub use error::SourceError;
pub use file::FileSource;
pub use http::HttpSource;
pub use pod_config::{PodConfig, PodSource, PodUpdates, SourceSender, SourcesReady};
