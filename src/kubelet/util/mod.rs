//! pkg/kubelet/util pieces used by several kubelet subsystems.

pub mod manager;
