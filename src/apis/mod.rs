//! Versioned API types owned by the kubelet (kubelet.config.k8s.io) and the
//! eviction thresholds they configure (Go's evictionapi).

pub mod config;
pub mod eviction;
