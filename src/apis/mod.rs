//! Versioned API types owned by the kubelet (kubelet.config.k8s.io).

pub mod config;
