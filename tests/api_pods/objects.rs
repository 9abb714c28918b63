//! The ConfigMap/Secret managers (each change detection strategy) and
//! TokenRequest against the API server.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kubelet::kubelet::configmap::new_config_map_manager;
use kubelet::kubelet::envvars::{ConfigMapGetter, SecretGetter};
use kubelet::kubelet::pod::{PodManager, PodObjectRegistrar};
use kubelet::kubelet::secret::new_secret_manager;
use kubelet::kubelet::token::{ApiTokenRequester, TokenRequester, pod_token_request};
use kubelet::kubelet::util::manager::{ChangeDetectionStrategy, ManagerError};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::TaskSet;
use serde_json::json;

use crate::common::{WAIT, bound_pod};
use crate::support::apiserver::testkit::obj;
use crate::support::apiserver::{KubeUser, TestApi};
use crate::support::eventually;

fn cm(ns: &str, name: &str, value: &str, immutable: bool) -> ConfigMap {
    obj(
        json!({"metadata": {"name": name, "namespace": ns}, "data": {"k": value}, "immutable": immutable}),
    )
}

fn value(c: &ConfigMap) -> String {
    c.data.as_ref().unwrap()["k"].clone()
}

fn pod_using(ns: &str, name: &str, node: &str, configmaps: &[&str]) -> Pod {
    let env: Vec<_> = configmaps
        .iter()
        .map(|c| json!({"name": format!("V_{}", c.replace('-', "_")), "valueFrom": {"configMapKeyRef": {"name": c, "key": "k"}}}))
        .collect();
    let mut p = bound_pod(ns, name, node, json!({}));
    let spec = p.spec.as_mut().unwrap();
    spec.containers[0].env = Some(obj(json!(env)));
    p.metadata.uid = Some(format!("uid-{name}"));
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_strategy_follows_objects_while_pods_need_them() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("cmw").await;
    let node = api.unique_name("cmnode");
    let client = api.client(&KubeUser::Node(node.clone())).await;
    let manager = Arc::new(new_config_map_manager(
        ChangeDetectionStrategy::Watch,
        client,
        Arc::new(RealClock),
        Duration::from_secs(60),
        Arc::new(|| None),
    ));
    let tasks = TaskSet::new();
    manager.start(&tasks);
    // Registration goes through the pod manager's hook, as in the kubelet.
    let pods = PodManager::with_registrars(vec![manager.clone() as Arc<dyn PodObjectRegistrar>]);

    let pod = pod_using(&ns, "user", &node, &["cfg", "frozen"]);
    pods.add_pod(Arc::new(pod.clone()));
    assert!(manager.is_watching(&ns, "cfg"));

    // Missing yet: not found once the watch has listed.
    let missing = manager.get_config_map(&ns, "cfg").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert_eq!(missing.to_string(), "configmap \"cfg\" not found");

    api.put(&cm(&ns, "cfg", "one", false)).await;
    let got = eventually(WAIT, || async {
        manager
            .get_config_map(&ns, "cfg")
            .await
            .ok()
            .filter(|c| value(c) == "one")
    })
    .await;
    assert!(got.is_some(), "the watch delivered the new object");
    api.put(&cm(&ns, "cfg", "two", false)).await;
    let got = eventually(WAIT, || async {
        manager
            .get_config_map(&ns, "cfg")
            .await
            .ok()
            .filter(|c| value(c) == "two")
    })
    .await;
    assert!(got.is_some(), "the watch delivered the change");

    // An immutable object is read once and not watched any more.
    api.put(&cm(&ns, "frozen", "ice", true)).await;
    let frozen = eventually(WAIT, || async {
        manager.get_config_map(&ns, "frozen").await.ok()
    })
    .await
    .expect("immutable object readable");
    assert_eq!(value(&frozen), "ice");
    assert!(!manager.is_watching(&ns, "frozen"));
    assert_eq!(
        value(&manager.get_config_map(&ns, "frozen").await.unwrap()),
        "ice"
    );

    if let Ok(log) = api.requests() {
        assert!(
            log.iter().any(|r| r.verb == "watch"
                && r.resource.as_deref() == Some("configmaps")
                && r.namespace.as_deref() == Some(ns.as_str())
                && r.query_param("fieldSelector").as_deref() == Some("metadata.name=cfg")),
            "one watch per object, selected by name"
        );
    }

    // When the last pod goes, the watch stops and reads are refused.
    pods.delete_pod(&pod);
    assert!(!manager.is_watching(&ns, "cfg"));
    let err = manager.get(&ns, "cfg").await.unwrap_err();
    assert!(matches!(err, ManagerError::NotRegistered { .. }), "{err}");

    tasks
        .into_shutdown_handle()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_and_get_strategies() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("cmc").await;
    let node = api.unique_name("cmnode");
    let client = api.client(&KubeUser::Node(node.clone())).await;
    api.put(&cm(&ns, "cfg", "one", false)).await;
    let cache = new_config_map_manager(
        ChangeDetectionStrategy::Cache,
        client.clone(),
        Arc::new(RealClock),
        Duration::from_secs(60),
        Arc::new(|| Some(Duration::from_secs(3600))),
    );
    let direct = new_config_map_manager(
        ChangeDetectionStrategy::Get,
        client.clone(),
        Arc::new(RealClock),
        Duration::from_secs(60),
        Arc::new(|| None),
    );
    let pod = pod_using(&ns, "user", &node, &["cfg"]);
    cache.register_pod(&pod);
    assert_eq!(
        value(&cache.get_config_map(&ns, "cfg").await.unwrap()),
        "one"
    );
    assert_eq!(
        value(&direct.get_config_map(&ns, "cfg").await.unwrap()),
        "one"
    );

    api.put(&cm(&ns, "cfg", "two", false)).await;
    // Within the TTL the cache answers; Get always asks the API server.
    assert_eq!(
        value(&cache.get_config_map(&ns, "cfg").await.unwrap()),
        "one"
    );
    assert_eq!(
        value(&direct.get_config_map(&ns, "cfg").await.unwrap()),
        "two"
    );
    // A pod update invalidates what it references.
    cache.register_pod(&pod);
    assert_eq!(
        value(&cache.get_config_map(&ns, "cfg").await.unwrap()),
        "two"
    );

    // Secrets through the same machinery.
    let secrets = new_secret_manager(
        ChangeDetectionStrategy::Get,
        client,
        Arc::new(RealClock),
        Duration::from_secs(60),
        Arc::new(|| None),
    );
    let err = secrets.get_secret(&ns, "nope").await.unwrap_err();
    assert_eq!(err.to_string(), "secret \"nope\" not found");
    let s: Secret =
        obj(json!({"metadata": {"name": "pw", "namespace": ns}, "stringData": {"p": "x"}}));
    api.put(&s).await;
    let got = secrets.get_secret(&ns, "pw").await.unwrap();
    let data = got.data.unwrap_or_default();
    assert!(
        data.get("p").map(|b| b.0.as_slice()) == Some(b"x".as_slice())
            || got
                .string_data
                .as_ref()
                .and_then(|d| d.get("p"))
                .map(String::as_str)
                == Some("x"),
        "secret content readable"
    );
    api.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_are_bound_to_the_pod() {
    let api = TestApi::start().await;
    let ns = api.create_namespace("tok").await;
    let node = api.unique_name("toknode");
    let pod = api.put(&bound_pod(&ns, "web", &node, json!({}))).await;
    let uid = pod.metadata.uid.clone().unwrap();
    let requester = ApiTokenRequester::new(api.client(&KubeUser::Node(node.clone())).await);

    let tr = pod_token_request(vec!["kubelet-rs-test".into()], 3607, "web", &uid);
    let got = requester.create_token(&ns, "default", &tr).await.unwrap();
    let status = got.status.expect("token status");
    assert!(!status.token.is_empty());
    let lifetime = status.expiration_timestamp.0.as_second() - jiff::Timestamp::now().as_second();
    assert!((3500..=3700).contains(&lifetime), "lifetime {lifetime}s");
    assert_eq!(got.spec.audiences, ["kubelet-rs-test"]);

    // A missing account is the API's NotFound, not "unsupported".
    let err = requester.create_token(&ns, "ghost", &tr).await.unwrap_err();
    assert!(
        err.to_string().contains("not found"),
        "missing account: {err}"
    );
    api.cleanup().await;
}
