use super::*;
use crate::kubelet::prober::exec::RunError;
use crate::kubelet::prober::testutil::{
    CapturingRecorder, ScriptedRunner, exec_probe, exit, pod_with,
};

fn container(json: serde_json::Value) -> Container {
    serde_json::from_value(json).expect("container")
}

#[test]
fn extract_port_table() {
    let c = container(serde_json::json!({
        "name": "c",
        "ports": [{"name": "http", "containerPort": 8080}, {"name": "admin", "containerPort": 9090}]
    }));
    let cases: &[(IntOrString, Result<u16, &str>)] = &[
        (IntOrString::Int(80), Ok(80)),
        (IntOrString::Int(65535), Ok(65535)),
        (IntOrString::String("http".into()), Ok(8080)),
        (IntOrString::String("admin".into()), Ok(9090)),
        (IntOrString::String("8081".into()), Ok(8081)),
        (IntOrString::Int(0), Err("invalid port number: 0")),
        (IntOrString::Int(-1), Err("invalid port number: -1")),
        (IntOrString::Int(65536), Err("invalid port number: 65536")),
        (
            IntOrString::String("70000".into()),
            Err("invalid port number: 70000"),
        ),
        (
            IntOrString::String("nope".into()),
            Err("strconv.Atoi: parsing \"nope\": invalid syntax"),
        ),
        (
            IntOrString::String("99999999999999999999".into()),
            Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range"),
        ),
    ];
    for (param, want) in cases {
        let got = extract_port(param, &c).map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string), "{param:?}");
    }
}

#[test]
fn exec_command_expands_only_literal_env() {
    let c = container(serde_json::json!({
        "name": "c",
        "env": [
            {"name": "FILE", "value": "/tmp/ready"},
            {"name": "FROM_API", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        ]
    }));
    let cmd: Vec<String> = [
        "test",
        "-f",
        "$(FILE)",
        "$(FROM_API)",
        "$(UNSET)",
        "$$(FILE)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        expand_static(&cmd, &c),
        vec!["test", "-f", "/tmp/ready", "", "$(UNSET)", "$(FILE)"]
    );
}

struct Setup {
    prober: Prober,
    runner: Arc<ScriptedRunner>,
    recorder: Arc<CapturingRecorder>,
}

fn setup(gates: ProbeGates) -> Setup {
    let runner = ScriptedRunner::new(Ok(Vec::new()));
    let recorder = Arc::new(CapturingRecorder::default());
    Setup {
        prober: Prober::new(runner.clone(), recorder.clone(), gates),
        runner,
        recorder,
    }
}

fn status() -> PodStatus {
    serde_json::from_value(serde_json::json!({"podIP": "127.0.0.1"})).expect("status")
}

#[tokio::test]
async fn exec_outcomes_results_and_events() {
    let timeout = || {
        Err(RunError::Timeout {
            message: "command \"sleep 10\" timed out".into(),
            timeout: Duration::from_secs(2),
        })
    };
    struct Case {
        name: &'static str,
        gates: ProbeGates,
        probe_type: ProbeType,
        answer: Result<Vec<u8>, RunError>,
        want: Result<ProbeResult, &'static str>,
        calls: usize,
        event: Option<&'static str>,
    }
    let on = ProbeGates::default();
    let off = ProbeGates {
        exec_probe_timeout: false,
        ..ProbeGates::default()
    };
    let cases = vec![
        Case {
            name: "exit 0",
            gates: on,
            probe_type: ProbeType::Liveness,
            answer: Ok(b"fine".to_vec()),
            want: Ok(ProbeResult::Success),
            calls: 1,
            event: None,
        },
        Case {
            name: "non-zero exit",
            gates: on,
            probe_type: ProbeType::Liveness,
            answer: exit(1, "boom\n"),
            want: Ok(ProbeResult::Failure),
            calls: 1,
            event: Some("Liveness probe failed: boom\n"),
        },
        Case {
            name: "timeout fails",
            gates: on,
            probe_type: ProbeType::Readiness,
            answer: timeout(),
            want: Ok(ProbeResult::Failure),
            calls: 1,
            event: Some("Readiness probe failed: command \"sleep 10\" timed out"),
        },
        Case {
            name: "timeout without the gate is an error, retried",
            gates: off,
            probe_type: ProbeType::Startup,
            answer: timeout(),
            want: Err("command \"sleep 10\" timed out"),
            calls: 3,
            event: Some("Startup probe errored: command \"sleep 10\" timed out"),
        },
        Case {
            name: "runtime error is retried then reported",
            gates: on,
            probe_type: ProbeType::Liveness,
            answer: Err(RunError::Other("container not found".into())),
            want: Err("container not found"),
            calls: 3,
            event: Some("Liveness probe errored: container not found"),
        },
    ];
    for case in cases {
        let s = setup(case.gates);
        s.runner.set_fallback(case.answer);
        let probe = exec_probe(
            &["check", "--timeout"],
            serde_json::json!({"timeoutSeconds": 2}),
        );
        let pod = pod_with(
            serde_json::json!([{
                "name": "c",
                "livenessProbe": probe,
                "readinessProbe": probe,
                "startupProbe": probe,
            }]),
            serde_json::json!({}),
        );
        let c = pod.spec.as_ref().expect("spec").containers[0].clone();
        let id = ContainerId::new("containerd", "abc");
        let got = s
            .prober
            .probe(case.probe_type, &pod, &status(), &c, &id)
            .await
            .map_err(|e| e.to_string());
        assert_eq!(got, case.want.map_err(str::to_string), "{}", case.name);
        let calls = s.runner.calls();
        assert_eq!(calls.len(), case.calls, "{}", case.name);
        assert_eq!(calls[0].cmd, vec!["check", "--timeout"], "{}", case.name);
        assert_eq!(calls[0].timeout, Duration::from_secs(2), "{}", case.name);
        assert_eq!(calls[0].id, id);
        let events = s.recorder.take();
        match case.event {
            None => assert!(events.is_empty(), "{}: {events:?}", case.name),
            Some(msg) => {
                assert_eq!(events.len(), 1, "{}: {events:?}", case.name);
                let e = &events[0];
                assert_eq!(e.message, msg, "{}", case.name);
                assert_eq!(e.reason, "Unhealthy");
                assert_eq!(e.event_type, EventType::Warning);
                assert_eq!(e.object.field_path.as_deref(), Some("spec.containers{c}"));
                assert_eq!(e.object.name.as_deref(), Some("p"));
            }
        }
    }
}

#[tokio::test]
async fn exec_output_is_cut_at_ten_kib() {
    let s = setup(ProbeGates::default());
    s.runner.set_fallback(exit(1, &"x".repeat(20_000)));
    let pod = pod_with(
        serde_json::json!([{"name": "c", "livenessProbe": exec_probe(&["x"], serde_json::json!({}))}]),
        serde_json::json!({}),
    );
    let c = pod.spec.as_ref().expect("spec").containers[0].clone();
    let id = ContainerId::new("containerd", "abc");
    let r = s
        .prober
        .probe(ProbeType::Liveness, &pod, &status(), &c, &id)
        .await;
    assert_eq!(r, Ok(ProbeResult::Failure));
    let events = s.recorder.take();
    let msg = events[0]
        .message
        .strip_prefix("Liveness probe failed: ")
        .expect("prefix");
    assert_eq!(msg.len(), 10 * 1024);
    // Default timeout is one second.
    assert_eq!(s.runner.calls()[0].timeout, Duration::from_secs(1));
}

#[tokio::test]
async fn missing_handler_and_missing_probe() {
    let s = setup(ProbeGates {
        grpc_container_probe: false,
        ..ProbeGates::default()
    });
    let pod = pod_with(
        serde_json::json!([{
            "name": "c",
            "livenessProbe": {"grpc": {"port": 9000}},
            "readinessProbe": {"periodSeconds": 3},
        }]),
        serde_json::json!({}),
    );
    let c = pod.spec.as_ref().expect("spec").containers[0].clone();
    let id = ContainerId::new("containerd", "abc");
    for t in [ProbeType::Liveness, ProbeType::Readiness] {
        let err = s
            .prober
            .probe(t, &pod, &status(), &c, &id)
            .await
            .expect_err("no usable handler");
        assert_eq!(err.to_string(), "missing probe handler for p_ns(uid-1):c");
    }
    let events = s.recorder.take();
    assert_eq!(
        events
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>(),
        vec![
            "Liveness probe errored: missing probe handler for p_ns(uid-1):c",
            "Readiness probe errored: missing probe handler for p_ns(uid-1):c",
        ]
    );
    // A container without that probe counts as passing it.
    assert_eq!(
        s.prober
            .probe(ProbeType::Startup, &pod, &status(), &c, &id)
            .await,
        Ok(ProbeResult::Success)
    );
}

#[tokio::test]
async fn bad_port_is_an_error_and_tcp_uses_pod_ip_by_default() {
    let s = setup(ProbeGates::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let pod = pod_with(
        serde_json::json!([{
            "name": "c",
            "ports": [{"name": "svc", "containerPort": port}],
            "livenessProbe": {"tcpSocket": {"port": "nope"}},
            "readinessProbe": {"tcpSocket": {"port": "svc"}},
        }]),
        serde_json::json!({}),
    );
    let c = pod.spec.as_ref().expect("spec").containers[0].clone();
    let id = ContainerId::new("containerd", "abc");
    let err = s
        .prober
        .probe(ProbeType::Liveness, &pod, &status(), &c, &id)
        .await
        .expect_err("bad port");
    assert!(matches!(err, ProberError::Port { .. }), "{err:?}");
    assert_eq!(
        s.prober
            .probe(ProbeType::Readiness, &pod, &status(), &c, &id)
            .await,
        Ok(ProbeResult::Success)
    );
    drop(listener);
    assert_eq!(
        s.prober
            .probe(ProbeType::Readiness, &pod, &status(), &c, &id)
            .await,
        Ok(ProbeResult::Failure)
    );
    let events = s.recorder.take();
    assert_eq!(
        events.last().map(|e| e.message.clone()),
        Some(format!(
            "Readiness probe failed: dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
}

#[test]
fn gates_follow_the_feature_gate() {
    let mut gate = crate::features::FeatureGate::new();
    assert_eq!(ProbeGates::from_gate(&gate), ProbeGates::default());
    gate.set("GRPCContainerProbe=false").expect("set");
    let g = ProbeGates::from_gate(&gate);
    assert!(!g.grpc_container_probe);
    assert!(g.exec_probe_timeout);
}
