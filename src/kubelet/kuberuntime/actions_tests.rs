//! computePodActions, case by case as the Go kubelet's own tables reason
//! about them: app containers, init containers, sandboxes, probes.

use super::*;
use crate::cri::api::{
    LinuxPodSandboxStatus, Namespace, NamespaceMode, NamespaceOption, PodSandboxMetadata,
    PodSandboxNetworkStatus, PodSandboxStatus,
};
use crate::kubelet::prober::results::ResultsManager;
use serde_json::json;
use std::time::{Duration, SystemTime};

fn pod_with(policy: &str, extra: serde_json::Value) -> Pod {
    let mut spec = json!({
        "restartPolicy": policy,
        "containers": [
            {"name": "foo1", "image": "busybox"},
            {"name": "foo2", "image": "busybox"},
            {"name": "foo3", "image": "alpine"}
        ]
    });
    if let Some(obj) = extra.as_object() {
        for (k, v) in obj {
            spec[k] = v.clone();
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": "foo", "namespace": "new", "uid": "12345678"},
        "spec": spec
    }))
    .expect("pod")
}

fn sandbox(id: &str, ready: bool, attempt: u32, ip: &str, net: NamespaceMode) -> PodSandboxStatus {
    PodSandboxStatus {
        id: id.into(),
        metadata: Some(PodSandboxMetadata {
            name: "foo".into(),
            uid: "12345678".into(),
            namespace: "new".into(),
            attempt,
        }),
        state: if ready {
            PodSandboxState::SandboxReady as i32
        } else {
            PodSandboxState::SandboxNotready as i32
        },
        network: Some(PodSandboxNetworkStatus {
            ip: ip.into(),
            additional_ips: vec![],
        }),
        linux: Some(LinuxPodSandboxStatus {
            namespaces: Some(Namespace {
                options: Some(NamespaceOption {
                    network: net as i32,
                    ..Default::default()
                }),
            }),
        }),
        ..Default::default()
    }
}

fn status_of(
    c: &Container,
    id: &str,
    state: ContainerState,
    exit: i32,
    age: u64,
) -> ContainerStatus {
    ContainerStatus {
        id: ContainerId::new("containerd", id),
        name: c.name.clone(),
        state,
        created_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 - age)),
        started_at: None,
        finished_at: None,
        exit_code: exit,
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        hash: hash_container(c),
        restart_count: 0,
        reason: String::new(),
        message: String::new(),
    }
}

/// Every app container running in a ready sandbox.
fn running_status(pod: &Pod) -> PodStatus {
    PodStatus {
        id: "12345678".into(),
        name: "foo".into(),
        namespace: "new".into(),
        ips: vec!["10.0.0.1".into()],
        sandbox_statuses: vec![sandbox("sb0", true, 0, "10.0.0.1", NamespaceMode::Pod)],
        container_statuses: spec_containers(pod)
            .iter()
            .enumerate()
            .map(|(i, c)| status_of(c, &format!("id{}", i + 1), ContainerState::Running, 0, 10))
            .collect(),
    }
}

fn set(status: &mut PodStatus, name: &str, state: ContainerState, exit: i32) {
    for s in status
        .container_statuses
        .iter_mut()
        .filter(|s| s.name == name)
    {
        s.state = state;
        s.exit_code = exit;
    }
}

struct Want {
    kill_pod: bool,
    create_sandbox: bool,
    sandbox_id: &'static str,
    attempt: u32,
    next_init: Option<usize>,
    start: Vec<usize>,
    kill: Vec<&'static str>,
}

impl Want {
    fn noop() -> Self {
        Want {
            kill_pod: false,
            create_sandbox: false,
            sandbox_id: "sb0",
            attempt: 0,
            next_init: None,
            start: vec![],
            kill: vec![],
        }
    }
    fn recreate(attempt: u32, start: Vec<usize>) -> Self {
        Want {
            kill_pod: true,
            create_sandbox: true,
            attempt,
            start,
            ..Want::noop()
        }
    }
}

fn check(name: &str, pod: &Pod, status: &PodStatus, probes: &[(&str, ProbeKind)], want: Want) {
    let (liveness, _) = ResultsManager::new();
    let (startup, _) = ResultsManager::new();
    for (id, kind) in probes {
        let cid = ContainerId::new("containerd", *id);
        match kind {
            ProbeKind::Liveness => liveness.set(&cid, ProbeResult::Failure, "12345678"),
            ProbeKind::Startup => startup.set(&cid, ProbeResult::Failure, "12345678"),
        }
    }
    let got = compute_pod_actions(pod, status, &liveness, &startup);
    assert_eq!(got.kill_pod, want.kill_pod, "{name}: kill_pod");
    assert_eq!(
        got.create_sandbox, want.create_sandbox,
        "{name}: create_sandbox"
    );
    assert_eq!(got.sandbox_id, want.sandbox_id, "{name}: sandbox_id");
    assert_eq!(got.attempt, want.attempt, "{name}: attempt");
    assert_eq!(
        got.next_init_container_to_start, want.next_init,
        "{name}: next init"
    );
    assert_eq!(
        got.containers_to_start, want.start,
        "{name}: containers to start"
    );
    let killed: Vec<&str> = got
        .containers_to_kill
        .keys()
        .map(|k| k.id.as_str())
        .collect();
    assert_eq!(killed, want.kill, "{name}: containers to kill");
}

#[derive(Clone, Copy)]
enum ProbeKind {
    Liveness,
    Startup,
}

#[test]
fn app_container_cases() {
    let always = pod_with("Always", json!({}));
    let on_failure = pod_with("OnFailure", json!({}));
    let never = pod_with("Never", json!({}));

    check(
        "everything is good; do nothing",
        &always,
        &running_status(&always),
        &[],
        Want::noop(),
    );

    let empty = PodStatus::empty("12345678");
    check(
        "new pod: create the sandbox and start every container",
        &always,
        &empty,
        &[],
        Want {
            sandbox_id: "",
            ..Want::recreate(0, vec![0, 1, 2])
        },
    );

    let mut s = running_status(&always);
    set(&mut s, "foo1", ContainerState::Exited, 0);
    set(&mut s, "foo2", ContainerState::Exited, 1);
    check(
        "Always restarts exited containers whatever their exit code",
        &always,
        &s,
        &[],
        Want {
            start: vec![0, 1],
            ..Want::noop()
        },
    );
    check(
        "OnFailure restarts only failed containers",
        &on_failure,
        &s,
        &[],
        Want {
            start: vec![1],
            ..Want::noop()
        },
    );
    check(
        "Never restarts nothing; the running one is kept",
        &never,
        &s,
        &[],
        Want::noop(),
    );

    let mut all_exited = running_status(&never);
    for n in ["foo1", "foo2", "foo3"] {
        set(&mut all_exited, n, ContainerState::Exited, 0);
    }
    check(
        "Never with every container exited: kill the pod",
        &never,
        &all_exited,
        &[],
        Want {
            kill_pod: true,
            ..Want::noop()
        },
    );

    let mut dead = running_status(&always);
    dead.sandbox_statuses[0].state = PodSandboxState::SandboxNotready as i32;
    check(
        "dead sandbox, Always: recreate everything",
        &always,
        &dead,
        &[],
        Want {
            sandbox_id: "sb0",
            ..Want::recreate(1, vec![0, 1, 2])
        },
    );
    let mut dead_on_failure = dead.clone();
    set(&mut dead_on_failure, "foo2", ContainerState::Exited, 0);
    check(
        "dead sandbox, OnFailure: recreate all but the succeeded container",
        &on_failure,
        &dead_on_failure,
        &[],
        Want {
            sandbox_id: "sb0",
            ..Want::recreate(1, vec![0, 2])
        },
    );

    let mut no_ip = running_status(&always);
    no_ip.sandbox_statuses[0].network = Some(PodSandboxNetworkStatus::default());
    check(
        "sandbox without an IP: recreate",
        &always,
        &no_ip,
        &[],
        Want {
            sandbox_id: "sb0",
            ..Want::recreate(1, vec![0, 1, 2])
        },
    );

    let mut two_ready = running_status(&always);
    two_ready
        .sandbox_statuses
        .push(sandbox("sb-old", true, 0, "10.0.0.2", NamespaceMode::Pod));
    check(
        "two ready sandboxes: reconcile by recreating",
        &always,
        &two_ready,
        &[],
        Want {
            sandbox_id: "sb0",
            ..Want::recreate(1, vec![0, 1, 2])
        },
    );

    let host_net = pod_with("Always", json!({"hostNetwork": true}));
    check(
        "network namespace changed: recreate, forgetting the old sandbox id",
        &host_net,
        &running_status(&host_net),
        &[],
        Want {
            sandbox_id: "",
            ..Want::recreate(1, vec![0, 1, 2])
        },
    );
    let mut host_status = running_status(&host_net);
    host_status.sandbox_statuses = vec![sandbox("sb0", true, 0, "", NamespaceMode::Node)];
    check(
        "host network pods need no IP",
        &host_net,
        &host_status,
        &[],
        Want::noop(),
    );

    let mut changed = always.clone();
    if let Some(spec) = changed.spec.as_mut() {
        spec.containers[1].image = Some("busybox:2".into());
    }
    check(
        "spec hash changed: kill and restart that container",
        &changed,
        &running_status(&always),
        &[],
        Want {
            start: vec![1],
            kill: vec!["id2"],
            ..Want::noop()
        },
    );
    check(
        "spec hash changed restarts even with Never",
        &pod_with(
            "Never",
            json!({"containers": changed.spec.as_ref().expect("spec").containers}),
        ),
        &running_status(&always),
        &[],
        Want {
            start: vec![1],
            kill: vec!["id2"],
            ..Want::noop()
        },
    );

    check(
        "liveness failure: kill and restart",
        &always,
        &running_status(&always),
        &[("id1", ProbeKind::Liveness)],
        Want {
            start: vec![0],
            kill: vec!["id1"],
            ..Want::noop()
        },
    );
    check(
        "startup failure: kill and restart",
        &always,
        &running_status(&always),
        &[("id3", ProbeKind::Startup)],
        Want {
            start: vec![2],
            kill: vec!["id3"],
            ..Want::noop()
        },
    );
    check(
        "liveness failure with Never: kill, no restart, pod stays for the others",
        &never,
        &running_status(&never),
        &[("id1", ProbeKind::Liveness)],
        Want {
            kill: vec!["id1"],
            ..Want::noop()
        },
    );

    let mut unknown = running_status(&always);
    set(&mut unknown, "foo2", ContainerState::Unknown, 0);
    check(
        "unknown state: kill before restart",
        &always,
        &unknown,
        &[],
        Want {
            start: vec![1],
            kill: vec!["id2"],
            ..Want::noop()
        },
    );

    let mut sandbox_dead_never = all_exited.clone();
    sandbox_dead_never.sandbox_statuses[0].state = PodSandboxState::SandboxNotready as i32;
    check(
        "dead sandbox, Never, containers ran: no new sandbox",
        &never,
        &sandbox_dead_never,
        &[],
        Want {
            kill_pod: true,
            attempt: 1,
            ..Want::noop()
        },
    );
    let mut succeeded_on_failure = sandbox_dead_never.clone();
    succeeded_on_failure.sandbox_statuses[0]
        .metadata
        .as_mut()
        .expect("meta")
        .attempt = 3;
    check(
        "dead sandbox, OnFailure, everything succeeded: no new sandbox",
        &on_failure,
        &succeeded_on_failure,
        &[],
        Want {
            kill_pod: true,
            attempt: 4,
            ..Want::noop()
        },
    );
    let never_started = PodStatus {
        container_statuses: vec![],
        ..sandbox_dead_never.clone()
    };
    check(
        "dead sandbox, Never, no container ever created: create a sandbox",
        &never,
        &never_started,
        &[],
        Want {
            sandbox_id: "sb0",
            ..Want::recreate(1, vec![0, 1, 2])
        },
    );

    let mut deleted = always.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    let mut exited = running_status(&always);
    set(&mut exited, "foo1", ContainerState::Exited, 1);
    check(
        "a deleted pod's containers are not restarted",
        &deleted,
        &exited,
        &[],
        Want::noop(),
    );
}

#[test]
fn init_container_cases() {
    let init = |policy: &str| {
        pod_with(
            policy,
            json!({"initContainers": [{"name": "init1", "image": "bar-image"}, {"name": "init2", "image": "bar-image"}]}),
        )
    };
    let always = init("Always");
    let never = init("Never");
    let on_failure = init("OnFailure");
    let inits: Vec<Container> = init_containers(&always).to_vec();
    let base = || PodStatus {
        container_statuses: vec![],
        ..running_status(&always)
    };
    let with = |specs: &[(usize, ContainerState, i32)]| {
        let mut s = base();
        for (i, st, exit) in specs {
            s.container_statuses.push(status_of(
                &inits[*i],
                &format!("init{}", i + 1),
                *st,
                *exit,
                10,
            ));
        }
        s
    };

    check(
        "no init container started: start the first",
        &always,
        &base(),
        &[],
        Want {
            next_init: Some(0),
            ..Want::noop()
        },
    );
    check(
        "first init succeeded: start the second",
        &always,
        &with(&[(0, ContainerState::Exited, 0)]),
        &[],
        Want {
            next_init: Some(1),
            ..Want::noop()
        },
    );
    check(
        "initialization in progress: wait",
        &always,
        &with(&[
            (0, ContainerState::Exited, 0),
            (1, ContainerState::Running, 0),
        ]),
        &[],
        Want::noop(),
    );
    check(
        "initialization completed: start every app container",
        &always,
        &with(&[
            (0, ContainerState::Exited, 0),
            (1, ContainerState::Exited, 0),
        ]),
        &[],
        Want {
            start: vec![0, 1, 2],
            ..Want::noop()
        },
    );
    check(
        "missing earlier statuses with the last one running: do not rerun earlier ones",
        &always,
        &with(&[(1, ContainerState::Running, 0)]),
        &[],
        Want::noop(),
    );
    let failed = with(&[
        (0, ContainerState::Exited, 0),
        (1, ContainerState::Exited, 137),
    ]);
    check(
        "init failed, Always: restart it",
        &always,
        &failed,
        &[],
        Want {
            next_init: Some(1),
            ..Want::noop()
        },
    );
    check(
        "init failed, OnFailure: restart it",
        &on_failure,
        &failed,
        &[],
        Want {
            next_init: Some(1),
            ..Want::noop()
        },
    );
    check(
        "init failed, Never: kill the pod",
        &never,
        &failed,
        &[],
        Want {
            kill_pod: true,
            ..Want::noop()
        },
    );
    let mut oom = with(&[(0, ContainerState::Exited, 0)]);
    oom.container_statuses[0].reason = "OOMKilled".into();
    check(
        "an OOM-killed init container counts as failed",
        &never,
        &oom,
        &[],
        Want {
            kill_pod: true,
            ..Want::noop()
        },
    );
    let unknown = with(&[(0, ContainerState::Unknown, 0)]);
    check(
        "init in unknown state, Always: kill it and start it again",
        &always,
        &unknown,
        &[],
        Want {
            next_init: Some(0),
            kill: vec!["init1"],
            ..Want::noop()
        },
    );
    check(
        "init in unknown state, Never: kill the pod",
        &never,
        &unknown,
        &[],
        Want {
            kill_pod: true,
            ..Want::noop()
        },
    );

    let mut dead = base();
    dead.sandbox_statuses[0].state = PodSandboxState::SandboxNotready as i32;
    check(
        "dead sandbox: recreate it and start from the first init container",
        &always,
        &dead,
        &[],
        Want {
            sandbox_id: "sb0",
            next_init: Some(0),
            ..Want::recreate(1, vec![])
        },
    );
    let mut dead_failed = failed.clone();
    dead_failed.sandbox_statuses[0].state = PodSandboxState::SandboxNotready as i32;
    check(
        "dead sandbox, init failed, Never: kill the pod only",
        &never,
        &dead_failed,
        &[],
        Want {
            kill_pod: true,
            attempt: 1,
            ..Want::noop()
        },
    );
    check(
        "dead sandbox, init failed, OnFailure: new sandbox from the first init",
        &on_failure,
        &dead_failed,
        &[],
        Want {
            sandbox_id: "sb0",
            next_init: Some(0),
            ..Want::recreate(1, vec![])
        },
    );

    let mut app_running = with(&[]);
    app_running.container_statuses.push(status_of(
        &spec_containers(&always)[0],
        "id1",
        ContainerState::Running,
        0,
        5,
    ));
    check(
        "an app container runs: initialization is done even without init statuses",
        &always,
        &app_running,
        &[],
        Want {
            start: vec![1, 2],
            ..Want::noop()
        },
    );
}

#[test]
fn ephemeral_containers_start_once() {
    let pod = pod_with(
        "Always",
        json!({"ephemeralContainers": [{"name": "debug", "image": "busybox", "targetContainerName": "foo1"}]}),
    );
    let (l, _) = ResultsManager::new();
    let (s, _) = ResultsManager::new();
    let status = running_status(&pod);
    let got = compute_pod_actions(&pod, &status, &l, &s);
    assert_eq!(got.ephemeral_containers_to_start, vec![0]);
    assert_eq!(
        ephemeral_container(&pod, 0).map(|c| c.name),
        Some("debug".into())
    );
    let mut ran = status.clone();
    let debug = ephemeral_container(&pod, 0).expect("ephemeral");
    ran.container_statuses
        .push(status_of(&debug, "dbg", ContainerState::Exited, 0, 1));
    assert!(
        compute_pod_actions(&pod, &ran, &l, &s)
            .ephemeral_containers_to_start
            .is_empty()
    );
}

#[test]
fn newest_status_decides() {
    // Statuses are newest first: an old failed instance does not matter once
    // a newer one succeeded.
    let pod = pod_with("OnFailure", json!({}));
    let mut s = running_status(&pod);
    let foo1 = spec_containers(&pod)[0].clone();
    set(&mut s, "foo1", ContainerState::Exited, 0);
    s.container_statuses
        .push(status_of(&foo1, "old", ContainerState::Exited, 1, 100));
    check("newest instance succeeded", &pod, &s, &[], Want::noop());
}

#[test]
fn an_older_instance_that_still_runs_is_stopped() {
    // (newest instance's state, older instance's state, to start, to kill)
    let cases: [(ContainerState, ContainerState, Vec<usize>, Vec<&str>); 4] = [
        // The newest runs and so does an older one: the older is stopped.
        (
            ContainerState::Running,
            ContainerState::Running,
            vec![],
            vec!["old"],
        ),
        // The newest exited, the older still runs: the older is stopped, a
        // new instance started (Always).
        (
            ContainerState::Exited,
            ContainerState::Running,
            vec![0],
            vec!["old"],
        ),
        // An older instance that exited is left to garbage collection.
        (
            ContainerState::Running,
            ContainerState::Exited,
            vec![],
            vec![],
        ),
        (
            ContainerState::Running,
            ContainerState::Created,
            vec![],
            vec![],
        ),
    ];
    let pod = pod_with("Always", json!({}));
    let foo1 = spec_containers(&pod)[0].clone();
    for (newest, older, start, kill) in cases {
        let mut s = running_status(&pod);
        set(&mut s, "foo1", newest, 1);
        s.container_statuses
            .push(status_of(&foo1, "old", older, 0, 100));
        check(
            &format!("newest {newest:?}, older {older:?}"),
            &pod,
            &s,
            &[],
            Want {
                start,
                kill,
                ..Want::noop()
            },
        );
    }
}
