//! `kubectl exec`, `port-forward` and the legacy `/run` against the
//! kubelet: the main port proxies WebSocket upgrades to containerd's
//! streaming server (channel.k8s.io framing: one byte of channel, then
//! data), and `/run` answers a command's output.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::*;
use crate::support::containerd::{Containerd, images};

const NODE: &str = "e2e-stream";
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// A WebSocket upgrade to `path` with the v4 channel protocol.
async fn ws_connect(dirs: &NodeDirs, port: u16, path: &str) -> TokioIo<hyper::upgrade::Upgraded> {
    let mut resp = https_send(
        dirs,
        NODE,
        port,
        "GET",
        path,
        &[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", WS_KEY),
            ("sec-websocket-protocol", "v4.channel.k8s.io"),
        ],
    )
    .await;
    assert_eq!(resp.status().as_u16(), 101, "{path}: {:?}", resp.headers());
    assert_eq!(
        resp.headers()["sec-websocket-protocol"],
        "v4.channel.k8s.io"
    );
    TokioIo::new(hyper::upgrade::on(&mut resp).await.expect("upgraded"))
}

/// Reads one server frame: (opcode, payload). Server frames are unmasked.
async fn read_frame<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 2];
    s.read_exact(&mut head).await.ok()?;
    let len = match head[1] & 0x7f {
        126 => u64::from(s.read_u16().await.ok()?),
        127 => s.read_u64().await.ok()?,
        n => u64::from(n),
    };
    let mut payload = vec![0u8; len as usize];
    s.read_exact(&mut payload).await.ok()?;
    Some((head[0] & 0x0f, payload))
}

/// Writes one masked binary client frame.
async fn write_frame<S: tokio::io::AsyncWrite + Unpin>(s: &mut S, payload: &[u8]) {
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut frame = vec![0x82u8];
    assert!(payload.len() < 126);
    frame.push(0x80 | payload.len() as u8);
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    s.write_all(&frame).await.expect("write frame");
}

/// Collects data by channel until the server closes or `done` holds.
async fn channels<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
    done: impl Fn(&BTreeMap<u8, Vec<u8>>) -> bool,
) -> BTreeMap<u8, Vec<u8>> {
    let mut out: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(&out) {
        match tokio::time::timeout_at(deadline, read_frame(s))
            .await
            .expect("frames in time")
        {
            Some((0x8, _)) | None => break,
            Some((_, p)) if !p.is_empty() => out.entry(p[0]).or_default().extend(&p[1..]),
            Some(_) => {}
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_run_and_port_forward_through_the_main_port() {
    let Some(rig) = Containerd::start("e2e_streaming") else {
        return;
    };
    let dirs = NodeDirs::new();
    let root = make_cgroup_root(&rig, "streaming");
    let p = Ports {
        main: 21320,
        read_only: 21321,
        healthz: 21322,
    };
    let cfg = config(&dirs, &root, p, "");
    let kubelet = Kubelet::start(args(&dirs, &rig, &cfg, NODE), |s| deps(&dirs, s));
    let bb = &images().busybox;
    dirs.write_manifest(
        "web.yaml",
        &format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {bb}
    command: [sh, -c, 'mkdir -p /www && echo hello-pf > /www/index.html && exec httpd -f -p 8080 -h /www']
"
        ),
    );
    let pod = "web-e2e-stream";
    wait_pod(p.read_only, pod, Duration::from_secs(60), "running", |p| {
        is_running(p, "main")
    })
    .await;

    // The resource metrics show the node, the pod and its container.
    let (status, metrics) = tokio::task::spawn_blocking(move || {
        http_get(p.read_only, "/metrics/resource").expect("metrics")
    })
    .await
    .expect("join");
    assert_eq!(status, 200);
    for want in [
        "\nnode_cpu_usage_seconds_total ",
        "\nnode_memory_working_set_bytes ",
        &format!("\npod_cpu_usage_seconds_total{{namespace=\"default\",pod=\"{pod}\"}} "),
        &format!("\npod_memory_working_set_bytes{{namespace=\"default\",pod=\"{pod}\"}} "),
        &format!(
            "\ncontainer_cpu_usage_seconds_total{{container=\"main\",namespace=\"default\",pod=\"{pod}\"}} "
        ),
        &format!(
            "\ncontainer_memory_working_set_bytes{{container=\"main\",namespace=\"default\",pod=\"{pod}\"}} "
        ),
        &format!(
            "\ncontainer_start_time_seconds{{container=\"main\",namespace=\"default\",pod=\"{pod}\"}} "
        ),
        "\nscrape_error 0\n",
    ] {
        assert!(metrics.contains(want), "{want} in:\n{metrics}");
    }

    // The stats summary: the node's filesystems and the pod's containers.
    let (status, body) = tokio::task::spawn_blocking(move || {
        http_get(p.read_only, "/stats/summary").expect("summary")
    })
    .await
    .expect("join");
    assert_eq!(status, 200);
    let summary: serde_json::Value = serde_json::from_str(&body).expect("summary JSON");
    assert_eq!(summary["node"]["nodeName"], NODE);
    assert!(
        summary["node"]["fs"]["capacityBytes"]
            .as_u64()
            .is_some_and(|b| b > 0),
        "{summary}"
    );
    assert!(
        summary["node"]["cpu"]["usageCoreNanoSeconds"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{summary}"
    );
    let web = summary["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["podRef"]["name"] == pod))
        .expect("the pod in the summary");
    assert_eq!(web["containers"][0]["name"], "main", "{web}");
    assert!(web["memory"]["workingSetBytes"].as_u64().is_some(), "{web}");

    // exec: stdout, stderr and the exit status on their channels.
    let mut ws = ws_connect(
        &dirs,
        p.main,
        &format!(
            "/exec/default/{pod}/main?command=sh&command=-c&command={}&output=1&error=1",
            "echo%20out%3B%20echo%20err%20%3E%262%3B%20exit%203"
        ),
    )
    .await;
    let got = channels(&mut ws, |_| false).await;
    assert_eq!(got.get(&1).map(Vec::as_slice), Some(&b"out\n"[..]));
    assert_eq!(got.get(&2).map(Vec::as_slice), Some(&b"err\n"[..]));
    let status: serde_json::Value =
        serde_json::from_slice(got.get(&3).expect("a status")).expect("status JSON");
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");

    // /run: the output of a command, no streams.
    let resp = https_send(
        &dirs,
        NODE,
        p.main,
        "POST",
        &format!("/run/default/{pod}/main?cmd=cat%20/www/index.html"),
        &[],
    )
    .await;
    assert_eq!(resp.status().as_u16(), 200);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(&body[..], b"hello-pf\n");

    // Refusals before any stream.
    let resp = https_send(
        &dirs,
        NODE,
        p.main,
        "GET",
        &format!("/exec/default/{pod}/nope?output=1"),
        &[],
    )
    .await;
    assert_eq!(resp.status().as_u16(), 500);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(&body[..], b"container not found (\"nope\")");

    // port-forward: the port announced on both channels, then an HTTP
    // request to the pod's port 8080 answered through the tunnel.
    let mut ws = ws_connect(
        &dirs,
        p.main,
        &format!("/portForward/default/{pod}?port=8080"),
    )
    .await;
    let announced = channels(&mut ws, |m| {
        m.get(&0).is_some_and(|d| d.len() >= 2) && m.get(&1).is_some_and(|d| d.len() >= 2)
    })
    .await;
    assert_eq!(announced[&0], 8080u16.to_le_bytes());
    assert_eq!(announced[&1], 8080u16.to_le_bytes());
    let mut req = vec![0u8];
    req.extend_from_slice(b"GET /index.html HTTP/1.0\r\n\r\n");
    write_frame(&mut ws, &req).await;
    let answer = channels(&mut ws, |m| {
        m.get(&0)
            .is_some_and(|d| String::from_utf8_lossy(d).contains("hello-pf"))
    })
    .await;
    let text = String::from_utf8_lossy(&answer[&0]).into_owned();
    assert!(
        text.starts_with("HTTP/1.") && text.contains("200"),
        "{text}"
    );
    drop(ws);

    dirs.remove_manifest("web.yaml");
    kubelet.stop().await.expect("clean stop");
}
