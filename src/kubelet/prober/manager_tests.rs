use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::PodStatus;
use tokio::time::Instant;

use super::*;
use crate::kubelet::prober::testutil::{exec_probe, exit, pod_with, running_status};
use crate::kubelet::prober::worker::tests::{Env, env};

/// Pod `ns/p{i}` (uid `uid-{i}`), one container `c` with these probes.
fn pod_n(i: usize, probes: serde_json::Value) -> Pod {
    let mut c = serde_json::json!({"name": "c"});
    if let (Some(o), Some(p)) = (c.as_object_mut(), probes.as_object()) {
        for (k, v) in p {
            o.insert(k.clone(), v.clone());
        }
    }
    let mut pod = pod_with(serde_json::json!([c]), serde_json::json!({}));
    pod.metadata.name = Some(format!("p{i}"));
    pod.metadata.uid = Some(format!("uid-{i}"));
    pod
}

fn id_n(i: usize) -> String {
    format!("containerd://c{i}")
}

fn set_running(env: &Env, i: usize, started: Option<bool>) {
    let at = SystemTime::now() - Duration::from_secs(600);
    env.status.set(
        &format!("uid-{i}"),
        running_status("c", &id_n(i), at, started),
    );
}

fn calls_of(env: &Env, i: usize) -> Vec<Instant> {
    let id = ContainerId::parse(&id_n(i)).expect("id");
    env.runner
        .calls()
        .into_iter()
        .filter(|c| c.id == id)
        .map(|c| c.at)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn first_probes_spread_over_one_period_then_follow_the_period() {
    let env = env();
    let tasks = TaskSet::new();
    env.manager.start(&tasks);
    let t0 = Instant::now();
    let period = Duration::from_secs(10);
    let n = 40;
    for i in 0..n {
        set_running(&env, i, Some(true));
        env.manager.add_pod(&pod_n(
            i,
            serde_json::json!({"readinessProbe": exec_probe(&["check"], serde_json::json!({"periodSeconds": 10}))}),
        ));
    }
    tokio::time::sleep(Duration::from_secs(35)).await;
    let mut firsts = HashSet::new();
    for i in 0..n {
        let calls = calls_of(&env, i);
        assert!(calls.len() >= 3, "pod {i}: {} probes", calls.len());
        let first = calls[0] - t0;
        assert!(first < period, "pod {i}: first probe after {first:?}");
        firsts.insert(first);
        for pair in calls.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                period,
                "pod {i}: probes one period apart"
            );
        }
    }
    assert!(
        firsts.len() > n / 2,
        "start-up jitter is random: {firsts:?}"
    );
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .expect("workers stop on shutdown");
    assert_eq!(env.manager.worker_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn no_jitter_once_the_kubelet_has_run_a_period() {
    let env = env();
    let tasks = TaskSet::new();
    env.manager.start(&tasks);
    tokio::time::sleep(Duration::from_secs(11)).await;
    set_running(&env, 0, Some(true));
    let added = Instant::now();
    env.manager.add_pod(&pod_n(
        0,
        serde_json::json!({"readinessProbe": exec_probe(&["check"], serde_json::json!({"periodSeconds": 10}))}),
    ));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(calls_of(&env, 0), vec![added], "probed at once");
    tasks.token().cancel();
}

#[tokio::test(start_paused = true)]
async fn liveness_failure_lands_after_failure_threshold_periods() {
    let mut env = env();
    env.runner.set_fallback(exit(1, "unhealthy"));
    let tasks = TaskSet::new();
    env.manager.start(&tasks);
    set_running(&env, 0, Some(true));
    env.manager.add_pod(&pod_n(
        0,
        serde_json::json!({"livenessProbe": exec_probe(
            &["check"],
            serde_json::json!({"periodSeconds": 2, "failureThreshold": 3})
        )}),
    ));
    let first = env.streams.liveness.recv().await.expect("initial result");
    assert_eq!(first.result, ProbeResult::Success);
    let failed = env.streams.liveness.recv().await.expect("failure");
    let at = Instant::now();
    assert_eq!(failed.result, ProbeResult::Failure);
    assert_eq!(failed.pod_uid, "uid-0");
    assert_eq!(failed.container_id.to_string(), id_n(0));
    let calls = calls_of(&env, 0);
    assert_eq!(calls.len(), 3);
    assert_eq!(at, calls[2], "recorded by the third failing probe");
    assert_eq!(calls[2] - calls[0], Duration::from_secs(4));
    // On hold: no more probes of this container.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(calls_of(&env, 0).len(), 3);
    let events = env.recorder.take();
    assert_eq!(events.len(), 3);
    assert!(
        events
            .iter()
            .all(|e| e.reason == "Unhealthy" && e.message == "Liveness probe failed: unhealthy")
    );
    tasks.token().cancel();
}

#[tokio::test(start_paused = true)]
async fn update_pod_status_asks_readiness_to_run_now() {
    let env = env();
    env.runner.set_fallback(exit(1, "not yet"));
    let tasks = TaskSet::new();
    env.manager.start(&tasks);
    set_running(&env, 0, Some(true));
    env.manager.add_pod(&pod_n(
        0,
        serde_json::json!({"readinessProbe": exec_probe(
            &["check"],
            serde_json::json!({"periodSeconds": 100, "failureThreshold": 1})
        )}),
    ));
    tokio::time::sleep(Duration::from_secs(100)).await;
    let before = calls_of(&env, 0).len();
    assert!(before >= 1);
    let mut status = env.status.get_pod_status("uid-0").expect("status");
    env.manager.update_pod_status("uid-0", &mut status);
    assert!(!status.container_statuses.as_ref().expect("cs")[0].ready);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        calls_of(&env, 0).len(),
        before + 1,
        "ran without waiting for the period"
    );
    tasks.token().cancel();
}

fn status_json(v: serde_json::Value) -> PodStatus {
    serde_json::from_value(v).expect("status")
}

#[tokio::test]
async fn update_pod_status_table() {
    let running = |id: &str, started: Option<bool>| {
        serde_json::json!({
            "name": "c", "containerID": id, "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "started": started,
            "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}},
        })
    };
    let waiting = serde_json::json!({
        "name": "c", "containerID": "", "image": "i", "imageID": "", "ready": false,
        "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}},
    });
    let exec = exec_probe(&["check"], serde_json::json!({}));
    struct Case {
        name: &'static str,
        probes: serde_json::Value,
        container: serde_json::Value,
        startup: Option<ProbeResult>,
        readiness: Option<ProbeResult>,
        want: (bool, bool),
    }
    let cases = vec![
        Case {
            name: "no probes: started and ready once running",
            probes: serde_json::json!({}),
            container: running("containerd://a", None),
            startup: None,
            readiness: None,
            want: (true, true),
        },
        Case {
            name: "not running: neither",
            probes: serde_json::json!({}),
            container: waiting.clone(),
            startup: None,
            readiness: None,
            want: (false, false),
        },
        Case {
            name: "startup probe without a result: not started",
            probes: serde_json::json!({"startupProbe": exec}),
            container: running("containerd://a", None),
            startup: None,
            readiness: None,
            want: (false, false),
        },
        Case {
            name: "startup Unknown: not started",
            probes: serde_json::json!({"startupProbe": exec}),
            container: running("containerd://a", None),
            startup: Some(ProbeResult::Unknown),
            readiness: None,
            want: (false, false),
        },
        Case {
            name: "startup passed, no readiness probe",
            probes: serde_json::json!({"startupProbe": exec}),
            container: running("containerd://a", None),
            startup: Some(ProbeResult::Success),
            readiness: None,
            want: (true, true),
        },
        Case {
            name: "readiness probe not answered yet",
            probes: serde_json::json!({"readinessProbe": exec}),
            container: running("containerd://a", None),
            startup: None,
            readiness: None,
            want: (true, false),
        },
        Case {
            name: "readiness Unknown reads as not ready",
            probes: serde_json::json!({"readinessProbe": exec}),
            container: running("containerd://a", None),
            startup: None,
            readiness: Some(ProbeResult::Unknown),
            want: (true, false),
        },
        Case {
            name: "readiness failed",
            probes: serde_json::json!({"readinessProbe": exec}),
            container: running("containerd://a", None),
            startup: None,
            readiness: Some(ProbeResult::Failure),
            want: (true, false),
        },
        Case {
            name: "readiness passed",
            probes: serde_json::json!({"readinessProbe": exec, "startupProbe": exec}),
            container: running("containerd://a", None),
            startup: Some(ProbeResult::Success),
            readiness: Some(ProbeResult::Success),
            want: (true, true),
        },
    ];
    for case in cases {
        let env = env();
        // Workers registered but not started: they only mark that a probe exists.
        env.manager.add_pod(&pod_n(0, case.probes));
        let id = ContainerId::new("containerd", "a");
        if let Some(r) = case.startup {
            env.manager.startup_results().set(&id, r, "uid-0");
        }
        if let Some(r) = case.readiness {
            env.manager.readiness_results().set(&id, r, "uid-0");
        }
        let mut status = status_json(serde_json::json!({"containerStatuses": [case.container]}));
        env.manager.update_pod_status("uid-0", &mut status);
        let c = &status.container_statuses.as_ref().expect("cs")[0];
        assert_eq!(
            (c.started == Some(true), c.ready),
            case.want,
            "{}",
            case.name
        );
        assert!(c.started.is_some(), "{}: started is always set", case.name);
    }

    let env = env();
    let init = |state: serde_json::Value| serde_json::json!({"name": "i", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state});
    let mut status = status_json(serde_json::json!({"initContainerStatuses": [
        init(serde_json::json!({"terminated": {"exitCode": 0}})),
        init(serde_json::json!({"terminated": {"exitCode": 2}})),
        init(serde_json::json!({"running": {}})),
    ]}));
    env.manager.update_pod_status("uid-0", &mut status);
    let ready: Vec<bool> = status
        .init_container_statuses
        .expect("init")
        .iter()
        .map(|c| c.ready)
        .collect();
    assert_eq!(ready, vec![true, false, false]);
}

#[tokio::test(start_paused = true)]
async fn add_remove_cleanup_and_stop() {
    let env = env();
    let exec = exec_probe(&["check"], serde_json::json!({"periodSeconds": 1}));
    let all =
        serde_json::json!({"livenessProbe": exec, "readinessProbe": exec, "startupProbe": exec});
    let a = pod_n(0, all.clone());
    let b = pod_n(1, all.clone());
    let c = pod_n(2, serde_json::json!({"readinessProbe": exec}));
    for i in 0..3 {
        set_running(&env, i, Some(true));
    }
    // Before start: registered, spawned later.
    env.manager.add_pod(&a);
    env.manager.add_pod(&a);
    assert_eq!(env.manager.worker_count(), 3, "a pod is added once");
    let tasks = TaskSet::new();
    env.manager.start(&tasks);
    env.manager.add_pod(&b);
    env.manager.add_pod(&c);
    assert_eq!(env.manager.worker_count(), 7);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !calls_of(&env, 0).is_empty(),
        "workers added before start run"
    );
    let ready_a = ContainerId::parse(&id_n(0)).expect("id");
    assert!(env.manager.readiness_results().get(&ready_a).is_some());

    env.manager.stop_liveness_and_startup(&a);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        env.manager.worker_count(),
        5,
        "a keeps its readiness worker"
    );

    env.manager.remove_pod(&a);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(env.manager.worker_count(), 4);
    assert_eq!(
        env.manager.readiness_results().get(&ready_a),
        None,
        "results go with the workers"
    );
    assert_eq!(env.manager.liveness_results().get(&ready_a), None);

    env.manager
        .cleanup_pods(&HashSet::from(["uid-2".to_string()]));
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        env.manager.worker_count(),
        1,
        "only the desired pod's worker is left"
    );

    // A removed pod can come back (same UID) once its workers are gone.
    env.manager.add_pod(&a);
    assert_eq!(env.manager.worker_count(), 4);
    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(1))
        .await
        .expect("shutdown");
    assert_eq!(env.manager.worker_count(), 0);
}

#[tokio::test]
async fn pending_workers_of_removed_pods_never_start() {
    let env = env();
    let exec = exec_probe(&["check"], serde_json::json!({}));
    let a = pod_n(0, serde_json::json!({"readinessProbe": exec}));
    env.manager.add_pod(&a);
    env.manager.remove_pod(&a);
    assert_eq!(env.manager.worker_count(), 0);
    env.manager.add_pod(&a);
    env.manager.cleanup_pods(&HashSet::new());
    assert_eq!(env.manager.worker_count(), 0);
}
