//! pkg/kubelet: NewMainKubelet, Run and syncLoop, and the subsystems they wire (issues 5-7).

pub mod config;
pub mod configmap;
pub mod container;
pub mod envvars;
pub mod eviction;
pub mod expansion;
pub mod hosts;
pub mod images;
pub mod kuberuntime;
pub mod lifecycle;
pub mod network;
pub mod pleg;
pub mod pod;
pub mod pod_dirs;
pub mod prober;
pub mod qos;
pub mod secret;
pub mod server;
pub mod status;
pub mod token;
pub mod types;
pub mod util;
pub mod volumemanager;
