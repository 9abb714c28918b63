//! `/logs/`: the node's log directory (/var/log) as a file server, the way
//! `kubectl get --raw /api/v1/nodes/<node>/proxy/logs/` reads it: a
//! directory answers with an HTML list of its entries, a file with its
//! content; directories without a trailing slash (and files with one) are
//! redirected, as Go's file server does.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};

use super::router::{
    Handler, HandlerFuture, RequestBody, ResponseBody, decode_path, empty, http_error, respond,
};

/// Where the handler is registered.
pub const NODE_LOGS_PATH: &str = "/logs/";

/// The node's log directory.
pub const NODE_LOG_DIR: &str = "/var/log";

struct NodeLogs(PathBuf);

impl Handler for NodeLogs {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        let root = self.0.clone();
        Box::pin(async move { serve(&root, req).await })
    }
}

/// Serves the files under `root` below /logs/.
pub fn node_logs_handler(root: impl Into<PathBuf>) -> Arc<dyn Handler> {
    Arc::new(NodeLogs(root.into()))
}

fn moved(location: &str) -> Response<ResponseBody> {
    let mut resp = Response::new(empty());
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(v) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

fn io_error(e: &std::io::Error) -> Response<ResponseBody> {
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => {
            http_error(StatusCode::NOT_FOUND, "404 page not found")
        }
        ErrorKind::PermissionDenied => http_error(StatusCode::FORBIDDEN, "403 Forbidden"),
        _ => http_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "500 Internal Server Error",
        ),
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

fn href_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    // A name with a colon must not read as a scheme.
    if out
        .split('/')
        .next()
        .is_some_and(|first| first.contains(':'))
    {
        out.insert_str(0, "./");
    }
    out
}

/// The HTML list of a directory's entries, sorted by name, directories
/// with a trailing slash.
pub fn dir_listing(mut names: Vec<(String, bool)>) -> String {
    names.sort();
    let mut out = String::from("<pre>\n");
    for (name, is_dir) in names {
        let name = if is_dir { format!("{name}/") } else { name };
        out.push_str(&format!(
            "<a href=\"{}\">{}</a>\n",
            href_escape(&name),
            html_escape(&name)
        ));
    }
    out.push_str("</pre>\n");
    out
}

/// The content type of a file: by extension for the common web types,
/// otherwise text when the start of the file reads as text.
pub fn content_type(path: &Path, head: &[u8]) -> &'static str {
    let by_ext = match path.extension().and_then(|e| e.to_str()) {
        Some("html" | "htm") => Some("text/html; charset=utf-8"),
        Some("json") => Some("application/json"),
        Some("xml") => Some("text/xml; charset=utf-8"),
        Some("gz") => Some("application/gzip"),
        _ => None,
    };
    if let Some(t) = by_ext {
        return t;
    }
    let text = match std::str::from_utf8(head) {
        Ok(s) => s,
        // A multi-byte character cut at the end of the sample is fine.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return "application/octet-stream",
    };
    let binary = text
        .bytes()
        .any(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b));
    if binary {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

/// What a path under the root is: a directory's entries, or a file opened
/// with the first bytes read (to tell its content type).
enum Entry {
    Dir(Vec<(String, bool)>),
    File(std::fs::File, Vec<u8>),
}

fn read_entry(path: &Path) -> std::io::Result<Entry> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        let mut names = Vec::new();
        for e in std::fs::read_dir(path)? {
            let e = e?;
            let is_dir = e.metadata().map(|m| m.is_dir()).unwrap_or(false);
            names.push((e.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(Entry::Dir(names))
    } else {
        let mut f = std::fs::File::open(path)?;
        let mut head = Vec::with_capacity(512);
        (&mut f).take(512).read_to_end(&mut head)?;
        Ok(Entry::File(f, head))
    }
}

/// The file's bytes as a body: what was read already, then the rest in
/// chunks, so a large log is never held whole.
fn file_body(file: std::fs::File, head: Vec<u8>) -> ResponseBody {
    use futures::StreamExt;
    use http_body_util::{BodyExt, StreamBody};
    use hyper::body::Frame;
    use tokio::io::AsyncReadExt;
    let first = futures::stream::once(async move { Ok(bytes::Bytes::from(head)) });
    let rest = futures::stream::unfold(Some(tokio::fs::File::from_std(file)), |f| async move {
        let mut f = f?;
        let mut buf = vec![0u8; 64 * 1024];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), Some(f)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    let stream = first.chain(rest).map(|r| {
        r.map(Frame::data)
            .map_err(|e| Box::new(e) as super::router::BoxError)
    });
    BodyExt::boxed(StreamBody::new(stream))
}

async fn serve(root: &Path, req: Request<RequestBody>) -> Response<ResponseBody> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return http_error(StatusCode::METHOD_NOT_ALLOWED, "405 method not allowed");
    }
    let raw = req.uri().path().to_string();
    let Some(decoded) = decode_path(&raw) else {
        return http_error(StatusCode::BAD_REQUEST, "400 Bad Request");
    };
    let rel = decoded.strip_prefix(NODE_LOGS_PATH).unwrap_or_default();
    if rel.split('/').any(|s| s == "..") {
        return http_error(StatusCode::BAD_REQUEST, "invalid URL path");
    }
    let last = raw.rsplit('/').next().unwrap_or_default().to_string();
    if last == "index.html" {
        return moved("./");
    }
    let path = root.join(rel.trim_matches('/'));
    let read = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || read_entry(&path)).await
    };
    let entry = match read {
        Ok(Ok(e)) => e,
        Ok(Err(e)) => return io_error(&e),
        Err(_) => {
            return http_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "500 Internal Server Error",
            );
        }
    };
    match entry {
        Entry::Dir(_) if !raw.ends_with('/') => moved(&format!("{last}/")),
        Entry::Dir(names) => respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            dir_listing(names),
        ),
        Entry::File(..) if raw.ends_with('/') => {
            let name = rel
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or_default();
            moved(&format!("../{name}"))
        }
        Entry::File(file, head) => {
            let ct = content_type(&path, &head);
            let mut resp = Response::new(file_body(file, head));
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
            resp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::server::router::request_body;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn files_directories_and_redirects() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pods")).unwrap();
        std::fs::write(dir.path().join("syslog"), "line one\n").unwrap();
        std::fs::write(dir.path().join("a b.log"), "x").unwrap();
        std::fs::write(dir.path().join("wtmp"), [0u8, 1, 2, 3]).unwrap();
        let h = node_logs_handler(dir.path());
        let cases: &[(&str, u16, &str, &str)] = &[
            (
                "/logs/",
                200,
                "text/html; charset=utf-8",
                "<pre>\n<a href=\"a%20b.log\">a b.log</a>\n<a href=\"pods/\">pods/</a>\n<a href=\"syslog\">syslog</a>\n<a href=\"wtmp\">wtmp</a>\n</pre>\n",
            ),
            (
                "/logs/syslog",
                200,
                "text/plain; charset=utf-8",
                "line one\n",
            ),
            ("/logs/a%20b.log", 200, "text/plain; charset=utf-8", "x"),
            (
                "/logs/wtmp",
                200,
                "application/octet-stream",
                "\u{0}\u{1}\u{2}\u{3}",
            ),
            ("/logs/pods", 301, "", ""),
            ("/logs/syslog/", 301, "", ""),
            (
                "/logs/nope",
                404,
                "text/plain; charset=utf-8",
                "404 page not found\n",
            ),
            (
                "/logs/syslog/x",
                404,
                "text/plain; charset=utf-8",
                "404 page not found\n",
            ),
        ];
        for (uri, status, ct, body) in cases {
            let resp = h
                .call(Request::get(*uri).body(request_body("")).unwrap())
                .await;
            assert_eq!(resp.status().as_u16(), *status, "{uri}");
            let got_ct = resp
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            assert_eq!(got_ct, *ct, "{uri}");
            let location = resp.headers().get(header::LOCATION).cloned();
            let got = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(String::from_utf8_lossy(&got), *body, "{uri}");
            if *status == 301 {
                let want = if uri.ends_with('/') {
                    "../syslog"
                } else {
                    "pods/"
                };
                assert_eq!(location.unwrap(), want, "{uri}");
            }
        }
    }
}
