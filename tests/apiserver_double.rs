//! Self-tests of the API server double, through kube::Client exactly as the
//! kubelet uses it: objects, selectors, paging, patches, deletion,
//! defaulting, discovery. With KUBELET_RS_TEST_KUBECONFIG set they run
//! against that real kube-apiserver instead, skipping (with a note) the steps
//! only a double can do; see tests/support/apiserver/README.md. Watches,
//! outages, faults and credentials are in apiserver_double_flows.rs.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::apiserver::TestApi;
use support::apiserver::Unsupported;
use support::apiserver::testkit::{api_error, configmap, obj, pod, skip};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_list_update_conflict_and_not_found() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("crud").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let pp = PostParams::default();

    let created = cms
        .create(&pp, &configmap("a", json!({"app": "x"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.as_deref().is_some_and(|u| u.len() == 36),
        "{meta:?}"
    );
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let dup = api_error(cms.create(&pp, &configmap("a", json!({}))).await);
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
            &configmap(&format!("p{i}"), json!({"page": "yes"})),
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

/// The heartbeat kube-apiserver refused from this kubelet (issue 11): the
/// changed conditions listed sorted by type while `$setElementOrder` lists
/// them in the Node's order. The server answers 500 with apimachinery's
/// message; the patch the kubelet computes now for the same change applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_status_patch_out_of_setelementorder_is_refused() {
    use kubelet::kubelet::nodestatus::patch::node_status_patch;
    let api = TestApi::start().await;
    let name = api.unique_name("node");
    let nodes: Api<Node> = Api::all(api.admin_client().await);
    let types = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];
    let cond = |t: &str, beat: &str| {
        json!({"type": t, "status": if t == "Ready" { "True" } else { "False" },
            "lastHeartbeatTime": beat, "lastTransitionTime": "2024-01-01T00:00:00Z"})
    };
    let t0 = "2024-01-01T00:00:00Z";
    let t1 = "2024-01-01T00:05:00Z";
    let node: Node = obj(json!({
        "metadata": {"name": name},
        "status": {"conditions": types.iter().map(|t| cond(t, t0)).collect::<Vec<_>>()},
    }));
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    api.track_for_cleanup(&created).await;

    let mut sorted = types;
    sorted.sort();
    let refused = json!({"status": {
        "$setElementOrder/conditions": types.iter().map(|t| json!({"type": t})).collect::<Vec<_>>(),
        "conditions": sorted.iter().map(|t| json!({"lastHeartbeatTime": t1, "type": t})).collect::<Vec<_>>(),
    }});
    let err = api_error(
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&refused))
            .await,
    );
    let list = |ts: &[&str], beat: bool| {
        let items: Vec<String> = ts
            .iter()
            .map(|t| match beat {
                true => format!("map[lastHeartbeatTime:{t1} type:{t}]"),
                false => format!("map[type:{t}]"),
            })
            .collect();
        format!("[{}]", items.join(" "))
    };
    assert_eq!(err.code, 500, "{err:?}");
    assert_eq!(
        err.message,
        format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            list(&sorted, true),
            list(&types, false)
        )
    );

    // The kubelet's own patch for the same heartbeat applies, order kept.
    let mut beat = created.clone();
    for c in beat.status.as_mut().unwrap().conditions.as_mut().unwrap() {
        c.last_heartbeat_time = Some(obj(json!(t1)));
    }
    let patch = node_status_patch(&created, &beat).unwrap();
    let n = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let got: Vec<(String, String)> = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| {
            (
                c.type_,
                serde_json::to_value(c.last_heartbeat_time)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = types
        .iter()
        .map(|t| (t.to_string(), t1.to_string()))
        .collect();
    assert_eq!(got, want);
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
    refusals();
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

/// What the server refuses, and how (apimachinery's checks on apply, as
/// kube-apiserver's patch handler answers them).
fn refusals() {
    use support::apiserver::SmpError;
    use support::apiserver::strategic_merge_patch as smp;
    let conds = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}});
    let cases: &[(&str, &str, Value, Value, SmpError)] = &[
        (
            "patch list out of the $setElementOrder order",
            "Node",
            conds.clone(),
            json!({"status": {"$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}],
                "conditions": [{"type": "A", "status": "x"}, {"type": "C", "status": "y"}]}}),
            SmpError::Internal(
                "The order in patch list:\n[map[status:x type:A] map[status:y type:C]]\n doesn't match \
                 $setElementOrder list:\n[map[type:C] map[type:A]]\n"
                    .into(),
            ),
        ),
        (
            "patch list item missing from $setElementOrder",
            "Node",
            conds.clone(),
            json!({"status": {"$setElementOrder/conditions": [{"type": "A"}],
                "conditions": [{"type": "B", "status": "x"}]}}),
            SmpError::Internal(
                "The order in patch list:\n[map[status:x type:B]]\n doesn't match \
                 $setElementOrder list:\n[map[type:A]]\n"
                    .into(),
            ),
        ),
        (
            "scalars out of order",
            "Pod",
            json!({"metadata": {"finalizers": ["a", "b"]}}),
            json!({"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"], "finalizers": ["a", "c"]}}),
            SmpError::Internal(
                "The order in patch list:\n[a c]\n doesn't match $setElementOrder list:\n[c b a]\n"
                    .into(),
            ),
        ),
        (
            "$setElementOrder without a list name",
            "Node",
            conds.clone(),
            json!({"status": {"$setElementOrder": [{"type": "A"}]}}),
            SmpError::BadRequest("invalid patch format of setElementOrder list"),
        ),
        (
            "$retainKeys not a list",
            "Pod",
            json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": "name"}]}}),
            SmpError::BadRequest("invalid patch format of retainKeys"),
        ),
        (
            "a patched key outside $retainKeys",
            "Pod",
            json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name"], "hostPath": {"path": "/x"}}]}}),
            SmpError::BadRequest("invalid patch format of retainKeys"),
        ),
        (
            "$deleteFromPrimitiveList without a list name",
            "Pod",
            json!({"metadata": {"finalizers": ["a"]}}),
            json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}),
            SmpError::BadRequest("invalid patch format of primitive list"),
        ),
        (
            "lists of lists",
            "Pod",
            json!({"metadata": {"finalizers": [["a"]]}}),
            json!({"metadata": {"finalizers": [["b"]]}}),
            SmpError::Unprocessable("lists of lists are not supported"),
        ),
        (
            "an element without its merge key",
            "Node",
            conds.clone(),
            json!({"status": {"conditions": [{"status": "True"}]}}),
            SmpError::Internal(
                "map: map[status:True] does not contain declared merge key: type".into(),
            ),
        ),
        (
            "an unknown $patch",
            "Node",
            json!({"status": {"capacity": {"cpu": "1"}}}),
            json!({"status": {"capacity": {"$patch": "merge-please"}}}),
            SmpError::Internal("unknown patch type: merge-please in map: map[$patch:merge-please]".into()),
        ),
    ];
    for (what, kind, original, patch, want) in cases {
        let got = smp(kind, original, patch);
        assert_eq!(got.as_ref().err(), Some(want), "{what}: {got:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_create_select_and_aggregate_by_patch() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    let api = TestApi::start().await;
    let ns = api.create_namespace("events").await;
    let node = api.unique_name("node");
    // An event about a Node (cluster-scoped) lives in "default", as the
    // kubelet records it; anywhere else the server refuses it.
    let misplaced: CoreEvent = obj(json!({
        "metadata": {"name": format!("{node}.17a8b3c4d5e6f700")},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": "Starting",
        "source": {"component": "kubelet", "host": node},
        "type": "Normal",
    }));
    let err = api_error(
        Api::<CoreEvent>::namespaced(api.admin_client().await, &ns)
            .create(&PostParams::default(), &misplaced)
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(
        err.message.contains(
            "involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
        ),
        "{}",
        err.message
    );
    let events: Api<CoreEvent> = Api::namespaced(api.admin_client().await, "default");
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
    api.track_for_cleanup(&created).await;
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
