//! httpGet probes (Go's pkg/probe/http): one GET per probe on a fresh
//! connection, no proxy, no compression, TLS without certificate checks.
//!
//! - 2xx is success with the body as output; 3xx that was not followed is a
//!   success with a warning; anything else fails with the status code.
//! - Redirects to the same host name are followed (at most 10 requests);
//!   a redirect to another host is not followed and ends as a warning.
//! - `User-Agent: kube-probe/<major>.<minor>` and `Accept: */*` unless the
//!   probe sets them (an empty Accept removes it); a `Host` header sets the
//!   request's host.
//! - The timeout bounds the whole exchange, redirects and body included; at
//!   most 10 KiB of body is read.
//! - Transport failures are probe failures whose message reads as Go's
//!   (`Get "http://10.0.0.5:80/": dial tcp 10.0.0.5:80: connect: connection
//!   refused`); only a body that cannot be read is an error.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONNECTION, HOST, LOCATION, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::error::ProberError;
use super::net::{DialError, dial, join_host_port};
use super::probe::{Outcome, go_quote};
use crate::vlog;

/// Most response body read.
pub const MAX_RESP_BODY_LENGTH: usize = 10 * 1024;
/// Requests made for one probe before redirects stop being followed.
const MAX_REQUESTS: usize = 10;

/// Why an HTTP probe's request got no response; the texts are Go's
/// net/http client's, as the probe's output shows them.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpProbeError {
    #[error("Get {}: {source}", go_quote(.url))]
    Get {
        url: String,
        source: Box<HttpProbeError>,
    },
    #[error("Get {}: failed to parse Location header {}: {source}", go_quote(.url), go_quote(.location))]
    Location {
        url: String,
        location: String,
        source: url::ParseError,
    },
    #[error("Get {}: stopped after {MAX_REQUESTS} redirects", go_quote(.location))]
    Redirects { location: String },
    #[error(transparent)]
    Url(#[from] url::ParseError),
    #[error("tls: {0}")]
    TlsConfig(rustls::Error),
    #[error("unsupported protocol scheme {}", go_quote(.0))]
    Scheme(String),
    #[error("{0} {AWAITING_HEADERS}")]
    DialTimeout(DialError),
    #[error("{0}")]
    Dial(DialError),
    #[error("tls: invalid server name: {0}")]
    ServerName(rustls::pki_types::InvalidDnsNameError),
    #[error("tls: {0}")]
    Handshake(std::io::Error),
    #[error("context deadline exceeded {AWAITING_HEADERS}")]
    Deadline,
    #[error("invalid Host header: {0}")]
    HostHeader(http::header::InvalidHeaderValue),
    #[error("net/http: invalid request: {0}")]
    Request(http::Error),
    #[error("{}", hyper_error_text(.0))]
    Transport(hyper::Error),
    #[error("net/http: invalid header field name {}", go_quote(.0))]
    HeaderName(String),
    #[error("net/http: invalid header field value for {}", go_quote(.0))]
    HeaderValue(String),
    #[error(
        "context deadline exceeded (Client.Timeout or context cancellation while reading body)"
    )]
    BodyDeadline,
}

/// The URL a probe requests, kept as written so messages show it as the Go
/// kubelet does (`http://10.0.0.5:80/healthz`, default port included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeUrl {
    scheme: String,
    /// Host name or IP, without brackets.
    host: String,
    port: u16,
    /// `host:port` as shown and sent in `Host`.
    authority: String,
    /// Path and query, percent-encoded where a request line needs it.
    path_and_query: String,
    fragment: Option<String>,
}

impl ProbeUrl {
    /// The URL of an httpGet probe: `scheme://host:port` plus the probe's
    /// path (which may carry a query).
    pub fn new(scheme: &str, host: &str, port: u16, path: &str) -> Self {
        let (rest, fragment) = match path.split_once('#') {
            Some((r, f)) => (r, Some(f.to_string())),
            None => (path, None),
        };
        let mut path_and_query = escape(rest);
        if !path_and_query.is_empty()
            && !path_and_query.starts_with('/')
            && !path_and_query.starts_with('?')
        {
            path_and_query.insert(0, '/');
        }
        Self {
            scheme: scheme.to_string(),
            host: host.to_string(),
            port,
            authority: join_host_port(host, port),
            path_and_query,
            fragment,
        }
    }

    /// The host name, for the same-host redirect rule.
    pub fn hostname(&self) -> &str {
        &self.host
    }

    fn request_target(&self) -> String {
        if self.path_and_query.is_empty() || self.path_and_query.starts_with('?') {
            format!("/{}", self.path_and_query)
        } else {
            self.path_and_query.clone()
        }
    }

    /// Resolves a `Location` header against this URL.
    fn resolve(&self, location: &str) -> Result<ProbeUrl, url::ParseError> {
        let base = url::Url::parse(&self.to_string())?;
        let next = base.join(location)?;
        let host = next.host_str().unwrap_or_default();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = next.port_or_known_default().unwrap_or(80);
        let authority = match next.port() {
            Some(p) => join_host_port(host, p),
            None if host.contains(':') => format!("[{host}]"),
            None => host.to_string(),
        };
        let mut path_and_query = next.path().to_string();
        if let Some(q) = next.query() {
            path_and_query.push('?');
            path_and_query.push_str(q);
        }
        Ok(ProbeUrl {
            scheme: next.scheme().to_string(),
            host: host.to_string(),
            port,
            authority,
            path_and_query,
            fragment: next.fragment().map(str::to_string),
        })
    }
}

impl std::fmt::Display for ProbeUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme, self.authority, self.path_and_query
        )?;
        if let Some(frag) = &self.fragment {
            write!(f, "#{frag}")?;
        }
        Ok(())
    }
}

/// Percent-encodes what may not appear raw in a request target.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let raw = b > 0x20
            && b < 0x7f
            && !matches!(
                b,
                b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
            );
        if raw {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Accepts any server certificate (the probe does not verify TLS peers), but
/// still checks the handshake signatures against the presented key.
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config() -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = crate::kubelet::server::tls::crypto_provider();
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Aborts the task driving a connection when the exchange is over.
struct ConnGuard(tokio::task::JoinHandle<()>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

const AWAITING_HEADERS: &str = "(Client.Timeout exceeded while awaiting headers)";

/// Runs httpGet probes.
#[derive(Clone)]
pub struct HttpProber {
    follow_non_local_redirects: bool,
    tls: Result<Arc<ClientConfig>, rustls::Error>,
}

impl std::fmt::Debug for HttpProber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProber")
            .field(
                "follow_non_local_redirects",
                &self.follow_non_local_redirects,
            )
            .finish_non_exhaustive()
    }
}

impl HttpProber {
    /// The kubelet's probes never follow redirects to other hosts.
    pub fn new(follow_non_local_redirects: bool) -> Self {
        Self {
            follow_non_local_redirects,
            tls: tls_config(),
        }
    }

    /// GETs `url` with the probe's headers within `timeout` (zero: none).
    pub async fn probe(
        &self,
        url: &ProbeUrl,
        headers: &[(String, String)],
        timeout: Duration,
    ) -> Result<(Outcome, String), ProberError> {
        let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        let (headers, host) = match build_headers(headers) {
            Ok(h) => h,
            Err(e) => {
                let e = HttpProbeError::Get {
                    url: url.to_string(),
                    source: Box::new(e),
                };
                return Ok((Outcome::Failure, e.to_string()));
            }
        };
        let (resp, guard, final_url) = match self.follow(url, &headers, host, deadline).await {
            Ok(r) => r,
            Err(e) => return Ok((Outcome::Failure, e.to_string())),
        };
        let status = resp.status().as_u16();
        let body = read_body(resp, deadline)
            .await
            .map_err(|e| ProberError::HttpBody {
                url: final_url.to_string(),
                message: e.to_string(),
            })?;
        drop(guard);
        let body = String::from_utf8_lossy(&body).into_owned();
        if (200..400).contains(&status) {
            if status >= 300 {
                vlog!(4, url = %final_url, status, "Probe terminated redirects");
                return Ok((
                    Outcome::Warning,
                    format!("Probe terminated redirects, Response body: {body}"),
                ));
            }
            vlog!(4, url = %final_url, status, "Probe succeeded");
            return Ok((Outcome::Success, body));
        }
        vlog!(4, url = %final_url, status, body = %body, "Probe failed");
        // The response body stays out of the message: it may hold secrets.
        Ok((
            Outcome::Failure,
            format!("HTTP probe failed with statuscode: {status}"),
        ))
    }

    /// Sends the request, following redirects as the probe allows; the last
    /// response, the guard of its connection and its URL.
    async fn follow(
        &self,
        first: &ProbeUrl,
        headers: &HeaderMap,
        mut host: Option<String>,
        deadline: Option<Instant>,
    ) -> Result<(Response<Incoming>, ConnGuard, ProbeUrl), HttpProbeError> {
        let mut url = first.clone();
        let mut requests = 0usize;
        loop {
            let (resp, guard) = self
                .round_trip(&url, headers, host.as_deref(), deadline)
                .await
                .map_err(|e| HttpProbeError::Get {
                    url: url.to_string(),
                    source: Box::new(e),
                })?;
            requests += 1;
            let status = resp.status().as_u16();
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Ok((resp, guard, url));
            }
            let Some(loc) = resp
                .headers()
                .get(LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .filter(|l| !l.is_empty())
            else {
                // A redirect without a target is the answer itself.
                return Ok((resp, guard, url));
            };
            let next = url
                .resolve(&loc)
                .map_err(|source| HttpProbeError::Location {
                    url: url.to_string(),
                    location: loc.clone(),
                    source,
                })?;
            if !self.follow_non_local_redirects && next.hostname() != first.hostname() {
                return Ok((resp, guard, url));
            }
            if requests >= MAX_REQUESTS {
                return Err(HttpProbeError::Redirects { location: loc });
            }
            // A custom Host survives only a relative redirect.
            if url::Url::parse(&loc).is_ok() {
                host = None;
            }
            vlog!(4, from = %url, to = %next, status, "Probe follows redirect");
            url = next;
        }
    }

    /// One request on a new connection.
    async fn round_trip(
        &self,
        url: &ProbeUrl,
        headers: &HeaderMap,
        host: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<(Response<Incoming>, ConnGuard), HttpProbeError> {
        let tls = match url.scheme.as_str() {
            "http" => None,
            "https" => Some(self.tls.clone().map_err(HttpProbeError::TlsConfig)?),
            other => return Err(HttpProbeError::Scheme(other.to_string())),
        };
        let stream = dial(&url.host, url.port, deadline).await.map_err(|e| {
            if e.is_timeout() {
                HttpProbeError::DialTimeout(e)
            } else {
                HttpProbeError::Dial(e)
            }
        })?;
        let exchange = async {
            match tls {
                None => send(stream, false, url, headers, host).await,
                Some(config) => {
                    let name = if url.host.is_empty() {
                        ServerName::IpAddress(std::net::Ipv4Addr::UNSPECIFIED.into())
                    } else {
                        ServerName::try_from(url.host.clone())
                            .map_err(HttpProbeError::ServerName)?
                    };
                    let conn = tokio_rustls::TlsConnector::from(config)
                        .connect(name, stream)
                        .await
                        .map_err(HttpProbeError::Handshake)?;
                    let h2 = conn.get_ref().1.alpn_protocol() == Some(b"h2");
                    send(conn, h2, url, headers, host).await
                }
            }
        };
        match deadline {
            Some(d) => tokio::time::timeout_at(d, exchange)
                .await
                .unwrap_or(Err(HttpProbeError::Deadline)),
            None => exchange.await,
        }
    }
}

/// The request headers from the probe's list, and the Host override.
fn build_headers(list: &[(String, String)]) -> Result<(HeaderMap, Option<String>), HttpProbeError> {
    let mut headers = HeaderMap::new();
    let mut host = None;
    for (name, value) in list {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| HttpProbeError::HeaderName(name.clone()))?;
        let v =
            HeaderValue::from_str(value).map_err(|_| HttpProbeError::HeaderValue(name.clone()))?;
        if n == HOST {
            host.get_or_insert_with(|| value.clone());
            continue;
        }
        headers.append(n, v);
    }
    match headers.get(USER_AGENT).map(|v| v.is_empty()) {
        None => {
            let ua = HeaderValue::from_str(&super::user_agent())
                .map_err(|_| HttpProbeError::HeaderValue("User-Agent".to_string()))?;
            headers.insert(USER_AGENT, ua);
        }
        // An empty User-Agent means none is sent.
        Some(true) => {
            headers.remove(USER_AGENT);
        }
        Some(false) => {}
    }
    match headers.get(ACCEPT).map(|v| v.is_empty()) {
        None => {
            headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        Some(true) => {
            headers.remove(ACCEPT);
        }
        Some(false) => {}
    }
    Ok((headers, host.filter(|h| !h.is_empty())))
}

async fn send<IO>(
    io: IO,
    h2: bool,
    url: &ProbeUrl,
    headers: &HeaderMap,
    host: Option<&str>,
) -> Result<(Response<Incoming>, ConnGuard), HttpProbeError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let authority = host.unwrap_or(&url.authority);
    let mut builder = Request::get(if h2 {
        format!("{}://{}{}", url.scheme, authority, url.request_target())
    } else {
        url.request_target()
    });
    if let Some(h) = builder.headers_mut() {
        *h = headers.clone();
        if !h2 {
            let host_value =
                HeaderValue::from_str(authority).map_err(HttpProbeError::HostHeader)?;
            h.insert(HOST, host_value);
            h.insert(CONNECTION, HeaderValue::from_static("close"));
        }
    }
    let req = builder
        .body(Empty::<Bytes>::new())
        .map_err(HttpProbeError::Request)?;
    let io = TokioIo::new(io);
    if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(HttpProbeError::Transport)?;
        let guard = ConnGuard(tokio::spawn(async move {
            let _ = conn.await;
        }));
        let resp = sender
            .send_request(req)
            .await
            .map_err(HttpProbeError::Transport)?;
        Ok((resp, guard))
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(HttpProbeError::Transport)?;
        let guard = ConnGuard(tokio::spawn(async move {
            let _ = conn.await;
        }));
        let resp = sender
            .send_request(req)
            .await
            .map_err(HttpProbeError::Transport)?;
        Ok((resp, guard))
    }
}

fn hyper_error_text(e: &hyper::Error) -> String {
    if e.is_incomplete_message() || e.is_closed() {
        return "EOF".to_string();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// Reads at most [`MAX_RESP_BODY_LENGTH`] bytes of the body; more is cut.
async fn read_body(
    resp: Response<Incoming>,
    deadline: Option<Instant>,
) -> Result<Vec<u8>, HttpProbeError> {
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let read = async {
        while buf.len() < MAX_RESP_BODY_LENGTH {
            match body.frame().await {
                None => break,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Err(HttpProbeError::Transport(e)),
            }
        }
        Ok(())
    };
    let done = match deadline {
        Some(d) => tokio::time::timeout_at(d, read)
            .await
            .unwrap_or(Err(HttpProbeError::BodyDeadline)),
        None => read.await,
    };
    done?;
    if buf.len() > MAX_RESP_BODY_LENGTH {
        vlog!(4, "Non fatal body truncation");
        buf.truncate(MAX_RESP_BODY_LENGTH);
    }
    Ok(buf)
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
