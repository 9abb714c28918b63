//! The streaming debug handlers of the main port: `/exec/`, `/attach/` and
//! `/portForward/` (GET or POST, proxied to the runtime's streaming server)
//! and `/run/` (POST: a command's output). Paths are
//! `/{verb}/{namespace}/{pod}[/{uid}]/{container}` (`/portForward/` has no
//! container); refusals carry the Go kubelet's status codes and texts.

use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};

use super::proxy::{is_websocket_request, proxy_stream};
use super::router::{
    Handler, HandlerFuture, RequestBody, ResponseBody, decode_path, respond, text,
};
use crate::kubelet::streaming::{StreamOptions, StreamingError, StreamingFailure, StreamingHost};

/// The verbs, each a path tree of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Exec,
    Attach,
    PortForward,
    Run,
}

impl Verb {
    /// Where the verb's handler is registered.
    pub fn path(self) -> &'static str {
        match self {
            Verb::Exec => "/exec/",
            Verb::Attach => "/attach/",
            Verb::PortForward => "/portForward/",
            Verb::Run => "/run/",
        }
    }
}

/// What a streaming path names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub container: String,
}

/// Splits the path after the verb; `None` when it has the wrong shape.
pub fn parse_target(verb: Verb, rest: &str) -> Option<Target> {
    let seg: Vec<String> = rest.split('/').map(decode_path).collect::<Option<_>>()?;
    let s = |i: usize| seg[i].clone();
    let t = match (verb, seg.len()) {
        (Verb::PortForward, 2) => Target {
            namespace: s(0),
            pod: s(1),
            ..Default::default()
        },
        (Verb::PortForward, 3) => Target {
            namespace: s(0),
            pod: s(1),
            uid: s(2),
            ..Default::default()
        },
        (Verb::PortForward, _) => return None,
        (_, 3) => Target {
            namespace: s(0),
            pod: s(1),
            uid: String::new(),
            container: s(2),
        },
        (_, 4) => Target {
            namespace: s(0),
            pod: s(1),
            uid: s(2),
            container: s(3),
        },
        _ => return None,
    };
    Some(t)
}

fn query_values(query: Option<&str>, name: &str) -> Vec<String> {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .collect()
}

fn flag(query: Option<&str>, name: &str) -> bool {
    query_values(query, name).first().map(String::as_str) == Some("1")
}

/// A streaming request's query the kubelet refuses (400 Bad Request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("you must specify at least 1 of stdin, stdout, stderr")]
    NoStreams,
    #[error("query parameter \"port\" is required")]
    NoPort,
    #[error("query parameter \"port\" cannot be empty")]
    EmptyPort,
    #[error("unable to parse {value:?} as a port: {source}")]
    BadPort {
        value: String,
        source: std::num::ParseIntError,
    },
    #[error("port {0:?} must be > 0")]
    ZeroPort(String),
}

/// The streams a remote command asks for (`input`, `output`, `error`,
/// `tty`, each on with `1`); a TTY has no separate stderr.
pub fn stream_options(query: Option<&str>) -> Result<StreamOptions, QueryError> {
    let tty = flag(query, "tty");
    let opts = StreamOptions {
        stdin: flag(query, "input"),
        stdout: flag(query, "output"),
        stderr: flag(query, "error") && !tty,
        tty,
    };
    if !(opts.stdin || opts.stdout || opts.stderr) {
        return Err(QueryError::NoStreams);
    }
    Ok(opts)
}

/// The ports a WebSocket port-forward asks for (`port`, repeated or comma
/// separated); SPDY clients name them later, on their streams.
pub fn port_forward_ports(query: Option<&str>, websocket: bool) -> Result<Vec<i32>, QueryError> {
    if !websocket {
        return Ok(Vec::new());
    }
    let values = query_values(query, "port");
    if values.is_empty() {
        return Err(QueryError::NoPort);
    }
    let mut ports = Vec::new();
    for v in values {
        if v.is_empty() {
            return Err(QueryError::EmptyPort);
        }
        for p in v.split(',') {
            let port: u16 = p.parse().map_err(|source| QueryError::BadPort {
                value: v.clone(),
                source,
            })?;
            if port < 1 {
                return Err(QueryError::ZeroPort(v.clone()));
            }
            ports.push(i32::from(port));
        }
    }
    Ok(ports)
}

fn streaming_error(e: &StreamingError) -> Response<ResponseBody> {
    let (status, retry) = match e.status() {
        StreamingFailure::NotFound => (StatusCode::NOT_FOUND, false),
        StreamingFailure::Busy => (StatusCode::TOO_MANY_REQUESTS, true),
        StreamingFailure::Internal => (StatusCode::INTERNAL_SERVER_ERROR, false),
    };
    let mut resp = text(status, e.to_string());
    if retry {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    }
    resp
}

struct StreamingHandler {
    verb: Verb,
    host: Arc<dyn StreamingHost>,
}

impl Handler for StreamingHandler {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        let (verb, host) = (self.verb, self.host.clone());
        Box::pin(async move { serve(verb, host, req).await })
    }
}

/// The handler for one verb.
pub fn streaming_handler(verb: Verb, host: Arc<dyn StreamingHost>) -> Arc<dyn Handler> {
    Arc::new(StreamingHandler { verb, host })
}

async fn serve(
    verb: Verb,
    host: Arc<dyn StreamingHost>,
    req: Request<RequestBody>,
) -> Response<ResponseBody> {
    let allowed = match verb {
        Verb::Run => req.method() == Method::POST,
        _ => req.method() == Method::GET || req.method() == Method::POST,
    };
    if !allowed {
        return text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
    }
    let rest = req
        .uri()
        .path()
        .strip_prefix(verb.path())
        .unwrap_or_default();
    let Some(t) = parse_target(verb, rest) else {
        return text(StatusCode::NOT_FOUND, "404: Page Not Found");
    };
    let query = req.uri().query().map(str::to_string);
    let query = query.as_deref();
    let bad_request = |e: QueryError| text(StatusCode::BAD_REQUEST, e.to_string());
    let url = match verb {
        Verb::Exec | Verb::Attach => {
            let opts = match stream_options(query) {
                Ok(o) => o,
                Err(e) => return bad_request(e),
            };
            let Some(pod) = host.get_pod_by_name(&t.namespace, &t.pod) else {
                return text(StatusCode::NOT_FOUND, "pod does not exist");
            };
            if verb == Verb::Exec {
                let cmd = query_values(query, "command");
                host.get_exec(&pod, &t.uid, &t.container, cmd, opts).await
            } else {
                host.get_attach(&pod, &t.uid, &t.container, opts).await
            }
        }
        Verb::PortForward => {
            let ports = match port_forward_ports(query, is_websocket_request(&req)) {
                Ok(p) => p,
                Err(e) => return bad_request(e),
            };
            let Some(pod) = host.get_pod_by_name(&t.namespace, &t.pod) else {
                return text(StatusCode::NOT_FOUND, "pod does not exist");
            };
            if !t.uid.is_empty() && pod.metadata.uid.as_deref() != Some(t.uid.as_str()) {
                return text(StatusCode::NOT_FOUND, "pod not found");
            }
            host.get_port_forward(&pod, ports).await
        }
        Verb::Run => {
            let Some(pod) = host.get_pod_by_name(&t.namespace, &t.pod) else {
                return text(StatusCode::NOT_FOUND, "pod does not exist");
            };
            // `/run` takes one `cmd`, split on single spaces.
            let cmd = query_values(query, "cmd")
                .into_iter()
                .next()
                .unwrap_or_default();
            let cmd = cmd.split(' ').map(str::to_string).collect();
            return match host.run_in_container(&pod, &t.uid, &t.container, cmd).await {
                Ok(out) if out.is_empty() => respond(StatusCode::OK, "application/json", ""),
                Ok(out) => respond(StatusCode::OK, "application/json", out),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            };
        }
    };
    match url {
        Ok(url) => proxy_stream(req, &url).await,
        Err(e) => streaming_error(&e),
    }
}

#[cfg(test)]
mod tests;
