//! `/containerLogs/{namespace}/{pod}/{container}`: a container's log, as
//! `kubectl logs` reaches it through the API server's node proxy. The query
//! is a v1 PodLogOptions (follow, previous, timestamps, sinceSeconds,
//! sinceTime, tailLines, limitBytes; `tail` as an old spelling of
//! tailLines). Refusals before streaming get the Go kubelet's status codes
//! and texts; the log itself streams chunked, flushed line by line.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use jiff::Timestamp;
use tokio::sync::mpsc;

use super::router::{
    Handler, HandlerFuture, RequestBody, ResponseBody, TEXT_PLAIN, decode_path, text,
};
use crate::kubelet::container_logs::{ContainerLogs, ContainerLogsError};
use crate::kubelet::kuberuntime::logs::PodLogOptions;

/// Where the handler is registered.
pub const CONTAINER_LOGS_PATH: &str = "/containerLogs/";

/// Why a query is refused: it does not decode (400) or does not validate (422).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    Decode(String),
    Invalid(Vec<String>),
}

fn bool_param(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

fn int_param(name: &str, v: &str) -> Result<i64, QueryError> {
    v.parse()
        .map_err(|e| QueryError::Decode(format!("{name}: {e}")))
}

fn time_param(v: &str) -> Result<Timestamp, QueryError> {
    if v.is_empty() || v == "null" {
        // Present but zero: no filter, yet it still counts as given.
        return Ok(Timestamp::MIN);
    }
    v.parse()
        .map_err(|e| QueryError::Decode(format!("sinceTime: {e}")))
}

/// Decodes and validates a log request's query (the first value of each
/// parameter counts, as Go's parameter codec takes it).
pub fn decode_log_options(query: Option<&str>) -> Result<PodLogOptions, QueryError> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let first = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let mut o = PodLogOptions {
        follow: first("follow").is_some_and(bool_param),
        previous: first("previous").is_some_and(bool_param),
        timestamps: first("timestamps").is_some_and(bool_param),
        ..Default::default()
    };
    // `tail` wins over tailLines; `tail=all` means no tail at all.
    let tail = match first("tail").filter(|t| !t.is_empty()) {
        Some("all") => None,
        Some(t) => Some(t),
        None => first("tailLines"),
    };
    o.tail_lines = tail.map(|v| int_param("tailLines", v)).transpose()?;
    o.since_seconds = first("sinceSeconds")
        .map(|v| int_param("sinceSeconds", v))
        .transpose()?;
    o.limit_bytes = first("limitBytes")
        .map(|v| int_param("limitBytes", v))
        .transpose()?;
    o.since_time = first("sinceTime").map(time_param).transpose()?;

    let mut errs = Vec::new();
    if let Some(t) = o.tail_lines.filter(|t| *t < 0) {
        errs.push(format!(
            "tailLines: Invalid value: {t}: must be greater than or equal to 0"
        ));
    }
    if let Some(b) = o.limit_bytes.filter(|b| *b < 1) {
        errs.push(format!(
            "limitBytes: Invalid value: {b}: must be greater than 0"
        ));
    }
    match (o.since_seconds, o.since_time) {
        (Some(_), Some(_)) => {
            errs.push("at most one of `sinceTime` or `sinceSeconds` may be specified".into())
        }
        (Some(s), None) if s < 1 => errs.push(format!(
            "sinceSeconds: Invalid value: {s}: must be greater than 0"
        )),
        _ => {}
    }
    if errs.is_empty() {
        Ok(o)
    } else {
        Err(QueryError::Invalid(errs))
    }
}

fn refuse(status: StatusCode, msg: &str) -> Response<ResponseBody> {
    text(status, msg)
}

struct LogsHandler(Arc<dyn ContainerLogs>);

impl Handler for LogsHandler {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        let logs = self.0.clone();
        Box::pin(async move { serve(logs, req).await })
    }
}

/// The /containerLogs/ handler over the kubelet's logs.
pub fn container_logs_handler(logs: Arc<dyn ContainerLogs>) -> Arc<dyn Handler> {
    Arc::new(LogsHandler(logs))
}

async fn serve(logs: Arc<dyn ContainerLogs>, req: Request<RequestBody>) -> Response<ResponseBody> {
    if req.method() != Method::GET {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
    }
    let rest = req
        .uri()
        .path()
        .strip_prefix(CONTAINER_LOGS_PATH)
        .unwrap_or_default();
    let segments: Option<Vec<String>> = rest.split('/').map(decode_path).collect();
    let Some([namespace, pod, container]) = segments.as_deref() else {
        return refuse(StatusCode::NOT_FOUND, "404: Page Not Found");
    };
    for (value, what) in [
        (pod, "podID"),
        (container, "container name"),
        (namespace, "podNamespace"),
    ] {
        if value.is_empty() {
            return refuse(
                StatusCode::BAD_REQUEST,
                &format!(r#"{{"message": "Missing {what}."}}"#),
            );
        }
    }
    let opts = match decode_log_options(req.uri().query()) {
        Ok(o) => o,
        Err(QueryError::Decode(e)) => {
            crate::vlog!(4, error = %e, "Unable to decode a container log query");
            return refuse(
                StatusCode::BAD_REQUEST,
                r#"{"message": "Unable to decode query."}"#,
            );
        }
        Err(QueryError::Invalid(errs)) => {
            crate::vlog!(4, errors = ?errs, "Invalid container log query");
            return refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                r#"{"message": "Invalid request."}"#,
            );
        }
    };
    let streamer = match logs.container_logs(namespace, pod, container, opts).await {
        Ok(s) => s,
        Err(
            e @ (ContainerLogsError::PodNotFound(_) | ContainerLogsError::ContainerNotFound { .. }),
        ) => {
            return refuse(StatusCode::NOT_FOUND, &e.to_string());
        }
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let tail = tx.clone();
    tokio::spawn(async move {
        if let Err(e) = streamer(tx).await {
            // Headers are gone already: the error ends the body, as Go's
            // late WriteError does.
            let _ = tail.send(Bytes::from(e.to_string())).await;
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|b| Ok::<_, super::router::BoxError>(Frame::data(b)));
    let mut resp = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(TEXT_PLAIN),
    );
    resp
}

#[cfg(test)]
mod tests;
