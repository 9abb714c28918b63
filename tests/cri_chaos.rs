//! The whole kubelet over a container runtime that misbehaves (issue 18):
//! three hollow nodes (the real composition: pod workers, PLEG, probers,
//! status manager, node status, image and container GC) whose CRI answers
//! pass through a fault-injecting layer (`cri_chaos/layer.rs`: random gRPC
//! errors, answers bent into other valid values) while pods start, crash,
//! complete and are probed. Then the layer is switched off. Asserted: no
//! panic anywhere in the process, the nodes keep heartbeating, and once the
//! runtime behaves the kubelets converge: every Node Ready, every
//! long-running pod Running and Ready with a ready sandbox and a running
//! container in the runtime (a second sandbox or container made while a
//! bent answer hid the first is counted and printed: the kubelet removes
//! it on its next inspection of the pod, which a quiet pod never gets, as
//! in Go). The
//! seed is printed (`CHAOS_SEED` replays it), and so are the counts of
//! calls, errors and bent answers.

mod support;

#[path = "cri_chaos/layer.rs"]
mod layer;
#[path = "hollow/rig.rs"]
#[allow(dead_code)]
mod rig;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet::app::hollow::{shared, start_all};
use kubelet::cri::RuntimeServices;
use kubelet::cri::api;
use kubelet::cri::memory::memory_runtime_services;
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use serde_json::json;

const NODES: u32 = 3;
/// How long the runtime misbehaves.
const CHAOS: Duration = Duration::from_secs(25);
/// How long the kubelets get to converge once it behaves.
const CONVERGE: Duration = Duration::from_secs(90);

static PANICS: AtomicU64 = AtomicU64::new(0);

fn seed() -> u64 {
    std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

fn ready(p: &Pod) -> bool {
    rig::pod_running(p)
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A long-running pod with exec readiness and liveness probes.
fn probed_pod(ns: &str, name: &str, node: &str) -> Pod {
    let probe = json!({"exec": {"command": ["true"]}, "periodSeconds": 1, "failureThreshold": 3});
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.8",
                "readinessProbe": probe,
                "livenessProbe": probe,
            }],
        },
    }))
    .expect("pod")
}

/// What node `index`'s runtime holds that it should not: (problems, extra
/// instances). A problem is a long-running pod without a ready sandbox or
/// without a running container. An extra instance is a second ready
/// sandbox or running container of a pod: one made while a bent answer hid
/// the first, which the kubelet removes once it inspects the pod again
/// (Go's rules: more than one ready sandbox recreates the pod, an older
/// running container is stopped); with no further runtime event for the
/// pod it never does (its cached status is the bent one, as in Go), so
/// these are counted, not failed.
async fn leftovers(
    index: u32,
    services: &RuntimeServices,
    long_running: &[String],
) -> (Vec<String>, usize) {
    let sandboxes = services
        .runtime
        .list_pod_sandbox(None)
        .await
        .expect("sandboxes");
    let containers = services
        .runtime
        .list_containers(None)
        .await
        .expect("containers");
    let pod_of = |labels: &HashMap<String, String>| {
        labels
            .get("io.kubernetes.pod.name")
            .cloned()
            .unwrap_or_default()
    };
    let (mut problems, mut extra) = (Vec::new(), 0);
    for pod in long_running
        .iter()
        .filter(|p| p.starts_with(&format!("n{index}-")))
    {
        let ready = sandboxes
            .iter()
            .filter(|s| {
                s.state == api::PodSandboxState::SandboxReady as i32 && pod_of(&s.labels) == *pod
            })
            .count();
        let running = containers
            .iter()
            .filter(|c| {
                c.state == api::ContainerState::ContainerRunning as i32 && pod_of(&c.labels) == *pod
            })
            .count();
        extra += running.saturating_sub(1) + ready.saturating_sub(1);
        if ready == 0 || running == 0 {
            let all: Vec<String> = containers
                .iter()
                .filter(|c| pod_of(&c.labels) == *pod)
                .map(|c| {
                    format!(
                        "{} sandbox {} attempt {} state {}",
                        c.id,
                        c.pod_sandbox_id,
                        c.metadata.as_ref().map_or(0, |m| m.attempt),
                        c.state
                    )
                })
                .collect();
            problems.push(format!(
                "{pod}: {ready} ready sandboxes, {running} running containers: {all:?}"
            ));
        }
    }
    (problems, extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelets_survive_random_cri_answers_and_converge_after() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let seed = seed();
    eprintln!("chaos seed {seed} (CHAOS_SEED={seed} replays it)");

    let rig::Fleet {
        api,
        dir: _dir,
        server,
        options,
        names,
    } = rig::fleet(
        "chaos",
        NODES,
        // A container left in back-off when the chaos stops is retried at
        // the pod's next resync (a back-off is not a sync error, as in
        // Go): syncFrequency plus up to half of it in jitter, so 1m30s at
        // the default, as long as CONVERGE. 10 s keeps it well inside.
        &["--sync-frequency=10s"],
    )
    .await;

    // Each node's runtime under the layer; the runtimes themselves kept
    // aside to look at what is left in them.
    let chaos = Arc::new(layer::Chaos::default());
    let runtimes: Arc<Mutex<HashMap<u32, RuntimeServices>>> = Arc::default();
    let mut hollow = shared(server, options, Arc::new(RealClock))
        .await
        .expect("hollow set-up");
    hollow.runtimes = {
        let (chaos, runtimes) = (chaos.clone(), runtimes.clone());
        Arc::new(move |index, clock, root| {
            let inner = memory_runtime_services(index, clock, root);
            runtimes.lock().unwrap().insert(index, inner.clone());
            layer::wrap(inner, chaos.clone(), seed.wrapping_add(u64::from(index)))
        })
    };
    let tasks = TaskSet::new();
    assert_eq!(start_all(&hollow, &tasks).await, NODES);
    rig::wait_nodes_ready(&api, &names, Duration::from_secs(60)).await;

    // The runtime turns hostile, then the pods come: long-running probed
    // ones, a crash loop, a job.
    chaos.on.store(true, Ordering::SeqCst);
    let ns = api.create_namespace("chaos").await;
    let mut long_running = Vec::new();
    for (i, node) in names.iter().enumerate() {
        for j in 0..3 {
            let name = format!("n{i}-p{j}");
            api.put(&probed_pod(&ns, &name, node)).await;
            long_running.push(name);
        }
        api.put(&rig::hollow_pod(
            &ns,
            &format!("n{i}-crash"),
            node,
            json!({"hollow.kubelet-rs.io/exit-after.app": "1", "hollow.kubelet-rs.io/exit-code.app": "2"}),
            "Always",
        ))
        .await;
        api.put(&rig::hollow_pod(
            &ns,
            &format!("n{i}-job"),
            node,
            json!({"hollow.kubelet-rs.io/exit-after.app": "0.5"}),
            "Never",
        ))
        .await;
    }
    tokio::time::sleep(CHAOS).await;
    chaos.on.store(false, Ordering::SeqCst);
    let (calls, errors, bent) = (
        chaos.calls.load(Ordering::SeqCst),
        chaos.errors.load(Ordering::SeqCst),
        chaos.bent.load(Ordering::SeqCst),
    );
    eprintln!(
        "chaos for {CHAOS:?}: {calls} CRI calls, {errors} failed on purpose, {bent} answers bent"
    );
    assert!(errors > 0 && bent > 0, "the layer did nothing");

    // Convergence.
    let converged = support::eventually(CONVERGE, || async {
        let nodes_ready = futures::future::join_all(
            names
                .iter()
                .map(|n| api.get::<k8s_openapi::api::core::v1::Node>(None, n)),
        )
        .await
        .iter()
        .all(|n| n.as_ref().is_some_and(rig::node_ready));
        let pods =
            futures::future::join_all(long_running.iter().map(|n| api.get::<Pod>(Some(&ns), n)))
                .await;
        (nodes_ready && pods.iter().all(|p| p.as_ref().is_some_and(ready))).then_some(())
    })
    .await;
    let not_ready: Vec<String> = {
        let mut v = Vec::new();
        for n in &long_running {
            match api.get::<Pod>(Some(&ns), n).await {
                Some(p) if ready(&p) => {}
                other => v.push(format!(
                    "{n}: {:?}\nwrites: {:#?}",
                    other.and_then(|p| p.status),
                    api.writes_to(n)
                )),
            }
        }
        v
    };
    assert!(
        converged.is_some(),
        "not converged {CONVERGE:?} after the chaos (seed {seed}): {not_ready:#?}"
    );

    // What is left in each runtime: a ready sandbox and a running
    // container per long-running pod (given the kubelets a little more
    // time: a leftover is cleaned up by a later sync).
    let services: Vec<(u32, RuntimeServices)> =
        runtimes.lock().unwrap().clone().into_iter().collect();
    let survey = || async {
        let (mut problems, mut extra) = (Vec::new(), 0);
        for (index, s) in &services {
            let (p, e) = leftovers(*index, s, &long_running).await;
            problems.extend(p);
            extra += e;
        }
        (problems, extra)
    };
    let clean = support::eventually(Duration::from_secs(30), || async {
        let (problems, extra) = survey().await;
        (problems.is_empty() && extra == 0).then_some(())
    })
    .await;
    let (problems, extra) = survey().await;
    assert!(
        problems.is_empty(),
        "runtime not clean (seed {seed}): {problems:#?}"
    );
    if clean.is_none() {
        eprintln!(
            "{extra} extra ready sandbox(es) or running container(s) left from the chaos, unseen by the kubelets (seed {seed})"
        );
    }
    // The crash loops go on as crash loops: each crasher is seen exiting
    // with its code (its restart count comes from the runtime's
    // annotations, which the chaos may have garbled, so it can start over,
    // as Go's would).
    for i in 0..NODES {
        let name = format!("n{i}-crash");
        api.wait_for::<Pod>(Some(&ns), &name, Duration::from_secs(60), |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .is_some_and(|c| {
                    [c.state.as_ref(), c.last_state.as_ref()]
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s.terminated.as_ref())
                        .any(|t| t.exit_code == 2)
                })
        })
        .await;
    }
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "panics under chaos (seed {seed})"
    );

    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(10))
        .await
        .expect("hollow nodes stop");
    api.cleanup().await;
}
