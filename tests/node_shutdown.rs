//! Graceful node shutdown end to end (issue 16): the kubelet in API-server
//! mode over a private containerd, on a private system bus (Debian's
//! dbus-daemon) with a systemd-logind double speaking
//! org.freedesktop.login1. With shutdownGracePeriod 20s and
//! shutdownGracePeriodCriticalPods 8s the kubelet takes a delay inhibitor;
//! when logind announces the shutdown (PrepareForShutdown true) the Node
//! turns NotReady ("node is shutting down"), the regular pod is stopped
//! first and the critical one after it, both end Failed with reason
//! `Terminated` and Go's message, a new pod is refused with `NodeShutdown`,
//! the shutdown times are recorded in `graceful_node_shutdown_state`, and
//! the inhibitor is released once the pods are down.
//!
//! The kubelet finds the bus through DBUS_SYSTEM_BUS_ADDRESS, as any D-Bus
//! client does; this binary holds this one test so that setting it touches
//! no other test.

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

use std::time::{Duration, Instant};

use harness::*;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use serde_json::json;
use support::apiserver::TestApi;
use support::containerd::{Containerd, images};
use support::logind::{Logind, SystemBus};

const WAIT: Duration = Duration::from_secs(60);
const SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

fn pod(ns: &str, name: &str, node: &str, on_term: &str, critical: bool) -> Pod {
    let mut spec = json!({
        "nodeName": node,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "containers": [{
            "name": "c",
            "image": images().busybox,
            "command": ["sh", "-c", format!("trap '{on_term}' TERM; while true; do sleep 1; done")],
        }],
    });
    if critical {
        // The double stores pods as given; the real server computes the
        // same priority from the class.
        spec["priorityClassName"] = json!("system-node-critical");
        spec["priority"] = json!(2_000_001_000);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .expect("pod")
}

fn ready(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

fn finished_at(p: &Pod) -> Option<jiff::Timestamp> {
    let state = container(p, "c")?.state.as_ref()?;
    Some(state.terminated.as_ref()?.finished_at.as_ref()?.0)
}

fn ended_for_shutdown(p: &Pod) -> bool {
    let s = p.status.as_ref();
    phase(p) == "Failed"
        && s.and_then(|s| s.reason.as_deref()) == Some("Terminated")
        && s.and_then(|s| s.message.as_deref()) == Some(SHUTDOWN_MESSAGE)
        && finished_at(p).is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_for_shutdown_stops_pods_by_priority_and_releases_the_inhibitor() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::var_os("KUBELET_TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    }
    let test = "node_shutdown";
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start(test) else {
        return;
    };
    let Some(bus) = SystemBus::start(test) else {
        return;
    };
    // SAFETY: set before the kubelet starts, in a binary with one test.
    unsafe { std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &bus.address) };
    // logind already allows 60 s: the kubelet leaves /etc alone.
    let logind = Logind::start(&bus, Duration::from_secs(60)).await;

    let api = TestApi::start().await;
    let ns = api.create_namespace("shutdown").await;
    let node = api.unique_name("shutnode");
    let root = make_cgroup_root(&rig, "nodeshutdown");
    let ports = Ports {
        main: 22280,
        read_only: 22281,
        healthz: 22282,
    };
    let cfg = config(
        &dirs,
        &root,
        ports,
        "shutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 8s\n",
    );
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        ready(n).is_some_and(|(s, _)| s == "True")
    })
    .await;
    support::eventually(WAIT, || async { (logind.held() == 1).then_some(()) })
        .await
        .expect("the kubelet holds a delay inhibitor");
    assert_eq!(
        logind.inhibit_calls(),
        vec![(
            "shutdown".to_string(),
            "kubelet".to_string(),
            "Kubelet needs time to handle node shutdown".to_string(),
            "delay".to_string()
        )]
    );

    // The regular pod takes 3 s to stop, the critical one none: stopped
    // together, the critical one would finish first. Both exit non-zero,
    // as a process stopped by TERM does: the phase the runtime reports
    // agrees with the shutdown's Failed.
    let critical = api.unique_name("critical");
    api.put(&pod(&ns, "regular", &node, "sleep 3; exit 1", false))
        .await;
    api.put(&pod("kube-system", &critical, &node, "exit 1", true))
        .await;
    for (namespace, name) in [(ns.as_str(), "regular"), ("kube-system", critical.as_str())] {
        api.wait_for::<Pod>(Some(namespace), name, WAIT, |p| is_running(p, "c"))
            .await;
    }

    let began = Instant::now();
    logind.prepare_for_shutdown(true).await;
    let n = api
        .wait_for::<Node>(None, &node, WAIT, |n| {
            ready(n).is_some_and(|(s, _)| s == "False")
        })
        .await;
    assert_eq!(
        ready(&n),
        Some(("False".to_string(), "node is shutting down".to_string()))
    );
    let regular = api
        .wait_for::<Pod>(Some(&ns), "regular", WAIT, ended_for_shutdown)
        .await;
    let critical_pod = api
        .wait_for::<Pod>(Some("kube-system"), &critical, WAIT, ended_for_shutdown)
        .await;
    support::eventually(WAIT, || async { (logind.held() == 0).then_some(()) })
        .await
        .expect("the inhibitor is released");
    let took = began.elapsed();
    eprintln!("shutdown handled in {took:?}");
    assert!(
        took < Duration::from_secs(25),
        "within the 20 s grace: {took:?}"
    );
    let (r, c) = (
        finished_at(&regular).expect("regular finished"),
        finished_at(&critical_pod).expect("critical finished"),
    );
    assert!(r <= c, "regular pods stop before critical ones: {r} vs {c}");

    // Nothing is admitted while the node shuts down.
    api.put(&pod(&ns, "late", &node, "exit 0", false)).await;
    let late = api
        .wait_for::<Pod>(Some(&ns), "late", WAIT, |p| phase(p) == "Failed")
        .await;
    let status = late.status.expect("status");
    assert_eq!(status.reason.as_deref(), Some("NodeShutdown"));
    // Go's rejectPod puts "Pod " before the handler's message.
    assert_eq!(
        status.message.as_deref(),
        Some("Pod Pod was rejected as the node is shutting down.")
    );

    let event = support::eventually(WAIT, || async {
        api.list::<Event>(None).await.into_iter().find(|e| {
            e.involved_object.kind.as_deref() == Some("Node")
                && e.involved_object.name.as_deref() == Some(node.as_str())
                && e.reason.as_deref() == Some("Shutdown")
        })
    })
    .await
    .expect("the Node's Shutdown event");
    assert_eq!(
        event.message.as_deref(),
        Some("Shutdown manager detected shutdown event")
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dirs.path("root/graceful_node_shutdown_state"))
            .expect("state file"),
    )
    .expect("state json");
    for key in ["startTime", "endTime"] {
        let t = state[key].as_str().unwrap_or_default();
        assert!(t.starts_with("20"), "{key}: {state}");
    }

    kubelet.stop().await.expect("kubelet stops cleanly");
    api.remove::<Pod>(Some("kube-system"), &critical).await;
    api.cleanup().await;
}
