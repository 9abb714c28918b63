//! `RuntimeService` over gRPC: the kubelet's client of the runtime's CRI v1
//! RuntimeService on a unix socket.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tonic::transport::Channel;

use super::api;
use super::api::runtime_service_client::RuntimeServiceClient;
use super::connection::{MAX_MSG_SIZE, parse_endpoint, request, unary, unix_channel};
use super::error::CriError;
use super::log_reduction::{IDENTICAL_ERROR_DELAY, LogReduction};
use super::service::{ExecSyncOutput, Result, RuntimeService};
use super::verify::{MissingField, verify_container_status, verify_sandbox_status};
use crate::util::clock::{Clock, RealClock};
use crate::vlog;

/// The CRI client version the kubelet reports in Version requests.
pub const KUBE_RUNTIME_API_VERSION: &str = "0.1.0";

/// The runtime service of a CRI runtime, reached over a unix socket.
pub struct RemoteRuntimeService {
    endpoint: String,
    timeout: Duration,
    client: RuntimeServiceClient<Channel>,
    log_reduction: LogReduction,
}

impl std::fmt::Debug for RemoteRuntimeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteRuntimeService")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RemoteRuntimeService {
    /// Opens a channel to `endpoint` and checks that the runtime serves the
    /// CRI v1 RuntimeService (a Version call bounded by `timeout`). Every
    /// later call is bounded by `timeout` (runtimeRequestTimeout) unless it
    /// is one of the long-running calls.
    pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Self> {
        vlog!(3, endpoint, "Connecting to runtime service");
        let service = Self::new_lazy(endpoint, timeout, Arc::new(RealClock))?;
        service.check_v1().await?;
        Ok(service)
    }

    /// A client that has not talked to the runtime yet (no API check).
    pub fn new_lazy(endpoint: &str, timeout: Duration, clock: Arc<dyn Clock>) -> Result<Self> {
        let parsed = parse_endpoint(endpoint)?;
        let channel = unix_channel(&parsed, timeout)?;
        let client = RuntimeServiceClient::new(channel).max_decoding_message_size(MAX_MSG_SIZE);
        Ok(RemoteRuntimeService {
            endpoint: endpoint.to_string(),
            timeout,
            client,
            log_reduction: LogReduction::new(clock, IDENTICAL_ERROR_DELAY),
        })
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The per-call bound (runtimeRequestTimeout).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn check_v1(&self) -> Result<()> {
        vlog!(4, "Finding the CRI API runtime version");
        let mut client = self.client.clone();
        let res = unary(
            &self.endpoint,
            "Version",
            Some(self.timeout),
            client.version(request(api::VersionRequest::default(), Some(self.timeout))),
        )
        .await;
        match res {
            Ok(_) => {
                vlog!(2, "Using CRI v1 runtime API");
                Ok(())
            }
            Err(err) if err.is_unimplemented() => Err(CriError::UnsupportedApi {
                endpoint: self.endpoint.clone(),
                service: "runtime",
                message: err.status_message(),
            }),
            Err(err) => {
                tracing::error!(endpoint = %self.endpoint, error = %err, "Unable to determine runtime API version");
                Err(err)
            }
        }
    }

    fn client(&self) -> RuntimeServiceClient<Channel> {
        self.client.clone()
    }

    fn invalid(&self, rpc: &'static str, reason: String) -> CriError {
        let err = CriError::InvalidResponse {
            endpoint: self.endpoint.clone(),
            rpc,
            reason,
        };
        tracing::error!(error = %err, "{rpc} failed");
        err
    }

    fn incomplete(&self, rpc: &'static str, field: MissingField) -> CriError {
        let err = CriError::IncompleteStatus {
            endpoint: self.endpoint.clone(),
            rpc,
            field,
        };
        tracing::error!(error = %err, "{rpc} failed");
        err
    }

    fn logged(&self, err: CriError, what: &'static str) -> CriError {
        tracing::error!(error = %err, "{what} from runtime service failed");
        err
    }
}

fn timeout_plus_seconds(base: Duration, seconds: i64) -> Duration {
    base + Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

#[async_trait]
impl RuntimeService for RemoteRuntimeService {
    async fn version(&self, api_version: &str) -> Result<api::VersionResponse> {
        vlog!(10, api_version, timeout = ?self.timeout, "[RemoteRuntimeService] Version");
        let req = api::VersionRequest {
            version: api_version.to_string(),
        };
        let t = Some(self.timeout);
        let resp = unary(
            &self.endpoint,
            "Version",
            t,
            self.client().version(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "Version"))?;
        vlog!(10, response = ?resp, "[RemoteRuntimeService] Version Response");
        if resp.version.is_empty()
            || resp.runtime_name.is_empty()
            || resp.runtime_api_version.is_empty()
            || resp.runtime_version.is_empty()
        {
            return Err(self.invalid(
                "Version",
                format!("not all fields are set in VersionResponse ({resp:?})"),
            ));
        }
        Ok(resp)
    }

    async fn run_pod_sandbox(
        &self,
        config: &api::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String> {
        // Sandbox creation (image, network set-up) gets twice the bound.
        let t = Some(self.timeout * 2);
        vlog!(10, config = ?config, runtime_handler, timeout = ?t, "[RemoteRuntimeService] RunPodSandbox");
        let req = api::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: runtime_handler.to_string(),
        };
        let resp = unary(
            &self.endpoint,
            "RunPodSandbox",
            t,
            self.client().run_pod_sandbox(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "RunPodSandbox"))?;
        if resp.pod_sandbox_id.is_empty() {
            return Err(self.invalid(
                "RunPodSandbox",
                format!("PodSandboxId is not set for sandbox {:?}", config.metadata),
            ));
        }
        vlog!(10, pod_sandbox_id = %resp.pod_sandbox_id, "[RemoteRuntimeService] RunPodSandbox Response");
        Ok(resp.pod_sandbox_id)
    }

    async fn stop_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<()> {
        vlog!(10, pod_sandbox_id, timeout = ?self.timeout, "[RemoteRuntimeService] StopPodSandbox");
        let t = Some(self.timeout);
        let req = api::StopPodSandboxRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
        };
        unary(
            &self.endpoint,
            "StopPodSandbox",
            t,
            self.client().stop_pod_sandbox(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "StopPodSandbox"))?;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, pod_sandbox_id: &str) -> Result<()> {
        vlog!(10, pod_sandbox_id, timeout = ?self.timeout, "[RemoteRuntimeService] RemovePodSandbox");
        let t = Some(self.timeout);
        let req = api::RemovePodSandboxRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
        };
        unary(
            &self.endpoint,
            "RemovePodSandbox",
            t,
            self.client().remove_pod_sandbox(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "RemovePodSandbox"))?;
        Ok(())
    }

    async fn pod_sandbox_status(
        &self,
        pod_sandbox_id: &str,
        verbose: bool,
    ) -> Result<api::PodSandboxStatusResponse> {
        vlog!(10, pod_sandbox_id, timeout = ?self.timeout, "[RemoteRuntimeService] PodSandboxStatus");
        let t = Some(self.timeout);
        let req = api::PodSandboxStatusRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
            verbose,
        };
        // Not logged: callers routinely ask about sandboxes that are gone.
        let resp = unary(
            &self.endpoint,
            "PodSandboxStatus",
            t,
            self.client().pod_sandbox_status(request(req, t)),
        )
        .await?;
        if let Some(status) = resp.status.as_ref() {
            verify_sandbox_status(status).map_err(|f| self.incomplete("PodSandboxStatus", f))?;
        }
        Ok(resp)
    }

    async fn list_pod_sandbox(
        &self,
        filter: Option<api::PodSandboxFilter>,
    ) -> Result<Vec<api::PodSandbox>> {
        vlog!(10, filter = ?filter, timeout = ?self.timeout, "[RemoteRuntimeService] ListPodSandbox");
        let t = Some(self.timeout);
        let req = api::ListPodSandboxRequest { filter };
        let resp = unary(
            &self.endpoint,
            "ListPodSandbox",
            t,
            self.client().list_pod_sandbox(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "ListPodSandbox"))?;
        Ok(resp.items)
    }

    async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: &api::ContainerConfig,
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String> {
        vlog!(10, pod_sandbox_id, timeout = ?self.timeout, "[RemoteRuntimeService] CreateContainer");
        let t = Some(self.timeout);
        let req = api::CreateContainerRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
            config: Some(config.clone()),
            sandbox_config: Some(sandbox_config.clone()),
        };
        let resp = unary(
            &self.endpoint,
            "CreateContainer",
            t,
            self.client().create_container(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "CreateContainer"))?;
        if resp.container_id.is_empty() {
            return Err(self.invalid(
                "CreateContainer",
                format!("ContainerId is not set for container {:?}", config.metadata),
            ));
        }
        vlog!(10, pod_sandbox_id, container_id = %resp.container_id, "[RemoteRuntimeService] CreateContainer Response");
        Ok(resp.container_id)
    }

    async fn start_container(&self, container_id: &str) -> Result<()> {
        vlog!(10, container_id, timeout = ?self.timeout, "[RemoteRuntimeService] StartContainer");
        let t = Some(self.timeout);
        let req = api::StartContainerRequest {
            container_id: container_id.to_string(),
        };
        unary(
            &self.endpoint,
            "StartContainer",
            t,
            self.client().start_container(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "StartContainer"))?;
        Ok(())
    }

    async fn stop_container(&self, container_id: &str, timeout: i64) -> Result<()> {
        // The grace period plus the usual bound, to leave time for SIGKILL.
        let t = Some(timeout_plus_seconds(self.timeout, timeout));
        vlog!(
            10,
            container_id,
            timeout,
            "[RemoteRuntimeService] StopContainer"
        );
        self.log_reduction.clear(container_id);
        let req = api::StopContainerRequest {
            container_id: container_id.to_string(),
            timeout,
        };
        unary(
            &self.endpoint,
            "StopContainer",
            t,
            self.client().stop_container(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "StopContainer"))?;
        Ok(())
    }

    async fn remove_container(&self, container_id: &str) -> Result<()> {
        vlog!(10, container_id, timeout = ?self.timeout, "[RemoteRuntimeService] RemoveContainer");
        let t = Some(self.timeout);
        self.log_reduction.clear(container_id);
        let req = api::RemoveContainerRequest {
            container_id: container_id.to_string(),
        };
        unary(
            &self.endpoint,
            "RemoveContainer",
            t,
            self.client().remove_container(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "RemoveContainer"))?;
        Ok(())
    }

    async fn list_containers(
        &self,
        filter: Option<api::ContainerFilter>,
    ) -> Result<Vec<api::Container>> {
        vlog!(10, filter = ?filter, timeout = ?self.timeout, "[RemoteRuntimeService] ListContainers");
        let t = Some(self.timeout);
        let req = api::ListContainersRequest { filter };
        let resp = unary(
            &self.endpoint,
            "ListContainers",
            t,
            self.client().list_containers(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "ListContainers"))?;
        Ok(resp.containers)
    }

    async fn container_status(
        &self,
        container_id: &str,
        verbose: bool,
    ) -> Result<api::ContainerStatusResponse> {
        vlog!(10, container_id, timeout = ?self.timeout, "[RemoteRuntimeService] ContainerStatus");
        let t = Some(self.timeout);
        let req = api::ContainerStatusRequest {
            container_id: container_id.to_string(),
            verbose,
        };
        let resp = match unary(
            &self.endpoint,
            "ContainerStatus",
            t,
            self.client().container_status(request(req, t)),
        )
        .await
        {
            Ok(resp) => resp,
            Err(err) => {
                if self
                    .log_reduction
                    .should_log(&err.to_string(), container_id)
                {
                    tracing::error!(error = %err, container_id, "ContainerStatus from runtime service failed");
                }
                return Err(err);
            }
        };
        self.log_reduction.clear(container_id);
        if let Some(status) = resp.status.as_ref() {
            verify_container_status(status).map_err(|f| self.incomplete("ContainerStatus", f))?;
        }
        Ok(resp)
    }

    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &api::ContainerResources,
    ) -> Result<()> {
        vlog!(10, container_id, timeout = ?self.timeout, "[RemoteRuntimeService] UpdateContainerResources");
        let t = Some(self.timeout);
        let req = api::UpdateContainerResourcesRequest {
            container_id: container_id.to_string(),
            linux: resources.linux.clone(),
            windows: resources.windows,
            annotations: Default::default(),
        };
        unary(
            &self.endpoint,
            "UpdateContainerResources",
            t,
            self.client().update_container_resources(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "UpdateContainerResources"))?;
        Ok(())
    }

    async fn reopen_container_log(&self, container_id: &str) -> Result<()> {
        vlog!(10, container_id, timeout = ?self.timeout, "[RemoteRuntimeService] ReopenContainerLog");
        let t = Some(self.timeout);
        let req = api::ReopenContainerLogRequest {
            container_id: container_id.to_string(),
        };
        unary(
            &self.endpoint,
            "ReopenContainerLog",
            t,
            self.client().reopen_container_log(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "ReopenContainerLog"))?;
        Ok(())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecSyncOutput> {
        vlog!(10, container_id, timeout = ?timeout, "[RemoteRuntimeService] ExecSync");
        // No bound when no timeout was asked for; otherwise the command's
        // timeout plus the usual bound, leaving the runtime time to clean up.
        let t = (!timeout.is_zero()).then(|| self.timeout + timeout);
        let req = api::ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd: cmd.to_vec(),
            timeout: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        };
        let joined = cmd.join(" ");
        let resp = match unary(
            &self.endpoint,
            "ExecSync",
            t,
            self.client().exec_sync(request(req, t)),
        )
        .await
        {
            Ok(resp) => resp,
            Err(err) => {
                tracing::error!(error = %err, container_id, cmd = ?cmd, "ExecSync cmd from runtime service failed");
                if err.is_deadline_exceeded() {
                    return Err(CriError::ExecTimeout {
                        container: container_id.to_string(),
                        cmd: joined,
                        timeout,
                    });
                }
                return Err(err);
            }
        };
        vlog!(
            10,
            container_id,
            exit_code = resp.exit_code,
            "[RemoteRuntimeService] ExecSync Response"
        );
        if resp.exit_code != 0 {
            return Err(CriError::ExitCode {
                container: container_id.to_string(),
                cmd: joined,
                code: resp.exit_code,
                stdout: resp.stdout,
                stderr: resp.stderr,
            });
        }
        Ok(ExecSyncOutput {
            stdout: resp.stdout,
            stderr: resp.stderr,
        })
    }

    async fn exec(&self, req: &api::ExecRequest) -> Result<api::ExecResponse> {
        vlog!(10, container_id = %req.container_id, timeout = ?self.timeout, "[RemoteRuntimeService] Exec");
        let t = Some(self.timeout);
        let resp = unary(
            &self.endpoint,
            "Exec",
            t,
            self.client().exec(request(req.clone(), t)),
        )
        .await
        .map_err(|e| self.logged(e, "Exec"))?;
        if resp.url.is_empty() {
            return Err(self.invalid("Exec", "URL is not set".into()));
        }
        Ok(resp)
    }

    async fn attach(&self, req: &api::AttachRequest) -> Result<api::AttachResponse> {
        vlog!(10, container_id = %req.container_id, timeout = ?self.timeout, "[RemoteRuntimeService] Attach");
        let t = Some(self.timeout);
        let resp = unary(
            &self.endpoint,
            "Attach",
            t,
            self.client().attach(request(req.clone(), t)),
        )
        .await
        .map_err(|e| self.logged(e, "Attach"))?;
        if resp.url.is_empty() {
            return Err(self.invalid("Attach", "URL is not set".into()));
        }
        Ok(resp)
    }

    async fn port_forward(
        &self,
        req: &api::PortForwardRequest,
    ) -> Result<api::PortForwardResponse> {
        vlog!(10, pod_sandbox_id = %req.pod_sandbox_id, port = ?req.port, timeout = ?self.timeout, "[RemoteRuntimeService] PortForward");
        let t = Some(self.timeout);
        let resp = unary(
            &self.endpoint,
            "PortForward",
            t,
            self.client().port_forward(request(req.clone(), t)),
        )
        .await
        .map_err(|e| self.logged(e, "PortForward"))?;
        if resp.url.is_empty() {
            return Err(self.invalid("PortForward", "URL is not set".into()));
        }
        Ok(resp)
    }

    async fn container_stats(&self, container_id: &str) -> Result<Option<api::ContainerStats>> {
        vlog!(10, container_id, timeout = ?self.timeout, "[RemoteRuntimeService] ContainerStats");
        let t = Some(self.timeout);
        let req = api::ContainerStatsRequest {
            container_id: container_id.to_string(),
        };
        match unary(
            &self.endpoint,
            "ContainerStats",
            t,
            self.client().container_stats(request(req, t)),
        )
        .await
        {
            Ok(resp) => {
                self.log_reduction.clear(container_id);
                Ok(resp.stats)
            }
            Err(err) => {
                if self
                    .log_reduction
                    .should_log(&err.to_string(), container_id)
                {
                    tracing::error!(error = %err, container_id, "ContainerStats from runtime service failed");
                }
                Err(err)
            }
        }
    }

    async fn list_container_stats(
        &self,
        filter: Option<api::ContainerStatsFilter>,
    ) -> Result<Vec<api::ContainerStats>> {
        vlog!(10, filter = ?filter, "[RemoteRuntimeService] ListContainerStats");
        // Unbounded: collecting writable-layer usage can take long.
        let req = api::ListContainerStatsRequest { filter };
        let resp = unary(
            &self.endpoint,
            "ListContainerStats",
            None,
            self.client().list_container_stats(request(req, None)),
        )
        .await
        .map_err(|e| self.logged(e, "ListContainerStats"))?;
        Ok(resp.stats)
    }

    async fn pod_sandbox_stats(
        &self,
        pod_sandbox_id: &str,
    ) -> Result<Option<api::PodSandboxStats>> {
        vlog!(10, pod_sandbox_id, timeout = ?self.timeout, "[RemoteRuntimeService] PodSandboxStats");
        let t = Some(self.timeout);
        let req = api::PodSandboxStatsRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
        };
        match unary(
            &self.endpoint,
            "PodSandboxStats",
            t,
            self.client().pod_sandbox_stats(request(req, t)),
        )
        .await
        {
            Ok(resp) => {
                self.log_reduction.clear(pod_sandbox_id);
                Ok(resp.stats)
            }
            Err(err) => {
                if self
                    .log_reduction
                    .should_log(&err.to_string(), pod_sandbox_id)
                {
                    tracing::error!(error = %err, pod_sandbox_id, "PodSandboxStats from runtime service failed");
                }
                Err(err)
            }
        }
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: Option<api::PodSandboxStatsFilter>,
    ) -> Result<Vec<api::PodSandboxStats>> {
        vlog!(10, filter = ?filter, "[RemoteRuntimeService] ListPodSandboxStats");
        let t = Some(self.timeout);
        let req = api::ListPodSandboxStatsRequest { filter };
        let resp = unary(
            &self.endpoint,
            "ListPodSandboxStats",
            t,
            self.client().list_pod_sandbox_stats(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "ListPodSandboxStats"))?;
        Ok(resp.stats)
    }

    async fn update_runtime_config(&self, runtime_config: &api::RuntimeConfig) -> Result<()> {
        vlog!(10, runtime_config = ?runtime_config, timeout = ?self.timeout, "[RemoteRuntimeService] UpdateRuntimeConfig");
        let t = Some(self.timeout);
        let req = api::UpdateRuntimeConfigRequest {
            runtime_config: Some(runtime_config.clone()),
        };
        unary(
            &self.endpoint,
            "UpdateRuntimeConfig",
            t,
            self.client().update_runtime_config(request(req, t)),
        )
        .await?;
        Ok(())
    }

    async fn status(&self, verbose: bool) -> Result<api::StatusResponse> {
        vlog!(10, timeout = ?self.timeout, "[RemoteRuntimeService] Status");
        let t = Some(self.timeout);
        let req = api::StatusRequest { verbose };
        let resp = unary(
            &self.endpoint,
            "Status",
            t,
            self.client().status(request(req, t)),
        )
        .await
        .map_err(|e| self.logged(e, "Status"))?;
        if resp.status.as_ref().is_none_or(|s| s.conditions.len() < 2) {
            return Err(self.invalid(
                "Status",
                "RuntimeReady or NetworkReady condition are not set".into(),
            ));
        }
        Ok(resp)
    }

    async fn runtime_config(&self) -> Result<api::RuntimeConfigResponse> {
        vlog!(10, timeout = ?self.timeout, "[RemoteRuntimeService] RuntimeConfig");
        let t = Some(self.timeout);
        unary(
            &self.endpoint,
            "RuntimeConfig",
            t,
            self.client()
                .runtime_config(request(api::RuntimeConfigRequest {}, t)),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_bound_adds_the_grace_period() {
        let base = Duration::from_secs(120);
        assert_eq!(timeout_plus_seconds(base, 30), Duration::from_secs(150));
        assert_eq!(timeout_plus_seconds(base, 0), base);
        assert_eq!(timeout_plus_seconds(base, -5), base);
    }

    #[tokio::test]
    async fn bad_endpoint_is_refused_before_dialling() {
        let err = RemoteRuntimeService::connect("tcp://127.0.0.1:1", Duration::from_secs(1))
            .await
            .expect_err("tcp is not supported");
        assert!(matches!(err, CriError::InvalidEndpoint { .. }), "{err:?}");
    }
}
