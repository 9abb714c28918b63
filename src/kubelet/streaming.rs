//! The kubelet's side of `kubectl exec`, `attach`, `port-forward` and the
//! legacy `/run` (GetExec, GetAttach, GetPortForward, RunInContainer): find
//! the running container or sandbox, ask the runtime to prepare the stream,
//! and hand back the runtime's streaming URL for the server to proxy.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tonic::Code;

use crate::cri::api::{AttachRequest, ExecRequest, PortForwardRequest};
use crate::cri::{CriError, RuntimeService};
use crate::kubelet::container::{RunningContainer, RunningPod, Runtime, RuntimeError};
use crate::kubelet::kuberuntime::kill::get_container_spec;
use crate::kubelet::pod::PodManager;
use crate::kubelet::types::build_pod_full_name;

/// Which streams a client wants (remotecommand's options).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Why no stream was prepared; [`StreamingError::status`] picks the HTTP
/// status.
#[derive(Debug, thiserror::Error)]
pub enum StreamingError {
    /// The runtime refused to prepare the stream: NotFound is a 404,
    /// ResourceExhausted (its streaming server is full) a 429, the rest 500.
    #[error(transparent)]
    Runtime(#[from] CriError),
    /// Listing the runtime's pods failed.
    #[error(transparent)]
    Pods(#[from] RuntimeError),
    /// `/run`'s command failed to run or exited non-zero (always a 500, as
    /// in Go, whatever the runtime's code).
    #[error(transparent)]
    Run(CriError),
    /// No running container of that name in the pod.
    #[error("container not found ({0:?})")]
    ContainerNotFound(String),
    /// Attach: the container is not running, or not in the pod's spec.
    #[error("container {container} not found in pod {pod}")]
    ContainerNotInPod { container: String, pod: String },
    /// Attach: the pod (full name) is not a desired pod.
    #[error("pod {0} not found")]
    PodNotFound(String),
    /// Port forward: the runtime runs nothing of the pod (full name).
    #[error("pod not found ({0:?})")]
    RunningPodNotFound(String),
    /// Port forward: the running pod (full name) has no sandbox.
    #[error("failed to find sandboxID for pod {0}")]
    NoSandbox(String),
}

/// What kind of HTTP answer a [`StreamingError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingFailure {
    /// 404.
    NotFound,
    /// 429, retry later.
    Busy,
    /// 500.
    Internal,
}

impl StreamingError {
    /// The HTTP answer this error is.
    pub fn status(&self) -> StreamingFailure {
        match self {
            StreamingError::Runtime(e) => match e.code() {
                Some(Code::NotFound) => StreamingFailure::NotFound,
                Some(Code::ResourceExhausted) => StreamingFailure::Busy,
                _ => StreamingFailure::Internal,
            },
            _ => StreamingFailure::Internal,
        }
    }
}

/// What the server's streaming handlers ask the kubelet.
#[async_trait::async_trait]
pub trait StreamingHost: Send + Sync + 'static {
    /// A desired pod by namespace and name.
    fn get_pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// The runtime's URL for an exec session.
    async fn get_exec(
        &self,
        pod: &Pod,
        pod_uid: &str,
        container: &str,
        cmd: Vec<String>,
        opts: StreamOptions,
    ) -> Result<String, StreamingError>;
    /// The runtime's URL for an attach session.
    async fn get_attach(
        &self,
        pod: &Pod,
        pod_uid: &str,
        container: &str,
        opts: StreamOptions,
    ) -> Result<String, StreamingError>;
    /// The runtime's URL for forwarding `ports` of the pod's sandbox.
    async fn get_port_forward(&self, pod: &Pod, ports: Vec<i32>) -> Result<String, StreamingError>;
    /// Runs `cmd` in the container and returns stdout then stderr.
    async fn run_in_container(
        &self,
        pod: &Pod,
        pod_uid: &str,
        container: &str,
        cmd: Vec<String>,
    ) -> Result<Vec<u8>, StreamingError>;
}

/// The kubelet's streaming host over its pod manager and runtime.
pub struct KubeletStreaming {
    pub pod_manager: Arc<PodManager>,
    pub runtime: Arc<dyn Runtime>,
    pub runtime_service: Arc<dyn RuntimeService>,
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

fn full_name(pod: &Pod) -> String {
    build_pod_full_name(name(pod), namespace(pod))
}

impl KubeletStreaming {
    /// The running pod with this UID (translated from a mirror pod's), or
    /// by full name when no UID is given.
    async fn find_pod(
        &self,
        full_name: &str,
        uid: &str,
    ) -> Result<Option<RunningPod>, StreamingError> {
        let pods = self.runtime.get_pods(false).await?;
        let uid = self.pod_manager.translate_pod_uid(uid).0;
        Ok(pods.into_iter().find(|p| {
            if uid.is_empty() {
                build_pod_full_name(&p.name, &p.namespace) == full_name
            } else {
                p.id == uid
            }
        }))
    }

    async fn find_container(
        &self,
        full_name: &str,
        uid: &str,
        container: &str,
    ) -> Result<Option<RunningContainer>, StreamingError> {
        Ok(self
            .find_pod(full_name, uid)
            .await?
            .and_then(|p| p.find_container_by_name(container).cloned()))
    }
}

#[async_trait::async_trait]
impl StreamingHost for KubeletStreaming {
    fn get_pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pod_manager.get_pod_by_name(namespace, name)
    }

    async fn get_exec(
        &self,
        pod: &Pod,
        pod_uid: &str,
        container: &str,
        cmd: Vec<String>,
        opts: StreamOptions,
    ) -> Result<String, StreamingError> {
        let c = self
            .find_container(&full_name(pod), pod_uid, container)
            .await?
            .ok_or_else(|| StreamingError::ContainerNotFound(container.to_string()))?;
        let req = ExecRequest {
            container_id: c.id.id,
            cmd,
            tty: opts.tty,
            stdin: opts.stdin,
            stdout: opts.stdout,
            stderr: opts.stderr,
        };
        Ok(self.runtime_service.exec(&req).await?.url)
    }

    async fn get_attach(
        &self,
        pod: &Pod,
        pod_uid: &str,
        container: &str,
        opts: StreamOptions,
    ) -> Result<String, StreamingError> {
        let full = full_name(pod);
        let not_found = || StreamingError::ContainerNotInPod {
            container: container.to_string(),
            pod: full.clone(),
        };
        let c = self
            .find_container(&full, pod_uid, container)
            .await?
            .ok_or_else(not_found)?;
        // Attach must match the TTY the container was started with.
        let desired = self
            .pod_manager
            .get_pod_by_full_name(&full)
            .filter(|p| pod_uid.is_empty() || p.metadata.uid.as_deref() == Some(pod_uid))
            .ok_or_else(|| StreamingError::PodNotFound(full.clone()))?;
        let spec = get_container_spec(&desired, container).ok_or_else(not_found)?;
        let req = AttachRequest {
            container_id: c.id.id,
            stdin: opts.stdin,
            tty: spec.tty.unwrap_or(false),
            stdout: opts.stdout,
            stderr: opts.stderr,
        };
        Ok(self.runtime_service.attach(&req).await?.url)
    }

    async fn get_port_forward(&self, pod: &Pod, ports: Vec<i32>) -> Result<String, StreamingError> {
        let full = full_name(pod);
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let running = self
            .find_pod(&full, uid)
            .await?
            .filter(|p| !p.is_empty())
            .ok_or_else(|| StreamingError::RunningPodNotFound(full.clone()))?;
        let sandbox = running
            .sandboxes
            .first()
            .ok_or_else(|| StreamingError::NoSandbox(running.name.clone()))?;
        let req = PortForwardRequest {
            pod_sandbox_id: sandbox.id.id.clone(),
            port: ports,
        };
        Ok(self.runtime_service.port_forward(&req).await?.url)
    }

    async fn run_in_container(
        &self,
        pod: &Pod,
        pod_uid: &str,
        container: &str,
        cmd: Vec<String>,
    ) -> Result<Vec<u8>, StreamingError> {
        let c = self
            .find_container(&full_name(pod), pod_uid, container)
            .await?
            .ok_or_else(|| StreamingError::ContainerNotFound(container.to_string()))?;
        // No timeout, as the Go kubelet runs it; stdout, then stderr.
        let out = self
            .runtime_service
            .exec_sync(&c.id.id, &cmd, Duration::ZERO)
            .await
            .map_err(StreamingError::Run)?;
        let mut all = out.stdout;
        all.extend_from_slice(&out.stderr);
        Ok(all)
    }
}
