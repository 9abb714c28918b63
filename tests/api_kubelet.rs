//! The whole kubelet in API-server mode (issue 6 acceptance), through the
//! real start path (`app::run::run_with`, as the binary runs it) over a
//! private containerd, against the API server double (or the real
//! kube-apiserver KUBELET_RS_TEST_KUBECONFIG names; the outage step needs
//! the double):
//!
//! - TLS bootstrap from a bootstrap-token kubeconfig: CSR, approval,
//!   certificate and kubeconfig on disk, then registration with it;
//! - the Node as the Go kubelet registers it, and the Lease renewed;
//! - pods bound to the node run and their status goes through the phases
//!   (Succeeded, Failed), with container statuses and the pod IP;
//! - a graceful DELETE stops the pod and the kubelet's final delete removes
//!   it; a static pod gets a mirror pod, removed with its manifest;
//! - events with the Go reasons;
//! - the API server away for a minute: pods keep running, the kubelet
//!   survives, status, node and lease catch up.

#[path = "e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
mod support;

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::path::Path;
use std::time::{Duration, Instant};

use harness::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use support::apiserver::TestApi;
use support::containerd::{Containerd, images};

const WAIT: Duration = Duration::from_secs(60);

/// This machine's outbound IPv4 address (what `--node-ip` names).
fn host_ip() -> String {
    let s = UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    s.connect("10.255.255.255:9").expect("udp connect");
    s.local_addr().expect("local addr").ip().to_string()
}

fn reference_node() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/go-kubelet-examples/node-gonode.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("fixture")).expect("fixture json")
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn pod(ns: &str, name: &str, node: &str, script: &str, restart: &str, grace: i64) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": grace,
            "containers": [{
                "name": "c",
                "image": images().busybox,
                "command": ["sh", "-c", script],
            }],
        },
    }))
    .expect("pod")
}

fn phase_of(p: &Pod) -> String {
    phase(p).to_string()
}

async fn events_for(api: &TestApi, ns: &str, kind: &str, name: &str) -> BTreeSet<String> {
    api.list::<Event>(Some(ns))
        .await
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
        })
        .filter_map(|e| e.reason)
        .collect()
}

async fn wait_events(api: &TestApi, ns: &str, kind: &str, name: &str, want: &[&str]) {
    let got = support::eventually(WAIT, || async {
        let have = events_for(api, ns, kind, name).await;
        want.iter().all(|w| have.contains(*w)).then_some(have)
    })
    .await;
    assert!(
        got.is_some(),
        "{kind} {ns}/{name}: events {want:?}; have {:?}",
        events_for(api, ns, kind, name).await
    );
}

fn lease_renew(l: &Lease) -> Option<String> {
    l.spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string())
}

fn ready_heartbeat(n: &Node) -> Option<(String, String)> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| {
            (
                c.status.clone(),
                c.last_heartbeat_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
            )
        })
}

/// The phases a pod goes through, polled from the API server, with its
/// first Running and its final status.
async fn watch_phases(
    api: &TestApi,
    ns: &str,
    name: &str,
    until: &str,
) -> (Vec<String>, Option<Pod>, Pod) {
    let start = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    let mut running = None;
    loop {
        if let Some(p) = api.get::<Pod>(Some(ns), name).await {
            let ph = phase_of(&p);
            if !ph.is_empty() && seen.last() != Some(&ph) {
                seen.push(ph.clone());
                if ph == "Running" {
                    running = Some(p.clone());
                }
            }
            if ph == until {
                return (seen, running, p);
            }
        }
        assert!(
            start.elapsed() < WAIT,
            "{ns}/{name}: phases {seen:?}, never {until}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn terminated_exit(p: &Pod) -> Option<(i32, String)> {
    let t = container(p, "c")?.state.as_ref()?.terminated.as_ref()?;
    Some((t.exit_code, t.reason.clone().unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_mode_end_to_end() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Dropped last: after the rig has removed the pods' containers.
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("api_kubelet_e2e") else {
        return;
    };
    let api = std::sync::Arc::new(TestApi::start().await);
    let ns = api.create_namespace("apik").await;
    let node = api.unique_name("apinode");
    let ip = host_ip();
    let root = make_cgroup_root(&rig, "apimode");
    let p = Ports {
        main: 22250,
        read_only: 22251,
        healthz: 22252,
    };
    let cfg = config(
        &dirs,
        &root,
        p,
        "nodeLeaseDurationSeconds: 4\nnodeStatusUpdateFrequency: 2s\nnodeStatusReportFrequency: 5s\n",
    );
    dirs.write_manifest(
        "web.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: {}\n    command: [sleep, '3600']\n",
            images().busybox
        ),
    );

    // 5. Bootstrap: no kubeconfig yet, a bootstrap-token one.
    let bootstrap = api
        .bootstrap_kubeconfig(&dirs.path("bootstrap-kubelet.conf"))
        .await;
    let kubeconfig = dirs.path("kubelet.conf");
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push(format!("--bootstrap-kubeconfig={}", bootstrap.display()));
    argv.push(format!("--node-ip={ip}"));
    let approver = tokio::spawn({
        let api = api.clone();
        async move { api.approve_bootstrap_csrs().await }
    });
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));

    // 1. The Node, as the Go kubelet registers it.
    let n = api
        .wait_for::<Node>(None, &node, WAIT, |n| {
            ready_heartbeat(n).is_some_and(|(s, _)| s == "True")
        })
        .await;
    approver.abort();
    assert!(kubeconfig.exists(), "kubeconfig written after bootstrap");
    assert!(
        dirs.path("pki/kubelet-client-current.pem").exists(),
        "client certificate in the cert dir"
    );
    let reference = reference_node();
    let got = serde_json::to_value(&n).expect("node json");
    let labels = &got["metadata"]["labels"];
    for (k, v) in reference["metadata"]["labels"].as_object().expect("labels") {
        let want = if k == "kubernetes.io/hostname" {
            json!(node)
        } else {
            v.clone()
        };
        assert_eq!(labels[k], want, "label {k}");
    }
    assert_eq!(
        got["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
        json!("true")
    );
    assert_eq!(
        keys(&got["status"]["nodeInfo"]),
        keys(&reference["status"]["nodeInfo"])
    );
    for k in [
        "machineID",
        "bootID",
        "kernelVersion",
        "osImage",
        "kubeletVersion",
    ] {
        assert!(
            got["status"]["nodeInfo"][k]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "nodeInfo.{k}"
        );
    }
    assert!(
        got["status"]["nodeInfo"]["containerRuntimeVersion"]
            .as_str()
            .is_some_and(|s| s.starts_with("containerd://"))
    );
    for k in ["cpu", "memory", "pods", "ephemeral-storage"] {
        assert!(got["status"]["capacity"][k].is_string(), "capacity {k}");
        assert!(
            got["status"]["allocatable"][k].is_string(),
            "allocatable {k}"
        );
    }
    assert_eq!(got["status"]["capacity"]["pods"], json!("110"));
    assert_eq!(
        got["status"]["addresses"],
        json!([{"address": ip, "type": "InternalIP"}, {"address": node, "type": "Hostname"}])
    );
    let conds: Vec<(String, String)> = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.reason.unwrap_or_default()))
        .collect();
    let want: Vec<(String, String)> = reference["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(conds, want);
    assert_eq!(
        got["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        json!(p.main)
    );

    // The lease, owned by the Node, renewed every second.
    let lease = api
        .wait_for::<Lease>(Some("kube-node-lease"), &node, WAIT, |l| {
            lease_renew(l).is_some()
        })
        .await;
    let owner = &lease.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", node.as_str())
    );
    let first = lease_renew(&lease);
    api.wait_for::<Lease>(
        Some("kube-node-lease"),
        &node,
        Duration::from_secs(10),
        |l| lease_renew(l) != first,
    )
    .await;

    // 4. The static pod's mirror pod.
    let mirror_name = format!("web-{node}");
    let mirror = api
        .wait_for::<Pod>(Some(&ns), &mirror_name, WAIT, |p| phase(p) == "Running")
        .await;
    let ann = mirror.metadata.annotations.clone().unwrap_or_default();
    assert!(ann.contains_key("kubernetes.io/config.mirror"), "{ann:?}");
    let owners = mirror.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("Node", node.as_str())
    );
    assert_eq!(owners[0].uid, n.metadata.uid.clone().unwrap_or_default());

    // 2. Pods bound to the node: Succeeded and Failed.
    api.put(&pod(&ns, "ok", &node, "sleep 4; exit 0", "Never", 30))
        .await;
    api.put(&pod(&ns, "bad", &node, "sleep 2; exit 3", "Never", 30))
        .await;
    // A pod that fills its emptyDir past the sizeLimit: the eviction
    // manager's local storage check fails it (looked at further down).
    let mut hog = serde_json::to_value(pod(
        &ns,
        "hog",
        &node,
        "dd if=/dev/zero of=/cache/fill bs=1024 count=2048; sleep 3600",
        "Always",
        1,
    ))
    .expect("json");
    hog["spec"]["volumes"] = json!([{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}]);
    hog["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "cache", "mountPath": "/cache"}]);
    api.put(&serde_json::from_value::<Pod>(hog).expect("pod"))
        .await;
    let (seen, running, ok) = watch_phases(&api, &ns, "ok", "Succeeded").await;
    assert!(seen.contains(&"Running".to_string()), "ok phases {seen:?}");
    assert_eq!(
        seen.first().map(String::as_str),
        Some("Pending"),
        "ok phases {seen:?}"
    );
    assert_eq!(terminated_exit(&ok), Some((0, "Completed".into())));
    let running = running.expect("seen Running");
    assert!(is_running(&running, "c"), "{:?}", running.status);
    let st = running.status.clone().unwrap_or_default();
    assert!(
        st.pod_ip.as_deref().is_some_and(|s| !s.is_empty()),
        "{st:?}"
    );
    assert_eq!(st.host_ip.as_deref(), Some(ip.as_str()));
    assert_eq!(st.qos_class.as_deref(), Some("BestEffort"));
    let (_, _, bad) = watch_phases(&api, &ns, "bad", "Failed").await;
    assert_eq!(terminated_exit(&bad), Some((3, "Error".into())));

    // Admission: a rejected pod fails with Go's reason and never runs.
    for (name, extra, reason) in [
        (
            "picky",
            json!({"nodeSelector": {"disk": "ssd"}}),
            "NodeAffinity",
        ),
        (
            "huge",
            json!({"containers": [{"name": "c", "image": images().busybox, "command": ["sleep", "1"],
                "resources": {"requests": {"cpu": "1000"}}}]}),
            "OutOfcpu",
        ),
    ] {
        let mut v = serde_json::to_value(pod(&ns, name, &node, "true", "Never", 1)).expect("json");
        for (k, x) in extra.as_object().expect("object") {
            v["spec"][k] = x.clone();
        }
        api.put(&serde_json::from_value::<Pod>(v).expect("pod"))
            .await;
        let got = api
            .wait_for::<Pod>(Some(&ns), name, WAIT, |p| phase(p) == "Failed")
            .await;
        let st = got.status.clone().unwrap_or_default();
        assert_eq!(st.reason.as_deref(), Some(reason), "{name}: {st:?}");
        assert!(
            st.container_statuses.unwrap_or_default().is_empty(),
            "{name}"
        );
    }

    // Eviction: the emptyDir past its limit fails the pod with Go's reason
    // and message, and an Evicted event.
    let hog = api
        .wait_for::<Pod>(Some(&ns), "hog", Duration::from_secs(90), |p| {
            phase(p) == "Failed"
        })
        .await;
    let st = hog.status.clone().unwrap_or_default();
    assert_eq!(st.reason.as_deref(), Some("Evicted"), "{st:?}");
    assert!(
        st.message.as_deref().is_some_and(
            |m| m.starts_with("Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\".")
        ),
        "{st:?}"
    );
    wait_events(&api, &ns, "Pod", "hog", &["Evicted"]).await;

    // ConfigMap env and volume, service variables, and a projected service
    // account token.
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "cm1", "namespace": ns}, "data": {"k": "bar"}}),
    )
    .expect("configmap");
    api.put(&cm).await;
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "runner", "namespace": ns}}))
            .expect("service account");
    api.put(&sa).await;
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "svc1", "namespace": ns},
        "spec": {"clusterIP": "10.96.0.20", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }))
    .expect("service");
    api.put(&svc).await;
    let cfg_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "cfg", "namespace": ns},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "serviceAccountName": "runner",
            "enableServiceLinks": true,
            "containers": [{
                "name": "c",
                "image": images().busybox,
                "command": ["sh", "-c",
                    "test \"$FOO\" = bar && test -s /tok/token && test \"$(cat /cm/k)\" = bar && test \"$SVC1_SERVICE_HOST\" = 10.96.0.20"],
                "env": [{"name": "FOO", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "k"}}}],
                "volumeMounts": [{"name": "tok", "mountPath": "/tok"}, {"name": "cm", "mountPath": "/cm"}],
            }],
            "volumes": [
                {"name": "tok", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}},
                {"name": "cm", "configMap": {"name": "cm1"}},
            ],
        },
    }))
    .expect("pod");
    api.put(&cfg_pod).await;
    let (_, _, cfg_done) = watch_phases(&api, &ns, "cfg", "Succeeded").await;
    assert_eq!(terminated_exit(&cfg_done), Some((0, "Completed".into())));

    // 3. Graceful deletion: containers stop, then the final delete.
    api.put(&pod(
        &ns,
        "long",
        &node,
        "trap 'exit 0' TERM; sleep 3600 & wait",
        "Always",
        20,
    ))
    .await;
    let long = api
        .wait_for::<Pod>(Some(&ns), "long", WAIT, |p| is_running(p, "c"))
        .await;
    let long_uid = uid(&long);
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await, &ns);
    let t0 = Instant::now();
    pods.delete("long", &DeleteParams::default().grace_period(20))
        .await
        .expect("graceful delete");
    let cri_rt = cri(&rig).await;
    support::eventually(WAIT, || async {
        api.get::<Pod>(Some(&ns), "long")
            .await
            .is_none()
            .then_some(())
    })
    .await
    .expect("the kubelet deletes the pod for good");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the container stopped on SIGTERM, not at the end of the grace period"
    );
    let left: Vec<_> = cri_containers(&cri_rt, &long_uid)
        .await
        .into_iter()
        .filter(|c| c.state == kubelet::cri::api::ContainerState::ContainerRunning as i32)
        .collect();
    assert!(left.is_empty(), "running containers after delete: {left:?}");

    // 6. Events.
    wait_events(&api, "default", "Node", &node, &["Starting"]).await;
    wait_events(&api, &ns, "Pod", "ok", &["Pulled", "Created", "Started"]).await;
    wait_events(&api, &ns, "Pod", "long", &["Killing"]).await;
    assert!(
        !events_for(&api, &ns, "Pod", "ok")
            .await
            .contains("Scheduled"),
        "Scheduled is the scheduler's"
    );

    // 4. Removing the manifest deletes the mirror pod.
    dirs.remove_manifest("web.yaml");
    support::eventually(WAIT, || async {
        api.get::<Pod>(Some(&ns), &mirror_name)
            .await
            .is_none()
            .then_some(())
    })
    .await
    .expect("mirror pod deleted with its manifest");

    // 7. The API server away for a minute.
    if api.double().is_ok() {
        api.put(&pod(&ns, "steady", &node, "sleep 3600", "Always", 1))
            .await;
        let steady = api
            .wait_for::<Pod>(Some(&ns), "steady", WAIT, |p| is_running(p, "c"))
            .await;
        api.put(&pod(&ns, "during", &node, "sleep 15; exit 0", "Never", 1))
            .await;
        api.wait_for::<Pod>(Some(&ns), "during", WAIT, |p| is_running(p, "c"))
            .await;
        let before_lease = lease_renew(
            &api.get::<Lease>(Some("kube-node-lease"), &node)
                .await
                .expect("lease"),
        );
        let before_hb = ready_heartbeat(&api.get::<Node>(None, &node).await.expect("node"));
        api.stop().await.expect("stop the double");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!kubelet.handle.is_finished(), "the kubelet survives");
        let running: Vec<_> = cri_containers(&cri_rt, &uid(&steady))
            .await
            .into_iter()
            .filter(|c| c.state == kubelet::cri::api::ContainerState::ContainerRunning as i32)
            .collect();
        assert_eq!(running.len(), 1, "the pod keeps running");
        api.restart().await.expect("restart the double");
        api.wait_for::<Pod>(Some(&ns), "during", WAIT, |p| phase(p) == "Succeeded")
            .await;
        api.wait_for::<Lease>(Some("kube-node-lease"), &node, WAIT, |l| {
            lease_renew(l) != before_lease
        })
        .await;
        api.wait_for::<Node>(None, &node, WAIT, |n| {
            ready_heartbeat(n).is_some_and(|h| Some(&h) != before_hb.as_ref() && h.0 == "True")
        })
        .await;
        let steady_now = api.get::<Pod>(Some(&ns), "steady").await.expect("steady");
        assert!(is_running(&steady_now, "c"));
        assert_eq!(
            container(&steady_now, "c").map(|c| c.restart_count),
            Some(0)
        );
        // Shutdown never waits for an absent API server.
        api.stop().await.expect("stop the double again");
    }

    let t0 = Instant::now();
    kubelet.stop().await.expect("run() ends cleanly");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    api.cleanup().await;
}

/// The kubelet process, killed if the test ends early.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The binary with `--kubeconfig`: it registers the Node and mirrors its
/// static pod; with the API server gone, SIGTERM still ends it with status
/// 0 within 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_in_api_mode_registers_and_stops_without_the_api_server() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("api_kubelet_binary") else {
        return;
    };
    let _sysctls = SysctlGuard::save();
    let api = TestApi::start().await;
    let ns = api.create_namespace("apib").await;
    let node = api.unique_name("binnode");
    let root = make_cgroup_root(&rig, "apibinary");
    let cfg = config(
        &dirs,
        &root,
        Ports {
            main: 22260,
            read_only: 22261,
            healthz: 22262,
        },
        "nodeLeaseDurationSeconds: 4\n",
    );
    dirs.write_manifest(
        "static.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: st\n  namespace: {ns}\nspec:\n  containers:\n  - name: c\n    image: {}\n    command: [sleep, '3600']\n",
            images().busybox
        ),
    );
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push(format!("--node-ip={}", host_ip()));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kubelet"))
        .args(&argv[1..])
        .env("KUBELET_RS_LOG_ROOT", dirs.path("logs"))
        .stdout(std::process::Stdio::null())
        .stderr(
            std::fs::File::create(dirs.path("kubelet.log"))
                .map(std::process::Stdio::from)
                .unwrap_or_else(|_| std::process::Stdio::null()),
        )
        .spawn()
        .expect("spawn kubelet");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut child = KillOnDrop(child);

    let registered = api
        .wait_for::<Node>(None, &node, WAIT, |n| {
            ready_heartbeat(n).is_some_and(|(s, _)| s == "True")
        })
        .await;
    assert!(registered.metadata.uid.is_some());
    api.wait_for::<Pod>(Some(&ns), &format!("st-{node}"), WAIT, |p| {
        phase(p) == "Running"
    })
    .await;
    api.wait_for::<Lease>(Some("kube-node-lease"), &node, WAIT, |l| {
        lease_renew(l).is_some()
    })
    .await;

    let on_double = api.double().is_ok();
    if on_double {
        api.stop().await.expect("stop the double");
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let t0 = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let code = loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            break status.code();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the kubelet did not exit within 5 s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(code, Some(0));
    if !on_double {
        api.cleanup().await;
    }
}

/// Issue 11: the whole kubelet against the API server for many status
/// report periods on accelerated time (nodeStatusReportFrequency 2 s, so a
/// minute here is half an hour of the default 5 min reports), with another
/// writer reordering the Node's conditions and adding one of its own, a
/// Service created just before a pod, and (on the double) failing answers
/// to status patches and lease renewals in between. Every report is
/// accepted (the heartbeat advances each period), the foreign condition
/// survives, the pod gets the Service's variables, and no watch is
/// restarted by the failures: one failed request never disturbs the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_status_reports_accepted_over_many_periods_and_watches_undisturbed() {
    use support::apiserver::{Fault, Verb};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start("api_kubelet_longrun") else {
        return;
    };
    let api = TestApi::start().await;
    let ns = api.create_namespace("longrun").await;
    let node = api.unique_name("longrun");
    let ip = host_ip();
    let root = make_cgroup_root(&rig, "longrun");
    let ports = Ports {
        main: 22260,
        read_only: 22261,
        healthz: 22262,
    };
    let report = Duration::from_secs(2);
    let cfg = config(
        &dirs,
        &root,
        ports,
        "nodeLeaseDurationSeconds: 4\nnodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 2s\n",
    );
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push(format!("--node-ip={ip}"));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        ready_heartbeat(n).is_some_and(|(s, _)| s == "True")
    })
    .await;

    // Service variables for a pod created right after its Service.
    // A cluster IP of its own (a real server's allocator keeps an address
    // until the Service of an earlier run is gone).
    let octets: u32 = node.bytes().map(u32::from).sum();
    let cluster_ip = format!("10.96.{}.{}", 1 + octets % 200, 2 + (octets / 7) % 250);
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "longrun", "namespace": ns},
        "spec": {"clusterIP": cluster_ip, "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
    }))
    .expect("service");
    api.put(&svc).await;
    let mut env_pod = serde_json::to_value(pod(
        &ns,
        "env",
        &node,
        "echo \"$LONGRUN_SERVICE_HOST:$LONGRUN_SERVICE_PORT\" > /dev/termination-log",
        "Never",
        1,
    ))
    .expect("json");
    env_pod["spec"]["enableServiceLinks"] = json!(true);
    api.put(&serde_json::from_value::<Pod>(env_pod).expect("pod"))
        .await;
    let (_, _, done) = watch_phases(&api, &ns, "env", "Succeeded").await;
    let message = container(&done, "c")
        .and_then(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
        .unwrap_or_default();
    assert_eq!(
        message.trim(),
        format!("{cluster_ip}:8080"),
        "{:?}",
        done.status
    );

    // Another writer puts the conditions in another order and adds its own.
    let mut n: Node = api.get(None, &node).await.expect("node");
    let st = n.status.as_mut().expect("status");
    let mut conds = st.conditions.take().unwrap_or_default();
    conds.reverse();
    conds.insert(
        0,
        serde_json::from_value(json!({"type": "NetworkUnavailable", "status": "False",
            "reason": "RouteCreated", "message": "set by another writer",
            "lastTransitionTime": "2024-01-01T00:00:00Z", "lastHeartbeatTime": "2024-01-01T00:00:00Z"}))
        .expect("condition"),
    );
    let order: Vec<String> = conds.iter().map(|c| c.type_.clone()).collect();
    st.conditions = Some(conds);
    api.put(&n).await;

    // Failing answers mid-run (the double only): two status patches in a
    // row and two lease renewals.
    let watches_before = kubelet_watches(&api, &node);
    let faults = [
        Fault::status(500)
            .on(Verb::Patch)
            .resource("nodes")
            .subresource("status")
            .times(2),
        Fault::status(500)
            .on(Verb::Update)
            .resource("leases")
            .times(2),
    ];
    for f in faults {
        if let Err(u) = api.inject(f) {
            support::apiserver::testkit::skip(u);
        }
    }

    // Twelve report periods: the heartbeat advances every period.
    let start = Instant::now();
    let mut beats: Vec<(Instant, String)> = Vec::new();
    while start.elapsed() < report * 12 {
        if let Some(n) = api.get::<Node>(None, &node).await
            && let Some((_, at)) = ready_heartbeat(&n)
            && beats.last().is_none_or(|(_, last)| *last != at)
        {
            beats.push((Instant::now(), at));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(beats.len() >= 8, "heartbeats seen: {beats:?}");
    for w in beats.windows(2) {
        let gap = w[1].0 - w[0].0;
        assert!(
            gap <= report * 3,
            "the heartbeat stalled for {gap:?} between {} and {}",
            w[0].1,
            w[1].1
        );
    }
    let n: Node = api.get(None, &node).await.expect("node");
    let conds = n.status.and_then(|s| s.conditions).unwrap_or_default();
    let now: Vec<String> = conds.iter().map(|c| c.type_.clone()).collect();
    assert_eq!(now, order, "the kubelet keeps the Node's order");
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "NetworkUnavailable" && c.reason.as_deref() == Some("RouteCreated")),
        "the other writer's condition survives: {conds:?}"
    );

    if let Ok(log) = api.requests() {
        let user = format!("system:node:{node}");
        let patches: Vec<u16> = log
            .iter()
            .filter(|r| {
                r.user.name == user
                    && r.method == "PATCH"
                    && r.resource.as_deref() == Some("nodes")
                    && r.subresource.as_deref() == Some("status")
            })
            .map(|r| r.status)
            .collect();
        let refused = patches.iter().filter(|s| **s != 200).count();
        assert_eq!(
            refused, 2,
            "only the two injected failures: {patches:?} (every status patch of the kubelet's own applies)"
        );
        assert!(patches.len() >= 10, "status patches: {patches:?}");
        assert_eq!(
            kubelet_watches(&api, &node),
            watches_before,
            "no watch was restarted by the failed requests"
        );
    }
    kubelet.stop().await.expect("kubelet stops cleanly");
    api.cleanup().await;
}

/// The kubelet's list and watch requests on the API server double, per
/// resource ((resource, verb) → count); empty on a real server.
fn kubelet_watches(
    api: &TestApi,
    node: &str,
) -> std::collections::BTreeMap<(String, String), usize> {
    let user = format!("system:node:{node}");
    let mut out = std::collections::BTreeMap::new();
    for r in api.requests().unwrap_or_default() {
        if r.user.name == user && (r.verb == "watch" || r.verb == "list") {
            *out.entry((r.resource.clone().unwrap_or_default(), r.verb.clone()))
                .or_insert(0) += 1;
        }
    }
    out
}

/// A pod pulling `image`, naming `pull_secret` when given.
fn private_pod(ns: &str, name: &str, node: &str, image: &str, pull_secret: Option<&str>) -> Pod {
    let mut p = pod(ns, name, node, "sleep 3600", "Always", 1);
    let spec = p.spec.as_mut().expect("spec");
    spec.containers[0].image = Some(image.to_string());
    spec.image_pull_secrets = pull_secret.map(|s| {
        vec![k8s_openapi::api::core::v1::LocalObjectReference {
            name: s.to_string(),
        }]
    });
    p
}

fn waiting_reason(p: &Pod) -> Option<(String, String)> {
    let w = container(p, "c")?.state.as_ref()?.waiting.as_ref()?;
    Some((w.reason.clone()?, w.message.clone().unwrap_or_default()))
}

/// Issue 16: the pod's imagePullSecrets reach the image pull. The only copy
/// of an image is in a registry on loopback that requires basic auth
/// (Debian's docker-registry): the pod naming a dockerconfigjson pull
/// secret runs; the pod without one waits with ErrImagePull (then
/// ImagePullBackOff) and the registry's refusal in its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_pull_secrets_reach_a_private_registry() {
    use support::registry::Registry;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let test = "api_kubelet_private_registry";
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start(test) else {
        return;
    };
    let Some(registry) = Registry::start(test, "puller", "s3cret") else {
        return;
    };
    registry.trust_from(&rig);
    // Two names: a pull by one must not make the other present.
    let image = registry.push_from(&rig, &images().busybox, "private/busybox:1");
    let other = registry.push_from(&rig, &images().busybox, "private/busybox:2");
    let api = TestApi::start().await;
    let ns = api.create_namespace("apireg").await;
    let node = api.unique_name("regnode");
    let root = make_cgroup_root(&rig, "apiregistry");
    let ports = Ports {
        main: 22270,
        read_only: 22271,
        healthz: 22272,
    };
    let cfg = config(&dirs, &root, ports, "");
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push(format!("--node-ip={}", host_ip()));
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "regcred", "namespace": ns},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": registry.docker_config_json()},
    }))
    .expect("secret");
    api.put(&secret).await;
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        ready_heartbeat(n).is_some_and(|(s, _)| s == "True")
    })
    .await;

    api.put(&private_pod(
        &ns,
        "with-secret",
        &node,
        &image,
        Some("regcred"),
    ))
    .await;
    api.put(&private_pod(&ns, "without", &node, &other, None))
        .await;
    let refused = api
        .wait_for::<Pod>(Some(&ns), "without", WAIT, |p| {
            waiting_reason(p).is_some_and(|(r, _)| r == "ErrImagePull" || r == "ImagePullBackOff")
        })
        .await;
    let running = api
        .wait_for::<Pod>(Some(&ns), "with-secret", WAIT, |p| phase(p) == "Running")
        .await;
    assert_eq!(
        container(&running, "c").map(|c| c.image.clone()).as_deref(),
        Some(image.as_str())
    );
    // The pull error, as the Failed event (and ErrImagePull's message)
    // carries it: the registry's refusal.
    let refusal = support::eventually(WAIT, || async {
        api.list::<Event>(Some(&ns))
            .await
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("without"))
            .filter(|e| e.reason.as_deref() == Some("Failed"))
            .filter_map(|e| e.message)
            .find(|m| m.contains("ErrImagePull") || m.contains("Failed to pull image"))
    })
    .await
    .expect("a Failed event for the pull");
    assert!(refusal.contains("401 Unauthorized"), "{refusal}");
    assert_eq!(phase(&refused), "Pending");
    kubelet.stop().await.expect("kubelet stops cleanly");
    api.cleanup().await;
}

/// Issue 16: the node's own registry credentials, for pods without pull
/// secrets. A credential provider plugin (a shell script speaking the exec
/// protocol, named by --image-credential-provider-config and found in
/// --image-credential-provider-bin-dir) answers for the registry's
/// `/plugin` images: the first pod's pull runs it, the second pod's pull of
/// the same image uses its cached answer. A `config.json` in the root
/// directory holds credentials for the `/node` images. No pod names a pull
/// secret; the registry refuses anonymous pulls (see the test above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_credentials_reach_a_private_registry() {
    use base64::Engine as _;
    use support::registry::Registry;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let test = "api_kubelet_node_credentials";
    let dirs = NodeDirs::new();
    let Some(rig) = Containerd::start(test) else {
        return;
    };
    let Some(registry) = Registry::start(test, "node-puller", "n0de-s3cret") else {
        return;
    };
    registry.trust_from(&rig);
    let plugin_image = registry.push_from(&rig, &images().busybox, "plugin/busybox:1");
    let node_image = registry.push_from(&rig, &images().busybox, "node/busybox:1");
    let host = registry.host.clone();

    // The plugin: logs its arguments, an env var from the config and its
    // request, then answers with the registry's credentials.
    let bin_dir = dirs.path("credential-bin");
    std::fs::create_dir_all(&bin_dir).expect("bin dir");
    let requests = dirs.path("plugin-requests.log");
    let plugin = bin_dir.join("registry-login");
    let response = json!({
        "kind": "CredentialProviderResponse",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1beta1",
        "cacheKeyType": "Image",
        "cacheDuration": "1h",
        "auth": {host.clone(): {"username": registry.user, "password": registry.password}},
    });
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\nprintf '%s %s ' \"$1\" \"$REGISTRY_LOGIN_TAG\" >> {log}\ncat >> {log}\nprintf '%s\\n' '{response}'\n",
            log = requests.display()
        ),
    )
    .expect("write plugin");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))
            .expect("chmod plugin");
    }
    let provider_config = dirs.path("credential-providers.yaml");
    std::fs::write(
        &provider_config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1
kind: CredentialProviderConfig
providers:
- name: registry-login
  matchImages: [\"{host}/plugin\"]
  defaultCacheDuration: 0s
  apiVersion: credentialprovider.kubelet.k8s.io/v1beta1
  args: [get-credentials]
  env:
  - name: REGISTRY_LOGIN_TAG
    value: from-config
"
        ),
    )
    .expect("write provider config");
    // The node's docker config, in the root directory.
    let auth = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", registry.user, registry.password));
    std::fs::write(
        dirs.path("root/config.json"),
        json!({"auths": {format!("{host}/node"): {"auth": auth}}}).to_string(),
    )
    .expect("write config.json");

    let api = TestApi::start().await;
    let ns = api.create_namespace("apinodecred").await;
    let node = api.unique_name("nodecred");
    let root = make_cgroup_root(&rig, "apinodecred");
    let ports = Ports {
        main: 22290,
        read_only: 22291,
        healthz: 22292,
    };
    let cfg = config(&dirs, &root, ports, "");
    let kubeconfig = api.kubeconfig_for_node(&dirs.path(""), &node).await;
    let mut argv = args(&dirs, &rig, &cfg, &node);
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push(format!("--node-ip={}", host_ip()));
    argv.push(format!(
        "--image-credential-provider-config={}",
        provider_config.display()
    ));
    argv.push(format!(
        "--image-credential-provider-bin-dir={}",
        bin_dir.display()
    ));
    let kubelet = Kubelet::start(argv, |s| deps(&dirs, s));
    api.wait_for::<Node>(None, &node, WAIT, |n| {
        ready_heartbeat(n).is_some_and(|(s, _)| s == "True")
    })
    .await;

    // Pulled every time, so the second pod's pull needs credentials too.
    let always = |name: &str, image: &str| {
        let mut p = private_pod(&ns, name, &node, image, None);
        p.spec.as_mut().expect("spec").containers[0].image_pull_policy = Some("Always".into());
        p
    };
    let running = |p: &Pod| phase(p) == "Running";
    api.put(&always("plugin-a", &plugin_image)).await;
    api.wait_for::<Pod>(Some(&ns), "plugin-a", WAIT, running)
        .await;
    api.put(&always("plugin-b", &plugin_image)).await;
    api.wait_for::<Pod>(Some(&ns), "plugin-b", WAIT, running)
        .await;
    wait_events(&api, &ns, "Pod", "plugin-b", &["Pulling", "Pulled"]).await;
    api.put(&always("files-c", &node_image)).await;
    api.wait_for::<Pod>(Some(&ns), "files-c", WAIT, running)
        .await;

    // One run of the plugin, for the first pod, with its arguments, its
    // environment and the request on stdin; none for the `/node` image.
    let log = std::fs::read_to_string(&requests).expect("the plugin ran");
    let lines: Vec<&str> = log.lines().collect();
    let repository = plugin_image.rsplit_once(':').map_or("", |(r, _)| r);
    assert_eq!(
        lines,
        [format!(
            "get-credentials from-config {{\"kind\":\"CredentialProviderRequest\",\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1beta1\",\"image\":\"{repository}\"}}"
        )],
        "one exec, the second pull served from the cache"
    );
    kubelet.stop().await.expect("kubelet stops cleanly");
    api.cleanup().await;
}
