//! The pod-resources socket: both API versions on one gRPC server over a
//! unix socket, dispatched by the service path.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::body::Body;
use tower::Service;

use super::api::v1::pod_resources_lister_server::PodResourcesListerServer as V1ListerServer;
use super::api::v1alpha1::pod_resources_lister_server::PodResourcesListerServer as AlphaListerServer;
use super::server::{Providers, V1Server, V1alpha1Server};
use crate::util::lifecycle::TaskSet;

/// The directory under the root directory.
pub const POD_RESOURCES_DIR: &str = "pod-resources";
/// The socket in it.
pub const POD_RESOURCES_SOCKET: &str = "kubelet.sock";

/// Routes `/v1alpha1.PodResourcesLister/*` to v1alpha1, the rest to v1.
#[derive(Clone)]
struct BothVersions {
    v1: V1ListerServer<V1Server>,
    alpha: AlphaListerServer<V1alpha1Server>,
}

impl Service<http::Request<Body>> for BothVersions {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path().starts_with("/v1alpha1.") {
            let mut s = self.alpha.clone();
            Box::pin(async move { s.call(req).await })
        } else {
            let mut s = self.v1.clone();
            Box::pin(async move { s.call(req).await })
        }
    }
}

/// The bound pod-resources server.
pub struct PodResourcesServer {
    path: PathBuf,
    listener: tokio::net::UnixListener,
    providers: Providers,
}

impl PodResourcesServer {
    /// Binds `<root-dir>/pod-resources/kubelet.sock` (a stale socket file
    /// is replaced).
    pub async fn bind(root_dir: &Path, providers: Providers) -> Result<Self, std::io::Error> {
        let dir = root_dir.join(POD_RESOURCES_DIR);
        let path = dir.join(POD_RESOURCES_SOCKET);
        let p = path.clone();
        let listener = tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(&dir)?;
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let l = std::os::unix::net::UnixListener::bind(&p)?;
            l.set_nonblocking(true)?;
            Ok(l)
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(PodResourcesServer {
            path,
            listener: tokio::net::UnixListener::from_std(listener)?,
            providers,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves until shutdown.
    pub fn start(self, tasks: &TaskSet) {
        let token = tasks.token();
        let service = BothVersions {
            v1: V1ListerServer::new(V1Server(self.providers.clone())),
            alpha: AlphaListerServer::new(V1alpha1Server(self.providers)),
        };
        let path = self.path;
        tracing::info!(path = %path.display(), "Starting the pod resources API server");
        let listener = self.listener;
        tasks.spawn("pod-resources-server", async move {
            let served = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(
                    service,
                    UnixListenerStream::new(listener),
                    token.cancelled(),
                )
                .await;
            if let Err(e) = served {
                tracing::error!(err = %e, path = %path.display(), "Pod resources API server stopped");
            }
        });
    }
}
