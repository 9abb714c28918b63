//! Slow and oversized requests on the read-only port (issue 18), on real
//! sockets: thousands of idle connections and slow-header (slowloris)
//! clients held open while healthz keeps answering; request heads up to
//! Go's 1 MiB limit served, longer ones answered 431. The latencies and
//! the connection counts are printed.

use std::time::{Duration, Instant};

use kubelet::configz::Configz;
use kubelet::healthz::Healthz;
use kubelet::kubelet::server::handlers::{ServerHandlers, read_only_router};
use kubelet::kubelet::server::read_only_server;
use kubelet::util::lifecycle::TaskSet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn handlers() -> ServerHandlers {
    ServerHandlers {
        healthz: Healthz::new(),
        configz: Configz::new(),
        metrics: None,
        probe_metrics: None,
        kubelet: None,
        profiling: false,
    }
}

/// Sends `head` (a whole request head) and returns the status code.
async fn status_of(addr: std::net::SocketAddr, head: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(head).await.ok()?;
    let mut buf = vec![0u8; 256];
    let mut got = 0;
    while got < 12 {
        let n = s.read(&mut buf[got..]).await.ok()?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let line = String::from_utf8_lossy(&buf[..got]).into_owned();
    line.split(' ').nth(1)?.parse().ok()
}

/// A read-only server on a free loopback port, accepting.
async fn start_read_only() -> (std::net::SocketAddr, TaskSet) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let server = read_only_server("127.0.0.1", port, read_only_router(&handlers()).unwrap())
        .expect("enabled");
    let bound = server.bind().await.expect("bind");
    let addr = bound.local_addr();
    let tasks = TaskSet::new();
    bound.start(&tasks);
    (addr, tasks)
}

fn healthz_request() -> Vec<u8> {
    b"GET /healthz HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n".to_vec()
}

fn with_header(len: usize) -> Vec<u8> {
    let mut r = b"GET /healthz HTTP/1.1\r\nHost: node\r\nConnection: close\r\nX-Big: ".to_vec();
    r.extend(std::iter::repeat_n(b'a', len));
    r.extend(b"\r\n\r\n");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_clients_do_not_starve_the_server() {
    let (addr, tasks) = start_read_only().await;

    // Idle connections (nothing sent) and slow-header ones, held open.
    let idle_n = 3000;
    let slow_n = 200;
    let mut idle = Vec::with_capacity(idle_n);
    for _ in 0..idle_n {
        match TcpStream::connect(addr).await {
            Ok(s) => idle.push(s),
            Err(e) => {
                eprintln!("stopped opening idle connections at {}: {e}", idle.len());
                break;
            }
        }
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let mut slow = Vec::new();
    for i in 0..slow_n {
        let stop = stop.clone();
        slow.push(tokio::spawn(async move {
            let Ok(mut s) = TcpStream::connect(addr).await else {
                return 0u32;
            };
            if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: node\r\n")
                .await
                .is_err()
            {
                return 0;
            }
            let mut lines = 0;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return lines,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
                if s.write_all(format!("X-Slow-{i}-{lines}: 1\r\n").as_bytes())
                    .await
                    .is_err()
                {
                    return lines;
                }
                lines += 1;
            }
        }));
    }

    // Healthz answers throughout.
    let mut latencies = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let code =
            tokio::time::timeout(Duration::from_secs(10), status_of(addr, &healthz_request()))
                .await
                .expect("healthz answers under load");
        assert_eq!(code, Some(200));
        latencies.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    latencies.sort();
    eprintln!(
        "with {} idle and {slow_n} slow-header connections open: healthz p50 {:?}, max {:?} over {} requests",
        idle.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
        latencies.len()
    );

    // Request heads up to Go's MaxHeaderBytes are read; longer ones get 431.
    let cases = [
        ("a 512 KiB header", 512 * 1024, Some(200)),
        ("a 1000 KiB header", 1000 * 1024, Some(200)),
        ("a 2 MiB header", 2 << 20, Some(431)),
    ];
    for (name, len, want) in cases {
        let got = tokio::time::timeout(Duration::from_secs(10), status_of(addr, &with_header(len)))
            .await
            .unwrap_or_else(|_| panic!("{name}: answered"));
        assert_eq!(got, want, "{name}");
    }
    // Still serving after all of it.
    assert_eq!(status_of(addr, &healthz_request()).await, Some(200));

    stop.cancel();
    let mut lines = 0;
    for h in slow {
        lines += h.await.unwrap_or(0);
    }
    eprintln!("slow-header clients sent {lines} header lines in all");
    drop(idle);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .expect("servers stop");
}

/// Bytes a hostile or broken client may send on a connection.
fn connection_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let method = prop::sample::select(vec![
        "GET", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "PRI", "G\0T", "",
    ]);
    let path = "(/[-a-zA-Z0-9%._~:@!$&'()*+,;=]{0,10}){0,5}/?|\\*|[ -~]{0,30}";
    let version = prop::sample::select(vec!["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", ""]);
    let header = prop::sample::select(vec![
        "Host: node",
        "Connection: Upgrade",
        "Connection: close",
        "Upgrade: websocket",
        "Upgrade: SPDY/3.1",
        "Upgrade: h2c",
        "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Protocol: v4.channel.k8s.io",
        "X-Stream-Protocol-Version: v4.channel.k8s.io",
        "Transfer-Encoding: chunked",
        "Transfer-Encoding: gzip, chunked",
        "Content-Length: 5",
        "Content-Length: -1",
        "Content-Length: 18446744073709551616",
        "Content-Length: 3\r\nContent-Length: 4",
        "Expect: 100-continue",
        "Authorization: Bearer \u{1}",
        " folded",
        ":",
    ]);
    let http1 = (
        method,
        path,
        version,
        prop::collection::vec(header, 0..8),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(m, p, v, headers, tail)| {
            let mut b = format!("{m} {p} {v}\r\n").into_bytes();
            for h in headers {
                b.extend_from_slice(h.as_bytes());
                b.extend_from_slice(b"\r\n");
            }
            b.extend_from_slice(b"\r\n");
            // A body, chunks, or WebSocket/SPDY frames: bytes either way.
            b.extend(tail);
            b
        });
    let h2 = prop::collection::vec(any::<u8>(), 0..400).prop_map(|frames| {
        let mut b = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        b.extend(frames);
        b
    });
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1024),
        http1.clone(),
        http1,
        h2,
    ]
}

/// Random connections (raw bytes, HTTP/1 heads with upgrade and framing
/// headers followed by body or frame bytes, HTTP/2 prefaces followed by
/// random frames), each written then half-closed: the server answers or
/// closes every one within a bound, never panics, and healthz keeps
/// answering. `KUBELET_RS_FUZZ_CASES` sets the number of cases (256).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_connections_are_answered_or_closed() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, TestRunner};
    use std::sync::atomic::{AtomicU64, Ordering};
    static PANICS: AtomicU64 = AtomicU64::new(0);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let cases: u32 = std::env::var("KUBELET_RS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);

    let (addr, tasks) = start_read_only().await;

    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = connection_bytes();
    let (mut answered, mut closed_silently, mut slowest) = (0u32, 0u32, Duration::ZERO);
    for i in 0..cases {
        let bytes = strategy.new_tree(&mut runner).expect("a case").current();
        let t = Instant::now();
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let _ = s.write_all(&bytes).await;
        let _ = s.shutdown().await;
        let mut got = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "connection still open 5 s after the client finished: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        slowest = slowest.max(t.elapsed());
        if got.is_empty() {
            closed_silently += 1;
        } else {
            answered += 1;
        }
        if i % 32 == 0 {
            assert_eq!(status_of(addr, &healthz_request()).await, Some(200));
        }
    }
    assert_eq!(status_of(addr, &healthz_request()).await, Some(200));
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a panic while serving");
    eprintln!(
        "{cases} random connections: {answered} answered, {closed_silently} closed without an answer, slowest {slowest:?}; healthz 200 throughout"
    );
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .expect("servers stop");
}
