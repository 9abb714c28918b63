//! Lifecycle hooks (postStart, preStop): exec through the runtime
//! (ExecSync, no timeout) or an HTTP GET to the container. A hook fails on
//! an exec error or non-zero exit, or when the HTTP request cannot be made;
//! the HTTP status does not matter, as in the v1.25 kubelet.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::manager::KubeGenericRuntimeManager;
use crate::kubelet::container::{ContainerId, RuntimeError, format_pod};

/// Why an HTTP hook's request could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HookHttpError {
    #[error("parse {url:?}: {source}")]
    Url {
        url: String,
        source: http::uri::InvalidUri,
    },
    #[error(transparent)]
    Request(#[from] http::Error),
    #[error("Get {target:?}: {source}")]
    Get {
        target: Box<http::Uri>,
        source: Box<hyper_util::client::legacy::Error>,
    },
    #[error(transparent)]
    Location(#[from] http::header::ToStrError),
    #[error(transparent)]
    Redirect(#[from] url::ParseError),
    #[error("unsupported redirect to {0}")]
    RedirectScheme(url::Url),
    #[error("{0}")]
    RedirectUri(http::uri::InvalidUri),
    #[error("Get {url:?}: stopped after {MAX_REDIRECTS} redirects")]
    TooManyRedirects { url: String },
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    PodStatus(#[from] RuntimeError),
    #[error("failed to find networking container")]
    NoNetwork,
    #[error("no httpGet")]
    NoHttpGet,
}

/// A named port the container does not declare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("couldn't find port: {port} in {container}")]
pub struct PortError {
    pub port: String,
    pub container: String,
}

/// A failed lifecycle hook; the text is the event's message.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(
        "Exec lifecycle hook ([{command}]) for Container {container:?} in Pod {pod:?} failed - error: {status}, message: {output:?}"
    )]
    Exec {
        command: String,
        container: String,
        pod: String,
        status: String,
        output: String,
    },
    #[error(
        "HTTP lifecycle hook ({path}) for Container {container:?} in Pod {pod:?} failed - error: {source}, message: \"\""
    )]
    Http {
        path: String,
        container: String,
        pod: String,
        source: Box<HookHttpError>,
    },
    #[error("Cannot run handler: invalid handler: neither exec nor httpGet is set")]
    InvalidHandler,
}

/// Response bytes kept from an HTTP hook.
const MAX_RESP_BODY_LENGTH: usize = 10 * 1024;
/// Redirects an HTTP hook follows, as Go's default client does.
const MAX_REDIRECTS: usize = 10;

/// The HTTP client hooks use.
#[derive(Clone)]
pub struct HookHttpClient {
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl std::fmt::Debug for HookHttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookHttpClient").finish_non_exhaustive()
    }
}

impl Default for HookHttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HookHttpClient {
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(30)));
        HookHttpClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// GETs `url`, following redirects; returns the start of the body.
    pub async fn get(&self, url: &str) -> Result<String, HookHttpError> {
        let mut target: http::Uri = url.parse().map_err(|source| HookHttpError::Url {
            url: url.to_string(),
            source,
        })?;
        for _ in 0..=MAX_REDIRECTS {
            let req = http::Request::get(target.clone())
                .header(http::header::USER_AGENT, "kube-lifecycle/1.25")
                .body(Empty::<Bytes>::new())?;
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|source| HookHttpError::Get {
                    target: Box::new(target.clone()),
                    source: Box::new(source),
                })?;
            if resp.status().is_redirection()
                && let Some(loc) = resp.headers().get(http::header::LOCATION)
            {
                let loc = loc.to_str()?;
                target = resolve_location(&target, loc)?;
                continue;
            }
            let mut body = resp.into_body();
            let mut out = Vec::new();
            while out.len() < MAX_RESP_BODY_LENGTH {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            out.extend_from_slice(data);
                        }
                    }
                    _ => break,
                }
            }
            out.truncate(MAX_RESP_BODY_LENGTH);
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
        Err(HookHttpError::TooManyRedirects {
            url: url.to_string(),
        })
    }
}

fn resolve_location(base: &http::Uri, loc: &str) -> Result<http::Uri, HookHttpError> {
    let base_url = url::Url::parse(&base.to_string())?;
    let next = base_url.join(loc)?;
    if next.scheme() != "http" {
        return Err(HookHttpError::RedirectScheme(next));
    }
    next.as_str().parse().map_err(HookHttpError::RedirectUri)
}

/// The port an IntOrString names: a number, a numeric string, or the name
/// of one of the container's ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<i32, PortError> {
    match port {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            if let Ok(n) = s.parse::<i32>() {
                return Ok(n);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| PortError {
                    port: s.clone(),
                    container: container.name.clone(),
                })
        }
    }
}

impl KubeGenericRuntimeManager {
    /// Runs a lifecycle handler; on failure returns the message for the
    /// event.
    pub(super) async fn run_handler(
        &self,
        container_id: &ContainerId,
        pod: &Pod,
        container: &Container,
        handler: &LifecycleHandler,
    ) -> Result<(), HookError> {
        if let Some(exec) = &handler.exec {
            let cmd = exec.command.clone().unwrap_or_default();
            return match self
                .runtime
                .exec_sync(&container_id.id, &cmd, Duration::ZERO)
                .await
            {
                Ok(_) => Ok(()),
                Err(e) => {
                    let output = match &e {
                        crate::cri::CriError::ExitCode { stdout, stderr, .. } => {
                            let mut o = stdout.clone();
                            o.extend_from_slice(stderr);
                            String::from_utf8_lossy(&o).into_owned()
                        }
                        _ => String::new(),
                    };
                    crate::vlog!(1, command = ?cmd, container = %container.name, pod = %format_pod(pod), error = %e, "exec lifecycle hook for container in pod failed");
                    Err(HookError::Exec {
                        command: cmd.join(" "),
                        container: container.name.clone(),
                        pod: format_pod(pod),
                        status: e.status_message(),
                        output,
                    })
                }
            };
        }
        if let Some(get) = &handler.http_get {
            let path = get.path.clone().unwrap_or_default();
            let result = self.run_http_handler(pod, container, handler).await;
            return result.map(|_| ()).map_err(|source| {
                crate::vlog!(1, path = %path, container = %container.name, pod = %format_pod(pod), error = %source, "HTTP lifecycle hook for container in pod failed");
                HookError::Http {
                    path,
                    container: container.name.clone(),
                    pod: format_pod(pod),
                    source: Box::new(source),
                }
            });
        }
        let e = HookError::InvalidHandler;
        tracing::error!(error = %e, "cannot run handler");
        Err(e)
    }

    async fn run_http_handler(
        &self,
        pod: &Pod,
        container: &Container,
        handler: &LifecycleHandler,
    ) -> Result<String, HookHttpError> {
        let Some(get) = &handler.http_get else {
            return Err(HookHttpError::NoHttpGet);
        };
        let mut host = get.host.clone().unwrap_or_default();
        if host.is_empty() {
            let uid = pod.metadata.uid.as_deref().unwrap_or("");
            let name = pod.metadata.name.as_deref().unwrap_or("");
            let ns = pod.metadata.namespace.as_deref().unwrap_or("");
            let status = self
                .get_pod_status_impl(uid, name, ns)
                .await
                .inspect_err(|e| {
                    tracing::error!(error = %e, "unable to get pod info, event handlers may be invalid");
                })?;
            host = status
                .ips
                .first()
                .cloned()
                .ok_or(HookHttpError::NoNetwork)?;
        }
        let port = match &get.port {
            IntOrString::String(s) if s.is_empty() => 80,
            p => resolve_port(p, container)?,
        };
        let host_port = match host.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(_)) => format!("[{host}]:{port}"),
            _ => format!("{host}:{port}"),
        };
        let path = get.path.as_deref().unwrap_or("");
        let url = format!("http://{host_port}/{}", path.trim_start_matches('/'));
        self.http.get(&url).await
    }
}
