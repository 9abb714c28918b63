//! tcpSocket probes: healthy when a TCP connection opens within the timeout;
//! the connection is closed at once.

use std::time::Duration;

use tokio::time::Instant;

use super::net::{dial, join_host_port};
use super::probe::Outcome;

/// Connects to `host:port` (an empty host is this machine); a zero timeout
/// means no bound but the system's.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> (Outcome, String) {
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    match dial(host, port, deadline).await {
        Ok(stream) => {
            drop(stream);
            (Outcome::Success, String::new())
        }
        Err(e) => {
            crate::vlog!(4, addr = %join_host_port(host, port), error = %e, "TCP probe failed");
            (Outcome::Failure, e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_port_succeeds_closed_port_fails() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert_eq!(
            probe("127.0.0.1", port, Duration::from_secs(1)).await,
            (Outcome::Success, String::new())
        );
        drop(listener);
        let (outcome, msg) = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert_eq!(outcome, Outcome::Failure);
        assert_eq!(
            msg,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
    }

    #[tokio::test]
    async fn unroutable_address_times_out_within_the_timeout() {
        // TEST-NET-1 is never routed; the connect hangs (or fails at once
        // where no route exists at all).
        let started = std::time::Instant::now();
        let (outcome, msg) = probe("192.0.2.1", 9, Duration::from_millis(300)).await;
        assert_eq!(outcome, Outcome::Failure);
        assert!(
            msg == "dial tcp 192.0.2.1:9: i/o timeout"
                || msg.starts_with("dial tcp 192.0.2.1:9: connect: "),
            "{msg}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
