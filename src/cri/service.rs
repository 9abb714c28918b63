//! The seams: what the kubelet asks of a container runtime and of an image
//! service, in the shapes the Go kubelet's internal CRI interfaces use.
//! Implemented over gRPC by [`super::RemoteRuntimeService`] and
//! [`super::RemoteImageService`]; wrapped for metrics by
//! [`super::InstrumentedRuntimeService`] / [`super::InstrumentedImageService`].

use std::time::Duration;

use async_trait::async_trait;

use super::api;
use super::error::CriError;

/// Result of the CRI calls.
pub type Result<T> = std::result::Result<T, CriError>;

/// Output of a command that ran to completion with exit code 0. A non-zero
/// exit is `CriError::ExitCode`, which carries the same output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecSyncOutput {
    /// Captured standard output.
    pub stdout: Vec<u8>,
    /// Captured standard error.
    pub stderr: Vec<u8>,
}

/// Pod sandboxes and containers (the CRI `RuntimeService`).
#[async_trait]
pub trait RuntimeService: Send + Sync {
    /// Name, version and API version of the runtime; `api_version` is the
    /// kubelet's own CRI client version.
    async fn version(&self, api_version: &str) -> Result<api::VersionResponse>;

    /// Creates and starts a sandbox; returns its id.
    async fn run_pod_sandbox(
        &self,
        config: &api::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String>;
    /// Stops a sandbox and everything in it (idempotent).
    async fn stop_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<()>;
    /// Removes a sandbox and everything in it (idempotent).
    async fn remove_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<()>;
    /// Status of a sandbox; `verbose` asks for the runtime's extra info map.
    async fn pod_sandbox_status(
        &self,
        pod_sandbox_id: &str,
        verbose: bool,
    ) -> Result<api::PodSandboxStatusResponse>;
    /// Sandboxes matching `filter` (all when `None`).
    async fn list_pod_sandbox(
        &self,
        filter: Option<api::PodSandboxFilter>,
    ) -> Result<Vec<api::PodSandbox>>;

    /// Creates a container in a sandbox; returns its id.
    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &api::ContainerConfig,
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String>;
    /// Starts a created container.
    async fn start_container(&self, container_id: &str) -> Result<()>;
    /// Stops a container, giving it `timeout` seconds before SIGKILL.
    async fn stop_container(&self, container_id: &str, timeout: i64) -> Result<()>;
    /// Removes a container (stopping it first if needed).
    async fn remove_container(&self, container_id: &str) -> Result<()>;
    /// Containers matching `filter` (all when `None`).
    async fn list_containers(
        &self,
        filter: Option<api::ContainerFilter>,
    ) -> Result<Vec<api::Container>>;
    /// Status of a container; `verbose` asks for the runtime's extra info map.
    async fn container_status(
        &self,
        container_id: &str,
        verbose: bool,
    ) -> Result<api::ContainerStatusResponse>;
    /// Applies new resource limits to a running container.
    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &api::ContainerResources,
    ) -> Result<()>;
    /// Asks the runtime to reopen the container's log file (after rotation).
    async fn reopen_container_log(&self, container_id: &str) -> Result<()>;

    /// Runs a command in a container and waits for it; a zero `timeout`
    /// means no limit.
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncOutput>;
    /// Prepares a streaming exec; returns the URL to stream from.
    async fn exec(&self, request: &api::ExecRequest) -> Result<api::ExecResponse>;
    /// Prepares a streaming attach; returns the URL to stream from.
    async fn attach(&self, request: &api::AttachRequest) -> Result<api::AttachResponse>;
    /// Prepares a port forward; returns the URL to stream from.
    async fn port_forward(
        &self,
        request: &api::PortForwardRequest,
    ) -> Result<api::PortForwardResponse>;

    /// Stats of one container (`None` when the runtime has none).
    async fn container_stats(&self, container_id: &str) -> Result<Option<api::ContainerStats>>;
    /// Stats of the containers matching `filter`.
    async fn list_container_stats(
        &self,
        filter: Option<api::ContainerStatsFilter>,
    ) -> Result<Vec<api::ContainerStats>>;
    /// Stats of one sandbox (`None` when the runtime has none).
    async fn pod_sandbox_stats(&self, pod_sandbox_id: &str)
    -> Result<Option<api::PodSandboxStats>>;
    /// Stats of the sandboxes matching `filter`.
    async fn list_pod_sandbox_stats(
        &self,
        filter: Option<api::PodSandboxStatsFilter>,
    ) -> Result<Vec<api::PodSandboxStats>>;

    /// Pushes runtime configuration (the node's pod CIDR).
    async fn update_runtime_config(&self, runtime_config: &api::RuntimeConfig) -> Result<()>;
    /// Runtime and network readiness conditions.
    async fn status(&self, verbose: bool) -> Result<api::StatusResponse>;
    /// The runtime's own configuration (its cgroup driver). Runtimes of the
    /// v1.25 era answer Unimplemented.
    async fn runtime_config(&self) -> Result<api::RuntimeConfigResponse>;
}

/// Images (the CRI `ImageService`).
#[async_trait]
pub trait ImageService: Send + Sync {
    /// Images matching `filter` (all when `None`).
    async fn list_images(&self, filter: Option<api::ImageFilter>) -> Result<Vec<api::Image>>;
    /// Status of one image; `image` is `None` in the response when absent.
    async fn image_status(
        &self,
        image: &api::ImageSpec,
        verbose: bool,
    ) -> Result<api::ImageStatusResponse>;
    /// Pulls an image; returns its reference (digest or id). Errors are
    /// `CriError::ImagePull`.
    async fn pull_image(
        &self,
        image: &api::ImageSpec,
        auth: Option<&api::AuthConfig>,
        sandbox_config: Option<&api::PodSandboxConfig>,
    ) -> Result<String>;
    /// Removes an image (CRI runtimes answer success for an absent image).
    async fn remove_image(&self, image: &api::ImageSpec) -> Result<()>;
    /// Usage of the filesystems images live on.
    async fn image_fs_info(&self) -> Result<Vec<api::FilesystemUsage>>;
}
