//! The pure parts of the kuberuntime manager (pkg/kubelet/kuberuntime): the
//! pod → CRI translation. Given a pod, the node's settings and what other
//! subsystems resolved (DNS, environment, volumes, cgroup parent, image),
//! these functions produce the PodSandboxConfig and ContainerConfigs the Go
//! kubelet would send, with its labels and annotations, and parse those
//! labels back after a restart.
//!
//! On top of them, the manager that drives CRI (`KubeGenericRuntimeManager`,
//! implementing `container::Runtime`): computePodActions, SyncPod, kill with
//! hooks and grace periods, pod status from CRI state, and container GC.

pub mod actions;
pub mod container;
pub mod events;
pub mod gc;
pub mod helper;
pub mod hooks;
pub mod kill;
pub mod labels;
pub mod log_paths;
pub mod manager;
pub mod pod_sandbox;
pub mod resources;
pub mod run_options;
pub mod sandbox;
pub mod seccomp;
pub mod security_context;
pub mod settings;
pub mod start;
pub mod status;
pub mod sync;
pub mod term_message;

pub use container::{
    ContainerConfigError, ContainerParams, GeneratedContainerConfig, generate_container_config,
};
pub use events::{EventRecorder, LoggingEventRecorder};
pub use helper::{HelperError, PodStateProvider, RuntimeHelper};
pub use manager::{
    KubeGenericRuntimeManager, KubeRuntimeError, RuntimeManagerConfig, RuntimeManagerDeps,
};
pub use run_options::{
    MountedVolume, RunOptionsError, RunOptionsParams, VolumeMap, generate_run_container_options,
};
pub use sandbox::{SandboxConfigError, SandboxParams, generate_pod_sandbox_config};
pub use security_context::ImageUser;
pub use settings::RuntimeSettings;
