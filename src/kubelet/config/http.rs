//! The HTTP source: static pods fetched from staticPodURL every
//! httpCheckFrequency, with the staticPodURLHeader headers.
//!
//! As in Go: a GET with a 10 s limit that follows up to 10 redirects; a body
//! of at most 10 MiB; anything but 200 is an error; an empty body is an empty
//! set (so the source counts as seen) and an error; an unchanged body is not
//! decoded again; the body is a single pod or a PodList (all of whose items
//! must be valid), sent as the source's complete set. Failures are logged
//! three times at info level, then only at -v=4, until a success.
//! `http://` and `https://` (system roots, or roots given) are supported;
//! proxies from the environment are not.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HOST, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use url::{Host, Url};

use super::common::StaticPodOrigin;
use super::decode::{decode_pod_list, decode_single_pod};
use super::error::{MAX_CONFIG_LENGTH, SourceError};
use super::pod_config::{PodSource, SourceSender};
use crate::kubelet::types::HTTP_SOURCE;
use crate::util::clock::RealClock;
use crate::util::lifecycle::{Period, run_periodic};

/// Limit on one fetch, redirects and body included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_REDIRECTS: usize = 10;
/// CA bundles looked for, in order, when no roots are given.
const SYSTEM_CA_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Why a URL could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("failed to parse Location header {location:?}: {source}")]
    Location {
        location: String,
        source: url::ParseError,
    },
    #[error("stopped after {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    #[error("missing port")]
    MissingPort,
    #[error("missing host")]
    MissingHost,
    #[error("dial tcp: {0}")]
    Dial(#[source] std::io::Error),
    #[error(transparent)]
    Request(#[from] http::Error),
    #[error(transparent)]
    ServerName(#[from] rustls_pki_types::InvalidDnsNameError),
    #[error("tls: {0}")]
    Tls(#[source] std::io::Error),
    #[error(transparent)]
    Roots(#[from] tokio::task::JoinError),
    #[error("x509: no trusted root certificates found")]
    NoRoots,
    #[error(transparent)]
    Config(#[from] rustls::Error),
    #[error(transparent)]
    Exchange(#[from] hyper::Error),
    #[error("the read limit is reached")]
    ReadLimit,
    #[error("Client.Timeout exceeded while awaiting headers")]
    Timeout,
    #[error("{} {}", .0.as_u16(), .0.canonical_reason().unwrap_or(""))]
    Status(StatusCode),
    #[error("zero-length data received from {0}")]
    Empty(String),
}

/// Static pods from a URL.
pub struct HttpSource {
    url: Url,
    raw_url: String,
    headers: HeaderMap,
    node_name: String,
    period: Duration,
    roots: Option<Vec<CertificateDer<'static>>>,
}

impl HttpSource {
    /// `url` is staticPodURL, `headers` staticPodURLHeader, `period`
    /// httpCheckFrequency.
    pub fn new(
        url: &str,
        headers: &BTreeMap<String, Vec<String>>,
        node_name: impl Into<String>,
        period: Duration,
    ) -> Result<Self, SourceError> {
        let parsed = Url::parse(url).map_err(|e| SourceError::BadUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if parsed.scheme() != "http" && parsed.scheme() != "https" {
            return Err(SourceError::BadUrl {
                url: url.to_string(),
                reason: format!("unsupported protocol scheme {:?}", parsed.scheme()),
            });
        }
        let mut map = HeaderMap::new();
        for (name, values) in headers {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| SourceError::BadHeader {
                    name: name.clone(),
                    reason: e.to_string(),
                })?;
            for v in values {
                let value = HeaderValue::from_str(v).map_err(|e| SourceError::BadHeader {
                    name: name.clone(),
                    reason: e.to_string(),
                })?;
                map.append(header.clone(), value);
            }
        }
        Ok(HttpSource {
            url: parsed,
            raw_url: url.to_string(),
            headers: map,
            node_name: node_name.into(),
            period: period.max(Duration::from_millis(1)),
            roots: None,
        })
    }

    /// Trusts these certificates for https instead of the system's.
    pub fn with_root_certificates(mut self, roots: Vec<CertificateDer<'static>>) -> Self {
        self.roots = Some(roots);
        self
    }
}

/// Per-run state: the last body read and how many failures were logged.
struct Fetcher {
    source: HttpSource,
    last_data: Option<Bytes>,
    failure_logs: u32,
    tls: Option<tokio_rustls::TlsConnector>,
}

#[async_trait::async_trait]
impl PodSource for HttpSource {
    fn name(&self) -> &'static str {
        HTTP_SOURCE
    }

    async fn run(self: Box<Self>, updates: SourceSender, stop: CancellationToken) {
        crate::vlog!(1, url = %self.raw_url, "Watching URL");
        let period = self.period;
        let fetcher = Arc::new(tokio::sync::Mutex::new(Fetcher {
            source: *self,
            last_data: None,
            failure_logs: 0,
            tls: None,
        }));
        let token = stop.clone();
        run_periodic(token, Period::sliding(period), Arc::new(RealClock), || {
            let (fetcher, updates, stop) = (fetcher.clone(), updates.clone(), stop.clone());
            async move {
                let mut fetcher = fetcher.lock().await;
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = fetcher.run_once(&updates) => {}
                }
            }
        })
        .await;
    }
}

impl Fetcher {
    async fn run_once(&mut self, updates: &SourceSender) {
        match self.extract_from_url(updates).await {
            Err(e) => {
                if self.failure_logs < 3 {
                    tracing::info!(error = %e, "Failed to read pods from URL");
                } else if self.failure_logs == 3 {
                    tracing::info!(error = %e, "Failed to read pods from URL. Dropping verbosity of this message to V(4)");
                } else {
                    crate::vlog!(4, error = %e, "Failed to read pods from URL");
                }
                self.failure_logs = self.failure_logs.saturating_add(1);
            }
            Ok(()) => {
                if self.failure_logs > 0 {
                    tracing::info!("Successfully read pods from URL");
                    self.failure_logs = 0;
                }
            }
        }
    }

    fn http_error(&self, source: FetchError) -> SourceError {
        SourceError::Http {
            url: self.source.raw_url.clone(),
            source,
        }
    }

    async fn extract_from_url(&mut self, updates: &SourceSender) -> Result<(), SourceError> {
        let (status, data) = match tokio::time::timeout(FETCH_TIMEOUT, self.fetch()).await {
            Ok(r) => r.map_err(|e| self.http_error(e))?,
            Err(_) => return Err(self.http_error(FetchError::Timeout)),
        };
        if status != StatusCode::OK {
            return Err(self.http_error(FetchError::Status(status)));
        }
        if data.is_empty() {
            updates.set(Vec::new());
            let url = self.source.raw_url.clone();
            return Err(self.http_error(FetchError::Empty(url)));
        }
        if self.last_data.as_ref() == Some(&data) {
            return Ok(());
        }
        self.last_data = Some(data.clone());
        let origin = StaticPodOrigin::Url(&self.source.raw_url);
        let node = &self.source.node_name;
        let invalid = |source| SourceError::InvalidUrlPod {
            url: self.source.raw_url.clone(),
            source,
        };
        let single = match decode_single_pod(&data, origin, node) {
            Ok(pod) => {
                updates.set(vec![pod]);
                return Ok(());
            }
            Err(e) if e.is_parsed() => return Err(invalid(e)),
            Err(e) => e,
        };
        match decode_pod_list(&data, origin, node) {
            Ok(pods) => {
                updates.set(pods);
                Ok(())
            }
            Err(e) if e.is_parsed() => Err(invalid(e)),
            Err(multiple) => Err(SourceError::Unparseable {
                url: self.source.raw_url.clone(),
                body: String::from_utf8_lossy(&data).into_owned(),
                single: Box::new(single),
                multiple: Box::new(multiple),
            }),
        }
    }

    /// GET with redirects; the body is read (up to the limit) before the
    /// status is looked at, as Go does.
    async fn fetch(&mut self) -> Result<(StatusCode, Bytes), FetchError> {
        let mut url = self.source.url.clone();
        let mut headers = self.source.headers.clone();
        for _ in 0..=MAX_REDIRECTS {
            let (status, response_headers, body) = self.fetch_once(&url, &headers).await?;
            let redirect = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
            let location = response_headers.get(LOCATION).and_then(|v| v.to_str().ok());
            match (redirect, location) {
                (true, Some(location)) => {
                    let next = url.join(location).map_err(|source| FetchError::Location {
                        location: location.to_string(),
                        source,
                    })?;
                    if next.host_str() != url.host_str() {
                        for sensitive in ["authorization", "www-authenticate", "cookie", "cookie2"]
                        {
                            headers.remove(sensitive);
                        }
                    }
                    url = next;
                }
                _ => return Ok((status, body)),
            }
        }
        Err(FetchError::TooManyRedirects)
    }

    async fn fetch_once(
        &mut self,
        url: &Url,
        headers: &HeaderMap,
    ) -> Result<(StatusCode, HeaderMap, Bytes), FetchError> {
        let port = url.port_or_known_default().ok_or(FetchError::MissingPort)?;
        let tcp = match url.host() {
            Some(Host::Domain(d)) => TcpStream::connect((d, port)).await,
            Some(Host::Ipv4(a)) => TcpStream::connect(SocketAddr::from((a, port))).await,
            Some(Host::Ipv6(a)) => TcpStream::connect(SocketAddr::from((a, port))).await,
            None => return Err(FetchError::MissingHost),
        }
        .map_err(FetchError::Dial)?;
        let mut builder = Request::get(&url[url::Position::BeforePath..url::Position::AfterQuery]);
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or("")),
            None => url.host_str().unwrap_or("").to_string(),
        };
        builder = builder.header(HOST, host);
        for (name, value) in headers {
            if name != HOST {
                builder = builder.header(name, value);
            }
        }
        if !headers.contains_key(USER_AGENT) {
            builder = builder.header(
                USER_AGENT,
                format!("kubelet/{}", crate::version::git_version()),
            );
        }
        let request = builder.body(Empty::<Bytes>::new())?;
        if url.scheme() == "https" {
            let connector = self.tls_connector().await?;
            let name = match url.host() {
                Some(Host::Domain(d)) => ServerName::try_from(d.to_string())?,
                Some(Host::Ipv4(a)) => ServerName::IpAddress(std::net::IpAddr::V4(a).into()),
                Some(Host::Ipv6(a)) => ServerName::IpAddress(std::net::IpAddr::V6(a).into()),
                None => return Err(FetchError::MissingHost),
            };
            let tls = connector
                .connect(name, tcp)
                .await
                .map_err(FetchError::Tls)?;
            exchange(TokioIo::new(tls), request).await
        } else {
            exchange(TokioIo::new(tcp), request).await
        }
    }

    async fn tls_connector(&mut self) -> Result<tokio_rustls::TlsConnector, FetchError> {
        if let Some(c) = &self.tls {
            return Ok(c.clone());
        }
        let given = self.source.roots.clone();
        let certs = match given {
            Some(c) => c,
            None => tokio::task::spawn_blocking(system_roots).await?,
        };
        let mut store = rustls::RootCertStore::empty();
        let (added, _ignored) = store.add_parsable_certificates(certs);
        if added == 0 {
            return Err(FetchError::NoRoots);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(store)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        self.tls = Some(connector.clone());
        Ok(connector)
    }
}

/// One request over one connection; the whole body is read.
async fn exchange<I>(
    io: I,
    request: Request<Empty<Bytes>>,
) -> Result<(StatusCode, HeaderMap, Bytes), FetchError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    let request_done = async move {
        let response = sender.send_request(request).await?;
        let (parts, mut body) = response.into_parts();
        let mut data = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame?;
            if let Some(chunk) = frame.data_ref() {
                if data.len() + chunk.len() > MAX_CONFIG_LENGTH {
                    return Err(FetchError::ReadLimit);
                }
                data.extend_from_slice(chunk);
            }
        }
        Ok((parts.status, parts.headers, data.freeze()))
        // The sender drops here, which lets the connection close.
    };
    let (result, _connection) = tokio::join!(request_done, connection);
    result
}

/// The system's trusted CA certificates (blocking).
fn system_roots() -> Vec<CertificateDer<'static>> {
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    if let Some(f) = std::env::var_os("SSL_CERT_FILE") {
        files.push(f.into());
    }
    files.extend(SYSTEM_CA_FILES.iter().map(Into::into));
    for file in files {
        if let Ok(iter) = CertificateDer::pem_file_iter(&file) {
            let certs: Vec<_> = iter.filter_map(Result::ok).collect();
            if !certs.is_empty() {
                return certs;
            }
        }
    }
    let dirs = std::env::var("SSL_CERT_DIR")
        .unwrap_or_else(|_| "/etc/ssl/certs:/etc/pki/tls/certs".into());
    let mut certs = Vec::new();
    for dir in dirs.split(':') {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(iter) = CertificateDer::pem_file_iter(entry.path()) {
                certs.extend(iter.filter_map(Result::ok));
            }
        }
    }
    certs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_checks_url_and_headers() {
        let none = BTreeMap::new();
        assert!(
            HttpSource::new(
                "http://127.0.0.1:8080/pods",
                &none,
                "n",
                Duration::from_secs(20)
            )
            .is_ok()
        );
        assert!(matches!(
            HttpSource::new("ftp://h/p", &none, "n", Duration::from_secs(20)),
            Err(SourceError::BadUrl { .. })
        ));
        assert!(matches!(
            HttpSource::new("not a url", &none, "n", Duration::from_secs(20)),
            Err(SourceError::BadUrl { .. })
        ));
        let bad: BTreeMap<String, Vec<String>> =
            [("bad header".to_string(), vec!["v".to_string()])].into();
        assert!(matches!(
            HttpSource::new("http://h/p", &bad, "n", Duration::from_secs(20)),
            Err(SourceError::BadHeader { .. })
        ));
        let multi: BTreeMap<String, Vec<String>> = [(
            "X-Token".to_string(),
            vec!["a".to_string(), "b".to_string()],
        )]
        .into();
        let s = HttpSource::new("http://h/p", &multi, "n", Duration::from_secs(20)).unwrap();
        assert_eq!(s.headers.get_all("x-token").iter().count(), 2);
    }
}
