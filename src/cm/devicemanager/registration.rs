//! The Registration service on `<root-dir>/device-plugins/kubelet.sock`:
//! a plugin says which resource it serves and where; the kubelet dials it
//! back and follows its ListAndWatch stream.

use std::path::Path;
use std::sync::Arc;

use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use super::api::registration_server::{Registration, RegistrationServer};
use super::api::{Empty, KUBELET_SOCKET, RegisterRequest, SUPPORTED_VERSIONS, VERSION};
use super::checkpoint::CHECKPOINT_FILE;
use super::endpoint::Endpoint;
use super::error::DeviceManagerError;
use super::manager::DeviceManager;
use crate::cm::cpumanager::SourcesReadyFn;
use crate::cm::qos_container_manager::ActivePodsFn;
use crate::util::lifecycle::TaskSet;
use crate::util::validation::is_qualified_name;

/// Extended resource names: outside the kubernetes.io namespace, not a
/// quota name, and `requests.<name>` a qualified name.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    if native || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// Checks a registration request as the kubelet does before dialling back.
pub fn validate_registration(r: &RegisterRequest) -> Result<(), DeviceManagerError> {
    if !SUPPORTED_VERSIONS.contains(&r.version.as_str()) {
        return Err(DeviceManagerError::UnsupportedVersion {
            version: r.version.clone(),
            supported: VERSION,
        });
    }
    if !is_extended_resource_name(&r.resource_name) {
        return Err(DeviceManagerError::InvalidResourceName(
            r.resource_name.clone(),
        ));
    }
    Ok(())
}

struct RegistrationService {
    manager: Arc<DeviceManager>,
    tasks: TaskSet,
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let r = request.into_inner();
        tracing::info!(resource_name = %r.resource_name, "Got registration request from device plugin with resource");
        crate::metrics::kubelet::device_plugin_registration().inc(&[&r.resource_name]);
        if let Err(e) = validate_registration(&r) {
            tracing::info!(resource_name = %r.resource_name, err = %e, "Bad registration request from device plugin with resource");
            return Err(Status::unknown(e.to_string()));
        }
        let (manager, tasks) = (self.manager.clone(), self.tasks.clone());
        self.tasks.spawn("device-plugin-endpoint", async move {
            manager.add_endpoint(r, &tasks).await;
        });
        Ok(Response::new(Empty {}))
    }
}

/// Files left in the socket directory by an earlier run: everything but
/// the checkpoint and directories.
fn remove_contents(dir: &Path) -> Result<(), std::io::Error> {
    let mut first_err = None;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        if entry.file_name() == CHECKPOINT_FILE {
            continue;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(err = %e, path = %path.display(), "Failed to stat file");
                continue;
            }
        }
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::error!(err = %e, path = %path.display(), "Failed to remove file");
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

impl DeviceManager {
    /// Dials the plugin back and follows its devices.
    pub(super) async fn add_endpoint(self: Arc<Self>, r: RegisterRequest, tasks: &TaskSet) {
        let path = self.socket_dir.join(&r.endpoint);
        let endpoint = match Endpoint::dial(&path, &r.resource_name, self.clock.clone()).await {
            Ok(e) => Arc::new(e),
            Err(e) => {
                tracing::error!(err = %e, resource_name = %r.resource_name, endpoint = %r.endpoint, "Failed to dial device plugin with request");
                return;
            }
        };
        self.register_endpoint(&r.resource_name, r.options, endpoint.clone());
        let me = self.clone();
        let token = tasks.token();
        tasks.spawn("device-plugin-list-and-watch", async move {
            let resource = endpoint.resource_name().to_string();
            let updates = me.clone();
            let on_devices = move |resource: &str, devices| {
                updates.apply_devices(resource, devices);
                // The checkpoint write blocks: off the async threads.
                let m = updates.clone();
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = m.write_checkpoint() {
                        tracing::error!(err = %e, "Writing checkpoint encountered");
                    }
                });
            };
            tokio::select! {
                _ = token.cancelled() => {}
                _ = endpoint.run(on_devices) => {}
            }
            me.endpoint_ended(&resource, &endpoint);
        });
    }

    /// Start: the checkpoint is loaded, stale files in the socket directory
    /// go, and the Registration service listens on `kubelet.sock` until
    /// shutdown (the plugins see the new socket and register again).
    pub async fn start(
        self: &Arc<Self>,
        tasks: &TaskSet,
        active_pods: ActivePodsFn,
        sources_ready: SourcesReadyFn,
    ) -> Result<(), DeviceManagerError> {
        crate::vlog!(2, "Starting Device Plugin manager");
        self.set_sources(active_pods, sources_ready);
        let me = self.clone();
        let dir = self.socket_dir.clone();
        let socket = dir.join(KUBELET_SOCKET);
        let listener = tokio::task::spawn_blocking(move || {
            if let Err(e) = me.read_checkpoint() {
                tracing::info!(err = %e, "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date");
            }
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(&dir)
                .map_err(|source| DeviceManagerError::Socket {
                what: "create",
                path: dir.clone(),
                source,
            })?;
            if let Err(e) = remove_contents(&dir) {
                tracing::error!(err = %e, path = %dir.display(), "Fail to clean up stale content under socket dir");
            }
            let l = std::os::unix::net::UnixListener::bind(&socket).map_err(|source| {
                tracing::error!(err = %source, "Failed to listen to socket while starting device plugin registry");
                DeviceManagerError::Socket {
                    what: "listen on",
                    path: socket.clone(),
                    source,
                }
            })?;
            l.set_nonblocking(true)
                .map_err(|source| DeviceManagerError::Socket {
                    what: "listen on",
                    path: socket.clone(),
                    source,
                })?;
            Ok::<_, DeviceManagerError>(l)
        })
        .await
        .map_err(|e| DeviceManagerError::Join(e.to_string()))??;
        let path = self.socket_dir.join(KUBELET_SOCKET);
        let listener = tokio::net::UnixListener::from_std(listener).map_err(|source| {
            DeviceManagerError::Socket {
                what: "listen on",
                path: path.clone(),
                source,
            }
        })?;
        let service = RegistrationService {
            manager: self.clone(),
            tasks: tasks.clone(),
        };
        let (token, me) = (tasks.token(), self.clone());
        tasks.spawn("device-plugin-registration", async move {
            let served = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(
                    RegistrationServer::new(service),
                    UnixListenerStream::new(listener),
                    token.cancelled(),
                )
                .await;
            if let Err(e) = served {
                tracing::error!(err = %e, "Device plugin registration server stopped");
            }
            me.stop_endpoints();
            // Closing the listener unlinks its socket (as Go's does): the
            // plugins see the kubelet gone, and register again when it is
            // back.
            let socket = me.socket_dir.join(KUBELET_SOCKET);
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_file(socket)).await;
        });
        crate::vlog!(2, path = %path.display(), "Serving device plugin registration server on socket");
        Ok(())
    }
}
