//! Connection helpers the network probes share: `host:port` joining, dialing
//! within a deadline, and error and duration texts shaped as the Go kubelet
//! writes them into probe messages (`dial tcp 10.0.0.5:80: connect:
//! connection refused`, `1m30s`), since users read them in events.

use std::fmt::Display;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// `host:port`, bracketing IPv6 literals (Go's `net.JoinHostPort`).
pub(crate) fn join_host_port(host: &str, port: impl Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A dial that did not produce a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DialError {
    /// The deadline passed while dialing `addr`.
    Timeout { addr: String },
    /// The host name did not resolve.
    Lookup { host: String, message: String },
    /// The connection attempt to `addr` failed.
    Connect { addr: String, message: String },
}

impl DialError {
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, DialError::Timeout { .. })
    }
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::Timeout { addr } => write!(f, "dial tcp {addr}: i/o timeout"),
            DialError::Lookup { host, message } => write!(f, "dial tcp: lookup {host}: {message}"),
            DialError::Connect { addr, message } => {
                write!(f, "dial tcp {addr}: connect: {message}")
            }
        }
    }
}

/// An OS error as Go's syscall package words it (`connection refused`).
pub(crate) fn os_error_text(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => lower_first(nix::errno::Errno::from_raw(code).desc()),
        None => lower_first(&err.to_string()),
    }
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

async fn until<F: std::future::Future>(deadline: Option<Instant>, fut: F) -> Option<F::Output> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, fut).await.ok(),
        None => Some(fut.await),
    }
}

/// Connects to `host:port` by TCP before `deadline` (none: no bound). An
/// empty host means this machine, as in Go; names are resolved and their
/// addresses tried in order.
pub(crate) async fn dial(
    host: &str,
    port: u16,
    deadline: Option<Instant>,
) -> Result<TcpStream, DialError> {
    let addrs: Vec<SocketAddr> = if host.is_empty() {
        vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)]
    } else if let Ok(ip) = host.parse::<IpAddr>() {
        vec![SocketAddr::new(ip, port)]
    } else {
        let lookup = until(deadline, tokio::net::lookup_host((host, port))).await;
        match lookup {
            None => {
                return Err(DialError::Timeout {
                    addr: join_host_port(host, port),
                });
            }
            Some(Err(e)) => {
                return Err(DialError::Lookup {
                    host: host.to_string(),
                    message: lookup_error_text(&e),
                });
            }
            Some(Ok(it)) => it.collect(),
        }
    };
    let shown = |a: &SocketAddr| {
        if host.is_empty() {
            join_host_port("", port)
        } else {
            a.to_string()
        }
    };
    let mut last = DialError::Lookup {
        host: host.to_string(),
        message: "no such host".to_string(),
    };
    for addr in &addrs {
        match until(deadline, TcpStream::connect(addr)).await {
            None => return Err(DialError::Timeout { addr: shown(addr) }),
            Some(Ok(stream)) => return Ok(stream),
            Some(Err(e)) => {
                last = DialError::Connect {
                    addr: shown(addr),
                    message: os_error_text(&e),
                }
            }
        }
    }
    Err(last)
}

fn lookup_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    if text.contains("not known") || text.contains("No address associated") {
        "no such host".to_string()
    } else {
        lower_first(&text)
    }
}

/// A duration as Go's `time.Duration` prints it: `0s`, `500ms`, `1s`,
/// `1.5s`, `1m30s`, `2h0m0s`.
pub(crate) fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", fraction(nanos, 1_000_000));
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let s = fraction(
        u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// `value / unit` with the remainder as trailing decimals, zeros trimmed.
fn fraction(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let rest = value % unit;
    if rest == 0 {
        return whole.to_string();
    }
    let width = unit.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_table() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(15), "15ns"),
            (Duration::from_micros(100), "100µs"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(7200), "2h0m0s"),
            (Duration::from_secs(3661), "1h1m1s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn join_host_port_table() {
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(join_host_port("fd00::1", 8080), "[fd00::1]:8080");
        assert_eq!(join_host_port("", 80), ":80");
        assert_eq!(join_host_port("example.test", "443"), "example.test:443");
    }

    #[tokio::test]
    async fn dial_refused_and_lookup_errors_read_like_go() {
        // A port that was just free: bind, note it, release it.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let deadline = Some(Instant::now() + Duration::from_secs(5));
        let err = dial("127.0.0.1", port, deadline)
            .await
            .expect_err("refused");
        assert_eq!(
            err.to_string(),
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
        let err = dial("no-such-host.invalid", 80, deadline)
            .await
            .expect_err("no such host");
        assert!(
            matches!(err, DialError::Lookup { .. } | DialError::Timeout { .. }),
            "{err:?}"
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        dial("127.0.0.1", port, deadline).await.expect("connects");
        dial("localhost", port, deadline)
            .await
            .expect("names resolve");
    }
}
