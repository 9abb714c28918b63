//! One registered device plugin as the kubelet sees it: a gRPC client on
//! the plugin's socket, the ListAndWatch stream, and the moment it stopped
//! (its resource stays in capacity for a grace period after that).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint as TonicEndpoint, Uri};

use super::api::device_plugin_client::DevicePluginClient;
use super::api::{
    AllocateRequest, AllocateResponse, ContainerAllocateRequest,
    ContainerPreferredAllocationRequest, Device, DevicePluginOptions, Empty,
    PRE_START_CONTAINER_TIMEOUT, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use super::error::{DeviceManagerError, rpc_error};
use crate::util::clock::Clock;

/// How long a stopped plugin's resource stays in capacity.
pub const ENDPOINT_STOP_GRACE_PERIOD: Duration = Duration::from_secs(5 * 60);
/// How long dialling a plugin may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// A device plugin's endpoint.
pub struct Endpoint {
    resource_name: String,
    socket_path: PathBuf,
    /// `None` for the placeholder of a resource known only from the checkpoint.
    client: Option<DevicePluginClient<Channel>>,
    stop_time: Mutex<Option<tokio::time::Instant>>,
    stopped: CancellationToken,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("resource_name", &self.resource_name)
            .field("socket_path", &self.socket_path)
            .finish()
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.resource_name, self.socket_path.display())
    }
}

impl Endpoint {
    /// Dials the plugin's socket (waits for the connection, as Go's
    /// blocking dial, at most 10 s).
    pub async fn dial(
        socket_path: &Path,
        resource_name: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, DeviceManagerError> {
        let path = socket_path.to_path_buf();
        let dial_path = path.clone();
        let endpoint = TonicEndpoint::from_static("http://localhost").connect_timeout(DIAL_TIMEOUT);
        let channel = endpoint.connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = dial_path.clone();
            async move { tokio::net::UnixStream::connect(p).await.map(TokioIo::new) }
        }));
        let channel = tokio::time::timeout(DIAL_TIMEOUT, channel)
            .await
            .map_err(|_| DeviceManagerError::Dial {
                path: path.clone(),
                reason: "context deadline exceeded".into(),
            })?
            .map_err(|e| DeviceManagerError::Dial {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        Ok(Endpoint {
            resource_name: resource_name.to_string(),
            socket_path: path,
            client: Some(DevicePluginClient::new(channel)),
            stop_time: Mutex::new(None),
            stopped: CancellationToken::new(),
            clock,
        })
    }

    /// A stopped endpoint for a resource known only from the checkpoint:
    /// its grace period starts now.
    pub fn stopped(resource_name: &str, clock: Arc<dyn Clock>) -> Self {
        let now = clock.monotonic();
        let stopped = CancellationToken::new();
        stopped.cancel();
        Endpoint {
            resource_name: resource_name.to_string(),
            socket_path: PathBuf::new(),
            client: None,
            stop_time: Mutex::new(Some(now)),
            stopped,
            clock,
        }
    }

    pub fn resource_name(&self) -> &str {
        &self.resource_name
    }

    fn stop_time(&self) -> Option<tokio::time::Instant> {
        *self.stop_time.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_stopped(&self) -> bool {
        self.stop_time().is_some()
    }

    /// Stopped longer ago than the grace period.
    pub fn stop_grace_period_expired(&self) -> bool {
        self.stop_time()
            .is_some_and(|t| self.clock.monotonic().duration_since(t) > ENDPOINT_STOP_GRACE_PERIOD)
    }

    /// Stops the endpoint (ends ListAndWatch; later calls fail).
    pub fn stop(&self) {
        let mut t = self.stop_time.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            *t = Some(self.clock.monotonic());
        }
        self.stopped.cancel();
    }

    fn client(&self) -> Result<DevicePluginClient<Channel>, DeviceManagerError> {
        match &self.client {
            Some(c) if !self.is_stopped() => Ok(c.clone()),
            _ => Err(DeviceManagerError::EndpointStopped(self.to_string())),
        }
    }

    pub async fn get_device_plugin_options(
        &self,
    ) -> Result<DevicePluginOptions, DeviceManagerError> {
        let mut c = self.client()?;
        c.get_device_plugin_options(Empty {})
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| DeviceManagerError::Allocate(rpc_error(&s)))
    }

    /// Runs ListAndWatch until the stream ends or the endpoint stops,
    /// handing every device list to `on_devices`.
    pub async fn run(&self, on_devices: impl Fn(&str, Vec<Device>)) {
        let Ok(mut c) = self.client() else { return };
        let stream = tokio::select! {
            _ = self.stopped.cancelled() => return,
            r = c.list_and_watch(Empty {}) => r,
        };
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(e) => {
                tracing::error!(err = %rpc_error(&e), resource_name = %self.resource_name, "listAndWatch ended unexpectedly for device plugin");
                return;
            }
        };
        loop {
            let next = tokio::select! {
                _ = self.stopped.cancelled() => return,
                m = stream.message() => m,
            };
            match next {
                Ok(Some(resp)) => {
                    crate::vlog!(2, resource_name = %self.resource_name, resource_capacity = resp.devices.len(), "State pushed for device plugin");
                    on_devices(&self.resource_name, resp.devices);
                }
                Ok(None) => {
                    tracing::error!(err = "EOF", resource_name = %self.resource_name, "listAndWatch ended unexpectedly for device plugin");
                    return;
                }
                Err(e) => {
                    tracing::error!(err = %rpc_error(&e), resource_name = %self.resource_name, "listAndWatch ended unexpectedly for device plugin");
                    return;
                }
            }
        }
    }

    pub async fn get_preferred_allocation(
        &self,
        available: Vec<String>,
        must_include: Vec<String>,
        size: usize,
    ) -> Result<PreferredAllocationResponse, DeviceManagerError> {
        let mut c = self.client()?;
        let req = PreferredAllocationRequest {
            container_requests: vec![ContainerPreferredAllocationRequest {
                available_device_i_ds: available,
                must_include_device_i_ds: must_include,
                allocation_size: i32::try_from(size).unwrap_or(i32::MAX),
            }],
        };
        c.get_preferred_allocation(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| DeviceManagerError::PreferredAllocation(rpc_error(&s)))
    }

    pub async fn allocate(
        &self,
        devs: Vec<String>,
    ) -> Result<AllocateResponse, DeviceManagerError> {
        let mut c = self.client()?;
        let req = AllocateRequest {
            container_requests: vec![ContainerAllocateRequest { devices_ids: devs }],
        };
        c.allocate(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| DeviceManagerError::Allocate(rpc_error(&s)))
    }

    pub async fn pre_start_container(
        &self,
        devs: Vec<String>,
    ) -> Result<PreStartContainerResponse, DeviceManagerError> {
        let mut c = self.client()?;
        let mut req = tonic::Request::new(PreStartContainerRequest { devices_ids: devs });
        req.set_timeout(PRE_START_CONTAINER_TIMEOUT);
        c.pre_start_container(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| DeviceManagerError::PreStartContainer(rpc_error(&s)))
    }
}
