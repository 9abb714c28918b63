//! Self-tests of the API server double, through kube::Client and
//! kube::runtime::watcher exactly as the kubelet uses them. With
//! KUBELET_RS_TEST_KUBECONFIG set they run against that real kube-apiserver
//! instead, skipping (with a note) the steps only a double can do; see
//! tests/support/apiserver/README.md.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, ServiceAccount};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent,
    WatchParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::apiserver::{Fault, KubeUser, TestApi, Unsupported, Verb};

const WAIT: Duration = Duration::from_secs(10);

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("test object decodes")
}

/// The Status of a failed API call.
fn api_error(r: Result<impl std::fmt::Debug, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn skip(what: Unsupported) {
    eprintln!("note: skipping a double-only step: {what}");
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    obj(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}))
}

fn pod(name: &str, node: Option<&str>, labels: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    obj(p)
}

async fn next_event<S, K>(s: &mut S) -> Event<K>
where
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(WAIT, s.next()).await {
            Ok(Some(Ok(e))) => return e,
            Ok(Some(Err(e))) => eprintln!("watcher error (it recovers): {e}"),
            Ok(None) => panic!("watcher stream ended"),
            Err(_) => panic!("no watcher event within {WAIT:?}"),
        }
    }
}

/// Names applied by events until InitDone, after the Init that starts a (re)list.
async fn until_init_done<S, K>(s: &mut S) -> Vec<String>
where
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
    K: kube::Resource,
{
    let mut names = Vec::new();
    loop {
        match next_event(s).await {
            Event::Init => names.clear(),
            Event::InitApply(k) => names.push(k.meta().name.clone().unwrap_or_default()),
            Event::InitDone => return names,
            Event::Apply(k) | Event::Delete(k) => {
                panic!("unexpected event for {:?} before InitDone", k.meta().name)
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_list_update_conflict_and_not_found() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("crud").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let pp = PostParams::default();

    let created = cms
        .create(&pp, &cm("a", json!({"app": "x"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.as_deref().is_some_and(|u| u.len() == 36),
        "{meta:?}"
    );
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let dup = api_error(cms.create(&pp, &cm("a", json!({}))).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let got = cms.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let listed = cms
        .list(&ListParams::default().labels("app=x"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let list_rv: u64 = listed.metadata.resource_version.unwrap().parse().unwrap();
    assert!(list_rv >= rv1);

    let mut changed = got.clone();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let updated = cms.replace("a", &pp, &changed).await.unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);

    // The same write again carries the old resourceVersion: 409 Conflict.
    let stale = api_error(cms.replace("a", &pp, &changed).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(
        stale.message.contains("the object has been modified"),
        "{}",
        stale.message
    );

    // A write that changes nothing keeps the resourceVersion.
    let same = cms.replace("a", &pp, &updated).await.unwrap();
    assert_eq!(
        same.metadata.resource_version,
        updated.metadata.resource_version
    );

    let missing = api_error(cms.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        missing.details.as_ref().map(|d| d.kind.as_str()),
        Some("configmaps")
    );

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(cms.get("a").await).code, 404);
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("sel").await;
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await, &ns);
    let pp = PostParams::default();
    for (name, node, labels) in [
        ("web-1", Some("n1"), json!({"app": "web", "tier": "front"})),
        ("web-2", Some("n2"), json!({"app": "web"})),
        ("db-1", Some("n1"), json!({"app": "db", "tier": "back"})),
        ("job-1", None, json!({"app": "job"})),
    ] {
        pods.create(&pp, &pod(name, node, labels)).await.unwrap();
    }
    let table: &[(&str, &str, &[&str])] = &[
        ("app=web", "", &["web-1", "web-2"]),
        ("app==db", "", &["db-1"]),
        ("app!=web", "", &["db-1", "job-1"]),
        ("app in (web,db)", "", &["db-1", "web-1", "web-2"]),
        ("app notin (web)", "", &["db-1", "job-1"]),
        ("tier", "", &["db-1", "web-1"]),
        ("!tier", "", &["job-1", "web-2"]),
        ("app=web,tier=front", "", &["web-1"]),
        ("", "spec.nodeName=n1", &["db-1", "web-1"]),
        ("", "spec.nodeName=", &["job-1"]),
        ("", "spec.nodeName!=n1", &["job-1", "web-2"]),
        ("", "metadata.name=web-2", &["web-2"]),
        ("app=web", "spec.nodeName=n1", &["web-1"]),
    ];
    for (labels, fields, want) in table {
        let lp = ListParams::default().labels(labels).fields(fields);
        let mut got: Vec<String> = pods
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        got.sort();
        assert_eq!(got, *want, "labels {labels:?} fields {fields:?}");
    }
    let bad = api_error(
        pods.list(&ListParams::default().fields("spec.bogus=x"))
            .await,
    );
    assert_eq!(bad.code, 400);
    assert!(
        bad.message.contains("field label not supported"),
        "{}",
        bad.message
    );
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_with_limit_and_continue() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("page").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    for i in 0..5 {
        cms.create(
            &PostParams::default(),
            &cm(&format!("p{i}"), json!({"page": "yes"})),
        )
        .await
        .unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("page=yes").limit(2);
    let mut pages = 0;
    loop {
        let l = cms.list(&lp).await.unwrap();
        pages += 1;
        names.extend(l.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match l.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(pages, 3);
    let meta_only = cms
        .list_metadata(&ListParams::default().labels("page=yes"))
        .await
        .unwrap();
    assert_eq!(meta_only.items.len(), 5);
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_status_merge_and_strategic_patches() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("status").await;
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await, &ns);
    let created = pods
        .create(&PostParams::default(), &pod("p", Some("n1"), json!({})))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let status = created.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));

    let pp = PatchParams::default();
    let merge =
        json!({"status": {"phase": "Running", "podIP": "10.88.0.5", "hostIP": "10.88.0.1"}});
    let p = pods
        .patch_status("p", &pp, &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));

    // The kubelet's status patch: uid as a precondition, conditions merged by
    // type in $setElementOrder order, container statuses replaced whole,
    // podIPs merged by ip.
    let first = json!({
        "metadata": {"uid": uid},
        "status": {
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            ],
            "containerStatuses": [
                {"name": "c", "ready": false, "restartCount": 0, "image": "busybox:1.36", "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}},
                {"name": "extra", "ready": false, "restartCount": 0, "image": "x", "imageID": ""},
            ],
            "podIPs": [{"ip": "10.88.0.5"}],
        },
    });
    pods.patch_status("p", &pp, &Patch::Strategic(&first))
        .await
        .unwrap();
    let second = json!({
        "metadata": {"uid": uid},
        "status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}, {"type": "ContainersReady"}],
            "conditions": [
                {"type": "Ready", "status": "True", "reason": null},
                {"type": "ContainersReady", "status": "True"},
            ],
            "containerStatuses": [
                {"name": "c", "ready": true, "restartCount": 0, "image": "busybox:1.36", "imageID": "sha256:1", "started": true, "state": {"running": {"startedAt": "2024-01-01T00:00:01Z"}}},
            ],
        },
    });
    let p = pods
        .patch_status("p", &pp, &Patch::Strategic(&second))
        .await
        .unwrap();
    let s = p.status.unwrap();
    let conds: Vec<(String, String)> = s
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conds,
        [
            ("Initialized".into(), "True".into()),
            ("Ready".into(), "True".into()),
            ("ContainersReady".into(), "True".into())
        ]
    );
    let cs = s.container_statuses.unwrap();
    assert_eq!(
        cs.len(),
        1,
        "containerStatuses has no merge key: a patch replaces it"
    );
    assert!(cs[0].ready && cs[0].state.as_ref().unwrap().running.is_some());
    assert_eq!(s.pod_ips.unwrap().len(), 1);

    // A status patch for another incarnation of the pod is refused.
    let wrong = json!({"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}, "status": {"phase": "Failed"}});
    let e = api_error(pods.patch_status("p", &pp, &Patch::Strategic(&wrong)).await);
    assert_eq!(e.code, 422, "{e:?}");

    // The main resource ignores status; the status subresource ignores spec.
    let mut p = pods.get("p").await.unwrap();
    p.status.as_mut().unwrap().phase = Some("Failed".into());
    let p = pods.replace("p", &PostParams::default(), &p).await.unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    let spec_via_status =
        json!({"spec": {"activeDeadlineSeconds": 5}, "status": {"phase": "Succeeded"}});
    let p = pods
        .patch_status("p", &pp, &Patch::Merge(&spec_via_status))
        .await
        .unwrap();
    assert_eq!(p.spec.unwrap().active_deadline_seconds, None);
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Succeeded"));

    // JSON patch works on the main resource.
    let jp: json_patch::Patch =
        obj(json!([{"op": "add", "path": "/metadata/labels", "value": {"patched": "yes"}}]));
    let p = pods.patch("p", &pp, &Patch::<()>::Json(jp)).await.unwrap();
    assert_eq!(p.metadata.labels.unwrap()["patched"], "yes");
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_status_strategic_merge_patch() {
    let api = TestApi::start().await;
    let name = api.unique_name("node");
    let nodes: Api<Node> = Api::all(api.admin_client().await);
    let node: Node = obj(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.88.0.1"}],
            "capacity": {"cpu": "2", "memory": "24684092Ki", "pods": "110"},
            "images": [{"names": ["a:1"], "sizeBytes": 1}],
        },
    }));
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    api.track_for_cleanup(&created).await;
    let patch = json!({
        "status": {
            "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "DiskPressure"}, {"type": "Ready"}],
            "$setElementOrder/addresses": [{"type": "InternalIP"}, {"type": "Hostname"}],
            "conditions": [
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            "images": [{"names": ["b:2"], "sizeBytes": 2}],
            "capacity": {"memory": "1Gi"},
        },
    });
    let n = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let s = n.status.unwrap();
    let conds: Vec<(String, String, Option<String>)> = s
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason))
        .collect();
    assert_eq!(
        conds,
        [
            (
                "MemoryPressure".into(),
                "False".into(),
                Some("KubeletHasSufficientMemory".into())
            ),
            (
                "DiskPressure".into(),
                "False".into(),
                Some("KubeletHasNoDiskPressure".into())
            ),
            ("Ready".into(), "True".into(), Some("KubeletReady".into())),
        ]
    );
    let addrs: Vec<String> = s.addresses.unwrap().into_iter().map(|a| a.type_).collect();
    assert_eq!(addrs, ["InternalIP", "Hostname"]);
    let images: Vec<Vec<String>> = s
        .images
        .unwrap()
        .into_iter()
        .map(|i| i.names.unwrap())
        .collect();
    assert_eq!(images, [["b:2"]], "images have no merge key: replaced");
    let cap = s.capacity.unwrap();
    assert_eq!(cap["memory"].0, "1Gi");
    assert_eq!(cap["cpu"].0, "2", "maps merge key by key");
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_resource_version_delivers_later_events_in_order() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("watch").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let pp = PostParams::default();
    let first = cms
        .create(&pp, &cm("before", json!({"w": "1"})))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.unwrap();
    let wp = WatchParams::default().labels("w=1").timeout(30);
    let mut stream = cms.watch(&wp, &rv).await.unwrap().boxed();

    let created = cms
        .create(&pp, &cm("later", json!({"w": "1"})))
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "changed".to_string())].into());
    cms.replace("later", &pp, &changed).await.unwrap();
    // Leaving the selection reads as a delete to this watch.
    let mut relabeled = cms.get("later").await.unwrap();
    relabeled.metadata.labels = Some([("w".to_string(), "2".to_string())].into());
    cms.replace("later", &pp, &relabeled).await.unwrap();
    cms.delete("before", &DeleteParams::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut last_rv = 0u64;
    while seen.len() < 4 {
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .expect("watch event")
            .unwrap()
            .unwrap();
        let (ty, o) = match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        };
        let orv: u64 = o.metadata.resource_version.unwrap().parse().unwrap();
        assert!(orv > last_rv, "resourceVersions increase");
        last_rv = orv;
        seen.push(format!("{ty} {}", o.metadata.name.unwrap()));
    }
    assert_eq!(
        seen,
        [
            "ADDED later",
            "MODIFIED later",
            "DELETED later",
            "DELETED before"
        ]
    );

    // timeoutSeconds ends the stream.
    let short = WatchParams::default().timeout(1);
    let mut ending = cms.watch(&short, "0").await.unwrap().boxed();
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(ev) = ending.try_next().await.unwrap() {
            assert!(!matches!(ev, WatchEvent::Error(_)), "{ev:?}");
        }
    })
    .await;
    assert!(ended.is_ok(), "a watch with timeoutSeconds=1 ends");
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_arrive_when_asked_for() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("bm").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let wp = WatchParams::default().timeout(120);
    let mut stream = cms.watch(&wp, &rv).await.unwrap().boxed();
    // A real server sends one about every minute; the double every second.
    let wait = if api.is_real() {
        Duration::from_secs(90)
    } else {
        Duration::from_secs(5)
    };
    let ev = tokio::time::timeout(wait, stream.try_next())
        .await
        .expect("a bookmark")
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Bookmark(b) => {
            let brv: u64 = b.metadata.resource_version.parse().unwrap();
            assert!(brv >= rv.parse::<u64>().unwrap());
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_gives_410_and_the_watcher_relists() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("compact").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let pp = PostParams::default();
    let cfg = watcher::Config::default().labels("c=1");
    let mut w = watcher::watcher(cms.clone(), cfg).default_backoff().boxed();
    assert!(until_init_done(&mut w).await.is_empty());
    let a = cms.create(&pp, &cm("a", json!({"c": "1"}))).await.unwrap();
    match next_event(&mut w).await {
        Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("a")),
        other => panic!("expected Apply(a), got {other:?}"),
    }
    let old_rv = a.metadata.resource_version.unwrap();
    match api.compact() {
        Err(u) => skip(u),
        Ok(_) => {
            // The open watch is expired: kube's watcher relists and goes on.
            assert_eq!(until_init_done(&mut w).await, ["a"]);
            let wp = WatchParams::default().timeout(10);
            let mut old = cms.watch(&wp, &old_rv).await.unwrap().boxed();
            match tokio::time::timeout(WAIT, old.try_next())
                .await
                .unwrap()
                .unwrap()
            {
                Some(WatchEvent::Error(e)) => {
                    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"))
                }
                other => panic!("expected ERROR 410, got {other:?}"),
            }
            let lp = ListParams::default()
                .at(&old_rv)
                .matching(VersionMatch::Exact);
            assert_eq!(api_error(cms.list(&lp).await).code, 410);
        }
    }
    cms.create(&pp, &cm("b", json!({"c": "1"}))).await.unwrap();
    match next_event(&mut w).await {
        Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("b")),
        other => panic!("expected Apply(b), got {other:?}"),
    }
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_create_renew_and_conflicting_renew() {
    let api = TestApi::start().await;
    let name = api.unique_name("node");
    let leases: Api<Lease> = Api::namespaced(api.admin_client().await, "kube-node-lease");
    let lease: Lease = obj(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:00.000000Z"},
    }));
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    api.track_for_cleanup(&created).await;

    let mut renew = created.clone();
    renew.spec.as_mut().unwrap().renew_time = Some(obj(json!("2024-01-01T00:00:10.123456Z")));
    let renewed = leases
        .replace(&name, &PostParams::default(), &renew)
        .await
        .unwrap();
    assert_ne!(
        renewed.metadata.resource_version,
        created.metadata.resource_version
    );
    let t = serde_json::to_value(&renewed.spec.as_ref().unwrap().renew_time).unwrap();
    assert_eq!(
        t,
        json!("2024-01-01T00:00:10.123456Z"),
        "MicroTime keeps microseconds"
    );

    // A second holder renewing from the stale copy loses.
    let mut other = created.clone();
    other.spec.as_mut().unwrap().holder_identity = Some("someone-else".into());
    let e = api_error(leases.replace(&name, &PostParams::default(), &other).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let now = leases.get(&name).await.unwrap();
    assert_eq!(
        now.spec.unwrap().holder_identity.as_deref(),
        Some(name.as_str())
    );
    api.cleanup().await;
}

fn node_csr(node: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::OrganizationName, "system:nodes");
    dn.push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name = dn;
    let csr = params.serialize_request(&key).unwrap();
    (csr.pem().unwrap(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csr_created_with_bootstrap_token_approved_and_issued() {
    let api = TestApi::start().await;
    let node = api.unique_name("node");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api
        .bootstrap_kubeconfig(&dir.path().join("bootstrap-kubelet.conf"))
        .await;
    let boot = api.client_from_kubeconfig(&kubeconfig).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(boot.clone());
    let (csr_pem, key_pem) = node_csr(&node);
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD.encode(&csr_pem);
    let csr: CertificateSigningRequest = obj(json!({
        "metadata": {"generateName": "csr-"},
        "spec": {
            "request": request,
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "key encipherment", "client auth"],
            "expirationSeconds": 3600,
        },
    }));
    let created = csrs.create(&PostParams::default(), &csr).await.unwrap();
    api.track_for_cleanup(&created).await;
    let name = created.metadata.name.clone().unwrap();
    let user = created.spec.username.clone().unwrap_or_default();
    assert!(user.starts_with("system:bootstrap:"), "{user}");
    assert!(
        created
            .spec
            .groups
            .unwrap()
            .contains(&"system:bootstrappers".to_string())
    );

    // Bootstrap credentials do nothing else.
    let pods: Api<Pod> = Api::namespaced(boot, "default");
    assert_eq!(api_error(pods.list(&ListParams::default()).await).code, 403);

    api.approve_csr(&name).await;
    let issued = api
        .wait_for::<CertificateSigningRequest>(None, &name, Duration::from_secs(30), |c| {
            c.status
                .as_ref()
                .and_then(|s| s.certificate.as_ref())
                .is_some()
        })
        .await;
    let cert = String::from_utf8(issued.status.unwrap().certificate.unwrap().0).unwrap();
    support::apiserver::verify_client_cert_with_ca(&api.ca_pem(), &cert)
        .expect("issued by the cluster CA");
    let subject = support::apiserver::cert_pem_subject(&cert).unwrap();
    assert_eq!(subject.common_name, format!("system:node:{node}"));
    assert_eq!(subject.organizations, ["system:nodes"]);
    let (nb, na) = support::apiserver::cert_validity(&cert).unwrap();
    assert!(
        na - nb <= 3600 + 301,
        "expirationSeconds honoured: {}",
        na - nb
    );

    // The new credentials authenticate as the node.
    if let Ok(double) = api.double() {
        let yaml = double.kubeconfig_yaml(&KubeUser::Admin);
        let yaml = yaml
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("client-certificate-data:") {
                    format!(
                        "    client-certificate-data: {}",
                        base64::engine::general_purpose::STANDARD.encode(&cert)
                    )
                } else if l.trim_start().starts_with("client-key-data:") {
                    format!(
                        "    client-key-data: {}",
                        base64::engine::general_purpose::STANDARD.encode(&key_pem)
                    )
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let client = kube::Client::try_from(
            kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::from_yaml(&yaml).unwrap(),
                &Default::default(),
            )
            .await
            .unwrap(),
        )
        .unwrap();
        double.clear_requests();
        Api::<Pod>::all(client)
            .list(&ListParams::default())
            .await
            .unwrap();
        let who = &double.requests()[0].user;
        assert_eq!(who.name, format!("system:node:{node}"));
        assert!(who.groups.contains(&"system:nodes".to_string()));
    } else {
        skip(Unsupported("reading the request log"));
    }
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_request_issues_a_bound_token_that_authenticates() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("token").await;
    let client = api.admin_client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let p = pods
        .create(&PostParams::default(), &pod("p", None, json!({})))
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(client, &ns);
    let tr: TokenRequest = obj(json!({
        "spec": {
            "audiences": ["api"],
            "expirationSeconds": 600,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": p.metadata.uid},
        },
    }));
    let out: TokenRequest = sas
        .create_subresource("token", "default", &PostParams::default(), &tr)
        .await
        .unwrap();
    let st = out.status.unwrap();
    assert_eq!(st.token.split('.').count(), 3, "JWT-shaped");
    let exp = st.expiration_timestamp.0.as_second() - jiff::Timestamp::now().as_second();
    assert!((590..=601).contains(&exp), "expires in ~600s: {exp}");

    let as_sa = api.client(&KubeUser::Token(st.token.clone())).await;
    as_sa
        .list_core_api_versions()
        .await
        .expect("the token authenticates");
    if let Ok(d) = api.double() {
        let last = d.requests().into_iter().last().unwrap();
        assert_eq!(
            last.user.name,
            format!("system:serviceaccount:{ns}:default")
        );
    }
    // Once the pod it is bound to is gone, the token is not accepted.
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let gone = api.client(&KubeUser::Token(st.token)).await;
    assert_eq!(api_error(gone.list_core_api_versions().await).code, 401);

    let short: TokenRequest =
        obj(json!({"spec": {"audiences": ["api"], "expirationSeconds": 100}}));
    let e = api_error(
        sas.create_subresource::<_, TokenRequest>(
            "token",
            "default",
            &PostParams::default(),
            &short,
        )
        .await,
    );
    assert_eq!(e.code, 422);
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_graceful_delete_then_final_delete() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("del").await;
    let node = api.unique_name("node");
    let n: Node = obj(json!({"metadata": {"name": node}}));
    let n = api.put(&n).await;
    api.track_for_cleanup(&n).await;
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await, &ns);
    let created = pods
        .create(&PostParams::default(), &pod("p", Some(&node), json!({})))
        .await
        .unwrap();

    let first = pods.delete("p", &DeleteParams::default()).await.unwrap();
    let terminating = first
        .left()
        .expect("a graceful delete answers with the pod");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    let still = pods.get("p").await.unwrap();
    assert!(
        still.metadata.deletion_timestamp.is_some(),
        "the pod stays while it terminates"
    );

    // The kubelet's final delete: grace 0 with the uid as precondition.
    let wrong = DeleteParams::default()
        .grace_period(0)
        .preconditions(kube::api::Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000000".into()),
            resource_version: None,
        });
    assert_eq!(api_error(pods.delete("p", &wrong).await).code, 409);
    let right = DeleteParams::default()
        .grace_period(0)
        .preconditions(kube::api::Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: None,
        });
    pods.delete("p", &right).await.unwrap();
    assert_eq!(api_error(pods.get("p").await).code, 404);

    // An unscheduled pod goes at once.
    pods.create(&PostParams::default(), &pod("q", None, json!({})))
        .await
        .unwrap();
    pods.delete("q", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(pods.get("q").await).code, 404);
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_fails_requests_and_restart_resumes_the_watch() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("outage").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let cfg = watcher::Config::default().labels("o=1");
    let mut w = watcher::watcher(cms.clone(), cfg).default_backoff().boxed();
    assert!(until_init_done(&mut w).await.is_empty());
    if let Err(u) = api.stop().await {
        skip(u);
        return api.cleanup().await;
    }
    let down = tokio::time::timeout(WAIT, cms.get("x"))
        .await
        .expect("fails fast");
    assert!(
        !matches!(down, Err(kube::Error::Api(_))),
        "no API answer while stopped: {down:?}"
    );
    // Arranged directly in the store while the server is away.
    let mut c = cm("while-down", json!({"o": "1"}));
    c.metadata.namespace = Some(ns.clone());
    api.put(&c).await;
    api.double().unwrap().clear_requests();
    api.restart().await.unwrap();
    match next_event(&mut w).await {
        Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("while-down")),
        other => panic!("expected Apply(while-down), got {other:?}"),
    }
    let relists = api
        .requests()
        .unwrap()
        .into_iter()
        .filter(|r| r.verb == "list" && r.resource.as_deref() == Some("configmaps"))
        .count();
    assert_eq!(relists, 0, "the watch resumed from its resourceVersion");
    cms.get("while-down").await.expect("requests work again");
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_injection_and_request_log() {
    let api = TestApi::start().await;
    let Ok(double) = api.double() else {
        return skip(Unsupported("fault injection"));
    };
    let ns = api.create_namespace("faults").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    double.clear_requests();

    double.inject(
        Fault::status(500)
            .on(Verb::Get)
            .resource("configmaps")
            .times(1),
    );
    assert_eq!(api_error(cms.get("a").await).code, 500);
    cms.get("a").await.expect("only the next request failed");

    // 429 with Retry-After: kube's default retry policy tries again.
    double.inject(
        Fault::too_many_requests(1)
            .on(Verb::List)
            .resource("configmaps"),
    );
    cms.list(&ListParams::default().labels("x=y"))
        .await
        .expect("retried after 429");

    double.inject(Fault::delay(Duration::from_millis(300)).on(Verb::Get));
    let t = std::time::Instant::now();
    cms.get("a").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));

    let log = double.requests();
    let calls: Vec<(String, u16)> = log
        .iter()
        .map(|r| {
            (
                format!("{} {}", r.verb, r.name.clone().unwrap_or_default()),
                r.status,
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("get a".to_string(), 500),
            ("get a".to_string(), 200),
            ("list ".to_string(), 429),
            ("list ".to_string(), 200),
            ("get a".to_string(), 200),
        ]
    );
    let list = &log[3];
    assert_eq!(list.path, format!("/api/v1/namespaces/{ns}/configmaps"));
    assert_eq!(list.query_param("labelSelector").as_deref(), Some("x=y"));
    assert_eq!(list.user.name, "kubernetes-admin");
    assert!(list.user.groups.contains(&"system:masters".to_string()));

    double.clear_requests();
    let p = json!({"data": {"k": "patched"}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    let r = &double.requests()[0];
    assert_eq!(r.method, "PATCH");
    assert_eq!(
        r.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_version() {
    let api = TestApi::start().await;
    let client = api.admin_client().await;
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    if !api.is_real() {
        assert_eq!(v.minor, "25");
    }
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    for (group, kind) in [
        ("", "Pod"),
        ("", "Node"),
        ("coordination.k8s.io", "Lease"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
    ] {
        let found = discovery
            .groups()
            .filter(|g| g.name() == group)
            .flat_map(|g| g.recommended_resources())
            .any(|(ar, _)| ar.kind == kind);
        assert!(found, "{group}/{kind} discovered");
    }
}

/// The pod a real server made of the reference burstable pod's manifest:
/// the double's defaulting and admission must give the same spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaulting_and_admission_match_the_reference_pod() {
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string("tests/fixtures/go-kubelet-examples/pod-burstable.json").unwrap(),
    )
    .unwrap();
    let manifest: Value = serde_json::from_str(
        reference["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let api = TestApi::start().await;
    let ns = api.create_namespace("defaults").await;
    let mut m = manifest.clone();
    m["metadata"]["namespace"] = json!(ns);
    m["spec"]["nodeName"] = json!("gonode");
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await, &ns);
    let created = pods.create(&PostParams::default(), &obj(m)).await.unwrap();
    let mut got = serde_json::to_value(&created.spec).unwrap();
    let mut want = reference["spec"].clone();
    // The service account volume's name ends in a random suffix.
    for spec in [&mut got, &mut want] {
        let vol = spec["volumes"][1]["name"].as_str().unwrap().to_string();
        assert!(vol.starts_with("kube-api-access-"), "{vol}");
        spec["volumes"][1]["name"] = json!("kube-api-access");
        spec["containers"][0]["volumeMounts"][1]["name"] = json!("kube-api-access");
    }
    assert_eq!(got, want);
    let st = created.status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert_eq!(st.qos_class.as_deref(), Some("Burstable"));
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_credentials_are_restricted_as_node_restriction_does() {
    let api = TestApi::start().await;
    let Ok(double) = api.double() else {
        return skip(Unsupported("node client certificates"));
    };
    let node = double.client(&KubeUser::node("n1")).await;
    let nodes: Api<Node> = Api::all(node.clone());
    let own: Node = obj(json!({"metadata": {"name": "n1"}}));
    nodes
        .create(&PostParams::default(), &own)
        .await
        .expect("a node registers itself");
    let other: Node = obj(json!({"metadata": {"name": "n2"}}));
    assert_eq!(
        api_error(nodes.create(&PostParams::default(), &other).await).code,
        403
    );

    let pods: Api<Pod> = Api::namespaced(node, "default");
    let plain = api_error(
        pods.create(&PostParams::default(), &pod("plain", Some("n1"), json!({})))
            .await,
    );
    assert_eq!(plain.code, 403);
    assert!(
        plain.message.contains("can only create mirror pods"),
        "{}",
        plain.message
    );
    let mut mirror = pod("static-n1", Some("n1"), json!({}));
    mirror.metadata.annotations = Some(
        [(
            "kubernetes.io/config.mirror".to_string(),
            "hash".to_string(),
        )]
        .into(),
    );
    let m = pods
        .create(&PostParams::default(), &mirror)
        .await
        .expect("mirror pods are allowed");
    let spec = m.spec.unwrap();
    assert_eq!(
        spec.service_account_name, None,
        "mirror pods get no service account"
    );
    assert_eq!(spec.priority, Some(0));

    let anon = double.client(&KubeUser::Anonymous).await;
    assert_eq!(
        api_error(
            Api::<Pod>::all(anon.clone())
                .list(&ListParams::default())
                .await
        )
        .code,
        403
    );
    anon.apiserver_version().await.expect("/version is public");
    let bad = double.client(&KubeUser::Token("not-a-token".into())).await;
    assert_eq!(api_error(bad.list_core_api_versions().await).code, 401);
}

/// The strategic merge engine on its own, for directives the kubelet's
/// patches do not use through the API.
#[test]
fn strategic_merge_patch_directives() {
    use support::apiserver::strategic_merge_patch as smp;
    let cases: &[(&str, &str, Value, Value, Value)] = &[
        (
            "null deletes a key; maps merge",
            "Pod",
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
            json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}}),
        ),
        (
            "$patch: delete removes a list element by its merge key",
            "Pod",
            json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}),
            json!({"status": {"conditions": [{"type": "A", "$patch": "delete"}]}}),
            json!({"status": {"conditions": [{"type": "B"}]}}),
        ),
        (
            "$patch: replace in a list replaces it",
            "Pod",
            json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}),
            json!({"status": {"conditions": [{"$patch": "replace"}, {"type": "C"}]}}),
            json!({"status": {"conditions": [{"type": "C"}]}}),
        ),
        (
            "$patch: replace on a map",
            "Node",
            json!({"status": {"capacity": {"cpu": "1", "memory": "1Gi"}}}),
            json!({"status": {"capacity": {"$patch": "replace", "pods": "110"}}}),
            json!({"status": {"capacity": {"pods": "110"}}}),
        ),
        (
            "finalizers merge as a set (new items first, as Go orders them); \
             $deleteFromPrimitiveList removes",
            "Pod",
            json!({"metadata": {"finalizers": ["a", "b"]}}),
            json!({"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]}}),
            json!({"metadata": {"finalizers": ["c", "b"]}}),
        ),
        (
            "$setElementOrder orders the named items; a server-only item goes \
             before the first named item it preceded in the live list",
            "Node",
            json!({"status": {"conditions": [{"type": "A"}, {"type": "X"}, {"type": "B"}]}}),
            json!({"status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}], "conditions": [{"type": "B", "status": "True"}]}}),
            json!({"status": {"conditions": [{"type": "X"}, {"type": "B", "status": "True"}, {"type": "A"}]}}),
        ),
        (
            "nested merge keys: containers by name, env by name",
            "Pod",
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "3"}]}]}}),
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]}]}}),
        ),
        (
            "$retainKeys clears what it does not name",
            "Pod",
            json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}}),
        ),
        (
            "lists without a merge key are replaced",
            "Pod",
            json!({"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}),
            json!({"spec": {"tolerations": [{"key": "c"}]}}),
            json!({"spec": {"tolerations": [{"key": "c"}]}}),
        ),
        (
            "ownerReferences merge by uid; without $setElementOrder new items lead",
            "Pod",
            json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "name": "a"}]}}),
        ),
    ];
    for (what, kind, original, patch, want) in cases {
        let got = smp(kind, original, patch).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&got, want, "{what}");
    }
    let bad = smp(
        "Pod",
        &json!({}),
        &json!({"status": {"conditions": [{"status": "True"}]}}),
    );
    assert!(bad.is_ok(), "a new list is taken as it is");
    let no_key = smp(
        "Pod",
        &json!({"status": {"conditions": [{"type": "A"}]}}),
        &json!({"status": {"conditions": [{"status": "True"}]}}),
    );
    assert!(
        no_key.is_err(),
        "merging an element without its merge key fails"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_create_select_and_aggregate_by_patch() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    let api = TestApi::start().await;
    let ns = api.create_namespace("events").await;
    let events: Api<CoreEvent> = Api::namespaced(api.admin_client().await, &ns);
    let node = api.unique_name("node");
    let ev: CoreEvent = obj(json!({
        "metadata": {"name": format!("{node}.17a8b3c4d5e6f701")},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": "Starting",
        "message": "Starting kubelet.",
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
    }));
    let created = events.create(&PostParams::default(), &ev).await.unwrap();
    let name = created.metadata.name.unwrap();
    let fields = format!(
        "involvedObject.kind=Node,involvedObject.name={node},source=kubelet,reason=Starting"
    );
    let found = events
        .list(&ListParams::default().fields(&fields))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    // client-go's recorder bumps a repeated event with a strategic merge patch.
    let bump = json!({"count": 2, "lastTimestamp": "2024-01-01T00:00:05Z", "message": "Starting kubelet."});
    let e = events
        .patch(&name, &PatchParams::default(), &Patch::Strategic(&bump))
        .await
        .unwrap();
    assert_eq!(e.count, Some(2));
    assert_eq!(e.reason.as_deref(), Some("Starting"));
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_review_names_the_token_user() {
    use k8s_openapi::api::authentication::v1::TokenReview;
    let api = TestApi::start().await;
    let ns = api.create_namespace("review").await;
    let client = api.admin_client().await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let tr: TokenRequest = obj(json!({"spec": {"expirationSeconds": 3600}}));
    let out: TokenRequest = sas
        .create_subresource("token", "default", &PostParams::default(), &tr)
        .await
        .unwrap();
    let reviews: Api<TokenReview> = Api::all(client);
    let review: TokenReview = obj(json!({"spec": {"token": out.status.unwrap().token}}));
    let r = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let st = r.status.unwrap();
    assert_eq!(st.authenticated, Some(true));
    assert_eq!(
        st.user.unwrap().username.as_deref(),
        Some(format!("system:serviceaccount:{ns}:default").as_str())
    );
    let bogus: TokenReview = obj(json!({"spec": {"token": "bogus"}}));
    let r = reviews
        .create(&PostParams::default(), &bogus)
        .await
        .unwrap();
    assert_ne!(r.status.unwrap().authenticated, Some(true));
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_only_content_negotiation() {
    let api = TestApi::start().await;
    if api.is_real() {
        return skip(Unsupported("refusing protobuf (a real server speaks it)"));
    }
    let client = api.admin_client().await;
    let get = |accept: &'static str| {
        http::Request::get("/api/v1/namespaces/default/configmaps")
            .header("accept", accept)
            .body(Vec::new())
            .unwrap()
    };
    let resp = client
        .send(get("application/vnd.kubernetes.protobuf").map(Into::into))
        .await
        .unwrap();
    assert_eq!(resp.status(), 406);
    let resp = client
        .send(get("application/vnd.kubernetes.protobuf, application/json").map(Into::into))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let post = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(b"\x6b\x38\x73\x00".to_vec())
        .unwrap();
    let resp = client.send(post.map(Into::into)).await.unwrap();
    assert_eq!(resp.status(), 415);
    let apply = http::Request::patch("/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
        .header("content-type", "application/apply-patch+yaml")
        .body(b"data: {}".to_vec())
        .unwrap();
    assert_eq!(
        client.send(apply.map(Into::into)).await.unwrap().status(),
        415
    );
}
