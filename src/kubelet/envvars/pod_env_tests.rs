//! Table tests for the container environment.

#![allow(clippy::type_complexity)]

use std::collections::BTreeMap;
use std::net::IpAddr;

use async_trait::async_trait;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use serde_json::json;

use super::*;

struct Objects {
    config_maps: BTreeMap<String, BTreeMap<String, String>>,
    secrets: BTreeMap<String, BTreeMap<String, String>>,
}

#[async_trait]
impl ConfigMapGetter for Objects {
    async fn get_config_map(&self, _ns: &str, name: &str) -> Result<ConfigMap, GetError> {
        match self.config_maps.get(name) {
            Some(d) => Ok(ConfigMap {
                data: Some(d.clone()),
                ..Default::default()
            }),
            None if name == "broken" => Err(GetError::getter(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            ))),
            None => Err(GetError::NotFound {
                kind: ObjectKind::ConfigMap,
                name: name.into(),
            }),
        }
    }
}

#[async_trait]
impl SecretGetter for Objects {
    async fn get_secret(&self, _ns: &str, name: &str) -> Result<Secret, GetError> {
        match self.secrets.get(name) {
            Some(d) => Ok(Secret {
                data: Some(
                    d.iter()
                        .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                        .collect(),
                ),
                ..Default::default()
            }),
            None => Err(GetError::NotFound {
                kind: ObjectKind::Secret,
                name: name.into(),
            }),
        }
    }
}

fn objects() -> Objects {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    Objects {
        config_maps: [
            (
                "cfg".to_string(),
                map(&[("greeting", "hello"), ("b", "2"), ("a", "1")]),
            ),
            (
                "bad".to_string(),
                map(&[("ok", "x"), ("1bad", "y"), ("with space", "z")]),
            ),
        ]
        .into(),
        secrets: [(
            "sec".to_string(),
            map(&[("password", "s3cret"), ("user", "me")]),
        )]
        .into(),
    }
}

fn services() -> Vec<Service> {
    vec![
        serde_json::from_value(
            json!({"metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]}}),
        )
        .expect("service"),
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "app"},
            "spec": {"clusterIP": "10.96.0.5", "ports": [{"port": 80}]}}))
        .expect("service"),
    ]
}

fn pod_with(container: serde_json::Value, extra_meta: serde_json::Value) -> (Pod, Container) {
    let mut meta = json!({"name": "p", "namespace": "app", "uid": "uid-1",
        "labels": {"app": "web"}, "annotations": {"note": "n"}});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), extra_meta.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": meta,
        "spec": {"containers": [container], "nodeName": "node1", "serviceAccountName": "sa",
            "enableServiceLinks": true}
    }))
    .expect("pod");
    let c = pod.spec.as_ref().expect("spec").containers[0].clone();
    (pod, c)
}

struct Env {
    objects: Objects,
    services: Vec<Service>,
    allocatable: BTreeMap<String, ApiQuantity>,
    pod_ips: Vec<String>,
    host_ips: Vec<String>,
    node_ips: Vec<IpAddr>,
}

impl Env {
    fn new() -> Self {
        Env {
            objects: objects(),
            services: services(),
            allocatable: [
                ("cpu".to_string(), ApiQuantity("2".into())),
                ("memory".to_string(), ApiQuantity("4Gi".into())),
            ]
            .into(),
            pod_ips: vec!["fd00::5".into(), "10.88.0.5".into()],
            host_ips: vec!["10.88.0.1".into()],
            node_ips: vec![],
        }
    }

    fn ctx(&self) -> EnvContext<'_> {
        EnvContext {
            pod_ip: "10.88.0.5",
            pod_ips: &self.pod_ips,
            node_ips: &self.node_ips,
            host_ips: &self.host_ips,
            node_allocatable: &self.allocatable,
            services: &self.services,
            services_synced: true,
            master_service_namespace: "default",
            config_maps: Some(&self.objects),
            secrets: Some(&self.objects),
        }
    }
}

fn user_vars(r: &ResolvedEnv) -> Vec<(String, String)> {
    r.envs
        .iter()
        .filter(|e| !e.name.starts_with("KUBERNETES_") && !e.name.starts_with("WEB_"))
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn environment_table() {
    let cases: Vec<(&str, serde_json::Value, Result<Vec<(&str, &str)>, &str>)> = vec![
        (
            "literals and expansion",
            json!([{"name": "A", "value": "a"}, {"name": "B", "value": "$(A)-b"},
                {"name": "C", "value": "$$(A) $(UNDEF) $(WEB_SERVICE_HOST)"}, {"name": "D"}]),
            Ok(vec![
                ("A", "a"),
                ("B", "a-b"),
                ("C", "$(A) $(UNDEF) 10.96.0.5"),
                ("D", ""),
            ]),
        ),
        (
            "reference to a later variable is not expanded",
            json!([{"name": "X", "value": "$(Y)"}, {"name": "Y", "value": "y"}]),
            Ok(vec![("X", "$(Y)"), ("Y", "y")]),
        ),
        (
            "field refs",
            json!([
                {"name": "N", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "U", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "AN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
                {"name": "HIP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                {"name": "PIP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "PIPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}}]),
            Ok(vec![
                ("N", "p"),
                ("NS", "app"),
                ("U", "uid-1"),
                ("L", "web"),
                ("AN", "n"),
                ("NODE", "node1"),
                ("SA", "sa"),
                ("HIP", "10.88.0.1"),
                ("PIP", "10.88.0.5"),
                ("PIPS", "10.88.0.5,fd00::5"),
            ]),
        ),
        (
            "unsupported field path",
            json!([{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]),
            Err("field label not supported: spec.containers"),
        ),
        (
            "resource field refs default to allocatable",
            json!([{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}]),
            Ok(vec![("CPU", "2"), ("MEM", "4096")]),
        ),
        (
            "configmap and secret keys",
            json!([{"name": "G", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                {"name": "P", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}}]),
            Ok(vec![("G", "hello"), ("P", "s3cret")]),
        ),
        (
            "missing configmap",
            json!([{"name": "G", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]),
            Err("configmap \"nope\" not found"),
        ),
        (
            "missing key",
            json!([{"name": "G", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nokey"}}}]),
            Err("couldn't find key nokey in ConfigMap app/cfg"),
        ),
        (
            "missing secret key",
            json!([{"name": "G", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "nokey"}}}]),
            Err("couldn't find key nokey in Secret app/sec"),
        ),
        (
            "optional references skip the variable",
            json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": true}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nokey", "optional": true}}},
                {"name": "C", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": true}}},
                {"name": "D", "value": "d"}]),
            Ok(vec![("D", "d")]),
        ),
        (
            "optional does not hide other errors",
            json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "broken", "key": "k", "optional": true}}}]),
            Err("connection refused"),
        ),
    ];
    let env = Env::new();
    for (name, vars, want) in cases {
        let (pod, c) = pod_with(json!({"name": "c", "env": vars}), json!({}));
        let got = make_environment_variables(&pod, &c, &env.ctx()).await;
        match want {
            Ok(w) => {
                let got = got.unwrap_or_else(|e| panic!("case {name}: {e}"));
                assert_eq!(user_vars(&got), pairs(&w), "case {name}");
            }
            Err(msg) => {
                let err = got.expect_err(name);
                assert_eq!(err.to_string(), msg, "case {name}");
                assert_eq!(err.reason(), "CreateContainerConfigError");
            }
        }
    }
}

#[tokio::test]
async fn env_from_prefix_invalid_keys_and_override() {
    let env = Env::new();
    let (pod, c) = pod_with(
        json!({"name": "c",
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CM_"},
                {"configMapRef": {"name": "bad"}},
                {"secretRef": {"name": "sec"}},
                {"configMapRef": {"name": "absent", "optional": true}}],
            "env": [{"name": "CM_a", "value": "override"}, {"name": "user", "value": "$(CM_b)"}]}),
        json!({}),
    );
    let got = make_environment_variables(&pod, &c, &env.ctx())
        .await
        .expect("env");
    assert_eq!(
        user_vars(&got),
        pairs(&[
            ("CM_a", "override"),
            ("CM_b", "2"),
            ("CM_greeting", "hello"),
            ("ok", "x"),
            ("password", "s3cret"),
            ("user", "2"),
        ])
    );
    assert_eq!(got.events.len(), 1);
    assert_eq!(got.events[0].reason, "InvalidEnvironmentVariableNames");
    assert!(
        got.events[0].message.contains("[1bad, with space]")
            && got.events[0].message.contains("app/bad"),
        "{}",
        got.events[0].message
    );
}

#[tokio::test]
async fn service_variables_order_and_links() {
    let env = Env::new();
    let (pod, c) = pod_with(
        json!({"name": "c", "env": [{"name": "WEB_SERVICE_HOST", "value": "mine"}]}),
        json!({}),
    );
    let got = make_environment_variables(&pod, &c, &env.ctx())
        .await
        .expect("env");
    assert_eq!(got.envs[0].name, "WEB_SERVICE_HOST");
    assert_eq!(got.envs[0].value, "mine");
    assert_eq!(
        got.envs
            .iter()
            .filter(|e| e.name == "WEB_SERVICE_HOST")
            .count(),
        1
    );
    assert!(got.envs.iter().any(|e| e.name == "KUBERNETES_SERVICE_HOST"));
    assert!(got.envs.iter().any(|e| e.name == "WEB_PORT_80_TCP"));

    let mut no_links = pod.clone();
    if let Some(s) = no_links.spec.as_mut() {
        s.enable_service_links = Some(false);
    }
    let got = make_environment_variables(&no_links, &c, &env.ctx())
        .await
        .expect("env");
    assert!(got.envs.iter().any(|e| e.name == "KUBERNETES_SERVICE_HOST"));
    assert!(!got.envs.iter().any(|e| e.name == "WEB_PORT"));
}

#[tokio::test]
async fn preconditions() {
    let env = Env::new();
    let (pod, c) = pod_with(json!({"name": "c"}), json!({}));

    let mut ctx = env.ctx();
    ctx.services_synced = false;
    let err = make_environment_variables(&pod, &c, &ctx)
        .await
        .expect_err("unsynced services");
    assert_eq!(err, EnvError::ServicesNotSynced);

    let (static_pod, sc) = pod_with(
        json!({"name": "c"}),
        json!({"annotations": {"kubernetes.io/config.source": "file"}}),
    );
    assert!(
        make_environment_variables(&static_pod, &sc, &ctx)
            .await
            .is_ok()
    );

    let mut unset = pod.clone();
    if let Some(s) = unset.spec.as_mut() {
        s.enable_service_links = None;
    }
    assert_eq!(
        make_environment_variables(&unset, &c, &env.ctx()).await,
        Err(EnvError::NilEnableServiceLinks)
    );

    let (cm_pod, cm_c) = pod_with(
        json!({"name": "c", "env": [{"name": "G", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}}]}),
        json!({}),
    );
    let mut standalone = env.ctx();
    standalone.config_maps = None;
    let err = make_environment_variables(&cm_pod, &cm_c, &standalone)
        .await
        .expect_err("no client");
    assert_eq!(
        err.to_string(),
        "couldn't get configMap app/cfg, no kubeClient defined"
    );
}

#[test]
fn pod_ip_sorting_table() {
    let v4: IpAddr = "10.0.0.1".parse().expect("ip");
    let v6: IpAddr = "fd00::1".parse().expect("ip");
    let ips = vec![
        "fd00::5".to_string(),
        "10.0.0.5".to_string(),
        "10.0.0.6".to_string(),
    ];
    let cases: Vec<(Vec<IpAddr>, Vec<&str>)> = vec![
        (vec![], vec!["10.0.0.5", "fd00::5"]),
        (vec![v4], vec!["10.0.0.5", "fd00::5"]),
        (vec![v6], vec!["fd00::5", "10.0.0.5"]),
    ];
    for (node, want) in cases {
        assert_eq!(sort_pod_ips(&ips, &node), want, "node {node:?}");
    }
    assert_eq!(sort_pod_ips(&["fd00::5".to_string()], &[]), vec!["fd00::5"]);
}
