//! The path router the kubelet's servers share, with the matching rules of
//! Go's `http.ServeMux`: a pattern ending in `/` serves its whole subtree,
//! any other pattern only its exact path, the longest pattern wins, unclean
//! paths and `/tree` (when only `/tree/` exists) are redirected with 301.
//! Later issues extend a router by registering patterns before the server
//! starts.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};

use crate::util::path::clean_url_path;

/// The error type of request and response bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A request body as handlers see it.
pub type RequestBody = BoxBody<Bytes, BoxError>;
/// A response body; streaming handlers (logs, exec) box their own bodies.
pub type ResponseBody = BoxBody<Bytes, BoxError>;
/// What a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>;

/// Content type of plain-text answers.
pub const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

/// Something that answers requests for a registered pattern. Handlers map
/// their own failures to responses. The authenticated user (main server) is
/// in the request's extensions as [`super::auth::UserInfo`], the connection
/// as [`super::ConnectionInfo`].
pub trait Handler: Send + Sync + 'static {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture;
}

struct FnHandler<F>(F);

impl<F, Fut> Handler for FnHandler<F>
where
    F: Fn(Request<RequestBody>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        Box::pin((self.0)(req))
    }
}

/// A handler from an async closure.
pub fn handler_fn<F, Fut>(f: F) -> Arc<dyn Handler>
where
    F: Fn(Request<RequestBody>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    Arc::new(FnHandler(f))
}

/// A complete body from bytes.
pub fn full(data: impl Into<Bytes>) -> ResponseBody {
    Full::new(data.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> ResponseBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// A request body from bytes (tests and internal callers).
pub fn request_body(data: impl Into<Bytes>) -> RequestBody {
    Full::new(data.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A response with a body and content type.
pub fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<ResponseBody> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// Plain text without a trailing newline (`ok`, auth refusals).
pub fn text(status: StatusCode, body: impl Into<String>) -> Response<ResponseBody> {
    respond(status, TEXT_PLAIN, body.into())
}

/// An error as Go's `http.Error` writes it: plain text, a trailing newline,
/// and `X-Content-Type-Options: nosniff`.
pub fn http_error(status: StatusCode, msg: &str) -> Response<ResponseBody> {
    let mut resp = text(status, format!("{msg}\n"));
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The answer for paths no pattern matches.
pub fn not_found() -> Response<ResponseBody> {
    http_error(StatusCode::NOT_FOUND, "404 page not found")
}

/// A 301 to `location`, with the small HTML body Go writes for GET and HEAD.
pub fn redirect(location: &str, method: &http::Method) -> Response<ResponseBody> {
    let body = if method == http::Method::GET || method == http::Method::HEAD {
        format!(
            "<a href=\"{}\">Moved Permanently</a>.\n\n",
            html_escape(location)
        )
    } else {
        String::new()
    };
    let mut resp = respond(
        StatusCode::MOVED_PERMANENTLY,
        "text/html; charset=utf-8",
        body,
    );
    if let Ok(v) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// Errors in registering patterns.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("invalid pattern {0:?}: patterns start with '/'")]
    InvalidPattern(String),
    #[error("multiple registrations for {0}")]
    Duplicate(String),
}

/// What a request path resolves to.
pub enum Route<'a> {
    /// Serve with this handler; `pattern` is the registered pattern.
    Handler {
        handler: &'a Arc<dyn Handler>,
        pattern: &'a str,
    },
    /// Answer 301 with this location.
    Redirect(String),
    /// No pattern matches.
    NotFound,
}

/// Patterns → handlers.
#[derive(Clone, Default)]
pub struct Router {
    patterns: BTreeMap<String, Arc<dyn Handler>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("patterns", &self.patterns.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Router {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `pattern` (exact path, or subtree when it ends in `/`).
    pub fn handle(&mut self, pattern: &str, handler: Arc<dyn Handler>) -> Result<(), RouterError> {
        if !pattern.starts_with('/') {
            return Err(RouterError::InvalidPattern(pattern.to_string()));
        }
        if self.patterns.contains_key(pattern) {
            return Err(RouterError::Duplicate(pattern.to_string()));
        }
        self.patterns.insert(pattern.to_string(), handler);
        Ok(())
    }

    /// Whether `pattern` is registered.
    pub fn has(&self, pattern: &str) -> bool {
        self.patterns.contains_key(pattern)
    }

    /// The registered patterns, sorted.
    pub fn patterns(&self) -> Vec<&str> {
        self.patterns.keys().map(String::as_str).collect()
    }

    /// Resolves a decoded request path (`query` is kept on redirects).
    pub fn route(&self, path: &str, query: Option<&str>) -> Route<'_> {
        let clean = clean_url_path(path);
        let with_query = |p: String| match query {
            Some(q) if !q.is_empty() => format!("{}?{q}", escape_path(&p)),
            _ => escape_path(&p),
        };
        if !self.patterns.contains_key(&clean) && !clean.ends_with('/') {
            let slashed = format!("{clean}/");
            if self.patterns.contains_key(&slashed) {
                return Route::Redirect(with_query(slashed));
            }
        }
        if clean != path {
            return Route::Redirect(with_query(clean));
        }
        match self.lookup(path) {
            Some((pattern, handler)) => Route::Handler { handler, pattern },
            None => Route::NotFound,
        }
    }

    fn lookup(&self, path: &str) -> Option<(&str, &Arc<dyn Handler>)> {
        if let Some((k, h)) = self.patterns.get_key_value(path) {
            return Some((k.as_str(), h));
        }
        self.patterns
            .iter()
            .filter(|(p, _)| p.ends_with('/') && path.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map(|(p, h)| (p.as_str(), h))
    }
}

/// Decodes `%XX` escapes in a path; `None` when an escape is malformed or
/// the result is not UTF-8.
pub fn decode_path(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let s = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(s, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Escapes a path for a `Location` header.
fn escape_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for &b in p.as_bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(tag: &'static str) -> Arc<dyn Handler> {
        handler_fn(move |_req| async move { text(StatusCode::OK, tag) })
    }

    fn router() -> Router {
        let mut r = Router::new();
        for p in [
            "/healthz",
            "/healthz/",
            "/stats/",
            "/stats/summary/",
            "/metrics",
            "/configz",
            "/logs/",
        ] {
            r.handle(p, tagged(p)).unwrap();
        }
        r
    }

    #[test]
    fn route_table() {
        let r = router();
        enum Want {
            H(&'static str),
            R(&'static str),
            N,
        }
        let cases: &[(&str, Option<&str>, Want)] = &[
            ("/healthz", None, Want::H("/healthz")),
            ("/healthz/ping", None, Want::H("/healthz/")),
            ("/stats/", None, Want::H("/stats/")),
            ("/stats/container", None, Want::H("/stats/")),
            ("/stats/summary/x", None, Want::H("/stats/summary/")),
            ("/stats", None, Want::R("/stats/")),
            ("/stats", Some("a=b"), Want::R("/stats/?a=b")),
            ("/logs", None, Want::R("/logs/")),
            ("/metrics", None, Want::H("/metrics")),
            ("/metrics/cadvisor", None, Want::N),
            ("/configz/", None, Want::N),
            ("/nothing", None, Want::N),
            ("/", None, Want::N),
            ("//configz", None, Want::R("/configz")),
            ("/stats/../configz", None, Want::R("/configz")),
            ("/./metrics", Some("x=1"), Want::R("/metrics?x=1")),
            ("/stats/a//b/", None, Want::R("/stats/a/b/")),
        ];
        for (path, query, want) in cases {
            match (r.route(path, *query), want) {
                (Route::Handler { pattern, .. }, Want::H(w)) => assert_eq!(pattern, *w, "{path}"),
                (Route::Redirect(loc), Want::R(w)) => assert_eq!(loc, *w, "{path}"),
                (Route::NotFound, Want::N) => {}
                (_, _) => panic!("{path}: unexpected route"),
            }
        }
    }

    #[test]
    fn registration_rules() {
        let mut r = router();
        assert!(matches!(
            r.handle("/healthz", tagged("x")),
            Err(RouterError::Duplicate(_))
        ));
        assert!(matches!(
            r.handle("healthz", tagged("x")),
            Err(RouterError::InvalidPattern(_))
        ));
        assert!(r.has("/stats/"));
        assert_eq!(r.patterns().len(), 7);
    }

    #[test]
    fn decode_path_table() {
        assert_eq!(decode_path("/a%2Fb").as_deref(), Some("/a/b"));
        assert_eq!(decode_path("/%63onfigz").as_deref(), Some("/configz"));
        assert_eq!(decode_path("/plain").as_deref(), Some("/plain"));
        assert_eq!(decode_path("/bad%2"), None);
        assert_eq!(decode_path("/bad%zz"), None);
        assert_eq!(escape_path("/a b"), "/a%20b");
    }

    #[tokio::test]
    async fn error_helpers_match_go_http_error() {
        let resp = http_error(StatusCode::NOT_FOUND, "404 page not found");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], TEXT_PLAIN);
        assert_eq!(resp.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"404 page not found\n");
        let r = redirect("/stats/", &http::Method::GET);
        assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(r.headers()[header::LOCATION], "/stats/");
    }
}
