//! Hostile input (issue 18): property tests over the parsers that take
//! outside bytes. Each property runs a bounded number of generated cases in
//! CI (`KUBELET_RS_FUZZ_CASES`, 256 by default; raise it for a deep run)
//! and must never panic: the KubeletConfiguration file, static pod
//! manifests (file and URL sources decode the same way), kubeconfigs,
//! quantities and CPU lists, request paths through the router,
//! /proc/net/dev text, and the strategic merge patches the kubelet sends
//! (which must also turn the API's copy into the kubelet's exactly, as the
//! API server applies them).
//!
//! Inputs are either raw (any string or bytes) or shaped: YAML documents
//! generated from a tree of the keys those files use, so the cases reach
//! past the YAML reader into decoding, defaulting and validation.

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use kubelet::apis::config::loader::decode_document;
use kubelet::kubelet::config::common::StaticPodOrigin;
use kubelet::kubelet::config::decode::{decode_pod_list, decode_single_pod, to_json};
use kubelet::util::strategicpatch::PatchSchema;
use kubelet::util::strategicpatch::create_two_way_merge_patch;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn cases() -> u32 {
    std::env::var("KUBELET_RS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // Failures are reported with the shrunk input; no files written.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Cases run by all properties, printed at the end of each.
static RUN: AtomicU64 = AtomicU64::new(0);

fn count() {
    RUN.fetch_add(1, Ordering::Relaxed);
}

/// Keys the generated documents use: the files' own and some noise.
const CONFIG_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "staticPodPath",
    "syncFrequency",
    "address",
    "port",
    "readOnlyPort",
    "authentication",
    "anonymous",
    "enabled",
    "webhook",
    "cacheTTL",
    "authorization",
    "mode",
    "evictionHard",
    "memory.available",
    "kubeReserved",
    "cpu",
    "memory",
    "featureGates",
    "cpuManagerPolicy",
    "reservedMemory",
    "numaNode",
    "limits",
    "clusterDNS",
    "tlsCipherSuites",
    "logging",
    "format",
    "shutdownGracePeriodByPodPriority",
    "priority",
    "x",
];

const POD_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "spec",
    "containers",
    "initContainers",
    "image",
    "command",
    "args",
    "env",
    "value",
    "valueFrom",
    "fieldRef",
    "fieldPath",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "volumes",
    "volumeMounts",
    "mountPath",
    "hostPath",
    "path",
    "ports",
    "containerPort",
    "protocol",
    "securityContext",
    "readinessProbe",
    "exec",
    "httpGet",
    "items",
    "restartPolicy",
    "hostNetwork",
    "x",
];

/// Scalars as YAML spells them: numbers, quantities, durations, booleans,
/// strings that look like other things.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<bool>().prop_map(|b| json!(b)),
        Just(Value::Null),
        prop::sample::select(vec![
            "v1",
            "Pod",
            "PodList",
            "kubelet.config.k8s.io/v1beta1",
            "KubeletConfiguration",
            "100Mi",
            "1.5",
            "-1",
            "10s",
            "1h2m",
            "0x10",
            "1e400",
            "Always",
            "None",
            "static",
            "~",
            "",
            "busybox",
            "/tmp",
            "a\u{0}b",
            "émoji 🎉",
        ])
        .prop_map(|s| json!(s)),
        "[ -~]{0,24}".prop_map(|s| json!(s)),
    ]
}

/// A JSON tree of bounded depth and width over `keys`.
fn tree(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(keys), inner), 0..8).prop_map(|kv| {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k.to_string(), v);
                }
                Value::Object(m)
            }),
        ]
    })
}

/// A document of `kind` with a shaped body, as YAML or JSON text.
fn document(
    api_version: &'static str,
    kind: &'static str,
    keys: &'static [&'static str],
) -> impl Strategy<Value = String> {
    (tree(keys), any::<bool>(), any::<bool>()).prop_map(move |(body, as_json, typed)| {
        let mut doc = match body {
            Value::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("spec".into(), other);
                m
            }
        };
        if typed {
            doc.insert("apiVersion".into(), json!(api_version));
            doc.insert("kind".into(), json!(kind));
        }
        let v = Value::Object(doc);
        if as_json {
            v.to_string()
        } else {
            to_yaml(&v, 0)
        }
    })
}

/// Block-style YAML of a JSON value (quoting every string).
fn to_yaml(v: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| match v {
                Value::Object(c) if !c.is_empty() => {
                    format!("{pad}{k:?}:\n{}", to_yaml(v, indent + 2))
                }
                Value::Array(a) if !a.is_empty() => {
                    format!("{pad}{k:?}:\n{}", to_yaml(v, indent))
                }
                _ => format!("{pad}{k:?}: {}\n", inline(v)),
            })
            .collect(),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|v| match v {
                Value::Object(c) if !c.is_empty() => {
                    let body = to_yaml(v, indent + 2);
                    format!("{pad}- {}", body.trim_start())
                }
                _ => format!("{pad}- {}\n", inline(v)),
            })
            .collect(),
        _ => format!("{pad}{}\n", inline(v)),
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        other => other.to_string(),
    }
}

fn manifest_path() -> &'static Path {
    Path::new("/etc/kubernetes/manifests/fuzz.yaml")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn config_file_any_text(text in "(?s).{0,400}") {
        count();
        let _ = decode_document(Path::new("/etc/kubernetes/kubelet-conf.yml"), &text);
    }

    #[test]
    fn config_file_shaped(text in document("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration", CONFIG_KEYS)) {
        count();
        let _ = decode_document(Path::new("/etc/kubernetes/kubelet-conf.yml"), &text);
    }

    #[test]
    fn manifest_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        count();
        let _ = to_json(&bytes);
        let _ = decode_single_pod(&bytes, StaticPodOrigin::File(manifest_path()), "node-a");
        let _ = decode_pod_list(&bytes, StaticPodOrigin::Url("http://127.0.0.1/pods"), "node-a");
    }

    #[test]
    fn manifest_shaped_pod(text in document("v1", "Pod", POD_KEYS)) {
        count();
        let _ = decode_single_pod(text.as_bytes(), StaticPodOrigin::File(manifest_path()), "node-a");
    }

    #[test]
    fn manifest_shaped_pod_list(text in document("v1", "PodList", POD_KEYS)) {
        count();
        let _ = decode_pod_list(text.as_bytes(), StaticPodOrigin::Url("http://127.0.0.1/pods"), "node-a");
    }

    #[test]
    fn quantities_and_cpu_lists(text in "[-+0-9.eEkKMGTPimun, ]{0,24}|(?s).{0,24}") {
        count();
        let _ = kubelet::util::quantity::parse(&text);
        let _ = kubelet::util::cpuset::parse_cpu_list(&text);
        let _ = kubelet::cm::cpuset::CpuSet::parse(&text);
    }

    #[test]
    fn request_paths(raw in "(/[-a-zA-Z0-9%._~:@!$&'()*+,;=]{0,12}){0,6}/?", query in proptest::option::of("[ -~]{0,40}")) {
        count();
        let mut router = kubelet::util::router::Router::new();
        let h = kubelet::util::router::handler_fn(|_req| async move {
            kubelet::util::router::text(http::StatusCode::OK, "ok")
        });
        for p in ["/healthz", "/pods", "/stats/", "/containerLogs/", "/exec/", "/debug/pprof/"] {
            router.handle(p, h.clone()).expect("pattern");
        }
        if let Some(path) = kubelet::util::router::decode_path(&raw) {
            let _ = router.route(&path, query.as_deref());
        }
    }

    #[test]
    fn proc_net_dev(text in "(?s)(Inter-.*\n face.*\n)?([ a-z0-9]{0,8}:[ 0-9]{0,80}\n){0,6}.{0,40}") {
        count();
        let _ = kubelet::cadvisor::container::parse_net_dev(&text);
    }
}

/// Kubeconfigs: shaped documents through the loader the clients use.
#[test]
fn kubeconfig_shaped() {
    const KEYS: &[&str] = &[
        "apiVersion",
        "kind",
        "clusters",
        "cluster",
        "server",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "contexts",
        "context",
        "current-context",
        "users",
        "user",
        "name",
        "token",
        "client-certificate-data",
        "client-key-data",
        "exec",
        "command",
        "x",
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    let mut runner = proptest::test_runner::TestRunner::new(config());
    runner
        .run(&document("v1", "Config", KEYS), |text| {
            count();
            std::fs::write(&path, &text).expect("write");
            let _ = rt.block_on(kubelet::kubelet::client::kubeconfig::load(&path));
            Ok(())
        })
        .expect("no panic");
}

/// Pod statuses as the status manager writes them.
fn pod_status() -> impl Strategy<Value = Value> {
    let condition = (
        prop::sample::select(vec![
            "Ready",
            "Initialized",
            "ContainersReady",
            "PodScheduled",
        ]),
        prop::sample::select(vec!["True", "False", "Unknown"]),
        proptest::option::of(prop::sample::select(vec![
            "ContainersNotReady",
            "PodCompleted",
        ])),
    );
    let state = prop_oneof![
        Just(json!({"running": {"startedAt": "2026-11-26T10:00:00Z"}})),
        prop::sample::select(vec!["ContainerCreating", "CrashLoopBackOff"])
            .prop_map(|r| json!({"waiting": {"reason": r}})),
        (0i32..256).prop_map(|c| json!({"terminated": {"exitCode": c, "reason": "Error"}})),
    ];
    let container = (
        prop::sample::select(vec!["a", "b", "c"]),
        any::<bool>(),
        0i32..5,
        state,
        proptest::option::of(state_strategy_last()),
    );
    (
        prop::sample::select(vec!["Pending", "Running", "Succeeded", "Failed"]),
        prop::collection::vec(condition, 0..5),
        prop::collection::vec(container, 0..4),
        proptest::option::of(prop::sample::select(vec!["10.0.0.1", "10.0.0.2"])),
        proptest::option::of("[a-z ]{0,12}"),
    )
        .prop_map(|(phase, conds, containers, ip, message)| {
            let mut seen = std::collections::BTreeSet::new();
            let conditions: Vec<Value> = conds
                .into_iter()
                .filter(|(t, _, _)| seen.insert(*t))
                .map(|(t, s, r)| {
                    let mut c = json!({"type": t, "status": s, "lastProbeTime": null,
                        "lastTransitionTime": "2026-11-26T10:00:00Z"});
                    if let Some(r) = r {
                        c["reason"] = json!(r);
                    }
                    c
                })
                .collect();
            let mut names = std::collections::BTreeSet::new();
            let statuses: Vec<Value> = containers
                .into_iter()
                .filter(|(n, ..)| names.insert(*n))
                .map(|(n, ready, restarts, state, last)| {
                    let mut c = json!({"name": n, "ready": ready, "restartCount": restarts,
                        "state": state, "image": "busybox", "imageID": "", "started": ready});
                    c["lastState"] = last.unwrap_or_else(|| json!({}));
                    c
                })
                .collect();
            let mut s = json!({"phase": phase, "conditions": conditions,
                "containerStatuses": statuses, "qosClass": "BestEffort"});
            if let Some(ip) = ip {
                s["podIP"] = json!(ip);
                s["podIPs"] = json!([{"ip": ip}]);
            }
            if let Some(m) = message {
                s["message"] = json!(m);
            }
            json!({"status": s})
        })
}

fn state_strategy_last() -> impl Strategy<Value = Value> {
    (0i32..256).prop_map(|c| json!({"terminated": {"exitCode": c, "reason": "Error"}}))
}

/// The kubelet's two-way patch, applied as the API server applies it,
/// turns the API's copy into the kubelet's status exactly.
#[test]
fn status_patches_round_trip() {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    runner
        .run(&(pod_status(), pod_status()), |(original, modified)| {
            count();
            let patch =
                create_two_way_merge_patch(&original, &modified, PatchSchema::of("Pod")).unwrap();
            let applied = support::apiserver::strategic_merge_patch("Pod", &original, &patch)
                .map_err(|e| TestCaseError::fail(format!("{e:?} applying {patch}")))?;
            prop_assert_eq!(&applied, &modified, "patch {} from {} ", patch, original);
            Ok(())
        })
        .expect("round trip");
    eprintln!(
        "hostile_input: {} cases so far",
        RUN.load(Ordering::Relaxed)
    );
}
