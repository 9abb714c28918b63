//! KubeletConfiguration (kubelet.config.k8s.io/v1beta1): types, defaulting,
//! file loading and validation, as the v1.25 kubelet has them.
//!
//! - `types`: the configuration the kubelet runs with, and the file form.
//! - `defaults`: v1beta1 defaulting and the legacy flag defaults.
//! - `loader`: `--config` (YAML 1.1 or JSON, strict then lenient decoding,
//!   relative paths).
//! - `validation`: ValidateKubeletConfiguration.
//! - `duration`: Go durations (`1m30s`), as every duration is read and shown.

pub mod decode;
pub mod defaults;
pub mod duration;
pub mod flags;
pub mod loader;
pub mod quantity_serde;
pub mod server;
pub mod types;
pub mod validation;

#[cfg(test)]
mod tests;

pub use duration::Duration;
pub use types::KubeletConfiguration;
