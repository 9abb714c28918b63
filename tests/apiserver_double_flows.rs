//! Self-tests of the API server double, continued: watches (order,
//! bookmarks, timeouts, 410 after compaction), the server going away and
//! coming back, fault injection and the request log, and credentials (CSR
//! flow from a bootstrap token, TokenRequest, TokenReview, node
//! restrictions). With KUBELET_RS_TEST_KUBECONFIG set they run against that
//! real kube-apiserver, skipping double-only steps with a note.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, ServiceAccount};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent,
    WatchParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use support::apiserver::testkit::{
    WAIT, api_error, configmap, next_event, obj, pod, skip, until_init_done,
};
use support::apiserver::{Fault, KubeUser, TestApi, Unsupported, Verb};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_resource_version_delivers_later_events_in_order() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("watch").await;
    let cms: Api<ConfigMap> = Api::namespaced(api.admin_client().await, &ns);
    let pp = PostParams::default();
    let first = cms
        .create(&pp, &configmap("before", json!({"w": "1"})))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.unwrap();
    let wp = WatchParams::default().labels("w=1").timeout(30);
    let mut stream = cms.watch(&wp, &rv).await.unwrap().boxed();

    let created = cms
        .create(&pp, &configmap("later", json!({"w": "1"})))
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
    let a = cms
        .create(&pp, &configmap("a", json!({"c": "1"})))
        .await
        .unwrap();
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
    cms.create(&pp, &configmap("b", json!({"c": "1"})))
        .await
        .unwrap();
    match next_event(&mut w).await {
        Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("b")),
        other => panic!("expected Apply(b), got {other:?}"),
    }
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
    // (kube-apiserver caches a token's success for up to 10 s.)
    let gone = api.client(&KubeUser::Token(st.token)).await;
    let refused = support::eventually(Duration::from_secs(15), || async {
        match gone.list_core_api_versions().await {
            Err(kube::Error::Api(s)) if s.code == 401 => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(refused.is_some(), "the token of a deleted pod is refused");

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
    let mut c = configmap("while-down", json!({"o": "1"}));
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
    cms.create(&PostParams::default(), &configmap("a", json!({})))
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

/// The real-server side of TestApi, exercised against a double reached only
/// through an admin kubeconfig: the helpers then work over HTTP as they do
/// with a real kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_api_over_a_kubeconfig_uses_only_the_client() {
    use support::apiserver::ApiServerDouble;
    if TestApi::start().await.is_real() {
        return skip(Unsupported("a double behind a kubeconfig"));
    }
    let double = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin.conf");
    std::fs::write(&admin, double.kubeconfig_yaml(&KubeUser::Admin)).unwrap();
    let api = TestApi::connect(&admin, Some(&double.url()));
    assert!(api.is_real());
    assert!(api.compact().is_err() && api.requests().is_err());

    let ns = api.create_namespace("viaclient").await;
    let mut c = configmap("c", json!({"a": "b"}));
    c.metadata.namespace = Some(ns.clone());
    api.put(&c).await;
    c.data = Some([("k".to_string(), "second".to_string())].into());
    let replaced = api.put(&c).await;
    assert_eq!(replaced.data.unwrap()["k"], "second");
    assert_eq!(
        api.list::<ConfigMap>(Some(&ns)).await.len(),
        2,
        "c and kube-root-ca.crt"
    );

    let node: Node = obj(json!({
        "metadata": {"name": "viaclient-node"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }));
    let stored = api.put(&node).await;
    let ready = &stored.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        ready.status, "True",
        "put writes status through the subresource"
    );

    // Bootstrap credentials minted as on a real cluster: a token Secret.
    let boot = api.client(&KubeUser::Bootstrap).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(boot);
    let (csr_pem, _) = node_csr("viaclient-node");
    use base64::Engine;
    let csr: CertificateSigningRequest = obj(json!({
        "metadata": {"name": "viaclient-csr"},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(&csr_pem),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"],
        },
    }));
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    api.approve_csr("viaclient-csr").await;
    api.wait_for::<CertificateSigningRequest>(None, "viaclient-csr", WAIT, |c| {
        c.status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_some()
    })
    .await;

    assert!(api.remove::<ConfigMap>(Some(&ns), "c").await);
    assert!(api.get::<ConfigMap>(Some(&ns), "c").await.is_none());
    api.cleanup().await;
    assert!(
        double.get::<Node>(None, "viaclient-node").is_none(),
        "cleanup removed it"
    );
    assert!(
        double
            .get::<k8s_openapi::api::core::v1::Namespace>(None, &ns)
            .is_none(),
        "cleanup removed the namespace"
    );
}
