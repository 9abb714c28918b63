//! kubelet-rs: a Rust port of the Kubernetes node agent, behaving as the v1.25 line.
//!
//! The module tree follows the documented start-up pipeline (see ARCHITECTURE.md):
//! `app` (flags → config file → precedence → validation → KubeletServer →
//! Dependencies → run → RunKubelet) hands over to `kubelet` (NewMainKubelet →
//! Run → syncLoop). Everything else is a subsystem those stages construct.

pub mod apis;
pub mod app;
pub mod cadvisor;
pub mod cm;
pub mod configz;
pub mod cri;
pub mod features;
pub mod healthz;
pub mod kubelet;
pub mod logs;
pub mod metrics;
pub mod util;
pub mod version;
pub mod volume;
