//! The image manager and image GC against a fake CRI image service.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret};
use serde_json::json;

use super::credentialprovider::{DockerKeyring, ProvidersKeyring};
use super::*;
use crate::cri::api;
use crate::cri::{CriError, ImageService};
use crate::kubelet::container::{
    ContainerId, ContainerState, GcPolicy, Image, PodStatus, PodSyncResult, RunningContainer,
    RunningPod, Runtime, RuntimeError, RuntimeStatus,
};
use crate::kubelet::kuberuntime::events::testing::CapturingRecorder;
use crate::util::backoff::Backoff;
use crate::util::clock::Clock;
use crate::util::clock::testing::JumpClock;

/// A fixed wall clock; monotonic time follows tokio.
struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    fn new() -> Arc<Self> {
        Arc::new(ManualClock(Mutex::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 30),
        )))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

#[derive(Default)]
struct FakeImages {
    present: Mutex<BTreeMap<String, (String, u64)>>,
    fail_pulls: Mutex<bool>,
    pull_delay: Mutex<Duration>,
    pulls: Mutex<Vec<(String, Option<String>)>>,
    removed: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    fs: Mutex<Option<(u64, u64)>>,
}

impl FakeImages {
    fn add(&self, name: &str, id: &str, size: u64) {
        self.present
            .lock()
            .unwrap()
            .insert(name.into(), (id.into(), size));
    }
}

fn unavailable(rpc: &'static str) -> CriError {
    CriError::Rpc {
        endpoint: "fake".into(),
        rpc,
        code: tonic::Code::Unknown,
        message: "pull access denied".into(),
    }
}

#[async_trait]
impl ImageService for FakeImages {
    async fn list_images(
        &self,
        _: Option<api::ImageFilter>,
    ) -> crate::cri::service::Result<Vec<api::Image>> {
        let present = self.present.lock().unwrap().clone();
        let mut by_id: BTreeMap<String, api::Image> = BTreeMap::new();
        for (name, (id, size)) in present {
            let e = by_id.entry(id.clone()).or_insert_with(|| api::Image {
                id: id.clone(),
                size,
                ..Default::default()
            });
            e.repo_tags.push(name);
        }
        Ok(by_id.into_values().collect())
    }
    async fn image_status(
        &self,
        image: &api::ImageSpec,
        _: bool,
    ) -> crate::cri::service::Result<api::ImageStatusResponse> {
        let present = self.present.lock().unwrap();
        let found = present
            .get(&image.image)
            .map(|(id, _)| id.clone())
            .or_else(|| {
                present
                    .values()
                    .find(|(id, _)| *id == image.image)
                    .map(|(id, _)| id.clone())
            });
        Ok(api::ImageStatusResponse {
            image: found.map(|id| api::Image {
                id,
                uid: Some(api::Int64Value { value: 1000 }),
                ..Default::default()
            }),
            info: Default::default(),
        })
    }
    async fn pull_image(
        &self,
        image: &api::ImageSpec,
        auth: Option<&api::AuthConfig>,
        _: Option<&api::PodSandboxConfig>,
    ) -> crate::cri::service::Result<String> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = *self.pull_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.pulls
            .lock()
            .unwrap()
            .push((image.image.clone(), auth.map(|a| a.username.clone())));
        if *self.fail_pulls.lock().unwrap() {
            return Err(unavailable("PullImage"));
        }
        let id = format!("sha256:{}", image.image.len());
        self.add(&image.image, &id, 10);
        Ok(id)
    }
    async fn remove_image(&self, image: &api::ImageSpec) -> crate::cri::service::Result<()> {
        self.removed.lock().unwrap().push(image.image.clone());
        self.present
            .lock()
            .unwrap()
            .retain(|_, (id, _)| *id != image.image);
        Ok(())
    }
    async fn image_fs_info(&self) -> crate::cri::service::Result<Vec<api::FilesystemUsage>> {
        Ok(vec![])
    }
}

fn pod(policy: Option<&str>, image: &str) -> Pod {
    let mut c = json!({"name": "c", "image": image});
    if let Some(p) = policy {
        c["imagePullPolicy"] = json!(p);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
        "spec": {"containers": [c]}
    }))
    .expect("pod")
}

struct Rig {
    images: Arc<FakeImages>,
    recorder: Arc<CapturingRecorder>,
    manager: ImageManager,
}

fn no_node_credentials() -> Arc<dyn DockerKeyring> {
    Arc::new(ProvidersKeyring::default())
}

/// A node keyring with one credential for every image.
struct NodeCredentials(&'static str);

#[async_trait]
impl DockerKeyring for NodeCredentials {
    async fn lookup(&self, _: &str) -> Vec<api::AuthConfig> {
        vec![api::AuthConfig {
            username: self.0.into(),
            ..Default::default()
        }]
    }
}

fn rig(settings: PullSettings, limiter: Option<TokenBucket>) -> Rig {
    rig_with(settings, limiter, no_node_credentials())
}

fn rig_with(
    settings: PullSettings,
    limiter: Option<TokenBucket>,
    node: Arc<dyn DockerKeyring>,
) -> Rig {
    let images = Arc::new(FakeImages::default());
    let recorder = Arc::new(CapturingRecorder::default());
    let backoff = Arc::new(Backoff::new(
        IMAGE_BACKOFF_INITIAL,
        IMAGE_BACKOFF_MAX,
        JumpClock::at_a_fixed_date(),
    ));
    let service = Arc::new(RuntimeImageService::new(images.clone(), limiter, node));
    let manager = ImageManager::new(service, recorder.clone(), backoff, settings);
    Rig {
        images,
        recorder,
        manager,
    }
}

async fn ensure(r: &Rig, p: &Pod) -> Result<String, ImagePullError> {
    let c = &p.spec.as_ref().expect("spec").containers[0];
    r.manager.ensure_image_exists(p, c, &[], None).await
}

#[tokio::test]
#[allow(clippy::type_complexity)]
async fn pull_policy_table() {
    // (policy, present, want pulled, want result reason or Ok)
    let cases: &[(Option<&str>, bool, bool, Result<(), &str>)] = &[
        (Some("Always"), true, true, Ok(())),
        (Some("Always"), false, true, Ok(())),
        (Some("IfNotPresent"), true, false, Ok(())),
        (Some("IfNotPresent"), false, true, Ok(())),
        (Some("Never"), true, false, Ok(())),
        (Some("Never"), false, false, Err("ErrImageNeverPull")),
        (None, true, true, Ok(())),
    ];
    for (policy, present, want_pull, want) in cases {
        let r = rig(PullSettings::default(), None);
        if *present {
            r.images.add("busybox:latest", "sha256:old", 1);
        }
        let got = ensure(&r, &pod(*policy, "busybox")).await;
        let pulled = !r.images.pulls.lock().unwrap().is_empty();
        assert_eq!(pulled, *want_pull, "{policy:?} present={present}");
        assert_eq!(
            got.as_ref().map(|_| ()).map_err(|e| e.kind.reason()),
            *want,
            "{policy:?} present={present}"
        );
        let reasons = r.recorder.reasons();
        if *want_pull {
            assert_eq!(reasons, vec!["Pulling", "Pulled"], "{policy:?}");
            assert!(
                r.recorder.messages()[1].starts_with("Successfully pulled image \"busybox\" in ")
            );
        }
    }
}

#[test]
fn default_pull_policy_table() {
    let cases = [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.35", "IfNotPresent"),
        ("registry.local:5000/app", "Always"),
        ("registry.local:5000/app:v2", "IfNotPresent"),
    ];
    for (image, want) in cases {
        let p = pod(None, image);
        let c = &p.spec.as_ref().expect("spec").containers[0];
        assert_eq!(manager::effective_pull_policy(c), want, "{image}");
    }
}

#[tokio::test(start_paused = true)]
async fn failed_pulls_back_off_on_the_go_schedule() {
    let r = rig(PullSettings::default(), None);
    *r.images.fail_pulls.lock().unwrap() = true;
    let p = pod(Some("Always"), "kubelet-rs.local/absent:404");
    let err = ensure(&r, &p).await.expect_err("pull fails");
    assert_eq!(err.kind, ImageErrorKind::Pull);
    assert!(
        err.message.contains("pull access denied"),
        "{}",
        err.message
    );

    let err = ensure(&r, &p).await.expect_err("backing off");
    assert_eq!(err.kind.reason(), "ImagePullBackOff");
    assert_eq!(
        err.message,
        "Back-off pulling image \"kubelet-rs.local/absent:404\""
    );
    assert_eq!(r.images.pulls.lock().unwrap().len(), 1);

    // 10 s later a pull is tried again; it fails and the window doubles.
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(
        ensure(&r, &p).await.expect_err("pull").kind,
        ImageErrorKind::Pull
    );
    tokio::time::advance(Duration::from_secs(19)).await;
    assert_eq!(
        ensure(&r, &p).await.expect_err("still").kind,
        ImageErrorKind::PullBackOff
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    *r.images.fail_pulls.lock().unwrap() = false;
    assert!(
        ensure(&r, &p).await.is_ok(),
        "20 s window over and the registry is back"
    );
    assert_eq!(r.images.pulls.lock().unwrap().len(), 3);

    // A back-off is per pod and image: another pod pulls at once.
    *r.images.fail_pulls.lock().unwrap() = true;
    let mut other = p.clone();
    other.metadata.uid = Some("uid-2".into());
    r.images.present.lock().unwrap().clear();
    assert_eq!(
        ensure(&r, &other).await.expect_err("pull").kind,
        ImageErrorKind::Pull
    );
}

#[tokio::test]
async fn invalid_names_are_rejected_before_any_call() {
    let r = rig(PullSettings::default(), None);
    let err = ensure(&r, &pod(Some("Always"), "Not/Valid:!"))
        .await
        .expect_err("invalid");
    assert_eq!(err.kind.reason(), "InvalidImageName");
    assert!(r.images.pulls.lock().unwrap().is_empty());
    assert_eq!(r.recorder.reasons(), vec!["InspectFailed"]);
}

async fn max_concurrency(settings: PullSettings) -> usize {
    let r = Arc::new(rig(settings, None));
    *r.images.pull_delay.lock().unwrap() = Duration::from_millis(200);
    let mut tasks = Vec::new();
    for i in 0..6 {
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            let mut p = pod(Some("Always"), &format!("img{i}"));
            p.metadata.uid = Some(format!("u{i}"));
            ensure(&r, &p).await.expect("pull");
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    r.images.max_in_flight.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn serialized_bounded_and_parallel_pulls() {
    let serial = PullSettings {
        serialize_image_pulls: true,
        max_parallel_image_pulls: Some(5),
    };
    assert_eq!(max_concurrency(serial).await, 1);
    let bounded = PullSettings {
        serialize_image_pulls: false,
        max_parallel_image_pulls: Some(2),
    };
    assert_eq!(max_concurrency(bounded).await, 2);
    let free = PullSettings {
        serialize_image_pulls: false,
        max_parallel_image_pulls: None,
    };
    assert_eq!(max_concurrency(free).await, 6);
}

#[tokio::test(start_paused = true)]
async fn registry_qps_limits_pulls() {
    let clock = ManualClock::new();
    let limiter = TokenBucket::new(1.0, 1, clock);
    let r = rig(PullSettings::default(), limiter);
    assert!(ensure(&r, &pod(Some("Always"), "a")).await.is_ok());
    let mut p = pod(Some("Always"), "b");
    p.metadata.uid = Some("other".into());
    let err = ensure(&r, &p).await.expect_err("throttled");
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ImageErrorKind::Pull, "pull QPS exceeded")
    );
}

#[tokio::test]
async fn pull_secrets_are_tried_in_turn() {
    use base64::Engine as _;
    let r = rig(PullSettings::default(), None);
    let cfg = json!({"auths": {"registry.local": {"auth": base64::engine::general_purpose::STANDARD.encode("u:p")}}});
    let secret = Secret {
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(
            [(
                ".dockerconfigjson".to_string(),
                k8s_openapi::ByteString(cfg.to_string().into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let p = pod(Some("Always"), "registry.local/app:1");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    r.manager
        .ensure_image_exists(&p, c, &[secret], None)
        .await
        .expect("pull");
    assert_eq!(
        *r.images.pulls.lock().unwrap(),
        vec![("registry.local/app:1".to_string(), Some("u".to_string()))]
    );
}

/// Go's MakeDockerKeyring union: the pull secrets' credentials first, then
/// the node's; without pull secrets, the node's alone.
#[tokio::test]
async fn node_credentials_follow_pull_secrets() {
    use base64::Engine as _;
    let cfg = json!({"auths": {"registry.local": {"auth": base64::engine::general_purpose::STANDARD.encode("u:p")}}});
    let secret = Secret {
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(
            [(
                ".dockerconfigjson".to_string(),
                k8s_openapi::ByteString(cfg.to_string().into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let image = "registry.local/app:1".to_string();
    let cases: &[(bool, bool, &[&str])] = &[
        // (with secret, pulls fail, users tried in order)
        (true, true, &["u", "node"]),
        (true, false, &["u"]),
        (false, true, &["node"]),
        (false, false, &["node"]),
    ];
    for (with_secret, fail, want) in cases {
        let r = rig_with(
            PullSettings::default(),
            None,
            Arc::new(NodeCredentials("node")),
        );
        *r.images.fail_pulls.lock().unwrap() = *fail;
        let p = pod(Some("Always"), &image);
        let c = &p.spec.as_ref().expect("spec").containers[0];
        let secrets = if *with_secret {
            vec![secret.clone()]
        } else {
            vec![]
        };
        let result = r.manager.ensure_image_exists(&p, c, &secrets, None).await;
        assert_eq!(result.is_err(), *fail, "{with_secret} {fail}");
        let tried: Vec<Option<String>> = r
            .images
            .pulls
            .lock()
            .unwrap()
            .iter()
            .map(|(_, u)| u.clone())
            .collect();
        let want: Vec<Option<String>> = want.iter().map(|u| Some(u.to_string())).collect();
        assert_eq!(tried, want, "{with_secret} {fail}");
    }
}

// ---------------------------------------------------------------------------
// Image GC

#[derive(Default)]
struct PodsRuntime {
    pods: Mutex<Vec<RunningPod>>,
}

#[async_trait]
impl Runtime for PodsRuntime {
    fn runtime_type(&self) -> &str {
        "fake"
    }
    async fn version(&self) -> Result<String, RuntimeError> {
        Ok(String::new())
    }
    async fn status(&self) -> Result<RuntimeStatus, RuntimeError> {
        Ok(RuntimeStatus::default())
    }
    async fn get_pods(&self, _: bool) -> Result<Vec<RunningPod>, RuntimeError> {
        Ok(self.pods.lock().unwrap().clone())
    }
    async fn get_pod_status(&self, uid: &str, _: &str, _: &str) -> Result<PodStatus, RuntimeError> {
        Ok(PodStatus::empty(uid))
    }
    async fn sync_pod(&self, _: &Pod, _: &PodStatus, _: &[Secret]) -> PodSyncResult {
        PodSyncResult::default()
    }
    async fn kill_pod(
        &self,
        _: Option<&Pod>,
        _: &RunningPod,
        _: Option<i64>,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn garbage_collect(&self, _: GcPolicy, _: bool, _: bool) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn delete_container(&self, _: &ContainerId) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeError> {
        Ok(vec![])
    }
    async fn remove_image(&self, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }
}

struct FixedStats(Arc<FakeImages>);

#[async_trait]
impl ImageFsStatsProvider for FixedStats {
    async fn image_fs_stats(&self) -> Result<FsStats, ImageGcError> {
        let (capacity, available) = self.0.fs.lock().unwrap().unwrap_or((0, 0));
        Ok(FsStats {
            capacity_bytes: capacity,
            available_bytes: available,
            used_bytes: None,
        })
    }
}

fn gc_rig(
    min_age: Duration,
) -> (
    Arc<FakeImages>,
    Arc<PodsRuntime>,
    Arc<CapturingRecorder>,
    Arc<JumpClock>,
    ImageGcManager,
) {
    let images = Arc::new(FakeImages::default());
    let runtime = Arc::new(PodsRuntime::default());
    let recorder = Arc::new(CapturingRecorder::default());
    let clock = JumpClock::at_a_fixed_date();
    let gc = ImageGcManager::new(
        runtime.clone(),
        Arc::new(RuntimeImageService::new(
            images.clone(),
            None,
            no_node_credentials(),
        )),
        Arc::new(FixedStats(images.clone())),
        recorder.clone(),
        ObjectReference {
            kind: Some("Node".into()),
            name: Some("node".into()),
            ..Default::default()
        },
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age,
        },
        "registry.k8s.io/pause:3.8",
        clock.clone(),
    )
    .expect("policy");
    (images, runtime, recorder, clock, gc)
}

fn using(image_id: &str) -> RunningPod {
    RunningPod {
        id: "p".into(),
        name: "p".into(),
        namespace: "ns".into(),
        containers: vec![RunningContainer {
            id: ContainerId::new("fake", "c"),
            name: "c".into(),
            image: String::new(),
            image_id: image_id.into(),
            hash: 0,
            state: ContainerState::Exited,
        }],
        sandboxes: vec![],
    }
}

#[test]
fn policy_validation() {
    let p = |high, low| ImageGcPolicy {
        high_threshold_percent: high,
        low_threshold_percent: low,
        min_age: Duration::ZERO,
    };
    assert!(p(85, 80).validate().is_ok());
    assert!(p(101, 80).validate().is_err());
    assert!(p(85, -1).validate().is_err());
    assert!(p(50, 80).validate().is_err());
}

#[test]
fn eviction_order_is_lru_then_detection() {
    // (id, first detected, last used, pinned)
    let got = gc::eviction_order_for_test(
        &[
            ("new", 5, 50, false),
            ("old", 1, 10, false),
            ("tie-b", 3, 20, false),
            ("tie-a", 2, 20, false),
            ("pinned", 0, 0, true),
            ("used", 0, 0, false),
        ],
        &["used"],
    );
    assert_eq!(got, vec!["old", "tie-a", "tie-b", "new"]);
}

#[tokio::test(start_paused = true)]
async fn gc_frees_unused_images_down_to_the_low_threshold() {
    let (images, runtime, _rec, _clock, gc) = gc_rig(Duration::from_secs(120));
    images.add("registry.k8s.io/pause:3.8", "sha256:pause", 300);
    images.add("in-use:1", "sha256:used", 300);
    images.add("a:1", "sha256:a", 300);
    images.add("b:1", "sha256:b", 300);
    runtime.pods.lock().unwrap().push(using("sha256:used"));
    // 90% used; the low threshold (80%) needs 100 bytes more free.
    *images.fs.lock().unwrap() = Some((1000, 100));

    // Everything was just detected: too young to go.
    let err = gc.garbage_collect().await.expect_err("nothing old enough");
    assert!(
        matches!(
            err,
            ImageGcError::NotEnoughFreed {
                wanted: 100,
                freed: 0
            }
        ),
        "{err}"
    );
    assert!(images.removed.lock().unwrap().is_empty());

    tokio::time::advance(Duration::from_secs(121)).await;
    gc.garbage_collect().await.expect("freed");
    let removed = images.removed.lock().unwrap().clone();
    assert_eq!(removed.len(), 1, "one image frees enough: {removed:?}");
    assert!(removed[0] == "sha256:a" || removed[0] == "sha256:b");

    // Below the high threshold nothing happens.
    *images.fs.lock().unwrap() = Some((1000, 200));
    gc.garbage_collect().await.expect("no-op");
    assert_eq!(images.removed.lock().unwrap().len(), 1);

    // Delete all unused: the sandbox and in-use images survive.
    gc.delete_unused_images().await.expect("delete unused");
    let left: HashSet<String> = images
        .present
        .lock()
        .unwrap()
        .values()
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(
        left,
        ["sha256:pause", "sha256:used"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

/// imageMinimumGCAge is measured on the monotonic clock, as Go's
/// `time.Now()` readings are: a step of the wall clock after the images
/// were detected neither frees them early nor holds them back.
#[tokio::test(start_paused = true)]
async fn gc_minimum_age_ignores_wall_clock_jumps() {
    // (wall-clock step after detection, seconds later, freed)
    let cases = [
        (0, 60, false),
        (0, 121, true),
        (3600, 0, false),
        (3600, 121, true),
        (-3600, 60, false),
        (-3600, 121, true),
    ];
    for (jump, after, want_freed) in cases {
        let (images, _runtime, _rec, clock, gc) = gc_rig(Duration::from_secs(120));
        images.add("a:1", "sha256:a", 300);
        *images.fs.lock().unwrap() = Some((1000, 100));
        assert!(gc.garbage_collect().await.is_err(), "just detected");
        clock.jump(jump);
        tokio::time::advance(Duration::from_secs(after)).await;
        let freed = gc.garbage_collect().await.is_ok();
        assert_eq!(freed, want_freed, "step {jump} s, {after} s later");
        assert_eq!(
            images.removed.lock().unwrap().len(),
            usize::from(want_freed),
            "step {jump} s, {after} s later"
        );
    }
}

#[tokio::test]
async fn gc_with_zero_capacity_reports_and_fails() {
    let (images, _runtime, recorder, _clock, gc) = gc_rig(Duration::ZERO);
    *images.fs.lock().unwrap() = Some((0, 0));
    let err = gc.garbage_collect().await.expect_err("zero capacity");
    assert_eq!(err.to_string(), "invalid capacity 0 on image filesystem");
    assert_eq!(recorder.reasons(), vec!["InvalidDiskCapacity"]);
}

#[tokio::test]
async fn image_list_is_cached_largest_first() {
    let (images, _runtime, _rec, _clock, gc) = gc_rig(Duration::ZERO);
    images.add("small:1", "sha256:s", 1);
    images.add("big:1", "sha256:b", 100);
    assert!(gc.get_image_list().is_empty());
    gc.refresh_image_list().await.expect("refresh");
    let ids: Vec<String> = gc.get_image_list().into_iter().map(|i| i.id).collect();
    assert_eq!(ids, vec!["sha256:b", "sha256:s"]);
}
