//! The CRI clients against a real containerd (deploy/rig), plus a wire-format
//! check of the generated messages against bytes recorded from containerd.
//!
//! Every test starts its own private containerd (own root, socket, CNI
//! network, cgroup root) and removes everything it made when done.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kubelet::cri::api;
use kubelet::cri::{
    CriError, ImageService, InstrumentedImageService, InstrumentedRuntimeService,
    RemoteImageService, RemoteRuntimeService, RuntimeService, connect_runtime_services,
    runtime_cgroup_driver,
};
use support::containerd::{Containerd, images};
use support::cri_requests::{MI, Pod, container, pod};

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| (*s).to_string()).collect()
}

async fn runtime(rig: &Containerd) -> RemoteRuntimeService {
    RemoteRuntimeService::connect(&rig.endpoint(), rig.timeout())
        .await
        .unwrap_or_else(|e| panic!("connect runtime: {e}\n{}", rig.log()))
}

async fn image_service(rig: &Containerd) -> RemoteImageService {
    RemoteImageService::connect(&rig.endpoint(), rig.timeout())
        .await
        .unwrap_or_else(|e| panic!("connect image service: {e}\n{}", rig.log()))
}

/// Runs a sandbox and one started container in it.
async fn running_container(
    rt: &dyn RuntimeService,
    pod: &Pod,
    name: &str,
    command: &[&str],
) -> (String, String) {
    let sandbox = rt
        .run_pod_sandbox(&pod.config, "")
        .await
        .expect("RunPodSandbox");
    let config = container(pod, name, &images().busybox, command);
    let id = rt
        .create_container(&sandbox, &config, &pod.config)
        .await
        .expect("CreateContainer");
    rt.start_container(&id).await.expect("StartContainer");
    (sandbox, id)
}

/// The pid containerd reports in the verbose container status.
async fn container_pid(rt: &dyn RuntimeService, id: &str) -> u32 {
    let status = rt
        .container_status(id, true)
        .await
        .expect("ContainerStatus");
    let info = status.info.get("info").expect("verbose info");
    let v: serde_json::Value = serde_json::from_str(info).expect("info is JSON");
    v["pid"].as_u64().expect("pid in info") as u32
}

fn sandbox_ids(items: &[api::PodSandbox]) -> Vec<&str> {
    items.iter().map(|s| s.id.as_str()).collect()
}

fn container_ids(items: &[api::Container]) -> Vec<&str> {
    items.iter().map(|c| c.id.as_str()).collect()
}

// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_status_and_runtime_config() {
    let Some(rig) = Containerd::start("version_status_and_runtime_config") else {
        return;
    };
    let rt = runtime(&rig).await;
    let v = rt
        .version(kubelet::cri::KUBE_RUNTIME_API_VERSION)
        .await
        .expect("Version");
    assert_eq!(v.runtime_name, "containerd");
    assert_eq!(v.runtime_api_version, "v1");
    assert_eq!(v.version, "0.1.0");
    assert!(!v.runtime_version.is_empty());

    let status = rt.status(true).await.expect("Status");
    let conditions = status.status.expect("status").conditions;
    for kind in ["RuntimeReady", "NetworkReady"] {
        let c = conditions
            .iter()
            .find(|c| c.r#type == kind)
            .unwrap_or_else(|| panic!("{kind} missing in {conditions:?}"));
        assert!(c.status, "{kind} not true: {c:?}");
    }
    assert!(
        !status.info.is_empty(),
        "verbose status carries the runtime config"
    );

    // The node's pod CIDR is pushed down as the Go kubelet does.
    rt.update_runtime_config(&api::RuntimeConfig {
        network_config: Some(api::NetworkConfig {
            pod_cidr: rig.pod_subnet().to_string(),
        }),
    })
    .await
    .expect("UpdateRuntimeConfig");

    // containerd 1.6 predates RuntimeConfig: "not supported", flag wins.
    let err = rt
        .runtime_config()
        .await
        .expect_err("containerd 1.6 lacks RuntimeConfig");
    assert!(err.is_unimplemented(), "{err:?}");
    assert_eq!(
        runtime_cgroup_driver(&rt).await.expect("driver query"),
        None
    );

    // Both services at once, image endpoint defaulting to the runtime's.
    let services = connect_runtime_services(&rig.endpoint(), "", rig.timeout())
        .await
        .expect("connect both");
    assert!(
        !services
            .image
            .image_fs_info()
            .await
            .expect("ImageFsInfo")
            .is_empty()
    );

    // A socket nobody serves: a clear error naming the endpoint.
    let absent = format!("unix://{}/nobody.sock", rig.dir().display());
    let err = RemoteRuntimeService::connect(&absent, Duration::from_secs(2))
        .await
        .expect_err("nothing listens");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains(&absent), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_lifecycle_status_and_filters() {
    let Some(rig) = Containerd::start("sandbox_lifecycle_status_and_filters") else {
        return;
    };
    let rt = runtime(&rig).await;
    let a = pod(&rig, "alpha", "refpack");
    let b = pod(&rig, "beta", "refpack");
    let id_a = rt.run_pod_sandbox(&a.config, "").await.expect("run alpha");
    let id_b = rt.run_pod_sandbox(&b.config, "").await.expect("run beta");

    let st = rt.pod_sandbox_status(&id_a, false).await.expect("status");
    let s = st.status.expect("status present");
    assert_eq!(s.id, id_a);
    assert_eq!(s.state, api::PodSandboxState::SandboxReady as i32);
    let meta = s.metadata.expect("metadata");
    assert_eq!(
        (meta.name.as_str(), meta.namespace.as_str()),
        ("alpha", "refpack")
    );
    assert_eq!(meta.uid, a.uid);
    assert_eq!(s.labels.get("io.kubernetes.pod.uid"), Some(&a.uid));
    assert_eq!(
        s.labels.get("io.kubernetes.pod.name").map(String::as_str),
        Some("alpha")
    );
    assert_eq!(
        s.annotations
            .get("kubernetes.io/config.source")
            .map(String::as_str),
        Some("api")
    );
    let ip = s.network.expect("network").ip;
    let prefix = rig
        .pod_subnet()
        .rsplit_once('.')
        .expect("subnet")
        .0
        .to_string()
        + ".";
    assert!(
        ip.starts_with(&prefix),
        "pod IP {ip} outside {}",
        rig.pod_subnet()
    );
    let ns = s
        .linux
        .and_then(|l| l.namespaces)
        .and_then(|n| n.options)
        .expect("ns options");
    assert_eq!(ns.pid, api::NamespaceMode::Container as i32);
    assert!(st.info.is_empty(), "no verbose info unless asked");
    let verbose = rt
        .pod_sandbox_status(&id_a, true)
        .await
        .expect("verbose status");
    assert!(verbose.info.contains_key("info"));

    // Filters: id, state, label selector.
    let by_id = rt
        .list_pod_sandbox(Some(api::PodSandboxFilter {
            id: id_b.clone(),
            ..Default::default()
        }))
        .await
        .expect("list by id");
    assert_eq!(sandbox_ids(&by_id), vec![id_b.as_str()]);
    let by_label = rt
        .list_pod_sandbox(Some(api::PodSandboxFilter {
            label_selector: HashMap::from([("io.kubernetes.pod.uid".into(), a.uid.clone())]),
            ..Default::default()
        }))
        .await
        .expect("list by label");
    assert_eq!(sandbox_ids(&by_label), vec![id_a.as_str()]);
    let all = rt.list_pod_sandbox(None).await.expect("list all");
    assert_eq!(all.len(), 2);

    rt.stop_pod_sandbox(&id_b).await.expect("stop beta");
    rt.stop_pod_sandbox(&id_b)
        .await
        .expect("stop is idempotent");
    let state = |s: api::PodSandboxState| {
        Some(api::PodSandboxFilter {
            state: Some(api::PodSandboxStateValue { state: s as i32 }),
            ..Default::default()
        })
    };
    let ready = rt
        .list_pod_sandbox(state(api::PodSandboxState::SandboxReady))
        .await
        .expect("ready");
    assert_eq!(sandbox_ids(&ready), vec![id_a.as_str()]);
    let not_ready = rt
        .list_pod_sandbox(state(api::PodSandboxState::SandboxNotready))
        .await
        .expect("not ready");
    assert_eq!(sandbox_ids(&not_ready), vec![id_b.as_str()]);

    rt.remove_pod_sandbox(&id_b).await.expect("remove beta");
    let err = rt.pod_sandbox_status(&id_b, false).await.expect_err("gone");
    assert!(err.is_not_found(), "{err:?}");
    assert!(err.to_string().contains("PodSandboxStatus"), "{err}");
    let err = rt
        .pod_sandbox_status("no-such-sandbox", false)
        .await
        .expect_err("unknown");
    assert!(err.is_not_found(), "{err:?}");

    rt.stop_pod_sandbox(&id_a).await.expect("stop alpha");
    rt.remove_pod_sandbox(&id_a).await.expect("remove alpha");
    assert!(rt.list_pod_sandbox(None).await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_lifecycle_status_and_filters() {
    let Some(rig) = Containerd::start("container_lifecycle_status_and_filters") else {
        return;
    };
    let rt = runtime(&rig).await;
    let p = pod(&rig, "lifecycle", "refpack");
    let sandbox = rt.run_pod_sandbox(&p.config, "").await.expect("sandbox");
    let cfg = container(&p, "main", &images().busybox_e2e, &["sleep", "3600"]);
    let id = rt
        .create_container(&sandbox, &cfg, &p.config)
        .await
        .expect("create");
    let side_cfg = container(&p, "side", &images().busybox, &["sleep", "3600"]);
    let side = rt
        .create_container(&sandbox, &side_cfg, &p.config)
        .await
        .expect("create side");

    let created = rt
        .container_status(&id, false)
        .await
        .expect("status")
        .status
        .expect("status");
    assert_eq!(created.state, api::ContainerState::ContainerCreated as i32);
    assert_eq!(
        created.metadata.as_ref().map(|m| m.name.as_str()),
        Some("main")
    );
    assert_eq!(
        created.image.as_ref().map(|i| i.image.as_str()),
        Some(images().busybox_e2e.as_str())
    );
    assert!(
        created.image_ref.starts_with("sha256:"),
        "{}",
        created.image_ref
    );
    assert_eq!(
        created
            .labels
            .get("io.kubernetes.container.name")
            .map(String::as_str),
        Some("main")
    );
    assert_eq!(
        created
            .annotations
            .get("io.kubernetes.container.hash")
            .map(String::as_str),
        Some("9f9eb022")
    );
    assert!(
        created.log_path.ends_with("main/0.log"),
        "{}",
        created.log_path
    );

    rt.start_container(&id).await.expect("start");
    let running = rt
        .container_status(&id, false)
        .await
        .expect("status")
        .status
        .expect("status");
    assert_eq!(running.state, api::ContainerState::ContainerRunning as i32);
    assert!(running.started_at > 0);

    let state = |s: api::ContainerState| {
        Some(api::ContainerFilter {
            state: Some(api::ContainerStateValue { state: s as i32 }),
            ..Default::default()
        })
    };
    let list = rt
        .list_containers(state(api::ContainerState::ContainerRunning))
        .await
        .expect("running");
    assert_eq!(container_ids(&list), vec![id.as_str()]);
    let list = rt
        .list_containers(state(api::ContainerState::ContainerCreated))
        .await
        .expect("created");
    assert_eq!(container_ids(&list), vec![side.as_str()]);
    let list = rt
        .list_containers(Some(api::ContainerFilter {
            id: side.clone(),
            ..Default::default()
        }))
        .await
        .expect("by id");
    assert_eq!(container_ids(&list), vec![side.as_str()]);
    let list = rt
        .list_containers(Some(api::ContainerFilter {
            label_selector: HashMap::from([("io.kubernetes.container.name".into(), "main".into())]),
            ..Default::default()
        }))
        .await
        .expect("by label");
    assert_eq!(container_ids(&list), vec![id.as_str()]);
    let list = rt
        .list_containers(Some(api::ContainerFilter {
            pod_sandbox_id: sandbox.clone(),
            ..Default::default()
        }))
        .await
        .expect("by sandbox");
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|c| c.pod_sandbox_id == sandbox));

    // sleep as PID 1 ignores SIGTERM: after the 1 s grace it is killed.
    rt.stop_container(&id, 1).await.expect("stop");
    let exited = rt
        .container_status(&id, false)
        .await
        .expect("status")
        .status
        .expect("status");
    assert_eq!(exited.state, api::ContainerState::ContainerExited as i32);
    assert_eq!(exited.exit_code, 137, "{exited:?}");
    assert!(exited.finished_at >= exited.started_at);

    rt.remove_container(&id).await.expect("remove");
    rt.remove_container(&side).await.expect("remove created");
    let err = rt.container_status(&id, false).await.expect_err("removed");
    assert!(err.is_not_found(), "{err:?}");
    let err = rt
        .start_container("no-such-container")
        .await
        .expect_err("unknown");
    assert!(err.is_not_found(), "{err:?}");

    rt.stop_pod_sandbox(&sandbox).await.expect("stop sandbox");
    rt.remove_pod_sandbox(&sandbox)
        .await
        .expect("remove sandbox");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_sync_output_exit_code_and_timeout() {
    let Some(rig) = Containerd::start("exec_sync_output_exit_code_and_timeout") else {
        return;
    };
    let rt = runtime(&rig).await;
    let p = pod(&rig, "exec", "refpack");
    let (sandbox, id) = running_container(&rt, &p, "main", &["sleep", "3600"]).await;

    let out = rt
        .exec_sync(
            &id,
            &strings(&["sh", "-c", "echo out; echo err >&2"]),
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");

    let out = rt
        .exec_sync(&id, &strings(&["cat", "/etc/hostname"]), Duration::ZERO)
        .await
        .expect("exec without timeout");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "exec");

    let err = rt
        .exec_sync(
            &id,
            &strings(&["sh", "-c", "echo partial; echo broken >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .await
        .expect_err("non-zero exit");
    match &err {
        CriError::ExitCode {
            code,
            stdout,
            stderr,
            ..
        } => {
            assert_eq!(*code, 3);
            assert_eq!(stdout, b"partial\n");
            assert_eq!(stderr, b"broken\n");
        }
        other => panic!("want ExitCode, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "command 'sh -c echo partial; echo broken >&2; exit 3' exited with 3: broken\n"
    );

    let started = std::time::Instant::now();
    let err = rt
        .exec_sync(&id, &strings(&["sleep", "30"]), Duration::from_secs(1))
        .await
        .expect_err("times out");
    assert!(matches!(err, CriError::ExecTimeout { .. }), "{err:?}");
    assert!(err.is_deadline_exceeded());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );

    // Streaming calls only hand out a URL of the runtime's streaming server.
    let exec = rt
        .exec(&api::ExecRequest {
            container_id: id.clone(),
            cmd: strings(&["sh"]),
            stdin: true,
            stdout: true,
            ..Default::default()
        })
        .await
        .expect("Exec");
    assert!(exec.url.starts_with("http://127.0.0.1:"), "{}", exec.url);
    let attach = rt
        .attach(&api::AttachRequest {
            container_id: id.clone(),
            stdout: true,
            stderr: true,
            ..Default::default()
        })
        .await
        .expect("Attach");
    assert!(
        attach.url.starts_with("http://127.0.0.1:"),
        "{}",
        attach.url
    );
    let forward = rt
        .port_forward(&api::PortForwardRequest {
            pod_sandbox_id: sandbox.clone(),
            port: vec![80],
        })
        .await
        .expect("PortForward");
    assert!(
        forward.url.starts_with("http://127.0.0.1:"),
        "{}",
        forward.url
    );

    let err = rt
        .exec_sync(
            "no-such-container",
            &strings(&["true"]),
            Duration::from_secs(5),
        )
        .await
        .expect_err("unknown container");
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_container_resources_changes_the_cgroup() {
    let Some(rig) = Containerd::start("update_container_resources_changes_the_cgroup") else {
        return;
    };
    let rt = runtime(&rig).await;
    let p = pod(&rig, "resize", "refpack");
    let (_sandbox, id) = running_container(&rt, &p, "main", &["sleep", "3600"]).await;
    let pid = container_pid(&rt, &id).await;

    let mem_file =
        support::cgroup_file_of_pid(pid, "memory", "memory.limit_in_bytes", "memory.max")
            .expect("memory cgroup of the container");
    let cpu_file = support::cgroup_file_of_pid(pid, "cpu", "cpu.cfs_quota_us", "cpu.max")
        .expect("cpu cgroup of the container");
    assert!(
        mem_file.starts_with("/sys/fs/cgroup")
            && mem_file.to_string_lossy().contains(rig.cgroup_root()),
        "container cgroup {mem_file:?} not under the rig root {}",
        rig.cgroup_root()
    );
    let read =
        |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    assert_eq!(read(&mem_file).trim(), (64 * MI).to_string());

    let resources = api::ContainerResources {
        linux: Some(api::LinuxContainerResources {
            cpu_period: 100_000,
            cpu_quota: 50_000,
            cpu_shares: 512,
            memory_limit_in_bytes: 128 * MI,
            ..Default::default()
        }),
        windows: None,
    };
    rt.update_container_resources(&id, &resources)
        .await
        .expect("update");
    assert_eq!(read(&mem_file).trim(), (128 * MI).to_string());
    let cpu = read(&cpu_file);
    assert!(
        cpu.trim() == "50000" || cpu.trim() == "50000 100000",
        "cpu quota after update: {cpu:?}"
    );

    let err = rt
        .update_container_resources("no-such-container", &resources)
        .await
        .expect_err("unknown");
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_container_log_after_rotation() {
    let Some(rig) = Containerd::start("reopen_container_log_after_rotation") else {
        return;
    };
    let rt = runtime(&rig).await;
    let p = pod(&rig, "logs", "refpack");
    let (_sandbox, id) = running_container(
        &rt,
        &p,
        "talker",
        &[
            "sh",
            "-c",
            "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.1; done",
        ],
    )
    .await;
    let log = std::path::Path::new(&p.config.log_directory).join("talker/0.log");
    let grew = support::eventually(Duration::from_secs(10), || async {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.contains("line 3"))
            .map(|_| ())
    })
    .await;
    assert!(grew.is_some(), "log {log:?} never got output");
    // CRI log format: "<RFC3339Nano> stdout F line N".
    let first = std::fs::read_to_string(&log).expect("log");
    assert!(
        first
            .lines()
            .next()
            .is_some_and(|l| l.contains(" stdout F line 1")),
        "{first}"
    );

    let rotated = log.with_extension("log.1");
    std::fs::rename(&log, &rotated).expect("rotate");
    rt.reopen_container_log(&id)
        .await
        .expect("ReopenContainerLog");
    let fresh = support::eventually(Duration::from_secs(10), || async {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.contains(" stdout F line "))
            .map(|_| ())
    })
    .await;
    assert!(fresh.is_some(), "no new log file after reopen");

    rt.stop_container(&id, 0).await.expect("stop");
    let err = rt.reopen_container_log(&id).await.expect_err("not running");
    assert!(
        err.code().is_some(),
        "a runtime error for a stopped container: {err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_and_sandbox_stats() {
    let Some(rig) = Containerd::start("container_and_sandbox_stats") else {
        return;
    };
    let rt = runtime(&rig).await;
    let p = pod(&rig, "stats", "refpack");
    let (sandbox, id) = running_container(&rt, &p, "main", &["sleep", "3600"]).await;

    let stats = rt
        .container_stats(&id)
        .await
        .expect("ContainerStats")
        .expect("stats present");
    let attrs = stats.attributes.expect("attributes");
    assert_eq!(attrs.id, id);
    assert_eq!(attrs.metadata.map(|m| m.name).as_deref(), Some("main"));
    let mem = stats.memory.expect("memory stats");
    assert!(
        mem.working_set_bytes.map(|v| v.value).unwrap_or(0) > 0,
        "{mem:?}"
    );
    assert!(stats.cpu.is_some());
    assert!(stats.writable_layer.is_some());

    let list = rt
        .list_container_stats(Some(api::ContainerStatsFilter {
            pod_sandbox_id: sandbox.clone(),
            ..Default::default()
        }))
        .await
        .expect("ListContainerStats");
    assert_eq!(list.len(), 1);
    assert_eq!(
        list[0].attributes.as_ref().map(|a| a.id.as_str()),
        Some(id.as_str())
    );
    let none = rt
        .list_container_stats(Some(api::ContainerStatsFilter {
            id: "no-such-container".into(),
            ..Default::default()
        }))
        .await
        .expect("filter that matches nothing");
    assert!(none.is_empty());

    let err = rt
        .container_stats("no-such-container")
        .await
        .expect_err("unknown");
    assert!(err.is_not_found(), "{err:?}");

    // containerd 1.6 serves sandbox stats on Linux.
    let s = rt
        .pod_sandbox_stats(&sandbox)
        .await
        .expect("PodSandboxStats")
        .expect("sandbox stats present");
    assert_eq!(s.attributes.map(|a| a.id), Some(sandbox.clone()));
    let linux = s.linux.expect("linux sandbox stats");
    assert!(linux.memory.is_some() && linux.cpu.is_some());
    let all = rt
        .list_pod_sandbox_stats(None)
        .await
        .expect("ListPodSandboxStats");
    assert_eq!(all.len(), 1);
    let err = rt
        .pod_sandbox_stats("no-such-sandbox")
        .await
        .expect_err("unknown");
    assert!(err.is_not_found(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_list_status_remove_fsinfo_and_failed_pull() {
    let Some(rig) = Containerd::start("images_list_status_remove_fsinfo_and_failed_pull") else {
        return;
    };
    let img = image_service(&rig).await;
    let spec = |name: &str| api::ImageSpec {
        image: name.to_string(),
        ..Default::default()
    };

    let all = img.list_images(None).await.expect("ListImages");
    let tags: Vec<&str> = all
        .iter()
        .flat_map(|i| i.repo_tags.iter().map(String::as_str))
        .collect();
    for want in [
        &images().pause,
        &images().busybox,
        &images().busybox_e2e,
        &images().httpd_e2e,
        &images().throwaway,
    ] {
        assert!(tags.contains(&want.as_str()), "{want} not in {tags:?}");
    }
    let filtered = img
        .list_images(Some(api::ImageFilter {
            image: Some(spec(&images().httpd_e2e)),
        }))
        .await
        .expect("ListImages filtered");
    // containerd 1.6 ignores the filter; the request must still be accepted.
    assert!(
        filtered
            .iter()
            .any(|i| i.repo_tags.contains(&images().httpd_e2e)),
        "{filtered:?}"
    );

    let bb = img
        .image_status(&spec(&images().busybox), false)
        .await
        .expect("status");
    let bb = bb.image.expect("busybox present");
    assert!(bb.id.starts_with("sha256:"));
    assert!(bb.size > 1_000_000, "busybox is about 2 MB: {}", bb.size);
    assert!(
        bb.repo_tags.contains(&images().busybox_e2e),
        "one image, two names: {:?}",
        bb.repo_tags
    );
    let verbose = img
        .image_status(&spec(&images().pause), true)
        .await
        .expect("verbose");
    assert!(verbose.image.is_some());
    assert!(verbose.info.contains_key("info"));

    let absent = img
        .image_status(&spec(&images().absent), false)
        .await
        .expect("absent status");
    assert!(
        absent.image.is_none(),
        "absent images have no status, not an error"
    );

    img.remove_image(&spec(&images().throwaway))
        .await
        .expect("RemoveImage");
    let gone = img
        .image_status(&spec(&images().throwaway), false)
        .await
        .expect("status");
    assert!(gone.image.is_none());
    img.remove_image(&spec(&images().throwaway))
        .await
        .expect("removing twice is fine");
    assert!(
        img.image_status(&spec(&images().busybox), false)
            .await
            .expect("status")
            .image
            .is_some()
    );

    let fs = img.image_fs_info().await.expect("ImageFsInfo");
    assert!(!fs.is_empty());
    let mount = fs[0]
        .fs_id
        .as_ref()
        .map(|f| f.mountpoint.clone())
        .unwrap_or_default();
    assert!(
        mount.starts_with(&rig.dir().display().to_string()),
        "image fs {mount} outside the rig"
    );
    // Usage itself is sampled by containerd every few seconds (0 at first).
    assert!(
        fs[0].used_bytes.is_some() && fs[0].inodes_used.is_some(),
        "{fs:?}"
    );

    // No registry is reachable: a typed pull error, reason ErrImagePull.
    let instrumented = InstrumentedImageService::new(Arc::new(img.clone()));
    let errors_before = kubelet::metrics::kubelet::runtime_operations_errors().get(&["pull_image"]);
    let started = std::time::Instant::now();
    let err = instrumented
        .pull_image(&spec(&images().absent), None, None)
        .await
        .expect_err("pull of an absent image");
    assert!(matches!(err, CriError::ImagePull { .. }), "{err:?}");
    assert_eq!(err.reason(), Some(kubelet::cri::ERR_IMAGE_PULL));
    assert!(err.to_string().contains(&images().absent), "{err}");
    assert!(
        err.status_message().starts_with("rpc error: code = "),
        "{}",
        err.status_message()
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "pull took {:?}",
        started.elapsed()
    );
    assert_eq!(
        kubelet::metrics::kubelet::runtime_operations_errors().get(&["pull_image"]) - errors_before,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instrumented_runtime_records_metrics() {
    let Some(rig) = Containerd::start("instrumented_runtime_records_metrics") else {
        return;
    };
    use kubelet::metrics::kubelet as m;
    let rt = InstrumentedRuntimeService::new(Arc::new(runtime(&rig).await));
    let before = (
        m::runtime_operations().get(&["container_status"]),
        m::runtime_operations_errors().get(&["container_status"]),
        m::runtime_operations().get(&["version"]),
        m::runtime_operations_errors().get(&["version"]),
    );
    rt.version("0.1.0").await.expect("version");
    rt.version("0.1.0").await.expect("version");
    let err = rt
        .container_status("no-such-container", false)
        .await
        .expect_err("unknown");
    assert!(err.is_not_found());
    assert_eq!(m::runtime_operations().get(&["version"]) - before.2, 2.0);
    assert_eq!(
        m::runtime_operations_errors().get(&["version"]) - before.3,
        0.0
    );
    assert_eq!(
        m::runtime_operations().get(&["container_status"]) - before.0,
        1.0
    );
    assert_eq!(
        m::runtime_operations_errors().get(&["container_status"]) - before.1,
        1.0
    );

    let text = kubelet::metrics::render_text();
    assert!(
        text.contains("kubelet_runtime_operations_total{operation_type=\"version\"}"),
        "{text}"
    );
    assert!(
        text.contains(
            "kubelet_runtime_operations_errors_total{operation_type=\"container_status\"}"
        )
    );
    assert!(
        text.contains(
            "kubelet_runtime_operations_duration_seconds_count{operation_type=\"version\"}"
        )
    );
    assert!(text.contains("# TYPE kubelet_runtime_operations_duration_seconds histogram"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_recovers_after_runtime_restart() {
    let Some(rig) = Containerd::start("client_recovers_after_runtime_restart") else {
        return;
    };
    let rt = runtime(&rig).await;
    let img = image_service(&rig).await;
    let p = pod(&rig, "survivor", "refpack");
    let (sandbox, id) = running_container(&rt, &p, "main", &["sleep", "3600"]).await;

    rig.kill();
    let err = rt.version("0.1.0").await.expect_err("runtime is down");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains(&rig.endpoint()), "{err}");
    let err = img
        .list_images(None)
        .await
        .expect_err("image service is down");
    assert!(err.is_unavailable(), "{err:?}");

    rig.restart();
    let back = support::eventually(Duration::from_secs(30), || async {
        rt.version("0.1.0").await.ok()
    })
    .await;
    assert!(
        back.is_some(),
        "the same client never reconnected\n{}",
        rig.log()
    );
    assert!(
        !img.list_images(None)
            .await
            .expect("image service back")
            .is_empty()
    );

    // The shim outlived containerd: the container still runs.
    let status = rt
        .container_status(&id, false)
        .await
        .expect("status")
        .status
        .expect("status");
    assert_eq!(status.state, api::ContainerState::ContainerRunning as i32);
    let sandboxes = rt.list_pod_sandbox(None).await.expect("list");
    assert_eq!(sandbox_ids(&sandboxes), vec![sandbox.as_str()]);
    let out = rt
        .exec_sync(
            &id,
            &strings(&["echo", "still here"]),
            Duration::from_secs(10),
        )
        .await
        .expect("exec after restart");
    assert_eq!(out.stdout, b"still here\n");
}
