//! configMap, secret, downwardAPI and projected plugins against temp dirs.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestStatus};
use k8s_openapi::api::core::v1::Volume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use crate::util::clock::RealClock;
use crate::volume::testing::{self, Objects, is_mounted, is_root, mode};
use crate::volume::token_manager::{ServiceAccountTokenGetter, TokenError, TokenManager};
use crate::volume::{MounterArgs, PluginManager, Spec, VolumeHost};

const UID: &str = "u1";

fn manager(root: &Path, objects: &Arc<Objects>, tokens: bool) -> PluginManager {
    let mut host: VolumeHost = testing::host(root)
        .with_config_maps(objects.clone())
        .with_secrets(objects.clone());
    if tokens {
        host = host.with_tokens(Arc::new(TokenManager::new(
            Arc::new(Issuer),
            Arc::new(RealClock),
        )));
    }
    PluginManager::new(Arc::new(host))
}

struct Issuer;

#[async_trait]
impl ServiceAccountTokenGetter for Issuer {
    async fn create_token(
        &self,
        namespace: &str,
        sa: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenError> {
        let secs = request.spec.expiration_seconds.unwrap_or(3600) as u64;
        let exp = SystemTime::now() + Duration::from_secs(secs);
        let r = request.spec.bound_object_ref.clone().unwrap_or_default();
        let mut out = request.clone();
        out.status = Some(TokenRequestStatus {
            token: format!(
                "jwt:{namespace}:{sa}:{}:{}",
                r.name.unwrap_or_default(),
                request.spec.audiences.join(",")
            ),
            expiration_timestamp: Time(jiff::Timestamp::try_from(exp).expect("ts")),
        });
        Ok(out)
    }
}

fn volume(v: serde_json::Value) -> Spec {
    Spec::from_volume(serde_json::from_value::<Volume>(v).expect("volume"))
}

fn visible(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".."))
        .collect();
    v.sort();
    v
}

fn pod_with(spec: serde_json::Value) -> Arc<k8s_openapi::api::core::v1::Pod> {
    testing::pod(UID, spec)
}

async fn set_up(pm: &PluginManager, spec: &Spec, args: &MounterArgs) -> Result<PathBuf, String> {
    let pod = pod_with(json!({"serviceAccountName": "default", "containers": [{"name": "c"}]}));
    set_up_pod(pm, spec, &pod, args).await
}

async fn set_up_pod(
    pm: &PluginManager,
    spec: &Spec,
    pod: &Arc<k8s_openapi::api::core::v1::Pod>,
    args: &MounterArgs,
) -> Result<PathBuf, String> {
    let plugin = pm.find_plugin_by_spec(spec).map_err(|e| e.to_string())?;
    let m = plugin.new_mounter(spec, pod).map_err(|e| e.to_string())?;
    m.set_up(args).await.map_err(|e| e.to_string())?;
    Ok(m.path())
}

async fn tear_down(pm: &PluginManager, plugin: &str, name: &str) {
    pm.find_plugin_by_name(plugin)
        .expect("plugin")
        .new_unmounter(name, UID)
        .expect("unmounter")
        .tear_down()
        .await
        .expect("teardown");
}

#[tokio::test]
async fn config_map_content_update_and_teardown() {
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    objects.put_config_map("cfg", &[("greeting", "hello"), ("other", "x")]);
    let pm = manager(tmp.path(), &objects, false);
    let spec = volume(json!({"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}}));
    let dir = set_up(&pm, &spec, &MounterArgs::default())
        .await
        .expect("setup");
    assert_eq!(
        dir,
        tmp.path()
            .join("pods/u1/volumes/kubernetes.io~configmap/cfg")
    );
    assert_eq!(visible(&dir), vec!["greeting", "other"]);
    assert_eq!(
        fs::read_to_string(dir.join("greeting")).expect("read"),
        "hello"
    );
    assert_eq!(mode(&dir.join("greeting")), 0o644);
    assert!(
        tmp.path()
            .join("pods/u1/plugins/kubernetes.io~empty-dir/wrapped_cfg/ready")
            .is_file()
    );
    assert!(!is_mounted(&dir), "configMap volumes are on disk");
    let data_before = fs::read_link(dir.join("..data")).expect("..data");

    // Same object: SetUp again changes nothing.
    set_up(&pm, &spec, &MounterArgs::default())
        .await
        .expect("again");
    assert_eq!(
        fs::read_link(dir.join("..data")).expect("..data"),
        data_before
    );

    // Changed object: new version, dropped key gone.
    objects.put_config_map("cfg", &[("greeting", "bonjour")]);
    set_up(&pm, &spec, &MounterArgs::default())
        .await
        .expect("update");
    assert_ne!(
        fs::read_link(dir.join("..data")).expect("..data"),
        data_before
    );
    assert_eq!(visible(&dir), vec!["greeting"]);
    assert_eq!(
        fs::read_to_string(dir.join("greeting")).expect("read"),
        "bonjour"
    );

    tear_down(&pm, "kubernetes.io/configmap", "cfg").await;
    assert!(!dir.exists());
    assert!(
        !tmp.path()
            .join("pods/u1/plugins/kubernetes.io~empty-dir/wrapped_cfg")
            .exists()
    );
}

#[tokio::test]
async fn config_map_items_optional_and_missing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    objects.put_config_map("cfg", &[("a", "1"), ("b", "2")]);
    let pm = manager(tmp.path(), &objects, false);

    let items = volume(
        json!({"name": "items", "configMap": {"name": "cfg", "defaultMode": 0o600,
        "items": [{"key": "a", "path": "sub/dir/a.txt", "mode": 0o444}, {"key": "b", "path": "b"}]}}),
    );
    let dir = set_up(&pm, &items, &MounterArgs::default())
        .await
        .expect("items");
    assert_eq!(visible(&dir), vec!["b", "sub"]);
    assert_eq!(
        fs::read_to_string(dir.join("sub/dir/a.txt")).expect("read"),
        "1"
    );
    assert_eq!(mode(&dir.join("sub/dir/a.txt")), 0o444);
    assert_eq!(mode(&dir.join("b")), 0o600);

    let optional = volume(
        json!({"name": "opt", "configMap": {"name": "nope", "optional": true, "defaultMode": 420}}),
    );
    let dir = set_up(&pm, &optional, &MounterArgs::default())
        .await
        .expect("optional");
    assert!(visible(&dir).is_empty());
    assert!(dir.join("..data").exists());

    let missing =
        volume(json!({"name": "miss", "configMap": {"name": "nope", "defaultMode": 420}}));
    let err = set_up(&pm, &missing, &MounterArgs::default())
        .await
        .expect_err("missing");
    assert_eq!(err, "configmap \"nope\" not found");
    assert!(
        !tmp.path()
            .join("pods/u1/volumes/kubernetes.io~configmap/miss")
            .exists()
    );

    let bad_key = volume(
        json!({"name": "bad", "configMap": {"name": "cfg", "defaultMode": 420,
        "items": [{"key": "zzz", "path": "z"}]}}),
    );
    let err = set_up(&pm, &bad_key, &MounterArgs::default())
        .await
        .expect_err("bad key");
    assert_eq!(err, "configmap references non-existent config key: zzz");
}

#[tokio::test]
async fn config_map_fs_group_ownership() {
    if !is_root() {
        eprintln!("SKIPPED config_map_fs_group_ownership: chown needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    objects.put_config_map("cfg", &[("k", "v")]);
    let pm = manager(tmp.path(), &objects, false);
    let spec = volume(json!({"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 0o600}}));
    let args = MounterArgs {
        fs_group: Some(2345),
        ..Default::default()
    };
    let dir = set_up(&pm, &spec, &args).await.expect("setup");
    let f = dir.join("k");
    assert_eq!(fs::metadata(&f).expect("meta").gid(), 2345);
    assert_eq!(mode(&f), 0o640, "read-only volume: group read only");
    assert_eq!(fs::metadata(&dir).expect("meta").gid(), 2345);
    assert_eq!(mode(&dir) & 0o2550, 0o2550);
}

#[tokio::test]
async fn secret_lives_in_tmpfs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    objects.put_secret("s", &[("password", b"hunter2")]);
    let pm = manager(tmp.path(), &objects, false);
    let spec = volume(json!({"name": "sec", "secret": {"secretName": "s", "defaultMode": 0o400}}));
    if !is_root() {
        eprintln!("SKIPPED secret_lives_in_tmpfs: mounting needs root");
        return;
    }
    let dir = set_up(&pm, &spec, &MounterArgs::default())
        .await
        .expect("setup");
    assert!(is_mounted(&dir), "secrets are in tmpfs");
    assert_eq!(fs::read(dir.join("password")).expect("read"), b"hunter2");
    assert_eq!(mode(&dir.join("password")), 0o400);
    let missing =
        volume(json!({"name": "m", "secret": {"secretName": "nope", "defaultMode": 420}}));
    assert_eq!(
        set_up(&pm, &missing, &MounterArgs::default()).await,
        Err("secret \"nope\" not found".to_string())
    );
    tear_down(&pm, "kubernetes.io/secret", "sec").await;
    assert!(!is_mounted(&dir));
    assert!(!dir.exists());
}

#[tokio::test]
async fn downward_api_fields_and_resources() {
    if !is_root() {
        eprintln!("SKIPPED downward_api_fields_and_resources: mounting needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    let pm = manager(tmp.path(), &objects, false);
    let pod = pod_with(json!({"containers": [
        {"name": "c", "resources": {"limits": {"memory": "64Mi"}}},
        {"name": "nolimits"}
    ]}));
    let spec = volume(
        json!({"name": "info", "downwardAPI": {"defaultMode": 0o644, "items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}, "mode": 0o400},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}},
            {"path": "cpu", "resourceFieldRef": {"containerName": "nolimits", "resource": "limits.cpu", "divisor": "1m"}},
            {"path": "./sub/../uid", "fieldRef": {"fieldPath": "metadata.uid"}}
        ]}}),
    );
    let dir = set_up_pod(&pm, &spec, &pod, &MounterArgs::default())
        .await
        .expect("setup");
    let read = |n: &str| fs::read_to_string(dir.join(n)).expect("read");
    assert_eq!(read("labels"), "app=\"web\"");
    assert_eq!(read("annotations"), "note=\"hi\"");
    assert_eq!(mode(&dir.join("annotations")), 0o400);
    assert_eq!(read("name"), "p");
    assert_eq!(read("app"), "web");
    assert_eq!(read("mem"), "64");
    assert_eq!(
        read("cpu"),
        "4000",
        "node allocatable stands in for a missing limit"
    );
    assert_eq!(read("uid"), "u1");
    assert!(is_mounted(&dir), "downwardAPI volumes are in tmpfs");

    let bad = volume(
        json!({"name": "bad", "downwardAPI": {"defaultMode": 420, "items": [
            {"path": "x", "fieldRef": {"fieldPath": "spec.nodeName"}},
            {"path": "y", "resourceFieldRef": {"containerName": "ghost", "resource": "limits.cpu"}}
        ]}}),
    );
    let err = set_up_pod(&pm, &bad, &pod, &MounterArgs::default())
        .await
        .expect_err("bad");
    assert_eq!(
        err,
        "[unsupported fieldPath: spec.nodeName, container ghost not found]"
    );
    tear_down(&pm, "kubernetes.io/downward-api", "info").await;
    assert!(!dir.exists());
}

fn kube_api_access() -> Spec {
    volume(
        json!({"name": "kube-api-access-z6r9k", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}}),
    )
}

#[tokio::test]
async fn projected_kube_api_access_shape() {
    if !is_root() {
        eprintln!("SKIPPED projected_kube_api_access_shape: mounting needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    objects.put_config_map(
        "kube-root-ca.crt",
        &[("ca.crt", "-----BEGIN CERTIFICATE-----")],
    );
    let pm = manager(tmp.path(), &objects, true);
    let spec = kube_api_access();
    let dir = set_up(&pm, &spec, &MounterArgs::default())
        .await
        .expect("setup");
    assert_eq!(
        dir,
        tmp.path()
            .join("pods/u1/volumes/kubernetes.io~projected/kube-api-access-z6r9k")
    );
    assert_eq!(visible(&dir), vec!["ca.crt", "namespace", "token"]);
    assert_eq!(
        fs::read_to_string(dir.join("token")).expect("token"),
        "jwt:ns:default:p:"
    );
    assert_eq!(fs::read_to_string(dir.join("namespace")).expect("ns"), "ns");
    for f in ["token", "ca.crt", "namespace"] {
        assert_eq!(mode(&dir.join(f)), 0o644, "{f}");
    }
    assert!(
        tmp.path()
            .join("pods/u1/plugins/kubernetes.io~empty-dir/wrapped_kube-api-access-z6r9k/ready")
            .is_file()
    );
    assert!(is_mounted(&dir));
    tear_down(&pm, "kubernetes.io/projected", "kube-api-access-z6r9k").await;
    assert!(!dir.exists());
    assert!(!is_mounted(&dir));
}

#[tokio::test]
async fn projected_token_modes_with_fs_group_and_user() {
    if !is_root() {
        eprintln!("SKIPPED projected_token_modes_with_fs_group_and_user: needs root");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    objects.put_config_map("kube-root-ca.crt", &[("ca.crt", "ca")]);
    let pm = manager(tmp.path(), &objects, true);
    let spec = kube_api_access();
    // (fsUser, fsGroup, token mode, token uid, token gid)
    let cases = [
        (None, Some(3000), 0o640, 0, 3000),
        (Some(1001), None, 0o600, 1001, 0),
        (Some(1001), Some(3000), 0o640, 1001, 3000),
    ];
    for (fs_user, fs_group, want_mode, uid, gid) in cases {
        let args = MounterArgs {
            fs_user,
            fs_group,
            fs_group_change_policy: None,
        };
        let dir = set_up(&pm, &spec, &args).await.expect("setup");
        let token = dir.join("token");
        let meta = fs::metadata(&token).expect("meta");
        assert_eq!(mode(&token), want_mode, "{fs_user:?} {fs_group:?}");
        assert_eq!(
            (meta.uid(), meta.gid()),
            (uid, gid),
            "{fs_user:?} {fs_group:?}"
        );
        tear_down(&pm, "kubernetes.io/projected", "kube-api-access-z6r9k").await;
    }
}

#[tokio::test]
async fn projected_needs_api_access_and_reports_every_failure() {
    let tmp = tempfile::tempdir().expect("tmp");
    let objects = Arc::new(Objects::default());
    let pm = manager(tmp.path(), &objects, false);
    let err = set_up(&pm, &kube_api_access(), &MounterArgs::default())
        .await
        .expect_err("no client");
    assert_eq!(
        err,
        "cannot setup projected volume kube-api-access-z6r9k because kube client is not configured"
    );
    let pm = manager(tmp.path(), &objects, true);
    let spec = volume(
        json!({"name": "p", "projected": {"defaultMode": 420, "sources": [
            {"configMap": {"name": "missing-cm"}},
            {"secret": {"name": "missing-secret"}},
            {"secret": {"name": "optional-secret", "optional": true}}
        ]}}),
    );
    let err = set_up(&pm, &spec, &MounterArgs::default())
        .await
        .expect_err("missing");
    assert_eq!(
        err,
        "[configmap \"missing-cm\" not found, secret \"missing-secret\" not found]"
    );
}

#[test]
fn plugin_lookup() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pm = manager(tmp.path(), &Arc::new(Objects::default()), false);
    let cases: Vec<(serde_json::Value, Result<&str, &str>)> = vec![
        (
            json!({"name": "a", "emptyDir": {}}),
            Ok("kubernetes.io/empty-dir"),
        ),
        (
            json!({"name": "a", "hostPath": {"path": "/x"}}),
            Ok("kubernetes.io/host-path"),
        ),
        (
            json!({"name": "a", "configMap": {"name": "x"}}),
            Ok("kubernetes.io/configmap"),
        ),
        (
            json!({"name": "a", "secret": {"secretName": "x"}}),
            Ok("kubernetes.io/secret"),
        ),
        (
            json!({"name": "a", "downwardAPI": {}}),
            Ok("kubernetes.io/downward-api"),
        ),
        (
            json!({"name": "a", "projected": {}}),
            Ok("kubernetes.io/projected"),
        ),
        (
            json!({"name": "a", "nfs": {"server": "s", "path": "/"}}),
            Err("no volume plugin matched"),
        ),
    ];
    for (v, want) in cases {
        let got = pm
            .find_plugin_by_spec(&volume(v.clone()))
            .map(|p| p.name())
            .map_err(|e| e.to_string());
        assert_eq!(got.as_deref().map_err(String::as_str), want, "{v}");
    }
}
