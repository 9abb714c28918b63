//! pkg/kubelet: NewMainKubelet, Run and syncLoop, and the subsystems they wire (issues 5-7).

pub mod certificate;
pub mod client;
pub mod config;
pub mod container;
pub mod envvars;
pub mod events;
pub mod eviction;
pub mod expansion;
pub mod hosts;
pub mod images;
pub mod kuberuntime;
pub mod network;
pub mod node_status;
pub mod nodelease;
pub mod nodestatus;
pub mod pleg;
pub mod pod;
pub mod pod_dirs;
pub mod prober;
pub mod qos;
pub mod server;
pub mod types;
pub mod volumemanager;
