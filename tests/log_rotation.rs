//! Container log rotation end to end (issue 16): a kubelet with
//! `containerLogMaxSize: 1Mi` and `containerLogMaxFiles: 3` over a private
//! containerd runs a static pod whose container writes about 1 MiB/s for
//! 30 s. Its log directory never holds more than 3 files, older rotations
//! are gzip files, what stays on disk is a fraction of what was written,
//! `kubectl logs --follow` keeps following across the rotations, and the
//! newest lines are read through /containerLogs/.
//!
//! The log manager looks every 10 s (Go's fixed period), so at 1 MiB/s the
//! live file and the newest (uncompressed) rotation each reach about 10 MiB
//! before a round rotates them: the size bound below follows from that.

#[allow(dead_code)]
#[path = "e2e/harness.rs"]
mod harness;
mod support;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness::*;
use http_body_util::BodyExt;
use support::containerd::{Containerd, images};

const NODE: &str = "e2e-logrotate";
const MI: u64 = 1024 * 1024;
/// Seconds of writing, 1000 lines of about 1 KiB each.
const WRITE_SECS: u64 = 30;
const LINES: u64 = WRITE_SECS * 1000;

/// What the sampler saw in the container's log directory.
#[derive(Debug, Default)]
struct Seen {
    samples: usize,
    max_files: usize,
    max_bytes: u64,
    /// Rotated names (without `.gz`/`.tmp`): one per rotation.
    rotations: BTreeSet<String>,
    gz_seen: bool,
    /// The largest listing, for the report.
    biggest: Vec<(String, u64)>,
}

fn listing(dir: &Path) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let len = e.metadata().ok()?.len();
            Some((e.file_name().to_string_lossy().into_owned(), len))
        })
        .collect();
    out.sort();
    out
}

/// Samples `dir` every 50 ms until `stop`.
fn sample(dir: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        while !stop.load(Ordering::SeqCst) {
            let files = listing(&dir);
            let bytes: u64 = files.iter().map(|(_, n)| n).sum();
            seen.samples += 1;
            seen.max_files = seen.max_files.max(files.len());
            if bytes > seen.max_bytes {
                seen.max_bytes = bytes;
                seen.biggest = files.clone();
            }
            for (name, _) in &files {
                if let Some(rest) = name.strip_prefix("0.log.") {
                    let stamp = rest.trim_end_matches(".tmp").trim_end_matches(".gz");
                    seen.rotations.insert(stamp.to_string());
                    seen.gz_seen |= name.ends_with(".gz");
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        seen
    })
}

/// The number in a "line N ..." or "after N" log line.
fn number(line: &str) -> Option<u64> {
    let mut words = line.split_whitespace();
    match words.next()? {
        "line" | "after" => words.next()?.parse().ok(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_logs_rotate_by_size_and_count() {
    let Some(rig) = Containerd::start("log_rotation") else {
        return;
    };
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "logrotate");
    let p = Ports {
        main: 21340,
        read_only: 21341,
        healthz: 21342,
    };
    let cfg = config(
        &dirs,
        &root,
        p,
        "containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\n",
    );
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    // 1000 numbered lines of ~1 KiB a second for WRITE_SECS seconds, then
    // a short "after N" line every second (the live log stays small).
    let program = format!(
        r#"BEGIN {{ pad = sprintf("%1000s", ""); n = 0; for (s = 0; s < {WRITE_SECS}; s++) {{ for (i = 0; i < 1000; i++) {{ n++; printf "line %d %s\n", n, pad }}; fflush(); system("sleep 1") }}; for (;;) {{ printf "after %d\n", n; fflush(); system("sleep 1") }} }}"#
    );
    dirs.write_manifest(
        "chatty.yaml",
        &format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: chatty
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: {bb}
    command: [awk, '{program}']
",
            bb = images().busybox
        ),
    );
    let pod_name = format!("chatty-{NODE}");
    let pod = wait_pod(
        p.read_only,
        &pod_name,
        Duration::from_secs(60),
        "writer running",
        |p| is_running(p, "writer"),
    )
    .await;
    let log_dir = dirs
        .path("logs/pods")
        .join(format!("default_{pod_name}_{}", uid(&pod)))
        .join("writer");
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(log_dir.clone(), stop.clone());

    // Follow from the start, across every rotation.
    let url = |q: &str| format!("/containerLogs/default/{pod_name}/writer{q}");
    let (status, mut body) = https_request(&dirs, NODE, p.main, &url("?follow=true")).await;
    assert_eq!(status, 200);
    let mut followed = String::new();
    let mut last = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(WRITE_SECS + 60);
    let mut numbers = Vec::new();
    while last < LINES {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("the followed log reaches the last line")
            .expect("stream open")
            .expect("frame");
        if let Some(d) = frame.data_ref() {
            followed.push_str(&String::from_utf8_lossy(d));
        }
        while let Some(end) = followed.find('\n') {
            let line: String = followed.drain(..=end).collect();
            if let Some(n) = number(&line) {
                numbers.push(n);
                last = last.max(n);
            }
        }
    }
    drop(body);

    // The newest lines, once the last big file has been rotated away:
    // the trailer with the final count.
    let newest = support::eventually(Duration::from_secs(40), || async {
        let (status, body) = https_get(&dirs, NODE, p.main, &url("?tailLines=3")).await;
        let lines: Vec<&str> = body.lines().collect();
        let settled = listing(&log_dir)
            .iter()
            .any(|(name, n)| name == "0.log" && *n < MI);
        (status == 200
            && settled
            && lines.len() == 3
            && lines.iter().all(|l| *l == format!("after {LINES}")))
        .then_some(body)
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let seen = sampler.join().expect("sampler");
    let end = listing(&log_dir);
    let end_bytes: u64 = end.iter().map(|(_, n)| n).sum();
    let distinct: BTreeSet<u64> = numbers.iter().copied().collect();
    // The follow began once the pod ran: count from its first line.
    let first = distinct.first().copied().unwrap_or(1);
    let missing = (first..=LINES).filter(|n| !distinct.contains(n)).count();
    eprintln!(
        "log rotation: {} samples; at most {} files and {:.2} MiB on disk (at {:?}); {} rotations {:?}; at the end {:.2} MiB in {:?}; followed {} lines from {first} to {LINES}",
        seen.samples,
        seen.max_files,
        seen.max_bytes as f64 / MI as f64,
        seen.biggest,
        seen.rotations.len(),
        seen.rotations,
        end_bytes as f64 / MI as f64,
        end,
        distinct.len(),
    );
    assert!(
        newest.is_some(),
        "the newest lines through /containerLogs/: {:?}",
        https_get(&dirs, NODE, p.main, &url("?tailLines=3")).await
    );
    assert!(
        seen.max_files <= 3,
        "at most containerLogMaxFiles files: {seen:?}"
    );
    assert!(seen.rotations.len() >= 2, "rotated several times: {seen:?}");
    assert!(seen.gz_seen, "older rotations are compressed: {seen:?}");
    // The live log and the newest rotation hold at most MaxSize plus one
    // period's writing each (about 11 MiB at 1 MiB/s); the .gz is small.
    assert!(seen.max_bytes <= 24 * MI, "disk use is bounded: {seen:?}");
    // Once the writing slows down, what stays is the small live log, one
    // .gz and the newest rotation, uncompressed until the next rotation
    // (Go keeps it so for readers that are still on it).
    assert!(
        end_bytes <= 12 * MI,
        "everything but the newest rotation is compressed or gone: {end_bytes} bytes left"
    );
    for (name, _) in end.iter().filter(|(n, _)| n.ends_with(".gz")) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(log_dir.join(name)).expect("open"))
            .read_to_string(&mut text)
            .expect("a gzip file");
        assert!(
            text.lines().all(|l| l.contains(" stdout F ")),
            "{name} holds CRI log lines"
        );
    }
    // Following went on across every rotation, in order.
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "in order");
    assert!(
        missing * 100 <= LINES as usize,
        "the follower saw (almost) every line: {missing} missing"
    );

    dirs.remove_manifest("chatty.yaml");
    kubelet.stop().await.expect("clean stop");
}
