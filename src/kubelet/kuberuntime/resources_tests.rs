//! Table tests for CRI resources.

#![allow(clippy::type_complexity)]

use super::*;
use serde_json::json;

fn q(s: &str) -> Quantity {
    quantity::parse(s).expect("quantity")
}

#[test]
fn linux_resources_table() {
    let on = RuntimeSettings::default();
    let off = RuntimeSettings {
        cpu_cfs_quota: false,
        ..Default::default()
    };
    let cases: Vec<(
        &str,
        &str,
        &str,
        &str,
        &RuntimeSettings,
        (i64, i64, i64, i64),
    )> = vec![
        (
            "guaranteed reference",
            "500m",
            "500m",
            "128Mi",
            &on,
            (100_000, 50_000, 512, 134_217_728),
        ),
        (
            "burstable reference",
            "100m",
            "1",
            "256Mi",
            &on,
            (100_000, 100_000, 102, 268_435_456),
        ),
        (
            "best effort reference",
            "0",
            "0",
            "0",
            &on,
            (100_000, 0, 2, 0),
        ),
        (
            "limit without request takes the limit's shares",
            "0",
            "2",
            "0",
            &on,
            (100_000, 200_000, 2048, 0),
        ),
        (
            "quota disabled",
            "100m",
            "1",
            "1Gi",
            &off,
            (0, 0, 102, 1 << 30),
        ),
    ];
    for (name, req, lim, mem, settings, (period, quota, shares, memory)) in cases {
        let r = calculate_linux_resources(&q(req), &q(lim), &q(mem), settings);
        assert_eq!(
            (
                r.cpu_period,
                r.cpu_quota,
                r.cpu_shares,
                r.memory_limit_in_bytes
            ),
            (period, quota, shares, memory),
            "case {name}"
        );
    }
    let custom = RuntimeSettings {
        cpu_cfs_quota_period_us: 50_000,
        ..Default::default()
    };
    let r = calculate_linux_resources(&q("0"), &q("500m"), &q("0"), &custom);
    assert_eq!((r.cpu_period, r.cpu_quota), (50_000, 25_000));
}

#[test]
fn hugepage_unit_table() {
    let cases: &[(i64, Result<&str, ()>)] = &[
        (1024, Ok("1KB")),
        (2 * 1024 * 1024, Ok("2MB")),
        (1 << 30, Ok("1GB")),
        (2048 * 1024 * 1024, Ok("2GB")),
        (256 * 1024, Ok("256KB")),
        (1025 * 1024, Err(())),
        (100, Ok("100B")),
    ];
    for (size, want) in cases {
        let got = hugepage_unit_size_from_byte_size(*size).map_err(|_| ());
        assert_eq!(got, want.map(str::to_string), "{size}");
    }
}

#[test]
fn sysfs_names_table() {
    let got = hugepage_sizes_from_sysfs_names([
        "hugepages-2048kB",
        "hugepages-1048576kB",
        "hugepages-64kB",
        "other",
        "hugepages-xkB",
    ]);
    assert_eq!(got, vec!["2MB", "1GB", "64KB"]);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("hugepages-2048kB")).expect("mkdir");
    assert_eq!(read_hugepage_sizes(dir.path()), vec!["2MB"]);
    assert!(read_hugepage_sizes(&dir.path().join("missing")).is_empty());
}

#[test]
fn hugepage_limits_table() {
    let sizes = vec!["2MB".to_string(), "1GB".to_string()];
    let res: ResourceRequirements = serde_json::from_value(json!({
        "limits": {"hugepages-2Mi": "6Mi", "hugepages-3Mi": "3Mi", "cpu": "1"}
    }))
    .expect("resources");
    let got: Vec<(String, u64)> = hugepage_limits(Some(&res), &sizes)
        .into_iter()
        .map(|h| (h.page_size, h.limit))
        .collect();
    assert_eq!(
        got,
        vec![("2MB".to_string(), 6 << 20), ("1GB".to_string(), 0)]
    );
    let none: Vec<u64> = hugepage_limits(None, &sizes)
        .into_iter()
        .map(|h| h.limit)
        .collect();
    assert_eq!(none, vec![0, 0]);
    assert!(hugepage_limits(None, &[]).is_empty());
}

#[test]
fn sandbox_resources_table() {
    let pod: Pod = serde_json::from_value(json!({"spec": {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "200m"}, "limits": {"memory": "64Mi"}}}],
        "initContainers": [
            {"name": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}}],
        "overhead": {"cpu": "250m", "memory": "120Mi"}}}))
    .expect("pod");
    let s = RuntimeSettings::default();
    let r = sandbox_resources(&pod, &s);
    // requests: cpu max(300m, 2) = 2; limits: cpu max(1, 500m) = 1, memory 320Mi.
    assert_eq!(
        (
            r.cpu_shares,
            r.cpu_quota,
            r.cpu_period,
            r.memory_limit_in_bytes
        ),
        (2048, 100_000, 100_000, 320 << 20)
    );
    let o = overhead_resources(&pod, &s);
    assert_eq!(
        (o.cpu_shares, o.cpu_quota, o.memory_limit_in_bytes),
        (256, 25_000, 120 << 20)
    );
    let bare: Pod =
        serde_json::from_value(json!({"spec": {"containers": [{"name": "a"}]}})).expect("pod");
    assert_eq!(
        overhead_resources(&bare, &s),
        LinuxContainerResources::default()
    );
    let r = sandbox_resources(&bare, &s);
    assert_eq!((r.cpu_shares, r.cpu_quota, r.cpu_period), (2, 0, 100_000));
}
