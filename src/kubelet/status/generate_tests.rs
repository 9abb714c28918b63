//! Table tests for getPhase, container status conversion and
//! generateAPIPodStatus, and a comparison with the statuses the Go kubelet
//! wrote for the reference pods.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, Pod, PodSpec,
};

use super::deadline::ActiveDeadline;
use super::generate::*;
use super::manager::StatusManager;
use super::reason_cache::ReasonCache;
use crate::kubelet::container::{self as kc, ContainerId, ContainerState as RS, SyncError};
use crate::kubelet::pod::PodManager;
use crate::util::clock::Clock;

pub(crate) struct TestClock(pub Mutex<SystemTime>);

impl TestClock {
    pub fn at(t: SystemTime) -> Arc<Self> {
        Arc::new(TestClock(Mutex::new(t)))
    }
    pub fn advance(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
}

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

/// Readiness as the prober reports it for containers without probes.
pub(crate) struct NoProbes;

impl ContainerProbeStatus for NoProbes {
    fn update_pod_status(&self, _uid: &str, status: &mut ApiPodStatus) {
        for cs in status.container_statuses.iter_mut().flatten() {
            let running = cs.state.as_ref().is_some_and(|s| s.running.is_some());
            cs.started = Some(running);
            cs.ready = running;
        }
        for cs in status.init_container_statuses.iter_mut().flatten() {
            cs.ready = cs
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0);
        }
    }
}

fn running() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..Default::default()
    }
}

fn terminated(code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn waiting() -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting::default()),
        ..Default::default()
    }
}

fn cs(name: &str, state: ContainerState, last: Option<ContainerState>) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        state: Some(state),
        last_state: last,
        ..Default::default()
    }
}

fn spec(policy: &str, init: &[&str], app: &[&str]) -> PodSpec {
    let c = |n: &&str| Container {
        name: n.to_string(),
        image: Some("busybox".into()),
        ..Default::default()
    };
    PodSpec {
        restart_policy: Some(policy.into()),
        init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
        containers: app.iter().map(c).collect(),
        ..Default::default()
    }
}

#[test]
fn phase_table() {
    struct Case {
        name: &'static str,
        policy: &'static str,
        init: &'static [&'static str],
        statuses: Vec<ContainerStatus>,
        want: &'static str,
    }
    let app = ["a", "b"];
    let cases = vec![
        Case {
            name: "all running",
            policy: "Always",
            init: &[],
            statuses: vec![cs("a", running(), None), cs("b", running(), None)],
            want: RUNNING,
        },
        Case {
            name: "one unknown",
            policy: "Always",
            init: &[],
            statuses: vec![cs("a", running(), None)],
            want: PENDING,
        },
        Case {
            name: "all stopped, always restarts",
            policy: "Always",
            init: &[],
            statuses: vec![cs("a", terminated(0), None), cs("b", terminated(1), None)],
            want: RUNNING,
        },
        Case {
            name: "restarting after a crash counts as stopped",
            policy: "Always",
            init: &[],
            statuses: vec![
                cs("a", running(), None),
                cs("b", waiting(), Some(terminated(2))),
            ],
            want: RUNNING,
        },
        Case {
            name: "waiting without history is pending",
            policy: "Always",
            init: &[],
            statuses: vec![cs("a", running(), None), cs("b", waiting(), None)],
            want: PENDING,
        },
        Case {
            name: "never: all succeeded",
            policy: "Never",
            init: &[],
            statuses: vec![cs("a", terminated(0), None), cs("b", terminated(0), None)],
            want: SUCCEEDED,
        },
        Case {
            name: "never: one failed",
            policy: "Never",
            init: &[],
            statuses: vec![cs("a", terminated(0), None), cs("b", terminated(1), None)],
            want: FAILED,
        },
        Case {
            name: "on failure: failed one restarts",
            policy: "OnFailure",
            init: &[],
            statuses: vec![cs("a", terminated(0), None), cs("b", terminated(1), None)],
            want: RUNNING,
        },
        Case {
            name: "on failure: all succeeded",
            policy: "OnFailure",
            init: &[],
            statuses: vec![cs("a", terminated(0), None), cs("b", terminated(0), None)],
            want: SUCCEEDED,
        },
        Case {
            name: "init running",
            policy: "Always",
            init: &["i"],
            statuses: vec![cs("i", running(), None)],
            want: PENDING,
        },
        Case {
            name: "init failed, never",
            policy: "Never",
            init: &["i"],
            statuses: vec![cs("i", terminated(1), None)],
            want: FAILED,
        },
        Case {
            name: "init failed and restarting, always",
            policy: "Always",
            init: &["i"],
            statuses: vec![cs("i", waiting(), Some(terminated(1)))],
            want: PENDING,
        },
        Case {
            name: "init waiting after a failure, never",
            policy: "Never",
            init: &["i"],
            statuses: vec![cs("i", waiting(), Some(terminated(1)))],
            want: FAILED,
        },
        Case {
            name: "init done, apps running",
            policy: "Always",
            init: &["i"],
            statuses: vec![
                cs("i", terminated(0), None),
                cs("a", running(), None),
                cs("b", running(), None),
            ],
            want: RUNNING,
        },
    ];
    for c in cases {
        let s = spec(c.policy, c.init, &app);
        assert_eq!(get_phase(&s, &c.statuses), c.want, "{}", c.name);
    }
}

fn pod(policy: &str, init: &[&str], app: &[&str]) -> Pod {
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        },
        spec: Some(spec(policy, init, app)),
        status: None,
    }
}

fn rt(
    name: &str,
    id: &str,
    state: RS,
    exit: i32,
    created: u64,
    restart: i32,
) -> kc::ContainerStatus {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + created);
    kc::ContainerStatus {
        id: ContainerId::new("containerd", id),
        name: name.into(),
        state,
        created_at: Some(t),
        started_at: Some(t + Duration::from_secs(1)),
        finished_at: (state == RS::Exited).then(|| t + Duration::from_secs(2)),
        exit_code: exit,
        image: "busybox:1".into(),
        image_id: "sha256:1".into(),
        hash: 0,
        restart_count: restart,
        reason: if state == RS::Exited {
            if exit == 0 { "Completed" } else { "Error" }.into()
        } else {
            String::new()
        },
        message: String::new(),
    }
}

fn state_reason(s: &ContainerStatus) -> String {
    let st = s.state.clone().unwrap_or_default();
    if let Some(w) = st.waiting {
        return format!("waiting:{}", w.reason.unwrap_or_default());
    }
    if let Some(t) = st.terminated {
        return format!(
            "terminated:{}:{}",
            t.exit_code,
            t.reason.unwrap_or_default()
        );
    }
    if st.running.is_some() {
        return "running".into();
    }
    "none".into()
}

fn last_reason(s: &ContainerStatus) -> String {
    state_reason(&ContainerStatus {
        state: s.last_state.clone(),
        ..s.clone()
    })
}

#[test]
fn container_status_conversion_table() {
    let reasons = ReasonCache::new();
    reasons.add(
        "uid-1",
        "crashy",
        SyncError::new(
            "CrashLoopBackOff",
            "back-off 10s restarting failed container=crashy",
        ),
    );
    let p = pod("Always", &[], &["fresh", "run", "crashy"]);
    let runtime = kc::PodStatus {
        id: "uid-1".into(),
        container_statuses: vec![
            rt("run", "r1", RS::Running, 0, 10, 0),
            rt("crashy", "c2", RS::Exited, 1, 20, 1),
            rt("crashy", "c1", RS::Exited, 1, 5, 0),
        ],
        ..Default::default()
    };
    let got = convert_to_api_container_statuses(&ContainerStatusInput {
        pod: &p,
        runtime: &runtime,
        previous: &[],
        containers: &p.spec.as_ref().unwrap().containers,
        has_init_containers: false,
        is_init_container: false,
        reasons: &reasons,
    });
    let summary: Vec<(String, String, String, i32)> = got
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                state_reason(s),
                last_reason(s),
                s.restart_count,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "crashy".into(),
                "waiting:CrashLoopBackOff".into(),
                "terminated:1:Error".into(),
                1
            ),
            (
                "fresh".into(),
                "waiting:ContainerCreating".into(),
                "none".into(),
                0
            ),
            ("run".into(), "running".into(), "none".into(), 0),
        ],
        "sorted by name; back-off reason shown with the last termination"
    );
    let crashy = &got[0];
    assert_eq!(
        crashy
            .state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .message
            .as_deref(),
        Some("back-off 10s restarting failed container=crashy")
    );
    assert_eq!(crashy.container_id.as_deref(), Some("containerd://c2"));
}

#[test]
fn init_containers_wait_with_pod_initializing_and_keep_spec_order() {
    let reasons = ReasonCache::new();
    let p = pod("Always", &["z-init", "a-init"], &["app"]);
    let runtime = kc::PodStatus {
        id: "uid-1".into(),
        container_statuses: vec![rt("z-init", "i1", RS::Exited, 0, 1, 0)],
        ..Default::default()
    };
    let spec = p.spec.clone().unwrap();
    let init = convert_to_api_container_statuses(&ContainerStatusInput {
        pod: &p,
        runtime: &runtime,
        previous: &[],
        containers: spec.init_containers.as_deref().unwrap(),
        has_init_containers: true,
        is_init_container: true,
        reasons: &reasons,
    });
    let names: Vec<_> = init
        .iter()
        .map(|s| (s.name.as_str(), state_reason(s)))
        .collect();
    assert_eq!(
        names,
        vec![
            ("z-init", "terminated:0:Completed".to_string()),
            ("a-init", "waiting:PodInitializing".to_string())
        ]
    );
    let app = convert_to_api_container_statuses(&ContainerStatusInput {
        pod: &p,
        runtime: &runtime,
        previous: &[],
        containers: &spec.containers,
        has_init_containers: true,
        is_init_container: false,
        reasons: &reasons,
    });
    assert_eq!(state_reason(&app[0]), "waiting:PodInitializing");
}

#[test]
fn a_vanished_running_container_reads_as_stopped_not_pending() {
    let reasons = ReasonCache::new();
    let p = pod("Always", &[], &["app"]);
    let previous = vec![cs("app", running(), None)];
    let runtime = kc::PodStatus::empty("uid-1");
    let got = convert_to_api_container_statuses(&ContainerStatusInput {
        pod: &p,
        runtime: &runtime,
        previous: &previous,
        containers: &p.spec.as_ref().unwrap().containers,
        has_init_containers: false,
        is_init_container: false,
        reasons: &reasons,
    });
    assert_eq!(state_reason(&got[0]), "waiting:ContainerCreating");
    assert_eq!(
        last_reason(&got[0]),
        "terminated:137:ContainerStatusUnknown"
    );
    assert_eq!(got[0].restart_count, 1);
    assert_eq!(get_phase(p.spec.as_ref().unwrap(), &got), RUNNING);
}

fn generator(clock: Arc<TestClock>) -> (StatusGenerator, Arc<StatusManager>, Arc<ReasonCache>) {
    let pm = Arc::new(PodManager::new());
    let sm = Arc::new(StatusManager::new(pm, clock.clone()));
    let reasons = Arc::new(ReasonCache::new());
    let generator_ = StatusGenerator {
        status_manager: sm.clone(),
        reasons: reasons.clone(),
        probes: Arc::new(NoProbes),
        deadline: Arc::new(ActiveDeadline::new(sm.clone(), clock, None)),
        node_ips: vec![],
        host_ips: None,
    };
    (generator_, sm, reasons)
}

#[test]
fn terminal_phases_stick_and_deadline_fails_the_pod() {
    let clock = TestClock::at(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let (generator_, sm, _) = generator(clock.clone());
    let p = pod("Never", &[], &["app"]);
    let done = kc::PodStatus {
        id: "uid-1".into(),
        container_statuses: vec![rt("app", "a1", RS::Exited, 0, 1, 0)],
        ..Default::default()
    };
    let s = generator_.generate(&p, &done);
    assert_eq!(s.phase.as_deref(), Some(SUCCEEDED));
    sm.set_pod_status(&p, s);
    // The container vanished: the phase stays Succeeded.
    let s = generator_.generate(&p, &kc::PodStatus::empty("uid-1"));
    assert_eq!(s.phase.as_deref(), Some(SUCCEEDED));

    let mut q = pod("Always", &[], &["app"]);
    q.metadata.uid = Some("uid-2".into());
    q.spec.as_mut().unwrap().active_deadline_seconds = Some(30);
    let run = kc::PodStatus {
        id: "uid-2".into(),
        container_statuses: vec![rt("app", "b1", RS::Running, 0, 1, 0)],
        ..Default::default()
    };
    let s = generator_.generate(&q, &run);
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    sm.set_pod_status(&q, s);
    assert!(!generator_.deadline.should_sync(&q));
    clock.advance(Duration::from_secs(31));
    assert!(generator_.deadline.should_sync(&q));
    let s = generator_.generate(&q, &run);
    assert_eq!(s.phase.as_deref(), Some(FAILED));
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
}

/// The reference statuses the Go kubelet wrote, regenerated from what the
/// runtime reported for them.
#[test]
fn reference_pod_statuses_match_the_go_kubelet() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/go-kubelet-examples");
    for name in ["guaranteed", "burstable", "besteffort"] {
        let text = std::fs::read_to_string(dir.join(format!("pod-{name}.json"))).unwrap();
        let reference: Pod = serde_json::from_str(&text).unwrap();
        let want = reference.status.clone().unwrap();
        let mut p = reference.clone();
        p.status = None;
        let start: SystemTime = want.start_time.clone().unwrap().0.into();
        let clock = TestClock::at(start);
        let (generator_, sm, _) = generator(clock.clone());
        // What the runtime reported: each container's newest instance.
        let mut runtime = kc::PodStatus {
            id: p.metadata.uid.clone().unwrap(),
            ips: want
                .pod_ips
                .iter()
                .flatten()
                .map(|i| i.ip.clone())
                .collect(),
            ..Default::default()
        };
        for s in want
            .container_statuses
            .iter()
            .flatten()
            .chain(want.init_container_statuses.iter().flatten())
        {
            let st = s.state.clone().unwrap();
            let (state, started, finished, exit, reason) = if let Some(r) = st.running {
                (RS::Running, r.started_at, None, 0, String::new())
            } else {
                let t = st.terminated.unwrap();
                (
                    RS::Exited,
                    t.started_at,
                    t.finished_at,
                    t.exit_code,
                    t.reason.unwrap_or_default(),
                )
            };
            runtime.container_statuses.push(kc::ContainerStatus {
                id: ContainerId::parse(s.container_id.as_deref().unwrap()).unwrap(),
                name: s.name.clone(),
                state,
                created_at: started.clone().map(|t| t.0.into()),
                started_at: started.map(|t| t.0.into()),
                finished_at: finished.map(|t| t.0.into()),
                exit_code: exit,
                image: s.image.clone(),
                image_id: s.image_id.clone(),
                hash: 0,
                restart_count: s.restart_count,
                reason,
                message: String::new(),
            });
        }
        let generated = generator_.generate(&p, &runtime);
        sm.set_pod_status(&p, generated);
        let mut got = serde_json::to_value(
            sm.get_pod_status(p.metadata.uid.as_deref().unwrap())
                .unwrap(),
        )
        .unwrap();
        let mut want = serde_json::to_value(&want).unwrap();
        // Transition times and the host IP (an API-mode field) aside.
        for v in [&mut got, &mut want] {
            let obj = v.as_object_mut().unwrap();
            obj.remove("hostIP");
            for c in obj["conditions"].as_array_mut().unwrap() {
                c.as_object_mut().unwrap().remove("lastTransitionTime");
                c.as_object_mut().unwrap().remove("lastProbeTime");
            }
        }
        assert_eq!(got, want, "pod {name}");
    }
}
