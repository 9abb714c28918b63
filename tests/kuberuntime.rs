//! The runtime manager, image manager, container GC and PLEG against a real
//! containerd (deploy/rig): the reference pods run with the Go kubelet's CRI
//! metadata and are adopted by a restarted manager; crash loops back off on
//! Go's schedule; spec changes and liveness failures restart containers;
//! kills run preStop within the grace period; termination messages, image
//! pull failures, garbage collection and PLEG events.
//!
//! Each test starts its own private containerd and removes everything it
//! made (the rig on drop; pod and log directories live in a temp dir).

#[path = "kuberuntime/harness.rs"]
mod harness;
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{Env, env, status_of, sync_until};
use k8s_openapi::api::core::v1::Pod;
use kubelet::cri::api::{ContainerFilter, PodSandboxFilter, PodSandboxState};
use kubelet::kubelet::container::{
    ContainerState, PodCache, PodStatus, PodSyncResult, Runtime, SyncAction,
};
use kubelet::kubelet::pleg::{GenericPleg, PodLifecycleEventType, event_stream};
use kubelet::kubelet::prober::results::ProbeResult;
use kubelet::util::clock::RealClock;
use serde_json::{Value, json};
use support::containerd::images;

const UID_LABEL: &str = "io.kubernetes.pod.uid";
const NAME_LABEL: &str = "io.kubernetes.container.name";

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/go-kubelet-examples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A reference pod as the config layer hands it over.
fn reference_pod(name: &str) -> Pod {
    let mut pod: Pod = serde_json::from_value(fixture(&format!("pod-{name}.json"))).expect("pod");
    let a = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    a.insert("kubernetes.io/config.source".into(), "api".into());
    a.insert(
        "kubernetes.io/config.seen".into(),
        "2026-11-22T04:03:41.900000000Z".into(),
    );
    pod.status = None;
    pod
}

/// A pod with the defaults the API server (or the static pod source) sets.
fn test_pod(name: &str, mut spec: Value) -> Pod {
    for (k, v) in [
        ("enableServiceLinks", json!(true)),
        ("dnsPolicy", json!("ClusterFirst")),
    ] {
        if spec.get(k).is_none() {
            spec[k] = v;
        }
    }
    for c in spec["containers"].as_array_mut().into_iter().flatten() {
        for (k, v) in [
            ("terminationMessagePath", "/dev/termination-log"),
            ("terminationMessagePolicy", "File"),
            ("imagePullPolicy", "IfNotPresent"),
        ] {
            if c.get(k).is_none() {
                c[k] = json!(v);
            }
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kr", "uid": format!("uid-{name}-{}", std::process::id())},
        "spec": spec
    }))
    .expect("pod")
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn running(s: &PodStatus, name: &str) -> bool {
    s.find_container_status_by_name(name)
        .is_some_and(|c| c.state == ContainerState::Running)
}

fn exited(s: &PodStatus, name: &str) -> bool {
    s.find_container_status_by_name(name)
        .is_some_and(|c| c.state == ContainerState::Exited)
}

fn errors(results: &[PodSyncResult]) -> Vec<(String, String)> {
    results
        .iter()
        .flat_map(|r| r.results.iter())
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| (e.reason.clone(), e.message.clone()))
        })
        .collect()
}

/// containerd's record of what the kubelet sent (the verbose status).
async fn recorded_config(env: &Env, sandbox: Option<&str>, container: Option<&str>) -> Value {
    let rt = env.manager.runtime_service();
    let info = match (sandbox, container) {
        (Some(id), _) => {
            rt.pod_sandbox_status(id, true)
                .await
                .expect("sandbox status")
                .info
        }
        (_, Some(id)) => {
            rt.container_status(id, true)
                .await
                .expect("container status")
                .info
        }
        _ => unreachable!(),
    };
    let v: Value = serde_json::from_str(info.get("info").expect("verbose info")).expect("json");
    v["config"].clone()
}

fn normalize_sandbox(mut v: Value, cgroup_prefix: &str) -> Value {
    if let Some(seen) = v.pointer_mut("/annotations/kubernetes.io~1config.seen") {
        *seen = Value::from("<seen>");
    }
    if let Some(dir) = v.get_mut("log_directory") {
        let base = Path::new(dir.as_str().unwrap_or(""))
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        *dir = Value::from(base.unwrap_or_default());
    }
    if let Some(cg) = v.pointer_mut("/linux/cgroup_parent") {
        let s = cg.as_str().unwrap_or("").to_string();
        *cg = Value::from(s.strip_prefix(cgroup_prefix).unwrap_or(&s).to_string());
    }
    v
}

fn normalize_container(mut v: Value, root: &Path) -> Value {
    if let Some(envs) = v.get_mut("envs").and_then(Value::as_array_mut) {
        let is_service = |e: &Value| {
            e["key"]
                .as_str()
                .is_some_and(|k| k.starts_with("KUBERNETES_"))
        };
        let user: Vec<Value> = envs.iter().filter(|e| !is_service(e)).cloned().collect();
        let mut service: Vec<Value> = envs.iter().filter(|e| is_service(e)).cloned().collect();
        service.sort_by_key(|e| e["key"].as_str().unwrap_or("").to_string());
        *envs = user.into_iter().chain(service).collect();
    }
    let root = root.display().to_string();
    if let Some(mounts) = v.get_mut("mounts").and_then(Value::as_array_mut) {
        for m in mounts.iter_mut() {
            let host = m["host_path"]
                .as_str()
                .unwrap_or("")
                .replace(&root, "/var/lib/kubelet");
            m["host_path"] = Value::from(host.clone());
            if m["container_path"] == "/dev/termination-log" {
                let (dir, _) = host.rsplit_once('/').unwrap_or(("", ""));
                m["host_path"] = Value::from(format!("{dir}/<random>"));
            }
        }
    }
    v["image"] = json!({"image": "<image>"});
    v
}

fn assert_same(what: &str, got: Value, want: Value) {
    if got != want {
        panic!(
            "{what} differs from the Go kubelet's\n--- ours (as containerd recorded it)\n{}\n--- reference\n{}",
            serde_json::to_string_pretty(&got).unwrap_or_default(),
            serde_json::to_string_pretty(&want).unwrap_or_default()
        );
    }
}

async fn sandbox_ids(env: &Env, pod: &Pod) -> Vec<String> {
    env.manager
        .runtime_service()
        .list_pod_sandbox(Some(PodSandboxFilter {
            label_selector: [(UID_LABEL.to_string(), uid(pod).to_string())].into(),
            ..Default::default()
        }))
        .await
        .expect("list sandboxes")
        .into_iter()
        .map(|s| s.id)
        .collect()
}

async fn container_ids(env: &Env, pod: &Pod, name: Option<&str>) -> Vec<String> {
    let mut labels: HashMap<String, String> =
        [(UID_LABEL.to_string(), uid(pod).to_string())].into();
    if let Some(n) = name {
        labels.insert(NAME_LABEL.into(), n.into());
    }
    env.manager
        .runtime_service()
        .list_containers(Some(ContainerFilter {
            label_selector: labels,
            ..Default::default()
        }))
        .await
        .expect("list containers")
        .into_iter()
        .map(|c| c.id)
        .collect()
}

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_pods_run_with_go_metadata_and_survive_a_restart() {
    let Some(env) = env("reference_pods_run_with_go_metadata_and_survive_a_restart").await else {
        return;
    };
    let cases: [(&str, &[&str]); 3] = [
        ("guaranteed", &["main"]),
        ("burstable", &["web"]),
        ("besteffort", &["init", "app"]),
    ];
    let cgroup_prefix = format!("/{}", env.rig.cgroup_root());
    let mut before: HashMap<String, PodStatus> = HashMap::new();
    for (name, containers) in cases {
        let pod = reference_pod(name);
        let app = *containers.last().expect("app container");
        let (status, results) =
            sync_until(&env.manager, &pod, RUN_TIMEOUT, |s| running(s, app)).await;
        assert!(
            errors(&results).is_empty(),
            "{name}: {:?}",
            errors(&results)
        );

        let sandboxes = sandbox_ids(&env, &pod).await;
        assert_eq!(sandboxes.len(), 1, "{name}: one sandbox");
        assert_same(
            &format!("{name} sandbox"),
            normalize_sandbox(
                recorded_config(&env, Some(&sandboxes[0]), None).await,
                &cgroup_prefix,
            ),
            normalize_sandbox(fixture(&format!("cri-{name}.sandbox.json")), ""),
        );
        for c in containers {
            let ids = container_ids(&env, &pod, Some(c)).await;
            assert_eq!(ids.len(), 1, "{name}/{c}: one instance");
            assert_same(
                &format!("{name}/{c}"),
                normalize_container(
                    recorded_config(&env, None, Some(&ids[0])).await,
                    env.root.path(),
                ),
                normalize_container(
                    fixture(&format!("cri-{name}.container.{c}.json")),
                    Path::new("/var/lib/kubelet"),
                ),
            );
            let log = env
                .logs_root()
                .join(format!("refpack_{name}_{}", uid(&pod)))
                .join(c)
                .join("0.log");
            assert!(log.exists(), "{}", log.display());
        }
        if name == "besteffort" {
            let init = status
                .find_container_status_by_name("init")
                .expect("init status");
            let app = status
                .find_container_status_by_name("app")
                .expect("app status");
            assert_eq!(
                (init.state, init.exit_code, init.reason.as_str()),
                (ContainerState::Exited, 0, "Completed")
            );
            assert!(
                init.finished_at <= app.started_at,
                "init finished before the app started"
            );
            let log = env
                .logs_root()
                .join(format!("refpack_besteffort_{}", uid(&pod)))
                .join("init/0.log");
            let text = std::fs::read_to_string(&log).expect("init log");
            assert!(text.contains("init done"), "{text}");
        }
        before.insert(name.to_string(), status);
    }
    // Legacy log links for the started containers.
    let links = std::fs::read_dir(env.symlinks_dir())
        .expect("symlinks")
        .count();
    assert_eq!(links, 4, "one link per started container");

    // A restarted kubelet: a new manager finds the same pods and changes nothing.
    let m2 = env.restarted_manager().await;
    let pods = m2.get_pods(false).await.expect("get pods");
    for (name, _) in cases {
        let pod = reference_pod(name);
        let found = pods
            .iter()
            .find(|p| p.id == uid(&pod))
            .unwrap_or_else(|| panic!("{name} not found"));
        assert_eq!(found.name, name);
        assert_eq!(found.namespace, "refpack");
        let status = status_of(&m2, &pod).await;
        assert_eq!(
            status, before[name],
            "{name}: same status through the new manager"
        );
        let result = m2.sync_pod(&pod, &status, &[]).await;
        let acted: Vec<SyncAction> = result
            .results
            .iter()
            .map(|r| r.action)
            .filter(|a| *a != SyncAction::ConfigPodSandbox)
            .collect();
        assert!(
            acted.is_empty(),
            "{name}: nothing to do after a restart, did {acted:?}"
        );
        assert!(result.error().is_none(), "{name}: {:?}", result.error());
        let after = status_of(&m2, &pod).await;
        assert_eq!(
            after.container_statuses, before[name].container_statuses,
            "{name}: untouched"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loop_backs_off_on_the_go_schedule_and_spec_changes_restart() {
    let Some(env) = env("crash_loop_backs_off_on_the_go_schedule_and_spec_changes_restart").await
    else {
        return;
    };
    let mut pod = test_pod(
        "crasher",
        json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "echo out; exit 3"],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "FallbackToLogsOnError"}]}),
    );
    let m = &env.manager;
    let key = format!("crasher_kr({})", uid(&pod));
    let instances = |s: &PodStatus| {
        s.container_statuses
            .iter()
            .filter(|c| c.name == "c")
            .count()
    };

    // First run, then the first restart goes ahead at once.
    sync_until(m, &pod, RUN_TIMEOUT, |s| exited(s, "c")).await;
    sync_until(m, &pod, RUN_TIMEOUT, |s| {
        instances(s) == 2 && exited(s, "c")
    })
    .await;

    let mut expected_backoff = 10;
    for round in 0..3 {
        let status = status_of(m, &pod).await;
        let result = m.sync_pod(&pod, &status, &[]).await;
        let err = result.error().cloned().expect("backing off");
        assert_eq!(err.reason, "CrashLoopBackOff", "round {round}");
        assert_eq!(
            err.message,
            format!("back-off {expected_backoff}s restarting failed container=c pod={key}"),
            "round {round}"
        );
        assert_eq!(
            instances(&status_of(m, &pod).await),
            round + 2,
            "nothing started while backing off"
        );
        // Step over the window: the next sync restarts it.
        env.clock.jump(Duration::from_secs(expected_backoff));
        let want = round + 3;
        sync_until(m, &pod, RUN_TIMEOUT, |s| {
            instances(s) == want && exited(s, "c")
        })
        .await;
        expected_backoff *= 2;
    }
    assert!(!env.recorder.with_reason("BackOff").is_empty());

    let status = status_of(m, &pod).await;
    let newest = &status.container_statuses[0];
    assert_eq!(newest.restart_count, 4);
    assert_eq!(
        (newest.exit_code, newest.message.as_str()),
        (3, "out\n"),
        "termination message from the log"
    );

    // GC keeps only the newest dead instance of the container.
    let policy = kubelet::kubelet::container::GcPolicy {
        min_age: Duration::ZERO,
        max_per_pod_container: 1,
        max_containers: -1,
    };
    m.garbage_collect(policy, true, false).await.expect("gc");
    let status = status_of(m, &pod).await;
    assert_eq!(instances(&status), 1, "older dead instances removed");
    assert_eq!(status.container_statuses[0].restart_count, 4);

    // A changed spec is a new back-off key: it starts at once.
    pod.spec.as_mut().expect("spec").containers[0].command =
        Some(vec!["sh".into(), "-c".into(), "sleep 3600".into()]);
    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| running(s, "c")).await;
    let first = status.container_statuses[0].clone();
    assert_eq!(first.restart_count, 5);

    // Changing a running container's spec kills and restarts it.
    pod.spec.as_mut().expect("spec").containers[0].env = Some(vec![
        serde_json::from_value(json!({"name": "X", "value": "1"})).expect("env"),
    ]);
    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| {
        running(s, "c") && s.container_statuses[0].id != first.id
    })
    .await;
    assert_eq!(status.container_statuses[0].restart_count, 6);
    let killing = env.recorder.with_reason("Killing");
    assert!(
        killing
            .iter()
            .any(|e| e.message == "Container c definition changed, will be restarted"),
        "{killing:?}"
    );

    // A liveness failure restarts it too.
    let current = status.container_statuses[0].clone();
    env.liveness
        .set(&current.id, ProbeResult::Failure, uid(&pod));
    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| {
        running(s, "c") && s.container_statuses[0].id != current.id
    })
    .await;
    assert_eq!(status.container_statuses[0].restart_count, 7);
    assert!(
        env.recorder
            .with_reason("Killing")
            .iter()
            .any(|e| e.message == "Container c failed liveness probe, will be restarted")
    );
}

/// A loopback HTTP server recording request paths (for httpGet hooks).
async fn hook_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                if let Some(path) = head.split_whitespace().nth(1) {
                    s.lock().unwrap().push(path.to_string());
                }
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_runs_pre_stop_within_the_grace_period_and_hooks_fail_properly() {
    let Some(env) = env("kill_runs_pre_stop_within_the_grace_period_and_hooks_fail_properly").await
    else {
        return;
    };
    let m = &env.manager;
    let data = env.root.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let (port, seen) = hook_server().await;

    let pod = test_pod(
        "graceful",
        json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 3,
        "volumes": [{"name": "data", "hostPath": {"path": data.display().to_string()}}],
        "containers": [{
            "name": "c", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
            "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "lifecycle": {
                "postStart": {"httpGet": {"host": "127.0.0.1", "port": port, "path": "/started"}},
                "preStop": {"exec": {"command": ["sh", "-c", "echo bye > /data/prestop"]}}
            }}]}),
    );
    let (status, results) = sync_until(m, &pod, RUN_TIMEOUT, |s| running(s, "c")).await;
    assert!(errors(&results).is_empty(), "{:?}", errors(&results));
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["/started".to_string()],
        "postStart httpGet ran"
    );

    let running_pod = m
        .get_pods(false)
        .await
        .expect("pods")
        .into_iter()
        .find(|p| p.id == uid(&pod))
        .expect("running pod");
    let started = Instant::now();
    m.kill_pod(Some(&pod), &running_pod, None)
        .await
        .expect("kill");
    let took = started.elapsed();
    assert_eq!(
        std::fs::read_to_string(data.join("prestop"))
            .expect("preStop ran")
            .trim(),
        "bye"
    );
    // The container ignores SIGTERM: it gets the whole grace period.
    assert!(took >= Duration::from_secs(3), "killed after {took:?}");
    let after = status_of(m, &pod).await;
    let c = after.find_container_status_by_name("c").expect("status");
    assert_eq!((c.state, c.exit_code), (ContainerState::Exited, 137));
    assert_eq!(
        after.sandbox_statuses[0].state,
        PodSandboxState::SandboxNotready as i32
    );
    assert!(
        env.recorder
            .with_reason("Killing")
            .iter()
            .any(|e| e.message == "Stopping container c" && e.field_path == "spec.containers{c}")
    );
    drop(status);

    // A pod unknown to the kubelet (after a restart) is killed from labels:
    // its preStop, from the annotations, runs too.
    let orphan = test_pod(
        "orphan",
        json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "data", "hostPath": {"path": data.display().to_string()}}],
            "containers": [{
                "name": "c", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "lifecycle": {"preStop": {"httpGet": {"host": "127.0.0.1", "port": port, "path": "/stopping"}}}}]}),
    );
    sync_until(m, &orphan, RUN_TIMEOUT, |s| running(s, "c")).await;
    let running_orphan = m
        .get_pods(false)
        .await
        .expect("pods")
        .into_iter()
        .find(|p| p.id == uid(&orphan))
        .expect("running orphan");
    m.kill_pod(None, &running_orphan, None)
        .await
        .expect("kill orphan");
    assert!(
        seen.lock().unwrap().contains(&"/stopping".to_string()),
        "preStop httpGet ran"
    );
    assert!(exited(&status_of(m, &orphan).await, "c"));

    // A failing postStart hook kills the container: PostStartHookError.
    let hooked = test_pod(
        "poststart",
        json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
            "command": ["sleep", "3600"],
            "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 7"]}}}}]}),
    );
    let (status, results) = sync_until(m, &hooked, RUN_TIMEOUT, |s| exited(s, "c")).await;
    let errs = errors(&results);
    assert!(
        errs.iter()
            .any(|(reason, msg)| reason == "PostStartHookError"
                && msg.starts_with(
                    "Exec lifecycle hook ([sh -c exit 7]) for Container \"c\" in Pod"
                )),
        "{errs:?}"
    );
    assert_eq!(
        status
            .find_container_status_by_name("c")
            .map(|c| c.exit_code),
        Some(137)
    );
    assert!(!env.recorder.with_reason("FailedPostStartHook").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn termination_messages_pull_failures_and_gc_of_removed_pods() {
    let Some(env) = env("termination_messages_pull_failures_and_gc_of_removed_pods").await else {
        return;
    };
    let m = &env.manager;
    let pod = test_pod(
        "msg",
        json!({"restartPolicy": "Never", "containers": [
            {"name": "file", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
             "command": ["sh", "-c", "printf done > /dev/termination-log"],
             "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"},
            {"name": "logs", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
             "command": ["sh", "-c", "echo oops; exit 1"],
             "terminationMessagePath": "/dev/termination-log",
             "terminationMessagePolicy": "FallbackToLogsOnError"}]}),
    );
    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| {
        exited(s, "file") && exited(s, "logs")
    })
    .await;
    let file = status.find_container_status_by_name("file").expect("file");
    let logs = status.find_container_status_by_name("logs").expect("logs");
    assert_eq!(
        (file.exit_code, file.reason.as_str(), file.message.as_str()),
        (0, "Completed", "done")
    );
    assert_eq!(
        (logs.exit_code, logs.reason.as_str(), logs.message.as_str()),
        (1, "Error", "oops\n")
    );
    // Nothing to keep with Never: the sandbox is stopped, not recreated.
    sync_until(m, &pod, RUN_TIMEOUT, |s| {
        s.sandbox_statuses
            .iter()
            .all(|sb| sb.state == PodSandboxState::SandboxNotready as i32)
    })
    .await;
    let status = status_of(m, &pod).await;
    let again = m.sync_pod(&pod, &status, &[]).await;
    assert!(
        !again
            .results
            .iter()
            .any(|r| r.action == SyncAction::CreatePodSandbox)
    );
    assert_eq!(sandbox_ids(&env, &pod).await.len(), 1);

    // An image that exists nowhere: ErrImagePull, then ImagePullBackOff.
    let absent = test_pod(
        "absent",
        json!({"restartPolicy": "Always", "containers": [
            {"name": "c", "image": images().absent, "imagePullPolicy": "IfNotPresent"}]}),
    );
    let status = status_of(m, &absent).await;
    let first = m.sync_pod(&absent, &status, &[]).await;
    assert_eq!(
        first.error().map(|e| e.reason.as_str()),
        Some("ErrImagePull"),
        "{first:?}"
    );
    let status = status_of(m, &absent).await;
    let second = m.sync_pod(&absent, &status, &[]).await;
    let e = second.error().expect("backing off");
    assert_eq!(e.reason, "ImagePullBackOff");
    assert_eq!(
        e.message,
        format!("Back-off pulling image {:?}", images().absent)
    );
    let reasons: Vec<String> = env
        .recorder
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.reason.clone())
        .collect();
    assert!(
        reasons.contains(&"Pulling".to_string()) && reasons.contains(&"BackOff".to_string()),
        "{reasons:?}"
    );

    // Both pods are removed: GC takes their containers, sandboxes and logs.
    let log_dir = env.logs_root().join(format!("kr_msg_{}", uid(&pod)));
    assert!(log_dir.exists());
    let running_absent = m
        .get_pods(true)
        .await
        .expect("pods")
        .into_iter()
        .find(|p| p.id == uid(&absent))
        .expect("absent pod");
    m.kill_pod(Some(&absent), &running_absent, None)
        .await
        .expect("kill");
    env.pod_state
        .0
        .lock()
        .unwrap()
        .extend([uid(&pod).to_string(), uid(&absent).to_string()]);
    let policy = kubelet::kubelet::container::GcPolicy {
        min_age: Duration::ZERO,
        max_per_pod_container: 1,
        max_containers: -1,
    };
    m.garbage_collect(policy, true, false).await.expect("gc");
    for p in [&pod, &absent] {
        assert!(
            container_ids(&env, p, None).await.is_empty(),
            "{:?}: containers left",
            p.metadata.name
        );
        assert!(
            sandbox_ids(&env, p).await.is_empty(),
            "{:?}: sandboxes left",
            p.metadata.name
        );
    }
    assert!(!log_dir.exists(), "pod log directory removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pleg_reports_a_container_that_dies() {
    let Some(env) = env("pleg_reports_a_container_that_dies").await else {
        return;
    };
    let m = &env.manager;
    let pod = test_pod(
        "short",
        json!({"restartPolicy": "Never", "containers": [
            {"name": "c", "image": images().busybox, "imagePullPolicy": "IfNotPresent",
             "command": ["sleep", "3"]}]}),
    );
    let cache = Arc::new(PodCache::new());
    let (tx, mut rx) = event_stream();
    let runtime: Arc<dyn Runtime> = m.clone();
    let pleg = GenericPleg::new(runtime, cache.clone(), tx, Arc::new(RealClock));
    pleg.relist().await;
    assert!(pleg.healthy().is_ok());

    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| running(s, "c")).await;
    let cid = status.container_statuses[0].id.id.clone();
    pleg.relist().await;
    let mut events = Vec::new();
    while let Some(e) = rx.try_recv() {
        events.push((e.event_type, e.data));
    }
    assert!(
        events.contains(&(PodLifecycleEventType::ContainerStarted, cid.clone())),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(t, _)| *t == PodLifecycleEventType::PodSync),
        "sandbox start: {events:?}"
    );
    assert!(running(&cache.get(uid(&pod)).status, "c"));

    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let died = loop {
        pleg.relist().await;
        if let Some(e) = rx.try_recv() {
            break e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no ContainerDied event"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        (died.event_type, died.data.as_str(), died.id.as_str()),
        (
            PodLifecycleEventType::ContainerDied,
            cid.as_str(),
            uid(&pod)
        )
    );
    let cached = cache.get(uid(&pod));
    let c = cached
        .status
        .find_container_status_by_name("c")
        .expect("cached");
    assert_eq!((c.state, c.exit_code), (ContainerState::Exited, 0));
    let _: PathBuf = env.root.path().to_path_buf();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_gc_keeps_images_in_use_and_the_sandbox_image() {
    use kubelet::kubelet::images::{
        CriImageFsStats, ImageFsStatsProvider, ImageGcManager, ImageGcPolicy,
    };
    let Some(env) = env("image_gc_keeps_images_in_use_and_the_sandbox_image").await else {
        return;
    };
    let m = &env.manager;
    let pod = test_pod(
        "user",
        json!({"containers": [{"name": "c", "image": images().busybox, "command": ["sleep", "3600"]}]}),
    );
    sync_until(m, &pod, RUN_TIMEOUT, |s| running(s, "c")).await;

    let (cri_images, images_svc) = env.image_service().await;
    let stats = CriImageFsStats::new(cri_images);
    let fs = stats.image_fs_stats().await.expect("image fs stats");
    assert!(
        fs.capacity_bytes > 0 && fs.available_bytes <= fs.capacity_bytes,
        "{fs:?}"
    );
    // containerd refreshes its usage figure periodically: present, maybe 0.
    assert!(fs.used_bytes.is_some(), "{fs:?}");

    let runtime: Arc<dyn Runtime> = m.clone();
    let gc = ImageGcManager::new(
        runtime,
        images_svc.clone(),
        Arc::new(stats),
        env.recorder.clone(),
        Default::default(),
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::ZERO,
        },
        images().pause.clone(),
        Arc::new(RealClock),
    )
    .expect("policy");
    let tags = |list: &[kubelet::kubelet::container::Image]| -> Vec<String> {
        list.iter()
            .flat_map(|i| i.repo_tags.iter().cloned())
            .collect()
    };
    let before = tags(&images_svc.list_images().await.expect("list"));
    assert!(before.contains(&images().throwaway), "{before:?}");
    let freed = gc.delete_unused_images().await.expect("delete unused");
    assert!(freed > 0);
    let after = tags(&images_svc.list_images().await.expect("list"));
    assert!(
        !after.contains(&images().throwaway),
        "unused image removed: {after:?}"
    );
    assert!(
        after.contains(&images().busybox),
        "image in use kept: {after:?}"
    );
    assert!(
        after.contains(&images().pause),
        "sandbox image kept: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_sandbox_is_recreated_with_init_containers_rerun() {
    let Some(env) = env("a_dead_sandbox_is_recreated_with_init_containers_rerun").await else {
        return;
    };
    let m = &env.manager;
    let pod = test_pod(
        "phoenix",
        json!({"restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
            "initContainers": [{"name": "init", "image": images().busybox, "command": ["true"]}],
            "containers": [{"name": "app", "image": images().busybox, "command": ["sleep", "3600"]}]}),
    );
    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| running(s, "app")).await;
    let old_sandbox = status.sandbox_statuses[0].id.clone();
    let old_init = status
        .find_container_status_by_name("init")
        .expect("init")
        .id
        .clone();

    m.runtime_service()
        .stop_pod_sandbox(&old_sandbox)
        .await
        .expect("stop sandbox");
    let (status, _) = sync_until(m, &pod, RUN_TIMEOUT, |s| {
        running(s, "app") && s.sandbox_statuses[0].id != old_sandbox
    })
    .await;
    let newest = &status.sandbox_statuses[0];
    assert_eq!(newest.metadata.as_ref().map(|md| md.attempt), Some(1));
    assert_eq!(newest.state, PodSandboxState::SandboxReady as i32);
    let inits: Vec<_> = status
        .container_statuses
        .iter()
        .filter(|c| c.name == "init")
        .collect();
    assert_eq!(inits.len(), 1, "old init instances purged");
    assert_ne!(inits[0].id, old_init, "init ran again in the new sandbox");
    assert_eq!(
        status
            .find_container_status_by_name("app")
            .map(|c| c.restart_count),
        Some(1)
    );
    assert!(!env.recorder.with_reason("SandboxChanged").is_empty());
}
