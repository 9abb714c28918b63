//! Hollow nodes (issue 17): 20 hollow kubelets in this process against the
//! API server double (or the real kube-apiserver KUBELET_RS_TEST_KUBECONFIG
//! names), 5 pods each. Every Node turns Ready, every pod Running with its
//! status in the API, every Lease is renewed, a scripted container that
//! exits is restarted, scripted probes and pulls play out as a real
//! kubelet reports them (late readiness, a liveness restart,
//! ErrImagePull/ImagePullBackOff), and (on the double) each node's
//! heartbeat traffic has one real kubelet's cadence: a Lease renewal every
//! 10 s (leaseDurationSeconds 40 × 0.25), a node status pass every 10 s
//! (nodeStatusUpdateFrequency) and at most one node status write while
//! nothing changes (nodeStatusReportFrequency 5 min). Behaviour, not
//! timing. A second test gives three nodes identities of their own through
//! TLS bootstrap.
//!
//! The ignored `hollow_bench` (bench/hollow.sh) runs the binary instead.

mod support;

#[path = "hollow/bench.rs"]
mod bench;
#[path = "hollow/rig.rs"]
#[allow(dead_code)]
mod rig;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod, Probe};
use kubelet::app::hollow::{HollowOptions, run_with};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::apiserver::TestApi;

const NODES: u32 = 20;
const PODS_PER_NODE: usize = 5;
/// The steady-state window the heartbeat counts cover.
const WINDOW: Duration = Duration::from_secs(21);

fn restarts(p: &Pod) -> (i32, Option<i32>) {
    let cs = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first());
    (
        cs.map_or(0, |c| c.restart_count),
        cs.and_then(|c| c.last_state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
    )
}

/// `pod` with an exec probe on its container (every second, one failure
/// counts): `readiness` or `liveness`.
fn with_probe(mut pod: Pod, kind: &str) -> Pod {
    let probe: Probe = serde_json::from_value(json!({
        "exec": {"command": ["cat", "/tmp/healthy"]},
        "periodSeconds": 1,
        "failureThreshold": 1,
    }))
    .expect("probe");
    let c = &mut pod.spec.as_mut().expect("spec").containers[0];
    match kind {
        "readiness" => c.readiness_probe = Some(probe),
        _ => c.liveness_probe = Some(probe),
    }
    pod
}

/// (running, ready) of the pod's one container.
fn container_running_ready(p: &Pod) -> (bool, bool) {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map_or((false, false), |c| {
            (
                c.state.as_ref().is_some_and(|s| s.running.is_some()),
                c.ready,
            )
        })
}

/// The waiting reason of the pod's one container.
fn waiting(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// (reason, message) of the events about pod `name`.
async fn events_of(api: &TestApi, ns: &str, name: &str) -> Vec<(String, String)> {
    api.list::<Event>(Some(ns))
        .await
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Until the events about pod `name` satisfy `want` (events are written on
/// their own budget, after the changes they tell of).
async fn wait_events(
    api: &TestApi,
    ns: &str,
    name: &str,
    want: impl Fn(&[(String, String)]) -> bool,
) {
    let seen = support::eventually(Duration::from_secs(30), || async {
        want(&events_of(api, ns, name).await).then_some(())
    })
    .await;
    assert!(
        seen.is_some(),
        "{name}: {:?}",
        events_of(api, ns, name).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_hollow_nodes_run_their_pods() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rig::Fleet {
        api,
        dir: _dir,
        server,
        options,
        names,
    } = rig::fleet("hollow", NODES, &[]).await;
    let stop = CancellationToken::new();
    let hollow = tokio::spawn(run_with(server, options, stop.clone()));

    let took = rig::wait_nodes_ready(&api, &names, Duration::from_secs(60)).await;
    eprintln!("{NODES} hollow nodes Ready in {took:?}");
    let nodes: Vec<Node> = api.list(None).await;
    for n in nodes
        .iter()
        .filter(|n| names.contains(n.metadata.name.as_ref().unwrap()))
    {
        let status = n.status.as_ref().expect("node status");
        let alloc = status.allocatable.as_ref().expect("allocatable");
        assert_eq!(alloc["pods"].0, "20", "{:?}", n.metadata.name);
        let info = status.node_info.as_ref().expect("node info");
        assert!(
            info.container_runtime_version.starts_with("hollow://"),
            "{info:?}"
        );
    }

    let ns = api.create_namespace("hollow").await;
    // A container that exits with 3 a second after it starts, restarted
    // by the pod's policy; one that completes.
    let script = |after: &str, code: &str| {
        json!({
            "hollow.kubelet-rs.io/exit-after.app": after,
            "hollow.kubelet-rs.io/exit-code.app": code,
        })
    };
    api.put(&rig::hollow_pod(
        &ns,
        "crasher",
        &names[0],
        script("1", "3"),
        "Always",
    ))
    .await;
    api.put(&rig::hollow_pod(
        &ns,
        "job",
        &names[1],
        script("0.5", "0"),
        "Never",
    ))
    .await;

    // Scripted probes and pulls: readiness 8 s late; a liveness probe that
    // fails from 2 s on; every pull failing.
    api.put(&with_probe(
        rig::hollow_pod(
            &ns,
            "late-ready",
            &names[2],
            json!({"hollow.kubelet-rs.io/probe-pass-after.app": "8"}),
            "Always",
        ),
        "readiness",
    ))
    .await;
    api.put(&with_probe(
        rig::hollow_pod(
            &ns,
            "unhealthy",
            &names[3],
            json!({"hollow.kubelet-rs.io/probe-fail-after.app": "2"}),
            "Always",
        ),
        "liveness",
    ))
    .await;
    // An image of its own: once another pod on the node has pulled the
    // usual one, IfNotPresent would not pull again (and the script's
    // error would never show).
    let mut unpullable = rig::hollow_pod(
        &ns,
        "unpullable",
        &names[4],
        json!({"hollow.kubelet-rs.io/pull-error": "manifest unknown"}),
        "Always",
    );
    if let Some(spec) = unpullable.spec.as_mut() {
        spec.containers[0].image = Some("registry.k8s.io/unpullable:1.0".into());
    }
    api.put(&unpullable).await;
    let late = api
        .wait_for::<Pod>(Some(&ns), "late-ready", Duration::from_secs(30), |p| {
            container_running_ready(p) == (true, false)
        })
        .await;
    assert!(late.status.is_some());

    let batch = rig::run_batch(&api, &ns, &names, PODS_PER_NODE, Duration::from_secs(60)).await;
    eprintln!(
        "{} pods Running in {:?} (p50 {:?}, p99 {:?})",
        batch.names.len(),
        batch.wall,
        rig::percentile(&batch.latencies, 50.0),
        rig::percentile(&batch.latencies, 99.0)
    );
    // Their statuses are in the API: Running, an IP from the node's range,
    // the node's IP, one running container.
    for name in &batch.names {
        let pod: Pod = api.get(Some(&ns), name).await.expect("pod");
        if !rig::pod_running(&pod) {
            let writes = api.writes_to(name);
            panic!("{name}: {:?}\nwrites: {writes:#?}", pod.status);
        }
        let status = pod.status.as_ref().expect("status");
        assert!(
            status
                .pod_ip
                .as_deref()
                .is_some_and(|ip| ip.starts_with("10.")),
            "{name}: {status:?}"
        );
        assert!(status.host_ip.is_some(), "{name}: {status:?}");
    }

    let crasher = api
        .wait_for::<Pod>(Some(&ns), "crasher", Duration::from_secs(40), |p| {
            restarts(p).0 >= 1
        })
        .await;
    assert_eq!(restarts(&crasher).1, Some(3), "{:?}", crasher.status);
    let job = api
        .wait_for::<Pod>(Some(&ns), "job", Duration::from_secs(30), |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
        })
        .await;
    assert!(job.status.is_some());
    api.wait_for::<Pod>(Some(&ns), "late-ready", Duration::from_secs(30), |p| {
        container_running_ready(p) == (true, true)
    })
    .await;
    let unhealthy = api
        .wait_for::<Pod>(Some(&ns), "unhealthy", Duration::from_secs(40), |p| {
            restarts(p).0 >= 1
        })
        .await;
    assert!(unhealthy.status.is_some());
    wait_events(&api, &ns, "unhealthy", |events| {
        events
            .iter()
            .any(|(r, m)| r == "Unhealthy" && m.starts_with("Liveness probe failed"))
    })
    .await;
    // ErrImagePull in the status until the next resync after the back-off
    // began (as Go: a back-off is not a sync error); the events show both.
    api.wait_for::<Pod>(Some(&ns), "unpullable", Duration::from_secs(30), |p| {
        matches!(
            waiting(p).as_deref(),
            Some("ErrImagePull" | "ImagePullBackOff")
        )
    })
    .await;
    wait_events(&api, &ns, "unpullable", |events| {
        let failed = events
            .iter()
            .any(|(r, m)| r == "Failed" && m.contains("manifest unknown"));
        failed && events.iter().any(|(r, _)| r == "BackOff")
    })
    .await;

    // Steady state: every Lease renewed; on the double, the cadence. It
    // begins once every node has reported the images its pods pulled, the
    // last status change that follows their start.
    rig::wait_images_reported(&api, &names, Duration::from_secs(60)).await;
    let before = rig::lease_renewals(&api, &names).await;
    assert_eq!(before.len(), names.len(), "a Lease per node: {before:?}");
    let _ = api.clear_requests();
    tokio::time::sleep(WINDOW).await;
    let after = rig::lease_renewals(&api, &names).await;
    for name in &names {
        assert_ne!(
            before.get(name),
            after.get(name),
            "{name}: Lease not renewed in {WINDOW:?}"
        );
    }
    if let Ok(log) = api.requests() {
        let counts = rig::count(&log, &names);
        eprintln!(
            "requests of {NODES} hollow nodes in {WINDOW:?}: {:#?}",
            counts.total
        );
        let mut failures = Vec::new();
        for name in &names {
            let own = counts.per_node.get(name).cloned().unwrap_or_default();
            let n = |m: &str, r: &str| {
                own.get(&(m.to_string(), r.to_string()))
                    .copied()
                    .unwrap_or(0)
            };
            // 10 s renewals: 2 in 21 s (3 when the window catches both ends).
            let renewals = n("PUT", "leases");
            if !(2..=3).contains(&renewals) {
                failures.push(format!(
                    "{name}: {renewals} lease renewals in {WINDOW:?}: {own:?}"
                ));
            }
            // Node status every 10 s (nodeStatusUpdateFrequency): one
            // read of the Node each time; a write only when something
            // changed (nodeStatusReportFrequency 5 min).
            let node_reads = n("GET", "nodes");
            if !(1..=3).contains(&node_reads) {
                failures.push(format!(
                    "{name}: {node_reads} Node GETs in {WINDOW:?}: {own:?}"
                ));
            }
            let writes = n("PATCH", "nodes/status") + n("PUT", "nodes/status");
            if writes > 1 {
                failures.push(format!(
                    "{name}: {writes} node status writes in {WINDOW:?}: {own:?}; bodies: {:#?}",
                    rig::status_writes(&log, name)
                ));
            }
            let reads = n("GET", "leases");
            if reads > 0 {
                failures.push(format!("{name}: {reads} lease GETs in {WINDOW:?}: {own:?}"));
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    } else {
        eprintln!("NOTE: request counts need the API server double; skipped");
    }

    stop.cancel();
    hollow.await.expect("hollow task").expect("hollow nodes");
    rig::remove_nodes(&api, &names).await;
    api.cleanup().await;
}

/// Per-node identities: each hollow node bootstraps its own client
/// certificate from one bootstrap-token kubeconfig (a CSR of its own,
/// `system:node:<name>`), writes its own kubeconfig under its directory,
/// and everything it sends afterwards carries its own name, so the API
/// server's NodeRestriction holds it to its own Node, Lease and pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hollow_nodes_bootstrap_their_own_identities() {
    const N: u32 = 3;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = std::sync::Arc::new(TestApi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bootstrap = api
        .bootstrap_kubeconfig(&dir.path().join("bootstrap.kubeconfig"))
        .await;
    let server = rig::hollow_server([format!("--bootstrap-kubeconfig={}", bootstrap.display())]);
    let state = dir.path().join("state");
    let options = HollowOptions {
        nodes: N,
        prefix: api.unique_name("hollow-id"),
        state_dir: state.clone(),
        ..Default::default()
    };
    let names: Vec<String> = (0..N).map(|n| options.node_name(n)).collect();
    let approver = tokio::spawn({
        let api = api.clone();
        async move { api.approve_bootstrap_csrs().await }
    });
    let stop = CancellationToken::new();
    let hollow = tokio::spawn(run_with(server, options, stop.clone()));
    rig::wait_nodes_ready(&api, &names, Duration::from_secs(60)).await;
    approver.abort();

    let ns = api.create_namespace("hollow-id").await;
    for (i, node) in names.iter().enumerate() {
        api.put(&rig::hollow_pod(
            &ns,
            &format!("p{i}"),
            node,
            json!({}),
            "Always",
        ))
        .await;
    }
    for i in 0..names.len() {
        api.wait_for::<Pod>(Some(&ns), &format!("p{i}"), Duration::from_secs(60), |p| {
            rig::pod_running(p)
        })
        .await;
    }
    for name in &names {
        let root = state.join(name);
        assert!(root.join("kubeconfig").exists(), "{name}: kubeconfig");
        assert!(
            root.join("pki/kubelet-client-current.pem").exists(),
            "{name}: client certificate"
        );
    }
    // On the double: who sent what. Each node's Lease, Node and pod
    // statuses were written by that node alone. A node's first Lease and
    // Node come from creations (POSTs to the collections), so wait for each
    // node's first Lease renewal (every 10 s) to have a write to attribute.
    let renewed = |log: &[support::apiserver::RequestRecord], name: &str| {
        log.iter()
            .any(|r| r.method == "PUT" && r.path.ends_with(&format!("/leases/{name}")))
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(log) = api.requests() {
        if names.iter().all(|n| renewed(&log, n)) || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if let Ok(log) = api.requests() {
        for name in &names {
            let users: std::collections::BTreeSet<&str> = log
                .iter()
                .filter(|r| {
                    r.method != "GET"
                        && (r.path.ends_with(&format!("/leases/{name}"))
                            || r.path.ends_with(&format!("/nodes/{name}/status")))
                })
                .map(|r| r.user.name.as_str())
                .collect();
            let own = format!("system:node:{name}");
            assert_eq!(users, [own.as_str()].into(), "{name}");
        }
        let status_writers: std::collections::BTreeSet<&str> = log
            .iter()
            .filter(|r| {
                r.path.contains(&format!("/namespaces/{ns}/pods/")) && r.path.ends_with("/status")
            })
            .map(|r| r.user.name.as_str())
            .collect();
        let want: std::collections::BTreeSet<String> =
            names.iter().map(|n| format!("system:node:{n}")).collect();
        assert_eq!(
            status_writers,
            want.iter().map(String::as_str).collect(),
            "pod status writers"
        );
    } else {
        eprintln!("NOTE: request identities need the API server double; skipped");
    }

    stop.cancel();
    hollow.await.expect("hollow task").expect("hollow nodes");
    rig::remove_nodes(&api, &names).await;
    api.cleanup().await;
}
