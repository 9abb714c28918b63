//! Fakes for the lifecycle's unit tests: a scripted runtime, container and
//! pod container managers that record calls, volumes and probes that do
//! nothing but record, and an event recorder that keeps events.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::cadvisor::MachineInfo;
use crate::cm::qos_container_manager::ActivePodsFn;
use crate::cm::{
    CgroupName, CmError, ContainerManager, NodeConfig, PodContainerManager, QosContainersInfo,
    ResourceList, Status,
};
use crate::kubelet::container::helpers::convert_pod_status_to_running_pod;
use crate::kubelet::container::{
    ContainerId, ContainerState, ContainerStatus, GcPolicy, Image, PodStatus, PodSyncResult,
    RunningPod, Runtime, RuntimeError, RuntimeStatus, SyncAction, SyncResult,
};
use crate::kubelet::pod_sync::{PodVolumes, ProbeManager};
use crate::kubelet::pod_workers::{EventType, PodEventRecorder};
use crate::kubelet::status::{ApiPodStatus, ContainerProbeStatus};
use crate::kubelet::volumemanager::{OrphanCleanupError, WaitError};
use crate::util::lifecycle::TaskSet;

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// A runtime that "runs" every container of a synced pod.
#[derive(Default)]
pub struct FakeRuntime {
    pub pods: Mutex<HashMap<String, PodStatus>>,
    pub calls: Mutex<Vec<String>>,
    /// Results returned by sync_pod instead of running containers.
    pub sync_results: Mutex<Vec<PodSyncResult>>,
    pub deleted: Mutex<Vec<String>>,
    pub kill_grace: Mutex<Vec<Option<i64>>>,
}

impl FakeRuntime {
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// Makes the runtime report a running pod nobody asked for.
    pub fn add_running(&self, uid: &str, name: &str) {
        let status = PodStatus {
            id: uid.into(),
            name: name.into(),
            namespace: "default".into(),
            container_statuses: vec![container(
                "app",
                &format!("{uid}-app"),
                ContainerState::Running,
            )],
            ..Default::default()
        };
        self.pods.lock().unwrap().insert(uid.into(), status);
    }
}

pub fn container(name: &str, id: &str, state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        id: ContainerId::new("fake", id),
        name: name.into(),
        state,
        created_at: Some(SystemTime::now()),
        started_at: Some(SystemTime::now()),
        finished_at: None,
        exit_code: 0,
        image: "busybox".into(),
        image_id: "sha256:1".into(),
        hash: 0,
        restart_count: 0,
        reason: String::new(),
        message: String::new(),
    }
}

#[async_trait]
impl Runtime for FakeRuntime {
    fn runtime_type(&self) -> &str {
        "fake"
    }
    async fn version(&self) -> Result<String, RuntimeError> {
        Ok("fake://1".into())
    }
    async fn status(&self) -> Result<RuntimeStatus, RuntimeError> {
        Ok(RuntimeStatus::default())
    }
    async fn get_pods(&self, _all: bool) -> Result<Vec<RunningPod>, RuntimeError> {
        let pods = self.pods.lock().unwrap();
        Ok(pods
            .values()
            .filter(|p| p.running_container_statuses().next().is_some())
            .map(|p| convert_pod_status_to_running_pod("fake", p))
            .collect())
    }
    async fn get_pod_status(
        &self,
        uid: &str,
        _n: &str,
        _ns: &str,
    ) -> Result<PodStatus, RuntimeError> {
        Ok(self
            .pods
            .lock()
            .unwrap()
            .get(uid)
            .cloned()
            .unwrap_or_else(|| PodStatus::empty(uid)))
    }
    async fn sync_pod(&self, pod: &Pod, _status: &PodStatus, _s: &[Secret]) -> PodSyncResult {
        let id = uid(pod);
        self.calls.lock().unwrap().push(format!("sync {id}"));
        if let Some(r) = self.sync_results.lock().unwrap().pop() {
            return r;
        }
        let mut result = PodSyncResult::default();
        let mut pods = self.pods.lock().unwrap();
        let status = pods.entry(id.clone()).or_insert_with(|| PodStatus {
            id: id.clone(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            ips: vec!["10.0.0.2".into()],
            ..Default::default()
        });
        for c in &pod.spec.as_ref().unwrap().containers {
            let running = status
                .container_statuses
                .iter()
                .any(|s| s.name == c.name && s.state == ContainerState::Running);
            if running {
                continue;
            }
            status.container_statuses.push(container(
                &c.name,
                &format!("{id}-{}", c.name),
                ContainerState::Running,
            ));
            result.add(SyncResult::ok(SyncAction::StartContainer, c.name.clone()));
        }
        result
    }
    async fn kill_pod(
        &self,
        _pod: Option<&Pod>,
        running: &RunningPod,
        grace: Option<i64>,
    ) -> Result<(), RuntimeError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("kill {}", running.id));
        self.kill_grace.lock().unwrap().push(grace);
        if let Some(p) = self.pods.lock().unwrap().get_mut(&running.id) {
            for c in &mut p.container_statuses {
                c.state = ContainerState::Exited;
                c.exit_code = 137;
                c.finished_at = Some(SystemTime::now());
            }
        }
        Ok(())
    }
    async fn garbage_collect(&self, _p: GcPolicy, _r: bool, _e: bool) -> Result<(), RuntimeError> {
        Ok(())
    }
    async fn delete_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.deleted.lock().unwrap().push(id.id.clone());
        Ok(())
    }
    async fn list_images(&self) -> Result<Vec<Image>, RuntimeError> {
        Ok(vec![])
    }
    async fn remove_image(&self, _id: &str) -> Result<(), RuntimeError> {
        Ok(())
    }
}

/// Pod cgroups as a set.
#[derive(Default)]
pub struct FakePcm {
    pub cgroups: Mutex<BTreeSet<String>>,
    pub destroyed: Mutex<Vec<String>>,
}

#[async_trait]
impl PodContainerManager for FakePcm {
    fn get_pod_container_name(&self, pod: &Pod) -> Result<(CgroupName, String), CmError> {
        let name = CgroupName::from_cgroupfs(&format!("/kubepods/pod{}", uid(pod)));
        let literal = name.to_cgroupfs();
        Ok((name, literal))
    }
    async fn exists(&self, pod: &Pod) -> bool {
        self.cgroups.lock().unwrap().contains(&uid(pod))
    }
    async fn ensure_exists(&self, pod: &Pod) -> Result<(), CmError> {
        self.cgroups.lock().unwrap().insert(uid(pod));
        Ok(())
    }
    async fn destroy(&self, name: &CgroupName) -> Result<(), CmError> {
        let uid = name
            .base()
            .unwrap_or_default()
            .trim_start_matches("pod")
            .to_string();
        self.cgroups.lock().unwrap().remove(&uid);
        self.destroyed.lock().unwrap().push(uid);
        Ok(())
    }
    async fn reduce_cpu_limits(&self, _name: &CgroupName) -> Result<(), CmError> {
        Ok(())
    }
    async fn get_all_pods_from_cgroups(&self) -> Result<BTreeMap<String, CgroupName>, CmError> {
        Ok(self
            .cgroups
            .lock()
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u.clone(),
                    CgroupName::from_cgroupfs(&format!("/kubepods/pod{u}")),
                )
            })
            .collect())
    }
    fn is_pod_cgroup(&self, literal: &str) -> Option<String> {
        literal
            .rsplit('/')
            .next()?
            .strip_prefix("pod")
            .map(str::to_string)
    }
}

/// A container manager that only counts QoS updates.
#[derive(Default)]
pub struct FakeCm {
    pub config: NodeConfig,
    pub machine: MachineInfo,
    pub qos_updates: Mutex<u32>,
    /// What resource allocation at admission fails with, if anything.
    pub refuse_allocation: Option<fn() -> crate::cm::admission::AllocationError>,
}

#[async_trait]
impl ContainerManager for FakeCm {
    async fn start(
        &self,
        _t: &TaskSet,
        _a: ActivePodsFn,
        _r: Option<crate::cm::CmRuntimeDeps>,
    ) -> Result<(), CmError> {
        Ok(())
    }
    async fn get_capacity(&self, _l: bool) -> ResourceList {
        ResourceList::new()
    }
    fn get_node_allocatable_reservation(&self) -> ResourceList {
        ResourceList::new()
    }
    fn get_node_allocatable_absolute(&self) -> ResourceList {
        ResourceList::new()
    }
    fn get_node_config(&self) -> &NodeConfig {
        &self.config
    }
    fn get_qos_containers_info(&self) -> QosContainersInfo {
        QosContainersInfo::default()
    }
    fn get_pod_cgroup_root(&self) -> String {
        "/kubepods".into()
    }
    fn new_pod_container_manager(&self) -> Arc<dyn PodContainerManager> {
        Arc::new(FakePcm::default())
    }
    async fn update_qos_cgroups(&self) -> Result<(), CmError> {
        *self.qos_updates.lock().unwrap() += 1;
        Ok(())
    }
    fn status(&self) -> Status {
        Status::default()
    }
    fn kubelet_cgroups_name(&self) -> String {
        String::new()
    }
    fn system_cgroups_name(&self) -> String {
        String::new()
    }
    fn runtime_cgroups_name(&self) -> String {
        String::new()
    }
    fn machine_info(&self) -> &MachineInfo {
        &self.machine
    }
    fn allocate_resources(&self, _pod: &Pod) -> Result<(), crate::cm::admission::AllocationError> {
        match self.refuse_allocation {
            Some(e) => Err(e()),
            None => Ok(()),
        }
    }
}

/// Volumes that mount at once and record what was asked.
#[derive(Default)]
pub struct FakeVolumes {
    pub mounted: Mutex<Vec<String>>,
    pub unmounted: Mutex<Vec<String>>,
    pub existing: Mutex<HashSet<String>>,
    pub fail_mount: Mutex<Option<WaitError>>,
    pub cleaned: Mutex<Vec<(Vec<String>, Vec<String>)>>,
}

#[async_trait]
impl PodVolumes for FakeVolumes {
    async fn wait_for_attach_and_mount(&self, pod: &Pod) -> Result<(), WaitError> {
        if let Some(e) = self.fail_mount.lock().unwrap().clone() {
            return Err(e);
        }
        self.mounted.lock().unwrap().push(uid(pod));
        Ok(())
    }
    async fn wait_for_unmount(&self, pod: &Pod) -> Result<(), WaitError> {
        self.unmounted.lock().unwrap().push(uid(pod));
        self.existing.lock().unwrap().remove(&uid(pod));
        Ok(())
    }
    async fn pod_volumes_exist(&self, uid: &str) -> bool {
        self.existing.lock().unwrap().contains(uid)
    }
    fn get_mounted_volumes_for_pod(&self, _uid: &str) -> crate::kubelet::kuberuntime::VolumeMap {
        Default::default()
    }
    fn get_extra_supplemental_groups_for_pod(&self, _pod: &Pod) -> Vec<i64> {
        Vec::new()
    }
    async fn cleanup_orphaned_pod_dirs(
        &self,
        desired: &HashSet<String>,
        running: &HashSet<String>,
    ) -> Result<(), OrphanCleanupError> {
        let mut d: Vec<String> = desired.iter().cloned().collect();
        let mut r: Vec<String> = running.iter().cloned().collect();
        d.sort();
        r.sort();
        self.cleaned.lock().unwrap().push((d, r));
        Ok(())
    }
}

/// Probes: running containers are ready unless marked unready; calls recorded.
#[derive(Default)]
pub struct FakeProbes {
    pub calls: Mutex<Vec<String>>,
    pub unready: Mutex<HashSet<String>>,
}

impl ContainerProbeStatus for FakeProbes {
    fn update_pod_status(&self, _uid: &str, status: &mut ApiPodStatus) {
        for cs in status.container_statuses.iter_mut().flatten() {
            let running = cs.state.as_ref().is_some_and(|s| s.running.is_some());
            let unready = cs
                .container_id
                .as_ref()
                .is_some_and(|id| self.unready.lock().unwrap().contains(id));
            cs.ready = running && !unready;
            cs.started = Some(running);
        }
    }
}

impl ProbeManager for FakeProbes {
    fn add_pod(&self, pod: &Pod) {
        self.calls.lock().unwrap().push(format!("add {}", uid(pod)));
    }
    fn remove_pod(&self, pod: &Pod) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("remove {}", uid(pod)));
    }
    fn stop_liveness_and_startup(&self, pod: &Pod) {
        self.calls
            .lock()
            .unwrap()
            .push(format!("stop {}", uid(pod)));
    }
    fn cleanup_pods(&self, desired: &HashSet<String>) {
        let mut d: Vec<&String> = desired.iter().collect();
        d.sort();
        self.calls.lock().unwrap().push(format!("cleanup {d:?}"));
    }
}

/// Keeps events as (reason, message).
#[derive(Default)]
pub struct Events(pub Mutex<Vec<(String, String)>>);

impl Events {
    pub fn reasons(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }
}

impl PodEventRecorder for Events {
    fn pod_event(&self, _pod: &Pod, _t: EventType, reason: &str, message: &str) {
        self.0
            .lock()
            .unwrap()
            .push((reason.to_string(), message.to_string()));
    }
}

/// The whole lifecycle built over the fakes above.
/// Mirror pods that record what pod sync and housekeeping asked.
#[derive(Default)]
pub struct FakeMirrors {
    pub calls: Mutex<Vec<String>>,
}

#[async_trait]
impl crate::kubelet::pod_sync::MirrorPods for FakeMirrors {
    async fn sync(&self, pod: &Pod, mirror: Option<&Pod>) {
        let had = if mirror.is_some() {
            "replace"
        } else {
            "create"
        };
        self.calls
            .lock()
            .unwrap()
            .push(format!("{had} {}", uid(pod)));
    }

    async fn delete_orphaned(
        &self,
        pods: &crate::kubelet::pod::PodManager,
        is_terminating: &(dyn for<'a> Fn(&'a str) -> bool + Send + Sync),
    ) {
        for name in pods.get_orphaned_mirror_pod_names() {
            if !is_terminating(&name) {
                self.calls.lock().unwrap().push(format!("delete {name}"));
            }
        }
    }
}

pub struct Stack {
    pub runtime: Arc<FakeRuntime>,
    pub mirrors: Arc<FakeMirrors>,
    pub pcm: Arc<FakePcm>,
    pub cm: Arc<FakeCm>,
    pub volumes: Arc<FakeVolumes>,
    pub probes: Arc<FakeProbes>,
    pub events: Arc<Events>,
    pub pod_manager: Arc<crate::kubelet::pod::PodManager>,
    pub status_manager: Arc<crate::kubelet::status::StatusManager>,
    pub cache: Arc<crate::kubelet::container::PodCache>,
    pub runtime_state: Arc<super::runtime_state::RuntimeState>,
    pub syncer: Arc<crate::kubelet::pod_sync::PodSyncer>,
    pub workers: crate::kubelet::pod_workers::PodWorkers,
    pub housekeeping: Arc<crate::kubelet::housekeeping::Housekeeping>,
    /// The composed lifecycle until [`Stack::start_workers`].
    lifecycle: Option<crate::kubelet::build::lifecycle::Lifecycle>,
    /// The sync loop, once the workers started.
    pub sync_loop: Option<super::SyncLoop>,
    pub root: tempfile::TempDir,
}

/// A node with room for 110 pods, 2 CPUs and 1 GiB.
pub fn admission_node(max_pods: i64) -> super::fit::AdmissionNode {
    use crate::util::quantity::Quantity;
    super::fit::AdmissionNode {
        name: "node".into(),
        labels: Default::default(),
        taints: vec![],
        allocatable: [
            ("pods".to_string(), Quantity::from_decimal(max_pods)),
            ("cpu".to_string(), Quantity::from_decimal(2)),
            ("memory".to_string(), Quantity::from_binary(1 << 30)),
        ]
        .into(),
    }
}

impl Stack {
    /// Starts the pod workers over the stack's syncer (and the container
    /// deletor); the sync loop is then in [`Stack::sync_loop`].
    pub fn start_workers(&mut self, tasks: &crate::util::lifecycle::TaskSet) {
        if let Some(lifecycle) = self.lifecycle.take() {
            self.sync_loop = Some(lifecycle.start_workers(tasks));
        }
    }

    pub fn new(apparmor: bool) -> Stack {
        let (config, _) =
            crate::kubelet::config::PodConfig::new(Arc::new(crate::util::clock::RealClock));
        Stack::with(apparmor, admission_node(110), config.sources_ready())
    }

    /// The kubelet's own lifecycle composition over fakes at the outer
    /// seams: runtime, cgroups, volumes, probes, events.
    pub fn with(
        apparmor: bool,
        node: super::fit::AdmissionNode,
        sources_ready: crate::kubelet::config::SourcesReady,
    ) -> Stack {
        use crate::kubelet::build::lifecycle::{PodCore, Seams, Settings, compose};
        use crate::util::clock::{Clock, RealClock};
        let clock: Arc<dyn Clock> = Arc::new(RealClock);
        let runtime = Arc::new(FakeRuntime::default());
        let pcm = Arc::new(FakePcm::default());
        let cm = Arc::new(FakeCm::default());
        let volumes = Arc::new(FakeVolumes::default());
        let probes = Arc::new(FakeProbes::default());
        let events = Arc::new(Events::default());
        let mirrors = Arc::new(FakeMirrors::default());
        let pod_manager = Arc::new(crate::kubelet::pod::PodManager::new());
        let (core, workers_start) =
            PodCore::new(pod_manager, events.clone(), clock, Default::default());
        core.runtime_state.set_network_state(None);
        core.runtime_state.set_runtime_sync();
        let root = tempfile::tempdir().unwrap();
        let seams = Seams {
            runtime: runtime.clone(),
            container_manager: cm.clone(),
            pod_container_manager: pcm.clone(),
            volumes: volumes.clone(),
            probes: probes.clone(),
            secrets: Arc::new(crate::kubelet::pod_sync::NoSecretManager),
            mirror_pods: Some(mirrors.clone()),
            soft_admission: Arc::new(super::admission::SoftAdmission::with_apparmor(apparmor)),
            admission_node: Arc::new(move || node.clone()),
            eviction_admit: None,
            shutdown_admit: None,
            backoff_gc: None,
            sources_ready,
        };
        let settings = Settings {
            dirs: crate::kubelet::pod_dirs::PodDirs::new(root.path()),
            cgroups_per_qos: true,
            keep_terminated_pod_volumes: false,
            allowed_unsafe_sysctls: vec![],
            max_per_pod_container: 1,
            node_ips: vec![],
            host_ips: None,
        };
        let lifecycle = compose(&core, workers_start, seams, settings);
        Stack {
            runtime,
            mirrors,
            pcm,
            cm,
            volumes,
            probes,
            events,
            pod_manager: core.pod_manager.clone(),
            status_manager: core.status_manager.clone(),
            cache: core.pod_cache.clone(),
            runtime_state: core.runtime_state.clone(),
            syncer: lifecycle.syncer.clone(),
            workers: core.pod_workers.clone(),
            housekeeping: lifecycle.housekeeping.clone(),
            lifecycle: Some(lifecycle),
            sync_loop: None,
            root,
        }
    }

    /// A PLEG stand-in: copies the fake runtime into the cache continuously
    /// and reports pods whose runtime state changed.
    pub fn start_fake_pleg(
        &self,
        tasks: &TaskSet,
        events: Option<crate::kubelet::pleg::events::EventSender>,
    ) {
        let runtime = self.runtime.clone();
        let cache = self.cache.clone();
        let stop = tasks.token();
        tasks.spawn("fake-pleg", async move {
            let mut last: HashMap<String, PodStatus> = HashMap::new();
            loop {
                let pods: Vec<PodStatus> = runtime.pods.lock().unwrap().values().cloned().collect();
                let now = tokio::time::Instant::now();
                for p in pods {
                    if last.get(&p.id) != Some(&p) {
                        if let Some(tx) = &events {
                            tx.send(crate::kubelet::pleg::PodLifecycleEvent {
                                id: p.id.clone(),
                                event_type:
                                    crate::kubelet::pleg::PodLifecycleEventType::ContainerChanged,
                                data: String::new(),
                            });
                        }
                        last.insert(p.id.clone(), p.clone());
                    }
                    cache.set(&p.id.clone(), p, None, now);
                }
                cache.update_time(now);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
                }
            }
        });
    }
}

/// A pod as the file source would deliver it.
pub fn static_pod(uid: &str, containers: &[&str]) -> Arc<Pod> {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    p.metadata.name = Some(format!("{uid}-node"));
    p.metadata.namespace = Some("default".into());
    p.metadata.annotations = Some(
        [(
            crate::kubelet::types::CONFIG_SOURCE_ANNOTATION_KEY.to_string(),
            "file".to_string(),
        )]
        .into(),
    );
    p.spec = Some(PodSpec {
        node_name: Some("node".into()),
        termination_grace_period_seconds: Some(30),
        restart_policy: Some("Always".into()),
        containers: containers
            .iter()
            .map(|c| Container {
                name: c.to_string(),
                image: Some("busybox".into()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    Arc::new(p)
}

/// Polls `f` every 10 ms for up to 5 s.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}
