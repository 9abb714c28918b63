//! pkg/kubelet: NewMainKubelet, Run and syncLoop, and the subsystems they wire (issues 5-7).

pub mod build;
pub mod config;
pub mod container;
pub mod envvars;
pub mod eviction;
pub mod expansion;
pub mod hosts;
pub mod housekeeping;
pub mod images;
pub mod kuberuntime;
pub mod network;
pub mod pleg;
pub mod pod;
pub mod pod_dirs;
pub mod pod_sync;
pub mod pod_workers;
pub mod prober;
pub mod qos;
pub mod run;
pub mod runonce;
pub mod runtime_helper;
pub mod server;
pub mod status;
pub mod sync_loop;
pub mod types;
pub mod volumemanager;
