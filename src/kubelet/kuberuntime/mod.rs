//! The pure parts of the kuberuntime manager (pkg/kubelet/kuberuntime): the
//! pod → CRI translation. Given a pod, the node's settings and what other
//! subsystems resolved (DNS, environment, volumes, cgroup parent, image),
//! these functions produce the PodSandboxConfig and ContainerConfigs the Go
//! kubelet would send, with its labels and annotations, and parse those
//! labels back after a restart. The manager that drives CRI builds on them.

pub mod container;
pub mod labels;
pub mod log_paths;
pub mod resources;
pub mod run_options;
pub mod sandbox;
pub mod seccomp;
pub mod security_context;
pub mod settings;

pub use container::{
    ContainerConfigError, ContainerParams, GeneratedContainerConfig, generate_container_config,
};
pub use run_options::{
    MountedVolume, RunOptionsError, RunOptionsParams, VolumeMap, generate_run_container_options,
};
pub use sandbox::{SandboxConfigError, SandboxParams, generate_pod_sandbox_config};
pub use security_context::ImageUser;
pub use settings::RuntimeSettings;
