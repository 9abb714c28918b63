//! KubeletServer lives with the configuration types
//! ([`crate::apis::config::server`]) so that the kubelet's subsystems read
//! it without importing the command; re-exported here for the app.

pub use crate::apis::config::server::KubeletServer;
