//! The transport under the kubelet's API clients: TCP (and TLS for https)
//! connections that can all be dropped at once, as Go's connection-rotating
//! dialer does (`closeAllConns`). Every connection is tied to the tracker's
//! current generation; [`ConnTracker::close_all`] ends that generation, so
//! each of its connections fails its next read or write (and pending reads
//! wake at once), the HTTP pool discards them, and the next request dials
//! again — abandoning an API server endpoint that stopped answering.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// How long a TCP connect may take (Go's dialer timeout).
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Hands out the current connection generation and ends it on demand.
#[derive(Clone, Debug, Default)]
pub struct ConnTracker {
    current: Arc<Mutex<CancellationToken>>,
    closes: Arc<std::sync::atomic::AtomicU64>,
}

impl ConnTracker {
    pub fn new() -> Self {
        Self::default()
    }

    fn generation(&self) -> CancellationToken {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Drops every connection opened so far; new ones are unaffected.
    pub fn close_all(&self) {
        let old = {
            let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *cur)
        };
        old.cancel();
        self.closes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many times every connection was dropped.
    pub fn close_count(&self) -> u64 {
        self.closes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Dials the API server: plain TCP for http, TLS for https.
#[derive(Clone)]
pub struct Connector {
    tls: Option<tokio_rustls::TlsConnector>,
    server_name: Option<ServerName<'static>>,
    tracker: ConnTracker,
    dial_timeout: Duration,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("tls", &self.tls.is_some())
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// `tls` serves https URIs; `server_name` overrides the name verified
    /// (the kubeconfig's `tls-server-name`).
    pub fn new(
        tls: Option<Arc<rustls::ClientConfig>>,
        server_name: Option<ServerName<'static>>,
        tracker: ConnTracker,
    ) -> Self {
        Connector {
            tls: tls.map(tokio_rustls::TlsConnector::from),
            server_name,
            tracker,
            dial_timeout: DIAL_TIMEOUT,
        }
    }
}

fn io_err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

async fn dial(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let connect = async {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
        let mut last = io_err(
            io::ErrorKind::NotFound,
            format!("no addresses found for {host}"),
        );
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(last)
    };
    match tokio::time::timeout(timeout, connect).await {
        Ok(r) => r,
        Err(_) => Err(io_err(
            io::ErrorKind::TimedOut,
            format!("dial tcp {host}:{port}: i/o timeout"),
        )),
    }
}

impl tower::Service<Uri> for Connector {
    type Response = TokioIo<TrackedStream>;
    type Error = io::Error;
    type Future = BoxFuture<'static, io::Result<Self::Response>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let me = self.clone();
        Box::pin(async move {
            let https = uri.scheme_str() == Some("https");
            let host = uri
                .host()
                .ok_or_else(|| io_err(io::ErrorKind::InvalidInput, format!("no host in {uri}")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
            let generation = me.tracker.generation();
            let tcp = dial(&host, port, me.dial_timeout).await?;
            let _ = tcp.set_nodelay(true);
            let stream = if https {
                let tls = me.tls.as_ref().ok_or_else(|| {
                    io_err(
                        io::ErrorKind::InvalidInput,
                        "https requested but no TLS configuration".into(),
                    )
                })?;
                let name = match &me.server_name {
                    Some(n) => n.clone(),
                    None => ServerName::try_from(host.clone()).map_err(|e| {
                        io_err(
                            io::ErrorKind::InvalidInput,
                            format!("server name {host}: {e}"),
                        )
                    })?,
                };
                Stream::Tls(Box::new(tls.connect(name, tcp).await?))
            } else {
                Stream::Plain(tcp)
            };
            Ok(TokioIo::new(TrackedStream {
                inner: stream,
                closed: Box::pin(generation.cancelled_owned()),
            }))
        })
    }
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// A connection that fails once its generation is closed.
pub struct TrackedStream {
    inner: Stream,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl TrackedStream {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.closed.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io_err(
                io::ErrorKind::ConnectionAborted,
                "connection closed: the kubelet dropped all API server connections".into(),
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl Connection for TrackedStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for TrackedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.check(cx)?;
        match &mut me.inner {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        me.check(cx)?;
        match &mut me.inner {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.check(cx)?;
        match &mut me.inner {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tower::Service;

    #[tokio::test]
    async fn close_all_fails_open_connections_and_spares_new_ones() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let tracker = ConnTracker::new();
        let mut c = Connector::new(None, None, tracker.clone());
        let uri: Uri = format!("http://{addr}").parse().unwrap();
        let mut old = c.call(uri.clone()).await.unwrap().into_inner();
        old.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        old.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        // A read blocked on the old connection wakes with an error.
        let reader = tokio::spawn(async move {
            let mut b = [0u8; 4];
            old.read(&mut b).await
        });
        tokio::task::yield_now().await;
        tracker.close_all();
        let err = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("blocked read wakes")
            .unwrap()
            .expect_err("old connection is closed");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);

        let mut fresh = c.call(uri).await.unwrap().into_inner();
        fresh.write_all(b"pong").await.unwrap();
        fresh.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
}
