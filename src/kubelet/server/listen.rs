//! Listening sockets and the accept loop shared by the kubelet's servers
//! (main, read-only, healthz): plain HTTP or TLS, HTTP/1.1 and HTTP/2,
//! connection upgrades, one task per connection on the start phase's
//! TaskSet, and a bounded graceful stop on cancellation.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::router::BoxError;
use super::{ConnectionInfo, KubeletService};
use crate::util::lifecycle::TaskSet;

/// How long in-flight requests get to finish once shutdown starts.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

const LISTEN_BACKLOG: u32 = 1024;

fn bind_exact(addr: SocketAddr, dual_stack: bool) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if dual_stack {
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::Ipv6V6Only, &false)
            .map_err(io::Error::from)?;
    }
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Binds `host:port` as Go's `net.Listen("tcp", ...)` does: an unspecified
/// address (empty, `0.0.0.0` or `::`) listens on all IPv6 and IPv4 addresses
/// through one dual-stack socket (IPv4 only where IPv6 is unavailable); a
/// hostname listens on its first resolved address.
pub async fn bind_tcp(host: &str, port: u16) -> io::Result<TcpListener> {
    let ip = if host.is_empty() {
        Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    } else {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok()
    };
    match ip {
        Some(ip) if ip.is_unspecified() => {
            match bind_exact(
                SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
                true,
            ) {
                Ok(l) => Ok(l),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAFNOSUPPORT) | Some(libc::EADDRNOTAVAIL)
                    ) =>
                {
                    bind_exact(
                        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
                        false,
                    )
                }
                Err(e) => Err(e),
            }
        }
        Some(ip) => bind_exact(SocketAddr::new(ip, port), false),
        None => {
            let mut last =
                io::Error::new(io::ErrorKind::NotFound, format!("no address for {host}"));
            for addr in tokio::net::lookup_host((host, port)).await? {
                match bind_exact(addr, false) {
                    Ok(l) => return Ok(l),
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// How long a client may take to complete its TLS handshake before the
/// connection is dropped. A handshake is a few round trips; Go bounds it
/// only by its 4 h read timeout, which lets clients that connect and send
/// nothing (or half a ClientHello) hold a connection and its memory for
/// hours.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS side of a listener.
pub(crate) struct TlsAccept {
    pub acceptor: TlsAcceptor,
    /// [`TLS_HANDSHAKE_TIMEOUT`] unless the server was built with another.
    pub handshake_timeout: Duration,
}

/// Runs the accept loop until `tasks` is cancelled; each connection is a
/// task on `tasks`.
pub(crate) async fn accept_loop(
    name: &'static str,
    listener: TcpListener,
    tls: Option<Arc<TlsAccept>>,
    service: Arc<KubeletService>,
    tasks: TaskSet,
) {
    let token = tasks.token();
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            _ = token.cancelled() => break,
            res = listener.accept() => res,
        };
        let (stream, peer) = match accepted {
            Ok(v) => {
                backoff = Duration::ZERO;
                v
            }
            Err(err) => {
                backoff = if backoff.is_zero() {
                    Duration::from_millis(5)
                } else {
                    (backoff * 2).min(Duration::from_secs(1))
                };
                tracing::error!(server = name, error = %err, retry_in = ?backoff, "Accept error");
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => continue,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let tls = tls.clone();
        let token = token.clone();
        tasks.spawn("http-connection", async move {
            match tls {
                None => {
                    let info = ConnectionInfo {
                        remote_addr: Some(peer),
                        tls: false,
                        peer_certificates: None,
                    };
                    serve_connection(stream, info, service, token).await;
                }
                Some(tls) => {
                    let handshake = tokio::select! {
                        _ = token.cancelled() => return,
                        res = tokio::time::timeout(tls.handshake_timeout, tls.acceptor.accept(stream)) => res,
                    };
                    match handshake {
                        Err(_) => {
                            crate::vlog!(2, server = name, remote = %peer, timeout = ?tls.handshake_timeout, "TLS handshake timed out; closing the connection");
                        }
                        Ok(Ok(tls_stream)) => {
                            let peer_certificates = tls_stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .map(|c| Arc::from(c.to_vec()));
                            let info = ConnectionInfo {
                                remote_addr: Some(peer),
                                tls: true,
                                peer_certificates,
                            };
                            serve_connection(tls_stream, info, service, token).await;
                        }
                        Ok(Err(err)) => {
                            crate::vlog!(2, server = name, remote = %peer, error = %err, "TLS handshake error");
                        }
                    }
                }
            }
        });
    }
    crate::vlog!(2, server = name, "Stopped listening");
}

/// Go's kubelet server closes idle keep-alive connections after 90 s.
/// Here the same bound also limits how long a request's headers may take
/// to arrive (Go: its 4 h read timeout), which keeps slow-header clients
/// from holding connections.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Go's `MaxHeaderBytes` (1 MiB) plus the 4 KiB its reader allows on top:
/// a longer request head is answered 431.
pub const MAX_HEADER_BYTES: usize = (1 << 20) + 4096;

async fn serve_connection<S>(
    io: S,
    info: ConnectionInfo,
    service: Arc<KubeletService>,
    token: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let remote = info.remote_addr;
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let service = service.clone();
        let info = info.clone();
        async move {
            let mut req = req.map(|b| b.map_err(|e| Box::new(e) as BoxError).boxed());
            req.extensions_mut().insert(info);
            Ok::<_, Infallible>(service.dispatch(req).await)
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        // Go's server: an idle keep-alive connection is closed after 90 s;
        // hyper's header timer also runs while the next request is awaited.
        .header_read_timeout(IDLE_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        res = conn.as_mut() => {
            if let Err(err) = res {
                crate::vlog!(4, remote = ?remote, error = %err, "Connection ended with an error");
            }
        }
        _ = token.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unspecified_address_accepts_ipv4_and_ipv6() {
        for host in ["", "0.0.0.0", "::"] {
            let l = bind_tcp(host, 0).await.unwrap();
            let port = l.local_addr().unwrap().port();
            let v4 = tokio::spawn(tokio::net::TcpStream::connect(("127.0.0.1", port)));
            l.accept().await.unwrap();
            v4.await.unwrap().unwrap();
            if l.local_addr().unwrap().is_ipv6() {
                let v6 = tokio::spawn(tokio::net::TcpStream::connect(("::1", port)));
                l.accept().await.unwrap();
                v6.await.unwrap().unwrap();
            }
        }
    }

    #[tokio::test]
    async fn specific_addresses_and_names() {
        let l = bind_tcp("127.0.0.1", 0).await.unwrap();
        assert_eq!(
            l.local_addr().unwrap().ip(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        let l = bind_tcp("localhost", 0).await.unwrap();
        assert!(l.local_addr().unwrap().ip().is_loopback());
        let taken = l.local_addr().unwrap();
        // A port in use is an error, not a silent second listener.
        let err = bind_tcp(&taken.ip().to_string(), taken.port())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }
}
