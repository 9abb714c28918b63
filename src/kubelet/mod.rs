//! pkg/kubelet: NewMainKubelet, Run and syncLoop, and the subsystems they wire (issues 5-7).

pub mod container;
pub mod pleg;
pub mod prober;
pub mod server;
