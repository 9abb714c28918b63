//! pkg/kubelet: NewMainKubelet, Run and syncLoop, and the subsystems they wire (issues 5-7).

pub mod config;
pub mod pod;
pub mod types;
