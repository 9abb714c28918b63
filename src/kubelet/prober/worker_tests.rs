use std::time::Duration;

use k8s_openapi::api::core::v1::PodStatus;

use super::*;
use crate::kubelet::prober::exec::RunError;
use crate::kubelet::prober::manager::{ProberDeps, ProberManager, ProberOptions, ResultStreams};
use crate::kubelet::prober::metrics::{RESULT_FAILED, RESULT_SUCCESSFUL};
use crate::kubelet::prober::testutil::{
    CapturingRecorder, ScriptedRunner, StatusTable, TokioWallClock, exec_probe, exit, pod_with,
    running_status, stopped_status,
};
use crate::util::clock::Clock;

pub(crate) struct Env {
    pub(crate) manager: ProberManager,
    pub(crate) streams: ResultStreams,
    pub(crate) status: Arc<StatusTable>,
    pub(crate) runner: Arc<ScriptedRunner>,
    pub(crate) recorder: Arc<CapturingRecorder>,
    pub(crate) clock: Arc<TokioWallClock>,
}

pub(crate) fn env() -> Env {
    let status = Arc::new(StatusTable::default());
    let runner = ScriptedRunner::new(Ok(Vec::new()));
    let recorder = Arc::new(CapturingRecorder::default());
    let clock = TokioWallClock::new();
    let (manager, streams) = ProberManager::new(ProberDeps {
        status: status.clone(),
        runner: runner.clone(),
        recorder: recorder.clone(),
        clock: clock.clone(),
        options: ProberOptions::default(),
    });
    Env {
        manager,
        streams,
        status,
        runner,
        recorder,
        clock,
    }
}

fn worker(env: &Env, probe_type: ProbeType, pod: &Pod) -> Worker {
    let c = pod.spec.as_ref().expect("spec").containers[0].clone();
    let seed = WorkerSeed {
        key: ProbeKey {
            pod_uid: pod_uid(pod).to_string(),
            container: c.name.clone(),
            probe_type,
        },
        id: 999,
        pod: Arc::new(pod.clone()),
        container: c,
        stop: CancellationToken::new(),
        trigger: Arc::new(Notify::new()),
    };
    Worker::new(seed, env.manager.shared()).expect("the container has the probe")
}

fn one_probe_pod(kind: &str, probe: serde_json::Value, extra: serde_json::Value) -> Pod {
    pod_with(serde_json::json!([{"name": "c", kind: probe}]), extra)
}

const ID1: &str = "containerd://c1";
const ID2: &str = "containerd://c2";

fn cid(s: &str) -> ContainerId {
    ContainerId::parse(s).expect("id")
}

fn ok() -> Result<Vec<u8>, RunError> {
    Ok(b"ok".to_vec())
}

fn fail() -> Result<Vec<u8>, RunError> {
    exit(1, "bad")
}

fn results_of(env: &Env, t: ProbeType) -> Arc<ResultsManager> {
    match t {
        ProbeType::Liveness => env.manager.liveness_results(),
        ProbeType::Readiness => env.manager.readiness_results(),
        ProbeType::Startup => env.manager.startup_results(),
    }
}

fn field(t: ProbeType) -> &'static str {
    match t {
        ProbeType::Liveness => "livenessProbe",
        ProbeType::Readiness => "readinessProbe",
        ProbeType::Startup => "startupProbe",
    }
}

#[tokio::test(start_paused = true)]
async fn thresholds_table() {
    use ProbeResult::{Failure as F, Success as S, Unknown as U};
    struct Case {
        name: &'static str,
        probe_type: ProbeType,
        thresholds: (i32, i32),
        answers: Vec<Result<Vec<u8>, RunError>>,
        /// The recorded result after each probe.
        want: Vec<ProbeResult>,
        /// Calls made to the runner in all.
        calls: usize,
    }
    let cases = vec![
        Case {
            name: "readiness fails after failureThreshold in a row",
            probe_type: ProbeType::Readiness,
            thresholds: (3, 1),
            answers: vec![ok(), fail(), fail(), fail(), ok()],
            want: vec![S, S, S, F, S],
            calls: 5,
        },
        Case {
            name: "a success resets the failure run",
            probe_type: ProbeType::Readiness,
            thresholds: (2, 1),
            answers: vec![fail(), ok(), fail(), fail()],
            want: vec![F, S, S, F],
            calls: 4,
        },
        Case {
            name: "readiness needs successThreshold successes",
            probe_type: ProbeType::Readiness,
            thresholds: (1, 2),
            answers: vec![ok(), ok(), fail(), ok(), ok()],
            want: vec![F, S, F, F, S],
            calls: 5,
        },
        Case {
            name: "liveness failure puts the worker on hold",
            probe_type: ProbeType::Liveness,
            thresholds: (2, 1),
            answers: vec![fail(), fail(), ok(), ok()],
            want: vec![S, F, F, F],
            calls: 2,
        },
        Case {
            name: "startup starts Unknown and fails on hold too",
            probe_type: ProbeType::Startup,
            thresholds: (2, 1),
            answers: vec![ok(), fail(), fail(), ok()],
            want: vec![S, S, F, F],
            calls: 3,
        },
        Case {
            name: "startup below threshold stays Unknown",
            probe_type: ProbeType::Startup,
            thresholds: (3, 1),
            answers: vec![fail(), fail(), ok()],
            want: vec![U, U, S],
            calls: 3,
        },
    ];
    for case in cases {
        let env = env();
        let (ft, st) = case.thresholds;
        let pod = one_probe_pod(
            field(case.probe_type),
            exec_probe(
                &["check"],
                serde_json::json!({"failureThreshold": ft, "successThreshold": st}),
            ),
            serde_json::json!({}),
        );
        // Startup probes run before the container started, the others after.
        let started = case.probe_type != ProbeType::Startup;
        let at = env.clock.now() - Duration::from_secs(60);
        env.status
            .set("uid-1", running_status("c", ID1, at, Some(started)));
        let mut w = worker(&env, case.probe_type, &pod);
        for a in case.answers {
            env.runner.push(a);
        }
        env.runner
            .set_fallback(Err(RunError::Other("script exhausted".into())));
        let results = results_of(&env, case.probe_type);
        for (i, want) in case.want.iter().enumerate() {
            assert!(w.do_probe().await, "{}: keeps going", case.name);
            assert_eq!(
                results.get(&cid(ID1)),
                Some(*want),
                "{} after probe {i}",
                case.name
            );
        }
        assert_eq!(env.runner.calls().len(), case.calls, "{}", case.name);
    }
}

#[tokio::test(start_paused = true)]
async fn new_container_resets_result_and_lifts_the_hold() {
    let env = env();
    let pod = one_probe_pod(
        "livenessProbe",
        exec_probe(&["check"], serde_json::json!({"failureThreshold": 1})),
        serde_json::json!({}),
    );
    let at = env.clock.now() - Duration::from_secs(60);
    env.status
        .set("uid-1", running_status("c", ID1, at, Some(true)));
    let mut w = worker(&env, ProbeType::Liveness, &pod);
    let live = env.manager.liveness_results();
    env.runner.set_fallback(fail());
    assert!(w.do_probe().await);
    assert_eq!(live.get(&cid(ID1)), Some(ProbeResult::Failure));
    assert!(w.do_probe().await);
    assert_eq!(
        env.runner.calls().len(),
        1,
        "on hold: no second exec into a dying container"
    );

    // The runtime replaced the container.
    env.runner.set_fallback(ok());
    env.status
        .set("uid-1", running_status("c", ID2, at, Some(true)));
    assert!(w.do_probe().await);
    assert_eq!(
        live.get(&cid(ID1)),
        None,
        "the old container's result is dropped"
    );
    assert_eq!(live.get(&cid(ID2)), Some(ProbeResult::Success));
    assert_eq!(env.runner.calls().len(), 2, "probing resumed");
    assert_eq!(env.runner.calls()[1].id, cid(ID2));

    // The change stream saw: c1 Success (initial), c1 Failure, c2 Success.
    let mut rx = env.streams.liveness;
    let seen: Vec<(String, ProbeResult)> = std::iter::from_fn(|| rx.try_recv().ok())
        .map(|u| (u.container_id.to_string(), u.result))
        .collect();
    assert_eq!(
        seen,
        vec![
            (ID1.to_string(), ProbeResult::Success),
            (ID1.to_string(), ProbeResult::Failure),
            (ID2.to_string(), ProbeResult::Success),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn startup_gates_the_other_probes() {
    let env = env();
    let probe = exec_probe(&["check"], serde_json::json!({}));
    let pod = pod_with(
        serde_json::json!([{"name": "c", "livenessProbe": probe, "readinessProbe": probe, "startupProbe": probe}]),
        serde_json::json!({}),
    );
    let at = env.clock.now() - Duration::from_secs(60);
    let mut live = worker(&env, ProbeType::Liveness, &pod);
    let mut ready = worker(&env, ProbeType::Readiness, &pod);
    let mut startup = worker(&env, ProbeType::Startup, &pod);
    for started in [None, Some(false)] {
        env.status
            .set("uid-1", running_status("c", ID1, at, started));
        assert!(live.do_probe().await);
        assert!(ready.do_probe().await);
    }
    assert!(
        env.runner.calls().is_empty(),
        "nothing but startup runs before start"
    );
    assert_eq!(
        env.manager.liveness_results().get(&cid(ID1)),
        Some(ProbeResult::Success)
    );
    assert_eq!(
        env.manager.readiness_results().get(&cid(ID1)),
        Some(ProbeResult::Failure)
    );
    assert!(startup.do_probe().await);
    assert_eq!(env.runner.calls().len(), 1);

    env.status
        .set("uid-1", running_status("c", ID1, at, Some(true)));
    assert!(
        startup.do_probe().await,
        "the startup worker stays for the next container"
    );
    assert_eq!(
        env.runner.calls().len(),
        1,
        "but probes no more once started"
    );
    assert!(live.do_probe().await);
    assert!(ready.do_probe().await);
    assert_eq!(env.runner.calls().len(), 3);
    assert_eq!(
        env.manager.readiness_results().get(&cid(ID1)),
        Some(ProbeResult::Success)
    );
}

#[tokio::test(start_paused = true)]
async fn non_running_terminal_and_deleted_pods() {
    struct Case {
        name: &'static str,
        probe_type: ProbeType,
        restart_policy: &'static str,
        status: Option<PodStatus>,
        deleted: bool,
        keep_going: bool,
        result: Option<ProbeResult>,
        calls: usize,
    }
    let now = SystemTime::now();
    let cases = vec![
        Case {
            name: "no status yet",
            probe_type: ProbeType::Readiness,
            restart_policy: "Always",
            status: None,
            deleted: false,
            keep_going: true,
            result: None,
            calls: 0,
        },
        Case {
            name: "waiting container reads as failure",
            probe_type: ProbeType::Readiness,
            restart_policy: "Never",
            status: Some(stopped_status("c", ID1, false, "Pending")),
            deleted: false,
            keep_going: true,
            result: Some(ProbeResult::Failure),
            calls: 0,
        },
        Case {
            name: "exited container that restarts",
            probe_type: ProbeType::Liveness,
            restart_policy: "OnFailure",
            status: Some(stopped_status("c", ID1, true, "Running")),
            deleted: false,
            keep_going: true,
            result: Some(ProbeResult::Failure),
            calls: 0,
        },
        Case {
            name: "exited container that never restarts ends the worker",
            probe_type: ProbeType::Readiness,
            restart_policy: "Never",
            status: Some(stopped_status("c", ID1, true, "Running")),
            deleted: false,
            keep_going: false,
            result: Some(ProbeResult::Failure),
            calls: 0,
        },
        Case {
            name: "terminal pod ends the worker",
            probe_type: ProbeType::Liveness,
            restart_policy: "Always",
            status: Some(stopped_status("c", ID1, true, "Succeeded")),
            deleted: false,
            keep_going: false,
            result: None,
            calls: 0,
        },
        Case {
            name: "deleted pod: liveness records success and stops",
            probe_type: ProbeType::Liveness,
            restart_policy: "Always",
            status: Some(running_status("c", ID1, now, Some(true))),
            deleted: true,
            keep_going: false,
            result: Some(ProbeResult::Success),
            calls: 0,
        },
        Case {
            name: "deleted pod: readiness keeps probing",
            probe_type: ProbeType::Readiness,
            restart_policy: "Always",
            status: Some(running_status(
                "c",
                ID1,
                now - Duration::from_secs(5),
                Some(true),
            )),
            deleted: true,
            keep_going: true,
            result: Some(ProbeResult::Success),
            calls: 1,
        },
    ];
    for case in cases {
        let env = env();
        let mut pod = one_probe_pod(
            field(case.probe_type),
            exec_probe(&["check"], serde_json::json!({})),
            serde_json::json!({"restartPolicy": case.restart_policy}),
        );
        if case.deleted {
            pod.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
            );
        }
        if let Some(s) = case.status {
            env.status.set("uid-1", s);
        }
        let mut w = worker(&env, case.probe_type, &pod);
        assert_eq!(w.do_probe().await, case.keep_going, "{}", case.name);
        assert_eq!(
            results_of(&env, case.probe_type).get(&cid(ID1)),
            case.result,
            "{}",
            case.name
        );
        assert_eq!(env.runner.calls().len(), case.calls, "{}", case.name);
    }
}

#[tokio::test(start_paused = true)]
async fn initial_delay_holds_probing_back() {
    let env = env();
    let pod = one_probe_pod(
        "readinessProbe",
        exec_probe(&["check"], serde_json::json!({"initialDelaySeconds": 5})),
        serde_json::json!({}),
    );
    env.status.set(
        "uid-1",
        running_status("c", ID1, env.clock.now(), Some(true)),
    );
    let mut w = worker(&env, ProbeType::Readiness, &pod);
    for _ in 0..5 {
        assert!(w.do_probe().await);
        assert!(env.runner.calls().is_empty());
        tokio::time::advance(Duration::from_millis(999)).await;
    }
    tokio::time::advance(Duration::from_millis(10)).await;
    assert!(w.do_probe().await);
    assert_eq!(
        env.runner.calls().len(),
        1,
        "probes from the fifth second on"
    );
}

#[tokio::test(start_paused = true)]
async fn probe_errors_keep_the_previous_result() {
    let env = env();
    let mut pod = one_probe_pod(
        "readinessProbe",
        exec_probe(&["check"], serde_json::json!({"failureThreshold": 1})),
        serde_json::json!({}),
    );
    // Metric series are process-wide: this pod's labels are its own.
    pod.metadata.name = Some("metrics-pod".into());
    pod.metadata.uid = Some("uid-metrics".into());
    let at = env.clock.now() - Duration::from_secs(60);
    env.status
        .set("uid-metrics", running_status("c", ID1, at, Some(true)));
    let mut w = worker(&env, ProbeType::Readiness, &pod);
    env.runner.push(ok());
    assert!(w.do_probe().await);
    env.runner
        .set_fallback(Err(RunError::Other("runtime down".into())));
    assert!(w.do_probe().await);
    assert_eq!(
        env.manager.readiness_results().get(&cid(ID1)),
        Some(ProbeResult::Success),
        "an error is not a failure"
    );
    assert_eq!(
        env.runner.calls().len(),
        1 + 3,
        "errors are retried three times"
    );
    let events = env.recorder.take();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].message, "Readiness probe errored: runtime down");
    assert_eq!(w.labels.count(RESULT_SUCCESSFUL), 1.0);
    assert_eq!(w.labels.count(RESULT_FAILED), 0.0);
    w.cleanup();
    assert_eq!(
        w.labels.count(RESULT_SUCCESSFUL),
        0.0,
        "series dropped with the worker"
    );
    assert_eq!(env.manager.readiness_results().get(&cid(ID1)), None);
}
