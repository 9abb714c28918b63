//! ResourceConfigForPod and the CPU conversions against worked examples,
//! including the three reference pods of the Go kubelet.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::helpers::*;
use super::resources::ResourceConfig;

fn reference(name: &str) -> Pod {
    let text = match name {
        "guaranteed" => {
            include_str!("../../tests/fixtures/go-kubelet-examples/pod-guaranteed.json")
        }
        "burstable" => include_str!("../../tests/fixtures/go-kubelet-examples/pod-burstable.json"),
        _ => include_str!("../../tests/fixtures/go-kubelet-examples/pod-besteffort.json"),
    };
    serde_json::from_str(text).unwrap()
}

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec})).unwrap()
}

fn ctr(name: &str, requests: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "resources": {"requests": requests, "limits": limits}})
}

#[test]
fn shares_and_quota_conversions() {
    let shares = [
        (0, 2),
        (1, 2),
        (100, 102),
        (500, 512),
        (1000, 1024),
        (2000, 2048),
        (300_000, 262_144),
    ];
    for (milli, want) in shares {
        assert_eq!(milli_cpu_to_shares(milli), want, "shares of {milli}m");
    }
    let quotas = [
        (0, 100_000, 0),
        (1, 100_000, 1000),
        (500, 100_000, 50_000),
        (1000, 100_000, 100_000),
        (250, 50_000, 12_500),
    ];
    for (milli, period, want) in quotas {
        assert_eq!(
            milli_cpu_to_quota(milli, period),
            want,
            "quota of {milli}m over {period}"
        );
    }
}

#[test]
fn reference_pods_match_the_go_kubelet() {
    let opts = PodResourceOptions::default();
    let cases = [
        (
            "guaranteed",
            ResourceConfig {
                cpu_shares: Some(512),
                cpu_quota: Some(50_000),
                cpu_period: Some(100_000),
                memory: Some(134_217_728),
                ..Default::default()
            },
        ),
        (
            "burstable",
            ResourceConfig {
                cpu_shares: Some(102),
                cpu_quota: Some(100_000),
                cpu_period: Some(100_000),
                memory: Some(268_435_456),
                ..Default::default()
            },
        ),
        (
            "besteffort",
            ResourceConfig {
                cpu_shares: Some(2),
                ..Default::default()
            },
        ),
    ];
    for (name, want) in cases {
        assert_eq!(
            resource_config_for_pod(&reference(name), &opts),
            want,
            "{name}"
        );
    }
}

#[test]
fn resource_config_table() {
    let default = PodResourceOptions::default();
    let no_quota = PodResourceOptions {
        enforce_cpu_limits: false,
        ..default
    };
    let period_50ms = PodResourceOptions {
        cpu_period_us: 50_000,
        ..default
    };
    let custom_period = PodResourceOptions {
        cpu_period_us: 50_000,
        custom_cpu_cfs_quota_period: true,
        ..default
    };
    let memory_qos = PodResourceOptions {
        enforce_memory_qos: true,
        ..default
    };
    let guaranteed = || {
        pod(
            json!({"containers": [ctr("a", json!({"cpu": "500m", "memory": "128Mi"}), json!({"cpu": "500m", "memory": "128Mi"}))]}),
        )
    };
    type Case = (&'static str, Pod, PodResourceOptions, ResourceConfig);
    let cases: Vec<Case> = vec![
        (
            "guaranteed without cfs quota",
            guaranteed(),
            no_quota,
            ResourceConfig {
                cpu_shares: Some(512),
                cpu_quota: Some(-1),
                cpu_period: Some(100_000),
                memory: Some(134_217_728),
                ..Default::default()
            },
        ),
        (
            "period configured but gate off: quota over 100ms",
            guaranteed(),
            period_50ms,
            ResourceConfig {
                cpu_shares: Some(512),
                cpu_quota: Some(50_000),
                cpu_period: Some(50_000),
                memory: Some(134_217_728),
                ..Default::default()
            },
        ),
        (
            "custom period gate on",
            guaranteed(),
            custom_period,
            ResourceConfig {
                cpu_shares: Some(512),
                cpu_quota: Some(25_000),
                cpu_period: Some(50_000),
                memory: Some(134_217_728),
                ..Default::default()
            },
        ),
        (
            "burstable: one container without cpu limit",
            pod(json!({"containers": [
                ctr("a", json!({"cpu": "100m", "memory": "64Mi"}), json!({"cpu": "1", "memory": "256Mi"})),
                ctr("b", json!({"cpu": "200m"}), json!({"memory": "64Mi"}))
            ]})),
            default,
            ResourceConfig {
                cpu_shares: Some(307),
                memory: Some(335_544_320),
                ..Default::default()
            },
        ),
        (
            "burstable: init container without memory limit",
            pod(json!({
                "initContainers": [ctr("i", json!({"cpu": "2"}), json!({"cpu": "2"}))],
                "containers": [ctr("a", json!({"cpu": "100m", "memory": "64Mi"}), json!({"cpu": "1", "memory": "256Mi"}))]
            })),
            default,
            ResourceConfig {
                cpu_shares: Some(2048),
                cpu_quota: Some(200_000),
                cpu_period: Some(100_000),
                ..Default::default()
            },
        ),
        (
            "guaranteed with overhead",
            pod(json!({
                "overhead": {"cpu": "250m", "memory": "64Mi"},
                "containers": [ctr("a", json!({"cpu": "500m", "memory": "128Mi"}), json!({"cpu": "500m", "memory": "128Mi"}))]
            })),
            default,
            ResourceConfig {
                cpu_shares: Some(768),
                cpu_quota: Some(75_000),
                cpu_period: Some(100_000),
                memory: Some(201_326_592),
                ..Default::default()
            },
        ),
        (
            "huge pages from requests, init containers take the max",
            pod(json!({
                "initContainers": [ctr("i", json!({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "8Mi"}), json!({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "8Mi"}))],
                "containers": [
                    ctr("a", json!({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"}), json!({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"})),
                    ctr("b", json!({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"}), json!({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"}))
                ]
            })),
            default,
            ResourceConfig {
                cpu_shares: Some(2048),
                cpu_quota: Some(200_000),
                cpu_period: Some(100_000),
                memory: Some(2 << 30),
                hugepage_limit: BTreeMap::from([(2 << 20, 8 << 20), (1 << 30, 1 << 30)]),
                ..Default::default()
            },
        ),
        (
            "tiny limit hits the minimum quota",
            pod(
                json!({"containers": [ctr("a", json!({"cpu": "1m", "memory": "1Mi"}), json!({"cpu": "1m", "memory": "1Mi"}))]}),
            ),
            default,
            ResourceConfig {
                cpu_shares: Some(2),
                cpu_quota: Some(1000),
                cpu_period: Some(100_000),
                memory: Some(1 << 20),
                ..Default::default()
            },
        ),
        (
            "memory qos writes memory.min",
            pod(json!({"containers": [ctr("a", json!({"memory": "64Mi"}), json!({}))]})),
            memory_qos,
            ResourceConfig {
                cpu_shares: Some(2),
                unified: BTreeMap::from([("memory.min".to_string(), "67108864".to_string())]),
                ..Default::default()
            },
        ),
    ];
    for (what, pod, opts, want) in cases {
        assert_eq!(resource_config_for_pod(&pod, &opts), want, "{what}");
    }
}

#[test]
fn requests_and_limits_sum() {
    let p = pod(json!({
        "overhead": {"cpu": "100m"},
        "initContainers": [ctr("i", json!({"cpu": "3", "memory": "10Mi"}), json!({"memory": "10Mi"}))],
        "containers": [
            ctr("a", json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "2", "memory": "2Gi"})),
            ctr("b", json!({"cpu": "500m", "memory": "1Gi"}), json!({"memory": "1Gi"}))
        ]
    }));
    let (reqs, limits) = pod_requests_and_limits(&p);
    assert_eq!(reqs["cpu"].milli_value(), 3100, "init max, then overhead");
    assert_eq!(reqs["memory"].to_string(), "2Gi");
    assert_eq!(limits["cpu"].milli_value(), 2100, "overhead on a set limit");
    assert_eq!(
        limits["memory"].to_string(),
        "3Gi",
        "no memory overhead, none added"
    );
}
