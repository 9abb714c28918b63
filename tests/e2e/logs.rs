//! `kubectl logs` against the kubelet: /containerLogs/ on the main (TLS)
//! port reads the CRI log files containerd writes for a static pod's
//! containers: current and previous container, tail, timestamps, byte
//! limit, follow, init containers, and Go's refusals.

use std::time::Duration;

use http_body_util::BodyExt;

use crate::harness::*;
use crate::support::containerd::{Containerd, images};

const NODE: &str = "e2e-logs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_logs_on_the_main_port() {
    let Some(rig) = Containerd::start("e2e_container_logs") else {
        return;
    };
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "logs");
    let p = Ports {
        main: 21310,
        read_only: 21311,
        healthz: 21312,
    };
    let cfg = config(&dirs, &root, p, "");
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    let bb = &images().busybox;
    // `once` exits after its first run and stays up after the restart;
    // `ticker` writes a line a second.
    dirs.write_manifest(
        "talk.yaml",
        &format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: talk
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: work
    emptyDir: {{}}
  initContainers:
  - name: setup
    image: {bb}
    command: [sh, -c, 'echo setting up']
  containers:
  - name: once
    image: {bb}
    command: [sh, -c, 'if [ -e /work/ran ]; then echo second run; sleep 3600; fi; touch /work/ran; echo first run; sleep 1; echo to stderr >&2; exit 1']
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: ticker
    image: {bb}
    command: [sh, -c, 'i=0; while true; do echo tick $i; i=$((i+1)); sleep 1; done']
"
        ),
    );
    let pod = "talk-e2e-logs";
    let url = |c: &str, q: &str| format!("/containerLogs/default/{pod}/{c}{q}");
    wait_pod(
        p.read_only,
        pod,
        Duration::from_secs(60),
        "ticker running",
        |p| is_running(p, "ticker"),
    )
    .await;

    let (status, body) = https_get(&dirs, NODE, p.main, &url("setup", "")).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "setting up\n"),
        "init container"
    );

    // The first run of `once`, then its restart after the back-off.
    wait_pod(
        p.read_only,
        pod,
        Duration::from_secs(60),
        "once restarted",
        |p| is_running(p, "once") && container(p, "once").is_some_and(|c| c.restart_count == 1),
    )
    .await;
    let cases: &[(&str, u16, &str)] = &[
        ("", 200, "second run\n"),
        ("?previous=true", 200, "first run\nto stderr\n"),
        ("?previous=true&tailLines=1", 200, "to stderr\n"),
        ("?previous=true&limitBytes=5", 200, "first"),
        (
            "?tailLines=x",
            400,
            r#"{"message": "Unable to decode query."}"#,
        ),
        ("?sinceSeconds=0", 422, r#"{"message": "Invalid request."}"#),
    ];
    for (q, want_status, want_body) in cases {
        let got = https_get(&dirs, NODE, p.main, &url("once", q)).await;
        assert_eq!(got, (*want_status, want_body.to_string()), "once{q}");
    }
    let (status, body) = https_get(
        &dirs,
        NODE,
        p.main,
        &url("once", "?previous=1&timestamps=1"),
    )
    .await;
    assert_eq!(status, 200);
    for (line, text) in body.lines().zip(["first run", "to stderr"]) {
        let (ts, rest) = line.split_once(' ').expect("a timestamp prefix");
        assert_eq!(rest, text);
        assert_eq!(ts.len(), "2026-11-22T08:00:00.000000000Z".len(), "{ts}");
        assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{ts}");
    }

    // The node's own logs: /var/log as a listing.
    let (status, body) = https_get(&dirs, NODE, p.main, "/logs/").await;
    assert_eq!(status, 200);
    assert!(
        body.starts_with("<pre>\n") && body.ends_with("</pre>\n"),
        "{body}"
    );

    // Not there: Go's answers.
    let refusals: &[(String, u16, String)] = &[
        (
            "/containerLogs/default/nope/once".to_string(),
            404,
            "pod \"nope\" does not exist".into(),
        ),
        (
            url("nope", ""),
            404,
            format!("container \"nope\" not found in pod \"{pod}\""),
        ),
        (
            url("ticker", "?previous=true"),
            400,
            format!("previous terminated container \"ticker\" in pod \"{pod}\" not found"),
        ),
    ];
    for (path, want_status, want_body) in refusals {
        let got = https_get(&dirs, NODE, p.main, path).await;
        assert_eq!(got, (*want_status, want_body.clone()), "{path}");
    }

    // Follow: new lines keep arriving on the open response.
    let (status, mut body) = https_request(
        &dirs,
        NODE,
        p.main,
        &url("ticker", "?follow=true&tailLines=1"),
    )
    .await;
    assert_eq!(status, 200);
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen.lines().count() < 4 {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("ticks keep coming")
            .expect("stream open")
            .expect("frame");
        if let Some(d) = frame.data_ref() {
            seen.push_str(&String::from_utf8_lossy(d));
        }
    }
    let ticks: Vec<u64> = seen
        .lines()
        .map(|l| l.strip_prefix("tick ").expect("a tick").parse().expect("n"))
        .collect();
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{ticks:?}");
    drop(body);

    dirs.remove_manifest("talk.yaml");
    kubelet.stop().await.expect("clean stop");
}
