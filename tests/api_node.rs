//! The node half of API-server mode against the API server double (or a real
//! kube-apiserver named by KUBELET_RS_TEST_KUBECONFIG): clients, TLS
//! bootstrap and rotation, node registration and status, the lease, events,
//! webhook authentication and authorization of the main server, and an API
//! server outage. Node status reads the runtime of a private containerd.

#[path = "api_node/rig.rs"]
mod rig;

/// A double behind an admin kubeconfig: the test API in real-server mode
/// (skipped when a real server is configured; that run covers it).
async fn over_kubeconfig() -> Option<(support::apiserver::ApiServerDouble, TestApi)> {
    if TestApi::start().await.is_real() {
        skip(support::apiserver::Unsupported(
            "a double behind a kubeconfig",
        ));
        return None;
    }
    let double = support::apiserver::ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin.conf");
    std::fs::write(
        &admin,
        double.kubeconfig_yaml(&support::apiserver::KubeUser::Admin),
    )
    .unwrap();
    let api = TestApi::connect(&admin, Some(&double.url()));
    Some((double, api))
}
mod support;

use rig::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, ObjectReference};
use kube::api::Api;
use kubelet::apis::config::types::KubeletConfiguration;
use kubelet::kubelet::client::build_clients;
use kubelet::kubelet::events::{
    ApiEventRecorder, COMBINED_PREFIX, EventRecorder, EventType, KubeEventSink, NodeEvents,
};
use kubelet::kubelet::nodelease::{LeaseController, NODE_LEASE_NAMESPACE};
use kubelet::kubelet::nodestatus::go_arch;
use kubelet::kubelet::nodestatus::registration::RegistrationConfig;
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use support::apiserver::testkit::skip;
use support::apiserver::{DoubleOptions, TestApi};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_registers_with_labels_addresses_info_capacity_conditions_lease_and_events() {
    registration_body(TestApi::start().await, "node_registers").await;
}

/// The same through the real-server helpers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_registers_over_a_kubeconfig() {
    let Some((_double, api)) = over_kubeconfig().await else {
        return;
    };
    registration_body(api, "node_registers_over_a_kubeconfig").await;
}

async fn registration_body(api: TestApi, test: &str) {
    let Some(rig) = node_rig(
        &api,
        test,
        Duration::from_secs(2),
        Duration::from_secs(60),
        Duration::from_secs(10),
    )
    .await
    else {
        return;
    };
    let name = rig.name.clone();
    NodeEvents::new(rig.recorder.clone(), &name).birth_cry();
    let lease = LeaseController::new(
        rig.clients.heartbeat.clone(),
        &name,
        40,
        Arc::new(RealClock),
        Some(rig.clients.heartbeat_failure_hook()),
    );
    lease.start(&rig.tasks);

    let node: Node = api
        .wait_for(None, &name, Duration::from_secs(90), |n: &Node| {
            ready_status(n).as_deref() == Some("True")
        })
        .await;
    api.track_for_cleanup(&node).await;
    let reference = reference_node();
    let got = serde_json::to_value(&node).unwrap();

    // Labels and annotations: the reference's keys, this node's values.
    assert_eq!(
        keys(&got["metadata"]["labels"]),
        keys(&reference["metadata"]["labels"])
    );
    let labels = &got["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/hostname"], name.as_str());
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["beta.kubernetes.io/os"], "linux");
    assert_eq!(labels["kubernetes.io/arch"], go_arch());
    assert_eq!(labels["beta.kubernetes.io/arch"], go_arch());
    assert_eq!(
        got["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
        "true"
    );

    let status = &got["status"];
    // Addresses: InternalIP on one of this host's interfaces, then Hostname.
    let addrs = status["addresses"].as_array().unwrap();
    let types: Vec<&str> = addrs.iter().map(|a| a["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["InternalIP", "Hostname"]);
    let ip: std::net::IpAddr = addrs[0]["address"].as_str().unwrap().parse().unwrap();
    assert!(!ip.is_loopback());
    let host_ips: Vec<std::net::IpAddr> = nix::ifaddrs::getifaddrs()
        .unwrap()
        .filter_map(|a| {
            let s = a.address?;
            s.as_sockaddr_in()
                .map(|v| std::net::IpAddr::V4(v.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v| std::net::IpAddr::V6(v.ip())))
        })
        .collect();
    assert!(
        host_ips.contains(&ip),
        "{ip} is not an address of this host"
    );
    assert_eq!(addrs[1]["address"], name.as_str());

    // nodeInfo: every reference field, this host's values.
    let info = &status["nodeInfo"];
    assert_eq!(keys(info), keys(&reference["status"]["nodeInfo"]));
    assert_eq!(info["machineID"], read_trim("/etc/machine-id").as_str());
    assert_eq!(
        info["bootID"],
        read_trim("/proc/sys/kernel/random/boot_id").as_str()
    );
    assert_eq!(
        info["kernelVersion"],
        nix::sys::utsname::uname()
            .unwrap()
            .release()
            .to_string_lossy()
            .as_ref()
    );
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let pretty = os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default();
    assert_eq!(info["osImage"], pretty.as_str());
    assert!(
        info["containerRuntimeVersion"]
            .as_str()
            .unwrap()
            .starts_with("containerd://1."),
        "{info}"
    );
    assert_eq!(
        info["kubeletVersion"],
        kubelet::version::git_version().as_str()
    );
    assert_eq!(
        info["kubeProxyVersion"],
        kubelet::version::git_version().as_str()
    );
    assert_eq!(info["operatingSystem"], "linux");
    assert_eq!(info["architecture"], go_arch());
    assert_eq!(status["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);

    // Capacity and allocatable: cpu, memory, pods, ephemeral-storage and the
    // host's huge page sizes; allocatable holds back the default hard
    // eviction thresholds (memory 100Mi, nodefs 10%).
    let mut want_resources: Vec<String> = ["cpu", "ephemeral-storage", "memory", "pods"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    want_resources.extend(host_hugepage_resources());
    want_resources.sort();
    assert_eq!(keys(&status["capacity"]), want_resources);
    assert_eq!(keys(&status["allocatable"]), want_resources);
    let cap = |k: &str| quantity(status["capacity"][k].as_str().unwrap());
    let alloc = |k: &str| quantity(status["allocatable"][k].as_str().unwrap());
    assert_eq!(status["capacity"]["pods"], "110");
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert!(
        cap("cpu") >= 1 && cap("cpu") <= cpus.max(1) as i128 * 4,
        "{}",
        status["capacity"]["cpu"]
    );
    assert_eq!(alloc("cpu"), cap("cpu"));
    let hugepages: i128 = host_hugepage_resources().iter().map(|h| cap(h)).sum();
    assert_eq!(
        alloc("memory"),
        cap("memory") - 100 * 1024 * 1024 - hugepages
    );
    // The container manager is not started here, so, as in Go before
    // ContainerManager.Start, the nodefs threshold is not yet held back.
    let reserved_eph = rig
        .cm
        .get_node_allocatable_reservation()
        .get("ephemeral-storage")
        .map(|q| q.value() as i128)
        .unwrap_or(0);
    assert_eq!(
        alloc("ephemeral-storage"),
        cap("ephemeral-storage") - reserved_eph
    );

    // Conditions: the reference's, in its order, with its reasons and messages.
    let conds = status["conditions"].as_array().unwrap();
    let want = reference["status"]["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), want.len());
    for (c, w) in conds.iter().zip(want) {
        for f in ["type", "status", "reason", "message"] {
            assert_eq!(c[f], w[f], "condition {} field {f}", w["type"]);
        }
        assert!(c["lastHeartbeatTime"].is_string() && c["lastTransitionTime"].is_string());
    }

    // Images: largest first, the rig's pause image among them.
    let images = status["images"].as_array().unwrap();
    let sizes: Vec<i64> = images
        .iter()
        .map(|i| i["sizeBytes"].as_i64().unwrap())
        .collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    let pause = &support::containerd::images().pause;
    assert!(
        images.iter().any(|i| i["names"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == pause.as_str()))),
        "{images:?}"
    );

    // The lease: owned by the Node, held by it, renewed.
    let lease_obj: Lease = api
        .wait_for(
            Some(NODE_LEASE_NAMESPACE),
            &name,
            Duration::from_secs(30),
            |l: &Lease| {
                l.metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|o| !o.is_empty())
            },
        )
        .await;
    api.track_for_cleanup(&lease_obj).await;
    let owner = &lease_obj.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            Some(owner.uid.as_str())
        ),
        ("v1", "Node", name.as_str(), node.metadata.uid.as_deref())
    );
    let spec = lease_obj.spec.as_ref().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert!(spec.renew_time.is_some());

    // Node events, in `default`, from the kubelet on this node.
    let events = wait_events(&api, "default", &name, |ev| {
        [
            "Starting",
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID",
        ]
        .iter()
        .all(|r| ev.iter().any(|e| e.reason.as_deref() == Some(*r)))
    })
    .await;
    let starting = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Starting"))
        .unwrap();
    assert_eq!(starting.message.as_deref(), Some("Starting kubelet."));
    let mem = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("NodeHasSufficientMemory"))
        .unwrap();
    assert_eq!(
        mem.message.clone().unwrap(),
        format!("Node {name} status is now: NodeHasSufficientMemory")
    );
    // (A real cluster's controllers record node events of their own.)
    let ours = events.iter().filter(|e| {
        [
            "Starting",
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID",
            "NodeReady",
            "NodeNotReady",
        ]
        .contains(&e.reason.as_deref().unwrap_or(""))
    });
    for e in ours {
        let src = e.source.as_ref().unwrap();
        assert_eq!(
            (src.component.as_deref(), src.host.as_deref()),
            (Some("kubelet"), Some(name.as_str()))
        );
        assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
        assert_eq!(e.involved_object.uid.as_deref(), Some(name.as_str()));
        assert!(
            e.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with(&format!("{name}."))
        );
        api.track_for_cleanup(e).await;
    }
    assert!(rig.manager.registration_completed());
    // Without an API server the same Node is computed locally.
    let local = kubelet::kubelet::node_status::standalone_node(
        &rig.params,
        &rig.sources,
        &kubelet::kubelet::events::LoggingRecorder,
    )
    .await;
    assert_eq!(local.metadata.labels, node.metadata.labels);
    let (ls, ns) = (
        local.status.as_ref().unwrap(),
        node.status.as_ref().unwrap(),
    );
    assert_eq!(ls.addresses, ns.addresses);
    assert_eq!(ls.capacity, ns.capacity);
    assert_eq!(ls.node_info, ns.node_info);
    assert_eq!(
        rig.manager.get_node().unwrap().metadata.uid,
        node.metadata.uid
    );
    stop(rig.tasks).await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_is_patched_only_on_change_or_when_the_report_frequency_passes() {
    let api = TestApi::start().await;
    let Some(rig) = node_rig(
        &api,
        "status_on_change",
        Duration::from_millis(500),
        Duration::from_secs(6),
        Duration::from_secs(10),
    )
    .await
    else {
        return;
    };
    let name = rig.name.clone();
    let node: Node = api
        .wait_for(None, &name, Duration::from_secs(90), |n: &Node| {
            ready_status(n).as_deref() == Some("True")
        })
        .await;
    api.track_for_cleanup(&node).await;
    // Let the start-up settle, then count over a quiet window: ~8 rounds
    // at 0.5 s, at most one report (6 s frequency) in 4 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before_hb = |n: &Node| {
        n.status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_heartbeat_time
            .clone()
    };
    let hb0 = before_hb(&api.get::<Node>(None, &name).await.unwrap());
    let p0 = status_patches(&api, &name);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let p1 = status_patches(&api, &name);
    if let (Some(a), Some(b)) = (p0, p1) {
        assert!(b - a <= 1, "{} status patches in 4 s without change", b - a);
    }
    // After the report frequency a heartbeat is written even without change.
    let n: Node = api
        .wait_for(None, &name, Duration::from_secs(15), |n: &Node| {
            before_hb(n) != hb0
        })
        .await;
    assert_eq!(ready_status(&n).as_deref(), Some("True"));

    // Someone changes the status: the kubelet puts it back at the next round,
    // long before the report frequency.
    let mut changed = n.clone();
    changed
        .status
        .as_mut()
        .unwrap()
        .node_info
        .as_mut()
        .unwrap()
        .kubelet_version = "v0.0.0-tampered".into();
    api.put(&changed).await;
    let started = Instant::now();
    api.wait_for(None, &name, Duration::from_secs(5), |n: &Node| {
        n.status
            .as_ref()
            .unwrap()
            .node_info
            .as_ref()
            .unwrap()
            .kubelet_version
            == kubelet::version::git_version()
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    stop(rig.tasks).await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_is_created_with_the_owner_and_renewed_on_schedule() {
    lease_body(TestApi::start().await).await;
}

/// The same through the real-server helpers (the double reached only by an
/// admin kubeconfig), as against a kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_is_created_with_the_owner_and_renewed_on_schedule_over_a_kubeconfig() {
    let Some((_double, api)) = over_kubeconfig().await else {
        return;
    };
    lease_body(api).await;
}

async fn lease_body(api: TestApi) {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let name = api.unique_name("node");
    let clients = node_clients(&api, dir.path(), &name).await;
    let tasks = TaskSet::new();
    // 4 s leases: renewed every second.
    let lease = LeaseController::new(
        clients.heartbeat.clone(),
        &name,
        4,
        Arc::new(RealClock),
        None,
    );
    assert_eq!(lease.renew_interval(), Duration::from_secs(1));
    lease.start(&tasks);
    // No Node yet: no lease is created without its owner.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        api.get::<Lease>(Some(NODE_LEASE_NAMESPACE), &name)
            .await
            .is_none()
    );
    let node = Api::<Node>::all(clients.main.clone())
        .create(
            &Default::default(),
            &kubelet::kubelet::nodestatus::registration::initial_node(&RegistrationConfig {
                node_name: name.clone(),
                hostname: name.clone(),
                register_schedulable: true,
                ..Default::default()
            }),
        )
        .await
        .expect("the kubelet creates its Node");
    api.track_for_cleanup(&node).await;
    let first: Lease = api
        .wait_for(
            Some(NODE_LEASE_NAMESPACE),
            &name,
            Duration::from_secs(20),
            |_| true,
        )
        .await;
    api.track_for_cleanup(&first).await;
    let owner = &first.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", name.as_str())
    );
    assert_eq!(Some(owner.uid.as_str()), node.metadata.uid.as_deref());
    let renew = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    let mut seen = vec![renew(&first).unwrap()];
    let started = Instant::now();
    while seen.len() < 4 {
        let l: Lease = api.get(Some(NODE_LEASE_NAMESPACE), &name).await.unwrap();
        let t = renew(&l).unwrap();
        if t != *seen.last().unwrap() {
            seen.push(t);
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "renewals seen: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in seen.windows(2) {
        let gap = w[1].as_millisecond() - w[0].as_millisecond();
        assert!(
            (800..=2500).contains(&gap),
            "renewal gap {gap} ms in {seen:?}"
        );
    }
    stop(tasks).await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bootstrap_writes_certificate_symlink_and_kubeconfig_then_the_node_registers_with_it() {
    bootstrap_body(TestApi::start().await).await;
}

/// The same through the real-server helpers (the double reached only by an
/// admin kubeconfig), as against a kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bootstrap_writes_certificate_symlink_and_kubeconfig_then_the_node_registers_with_it_over_a_kubeconfig()
 {
    let Some((_double, api)) = over_kubeconfig().await else {
        return;
    };
    bootstrap_body(api).await;
}

async fn bootstrap_body(api: TestApi) {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let name = api.unique_name("node");
    let bootstrap = api
        .bootstrap_kubeconfig(&dir.path().join("bootstrap-kubelet.conf"))
        .await;
    let kubeconfig = dir.path().join("kubelet.conf");
    let mut p = params(&kubeconfig, dir.path(), &name);
    p.bootstrap_kubeconfig = Some(bootstrap.clone());
    // The kubelet waits for its request to be approved and signed; the test
    // plays the approver.
    let clients = tokio::select! {
        r = build_clients(&p) => r.expect("clients after bootstrap"),
        _ = approve_pending(&api, &name) => panic!("the bootstrap did not finish within a minute"),
    };

    let pki = dir.path().join("pki");
    let current = pki.join("kubelet-client-current.pem");
    let target = std::fs::read_link(&current).expect("current is a symlink");
    let file = target.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        file.starts_with("kubelet-client-")
            && file.ends_with(".pem")
            && file != "kubelet-client-current.pem",
        "{file}"
    );
    let pem = std::fs::read_to_string(&target).unwrap();
    assert!(pem.contains("BEGIN CERTIFICATE") && pem.contains("PRIVATE KEY"));
    assert!(!pki.join("kubelet-client.key.tmp").exists());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        kc.contains(&format!(
            "client-certificate: {}",
            serde_json::to_string(&current.to_string_lossy()).unwrap()
        )),
        "{kc}"
    );
    assert!(kc.contains(&api.url()) || api.is_real(), "{kc}");
    let (cn, orgs) = cert_subject(&pem);
    assert_eq!(cn, format!("system:node:{name}"));
    assert_eq!(orgs, ["system:nodes"]);
    if let Ok(d) = api.double() {
        assert!(d.verify_client_cert(&pem).is_ok());
    }

    // The kubelet's identity is now the node's: it may create its Node.
    let node = Api::<Node>::all(clients.main.clone())
        .create(
            &Default::default(),
            &kubelet::kubelet::nodestatus::registration::initial_node(&RegistrationConfig {
                node_name: name.clone(),
                hostname: name.clone(),
                register_schedulable: true,
                ..Default::default()
            }),
        )
        .await
        .expect("register with the bootstrapped identity");
    api.track_for_cleanup(&node).await;
    if let Ok(reqs) = api.requests().map_err(skip) {
        let create = reqs
            .iter()
            .find(|r| r.method == "POST" && r.resource.as_deref() == Some("nodes"))
            .unwrap();
        assert_eq!(create.user.name, format!("system:node:{name}"));
        assert!(create.user.groups.iter().any(|g| g == "system:nodes"));
        let csr = reqs
            .iter()
            .find(|r| {
                r.method == "POST" && r.resource.as_deref() == Some("certificatesigningrequests")
            })
            .unwrap();
        assert!(
            csr.user.name.starts_with("system:bootstrap:"),
            "{:?}",
            csr.user
        );
    }

    // A restart finds the kubeconfig valid and does not bootstrap again.
    let before = std::fs::read_link(&current).unwrap();
    build_clients(&p)
        .await
        .expect("clients from the written kubeconfig");
    assert_eq!(std::fs::read_link(&current).unwrap(), before);
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotating_client_certificate_bootstraps_in_background_and_renews_without_restart() {
    install_provider();
    // Short-lived certificates so that a renewal comes within the test.
    let api = TestApi::start_with(DoubleOptions {
        auto_approve_csrs: true,
        max_cert_lifetime: Duration::from_secs(15),
        ..DoubleOptions::default()
    })
    .await;
    if api.is_real() {
        skip(support::apiserver::Unsupported(
            "short certificate lifetimes",
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = api.unique_name("node");
    let bootstrap = api
        .bootstrap_kubeconfig(&dir.path().join("bootstrap-kubelet.conf"))
        .await;
    let kubeconfig = dir.path().join("kubelet.conf");
    let mut p = params(&kubeconfig, dir.path(), &name);
    p.bootstrap_kubeconfig = Some(bootstrap);
    p.rotate_certificates = true;
    let clients = build_clients(&p).await.expect("clients");
    // The kubeconfig points at the store before any certificate exists.
    assert!(
        std::fs::read_to_string(&kubeconfig)
            .unwrap()
            .contains("kubelet-client-current.pem")
    );
    let manager = clients.certificate_manager().expect("rotation is on");
    assert!(manager.current().is_none());
    let tasks = TaskSet::new();
    clients.start(&tasks);
    let nodes: Api<Node> = Api::all(clients.main.clone());
    let start = Instant::now();
    while manager.current().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no certificate issued"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    nodes
        .create(
            &Default::default(),
            &kubelet::kubelet::nodestatus::registration::initial_node(&RegistrationConfig {
                node_name: name.clone(),
                hostname: name.clone(),
                register_schedulable: true,
                ..Default::default()
            }),
        )
        .await
        .expect("the issued certificate is used");
    let first = manager.current().unwrap();
    // Renewal at 70–90% of 15 s, then the connections are dropped so the
    // clients present the new certificate.
    while manager.rotations() < 2 {
        assert!(start.elapsed() < Duration::from_secs(60), "no renewal");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second = manager.current().unwrap();
    assert!(second.not_after > first.not_after);
    let drops = clients.connection_drops();
    let wait = Instant::now();
    while clients.connection_drops() == drops && wait.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        clients.connection_drops() > drops,
        "rotation drops the old connections"
    );
    api.clear_requests().unwrap();
    nodes
        .get(&name)
        .await
        .expect("requests go on with the renewed certificate");
    let serial_user = api.requests().unwrap().last().unwrap().user.name.clone();
    assert_eq!(serial_user, format!("system:node:{name}"));
    let pairs = std::fs::read_dir(dir.path().join("pki"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("kubelet-client-2")
        })
        .count();
    assert!(pairs >= 1);
    stop(tasks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_are_recorded_aggregated_and_deduplicated() {
    events_body(TestApi::start().await).await;
}

/// The same through the real-server helpers (the double reached only by an
/// admin kubeconfig), as against a kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_are_recorded_aggregated_and_deduplicated_over_a_kubeconfig() {
    let Some((_double, api)) = over_kubeconfig().await else {
        return;
    };
    events_body(api).await;
}

async fn events_body(api: TestApi) {
    install_provider();
    let ns = api.create_namespace("events").await;
    let dir = tempfile::tempdir().unwrap();
    let name = api.unique_name("node");
    let clients = node_clients(&api, dir.path(), &name).await;
    let tasks = TaskSet::new();
    let recorder = ApiEventRecorder::new(&name, Arc::new(RealClock));
    recorder.start(&tasks, Arc::new(KubeEventSink::new(clients.events.clone())));
    let pod_ref = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("web".into()),
        namespace: Some(ns.clone()),
        uid: Some("0b4c9d66-0000-4000-8000-000000000001".into()),
        field_path: Some("spec.containers{app}".into()),
        ..Default::default()
    };
    // The same event three times: one Event with count 3.
    for _ in 0..3 {
        recorder.event(
            &pod_ref,
            EventType::Normal,
            "Pulled",
            "Container image \"busybox\" already present on machine",
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let events = wait_events(&api, &ns, "web", |ev| {
        ev.iter()
            .any(|e| e.reason.as_deref() == Some("Pulled") && e.count == Some(3))
    })
    .await;
    let pulled: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Pulled"))
        .collect();
    assert_eq!(pulled.len(), 1);
    assert_eq!(
        pulled[0].involved_object.field_path.as_deref(),
        Some("spec.containers{app}")
    );
    assert_eq!(pulled[0].type_.as_deref(), Some("Normal"));
    assert_eq!(pulled[0].reporting_component.as_deref(), Some("kubelet"));
    assert_eq!(pulled[0].reporting_instance.as_deref(), Some(name.as_str()));
    assert!(pulled[0].first_timestamp <= pulled[0].last_timestamp);

    // Twelve similar events (same reason, different messages): nine stand
    // alone, then one aggregate event counts up.
    for i in 0..12 {
        recorder.event(
            &pod_ref,
            EventType::Warning,
            "BackOff",
            &format!("Back-off restarting failed container attempt {i}"),
        );
    }
    let events = wait_events(&api, &ns, "web", |ev| {
        ev.iter().any(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.starts_with(COMBINED_PREFIX))
                && e.count == Some(3)
        })
    })
    .await;
    let backoff: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("BackOff"))
        .collect();
    let plain = backoff
        .iter()
        .filter(|e| !e.message.as_deref().unwrap().starts_with(COMBINED_PREFIX))
        .count();
    assert_eq!(plain, 9);
    let combined: Vec<&&Event> = backoff
        .iter()
        .filter(|e| e.message.as_deref().unwrap().starts_with(COMBINED_PREFIX))
        .collect();
    assert_eq!(combined.len(), 1);
    assert_eq!(combined[0].type_.as_deref(), Some("Warning"));
    if let Ok(reqs) = api.requests() {
        let patches = reqs
            .iter()
            .filter(|r| {
                r.method == "PATCH"
                    && r.resource.as_deref() == Some("events")
                    && r.namespace.as_deref() == Some(ns.as_str())
            })
            .count();
        assert_eq!(
            patches, 4,
            "two count patches of Pulled, two of the aggregate"
        );
        assert!(
            reqs.iter()
                .filter(|r| r.resource.as_deref() == Some("events"))
                .all(|r| r.user.name == format!("system:node:{name}"))
        );
    }
    stop(tasks).await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_authentication_and_authorization_guard_the_main_server() {
    use kubelet::kubelet::server::auth::build_auth;
    use kubelet::kubelet::server::handlers::{ServerHandlers, main_router};
    use kubelet::kubelet::server::main_server;
    use kubelet::kubelet::server::tls::{TlsParams, initialize_tls};
    use rustls::pki_types::pem::PemObject;
    install_provider();
    let api = TestApi::start().await;
    let ns = api.create_namespace("authn").await;
    let dir = tempfile::tempdir().unwrap();
    let name = api.unique_name("node");
    let clients = node_clients(&api, dir.path(), &name).await;

    let mut config = KubeletConfiguration::v1beta1_defaults();
    config.authentication.anonymous.enabled = false;
    config.authentication.webhook.enabled = true;
    config.authorization.mode = "Webhook".into();
    config.authorization.webhook.cache_authorized_ttl =
        kubelet::apis::config::duration::Duration::from_secs(1);
    config.authorization.webhook.cache_unauthorized_ttl =
        kubelet::apis::config::duration::Duration::from_secs(1);
    let auth = build_auth(&name, Some(clients.main.clone()), &config, None).expect("webhook auth");
    let tls = initialize_tls(&TlsParams {
        cert_dir: dir.path().join("serving"),
        hostname: name.clone(),
        ..Default::default()
    })
    .unwrap();
    let handlers = ServerHandlers {
        healthz: kubelet::healthz::Healthz::new(),
        configz: kubelet::configz::Configz::new(),
        metrics: None,
        probe_metrics: None,
        kubelet: None,
        profiling: false,
    };
    let mut router = main_router(&handlers, true).unwrap();
    // A stand-in for the stats tree (another subresource to authorize).
    router
        .handle(
            "/stats/summary",
            kubelet::kubelet::server::handler_fn(|_req| async move {
                kubelet::kubelet::server::router::text(http::StatusCode::OK, "{}")
            }),
        )
        .unwrap();
    let bound = main_server("127.0.0.1", 0, router, tls.server_config().unwrap(), auth)
        .bind()
        .await
        .unwrap();
    let addr = bound.local_addr();
    let tasks = TaskSet::new();
    bound.start(&tasks);
    let served: Vec<rustls::pki_types::CertificateDer<'static>> =
        rustls::pki_types::CertificateDer::pem_file_iter(tls.cert_file().unwrap())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in served {
        let _ = roots.add(c);
    }

    let token = service_account_token(&api, &ns).await;
    let sa_user = format!("system:serviceaccount:{ns}:default");
    if api.is_real() {
        grant_node_proxy(&api, &sa_user).await;
    }
    let get = |path: &'static str, token: Option<String>| {
        let (roots, name) = (roots.clone(), name.clone());
        async move { https_get(addr, &name, &roots, path, token.as_deref()).await }
    };

    // A valid token, allowed by SubjectAccessReview.
    let start = Instant::now();
    loop {
        let (status, body) = get("/healthz", Some(token.clone())).await;
        if status == 200 {
            assert_eq!(body, "ok");
            break;
        }
        // A real cluster's RBAC needs a moment to see the new binding.
        assert!(
            api.is_real() && start.elapsed() < Duration::from_secs(30),
            "{status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Cached: the same token again makes no second TokenReview.
    if let Ok(d) = api.double() {
        d.clear_requests();
        assert_eq!(get("/healthz", Some(token.clone())).await.0, 200);
        let reviews = d
            .requests()
            .iter()
            .filter(|r| r.resource.as_deref() == Some("tokenreviews"))
            .count();
        assert_eq!(reviews, 0, "the token review is cached for cacheTTL");
    }
    // Bad or missing credentials: 401 (anonymous access is off).
    assert_eq!(
        get("/healthz", Some("not-a-token".into())).await,
        (401, "Unauthorized".to_string())
    );
    assert_eq!(
        get("/healthz", None).await,
        (401, "Unauthorized".to_string())
    );
    // Denied by SubjectAccessReview: 403 naming the node attributes.
    let denied_path = match api.double() {
        Ok(d) => {
            d.set_subject_access_allowed(false);
            tokio::time::sleep(Duration::from_millis(1200)).await;
            "/configz"
        }
        Err(u) => {
            skip(u);
            "/stats/summary"
        }
    };
    let (status, body) = get(denied_path, Some(token.clone())).await;
    assert_eq!(status, 403, "{body}");
    let sub = if denied_path == "/configz" {
        "proxy"
    } else {
        "stats"
    };
    assert_eq!(
        body,
        format!("Forbidden (user={sa_user}, verb=get, resource=nodes, subresource={sub})")
    );
    if let Ok(reqs) = api.requests() {
        let sar = reqs
            .iter()
            .rfind(|r| r.resource.as_deref() == Some("subjectaccessreviews"))
            .unwrap();
        assert_eq!(
            sar.user.name,
            format!("system:node:{name}"),
            "reviews go through the kubelet's client"
        );
    }
    stop(tasks).await;
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_server_outage_fails_heartbeats_drops_connections_and_status_catches_up() {
    let api = TestApi::start().await;
    if api.is_real() {
        skip(support::apiserver::Unsupported("stopping the API server"));
        return;
    }
    let Some(rig) = node_rig(
        &api,
        "api_outage",
        Duration::from_secs(1),
        Duration::from_secs(60),
        Duration::from_secs(1),
    )
    .await
    else {
        return;
    };
    let name = rig.name.clone();
    let lease = LeaseController::new(
        rig.clients.heartbeat.clone(),
        &name,
        4,
        Arc::new(RealClock),
        Some(rig.clients.heartbeat_failure_hook()),
    );
    lease.start(&rig.tasks);
    api.wait_for(None, &name, Duration::from_secs(90), |n: &Node| {
        ready_status(n).as_deref() == Some("True")
    })
    .await;
    api.wait_for(
        Some(NODE_LEASE_NAMESPACE),
        &name,
        Duration::from_secs(30),
        |_: &Lease| true,
    )
    .await;
    let drops_before = rig.clients.connection_drops();

    // The API server goes away (a minute in production; 20 s here, with
    // 1 s status updates and renewals). Meanwhile someone else changes the
    // Node's status in the store.
    api.stop().await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut tampered: Node = api.get(None, &name).await.unwrap();
    tampered
        .status
        .as_mut()
        .unwrap()
        .node_info
        .as_mut()
        .unwrap()
        .kubelet_version = "v0.0.0-tampered".into();
    api.put(&tampered).await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    let drops = rig.clients.connection_drops() - drops_before;
    assert!(
        drops >= 4,
        "repeated heartbeat failures drop the connections ({drops} drops)"
    );
    let back = std::time::SystemTime::now();
    api.restart().await.unwrap();

    // The status catches up (the change is seen and put right at the next
    // round) and the lease is renewed again.
    let n: Node = api
        .wait_for(None, &name, Duration::from_secs(15), |n: &Node| {
            n.status
                .as_ref()
                .unwrap()
                .node_info
                .as_ref()
                .unwrap()
                .kubelet_version
                == kubelet::version::git_version()
        })
        .await;
    assert_eq!(ready_status(&n).as_deref(), Some("True"));
    let back_ts = jiff::Timestamp::try_from(back).unwrap();
    api.wait_for(
        Some(NODE_LEASE_NAMESPACE),
        &name,
        Duration::from_secs(15),
        |l: &Lease| {
            l.spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .is_some_and(|t| t.0 >= back_ts)
        },
    )
    .await;
    stop(rig.tasks).await;
}
