//! The status manager (status_manager.go v1.25), local half: the latest API
//! status of every pod, versioned, normalized as Go normalizes it (times to
//! seconds, sorted container statuses, bounded termination messages), with
//! condition transition times kept while a condition's status holds, the
//! start time fixed once set, container states that may not go back from
//! terminated under restartPolicy Never/OnFailure, and terminal phases that
//! never regress.
//!
//! Writing statuses to the API server is issue 6: it subscribes to the
//! stream of changes ([`StatusManager::subscribe`]) and reads the versioned
//! statuses.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::mpsc;

use super::conditions::{self, CONTAINERS_READY, POD_INITIALIZED, POD_READY, POD_SCHEDULED};
use super::generate::{ApiPodStatus, is_terminal_phase, meta_time};
use crate::kubelet::container::{ContainerId, format_pod};
use crate::kubelet::pod::PodManager;
use crate::util::clock::Clock;

/// Termination messages of all containers of a pod share this many bytes.
pub const MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH: usize = 1024 * 12;

/// A status with its version; the version grows with every change.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedPodStatus {
    pub status: ApiPodStatus,
    pub version: u64,
    pub pod_name: String,
    pub pod_namespace: String,
    /// When the first unsynced change was made.
    pub at: SystemTime,
}

/// A change, as subscribers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    pub pod_uid: String,
    pub status: VersionedPodStatus,
}

#[derive(Default)]
struct Inner {
    statuses: HashMap<String, VersionedPodStatus>,
    subscribers: Vec<mpsc::UnboundedSender<StatusUpdate>>,
}

/// The kubelet's pod statuses.
pub struct StatusManager {
    pod_manager: Arc<PodManager>,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
}

fn uid_of(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

fn terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref().and_then(|st| st.terminated.as_ref())
}

/// A terminated container's status that went back to running or waiting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("terminated container {container} attempted illegal transition to non-terminated state")]
pub struct IllegalTransition {
    pub container: String,
}

/// A terminated container may only leave that state when the restart
/// policy lets it run again.
pub fn check_container_state_transition(
    old: &[ContainerStatus],
    new: &[ContainerStatus],
    restart_policy: &str,
) -> Result<(), IllegalTransition> {
    if restart_policy == "Always" {
        return Ok(());
    }
    for o in old {
        let Some(t) = terminated(o) else { continue };
        if t.exit_code != 0 && restart_policy == "OnFailure" {
            continue;
        }
        if new
            .iter()
            .any(|n| n.name == o.name && terminated(n).is_none())
        {
            return Err(IllegalTransition {
                container: o.name.clone(),
            });
        }
    }
    Ok(())
}

fn find_condition<'a>(conds: &'a [PodCondition], t: &str) -> Option<&'a PodCondition> {
    conds.iter().find(|c| c.type_ == t)
}

fn truncate_time(t: &mut Option<Time>) {
    if let Some(time) = t
        && let Ok(secs) = jiff::Timestamp::from_second(time.0.as_second())
    {
        time.0 = secs;
    }
}

fn truncate_message(message: &mut Option<String>, limit: usize) {
    if let Some(m) = message
        && m.len() > limit
    {
        let mut end = limit;
        while end > 0 && !m.is_char_boundary(end) {
            end -= 1;
        }
        m.truncate(end);
    }
}

fn normalize_state(state: &mut Option<ContainerState>, bytes_per_status: usize) {
    let Some(state) = state else { return };
    if let Some(r) = &mut state.running {
        truncate_time(&mut r.started_at);
    }
    if let Some(t) = &mut state.terminated {
        truncate_time(&mut t.started_at);
        truncate_time(&mut t.finished_at);
        truncate_message(&mut t.message, bytes_per_status);
    }
}

/// Go's normalizeStatus: second-precision times, bounded messages, sorted
/// container statuses (by name; init containers in spec order).
pub fn normalize_status(pod: &Pod, status: &mut ApiPodStatus) {
    let spec = pod.spec.as_ref();
    let containers = spec.map_or(0, |s| {
        s.containers.len() + s.init_containers.as_ref().map_or(0, Vec::len)
    });
    let bytes_per_status = MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH / containers.max(1);
    truncate_time(&mut status.start_time);
    for c in status.conditions.iter_mut().flatten() {
        truncate_time(&mut c.last_probe_time);
        truncate_time(&mut c.last_transition_time);
    }
    for list in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
    ] {
        for cs in list.iter_mut().flatten() {
            normalize_state(&mut cs.state, bytes_per_status);
            normalize_state(&mut cs.last_state, bytes_per_status);
        }
    }
    if let Some(list) = &mut status.container_statuses {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if let Some(list) = &mut status.init_container_statuses {
        let order: Vec<&str> = spec
            .and_then(|s| s.init_containers.as_ref())
            .map(|v| v.iter().map(|c| c.name.as_str()).collect())
            .unwrap_or_default();
        list.sort_by_key(|s| {
            order
                .iter()
                .position(|n| *n == s.name)
                .unwrap_or(usize::MAX)
        });
    }
}

/// Whether two statuses are equal for the kubelet: its own conditions by
/// status, reason and message, everything else exactly.
pub fn is_pod_status_by_kubelet_equal(old: &ApiPodStatus, new: &ApiPodStatus) -> bool {
    let old_conds = old.conditions.as_deref().unwrap_or_default();
    for c in new.conditions.iter().flatten() {
        if conditions::is_kubelet_owned(&c.type_) {
            match find_condition(old_conds, &c.type_) {
                Some(oc)
                    if oc.status == c.status
                        && oc.message == c.message
                        && oc.reason == c.reason => {}
                _ => return false,
            }
        }
    }
    let mut old = old.clone();
    old.conditions = new.conditions.clone();
    old == *new
}

impl StatusManager {
    pub fn new(pod_manager: Arc<PodManager>, clock: Arc<dyn Clock>) -> Self {
        StatusManager {
            pod_manager,
            clock,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A stream of every change from now on (the API sync of issue 6).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<StatusUpdate> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().subscribers.push(tx);
        rx
    }

    /// The latest status of the pod, if the kubelet produced one.
    pub fn get_pod_status(&self, uid: &str) -> Option<ApiPodStatus> {
        self.lock().statuses.get(uid).map(|v| v.status.clone())
    }

    /// The latest status with its version.
    pub fn get_versioned(&self, uid: &str) -> Option<VersionedPodStatus> {
        self.lock().statuses.get(uid).cloned()
    }

    /// Records the pod's new status; a deleted pod's status is always
    /// recorded, otherwise only a change is.
    pub fn set_pod_status(&self, pod: &Pod, status: ApiPodStatus) {
        let mut inner = self.lock();
        let force = pod.metadata.deletion_timestamp.is_some();
        self.update_internal(&mut inner, pod, status, force);
    }

    /// A readiness probe result: the container's `ready` and the Ready and
    /// ContainersReady conditions follow.
    pub fn set_container_readiness(&self, uid: &str, id: &ContainerId, ready: bool) {
        self.set_container_flag(uid, id, "readiness", |status, pod| {
            let cid = id.to_string();
            let Some(cs) = status
                .container_statuses
                .iter_mut()
                .flatten()
                .find(|c| c.container_id.as_deref() == Some(cid.as_str()))
            else {
                return false;
            };
            if cs.ready == ready {
                return false;
            }
            cs.ready = ready;
            let spec = pod.spec.clone().unwrap_or_default();
            let phase = status.phase.clone().unwrap_or_default();
            let conds = status.conditions.clone().unwrap_or_default();
            let ready_cond =
                conditions::pod_ready(&spec, &conds, status.container_statuses.as_deref(), &phase);
            let containers_cond =
                conditions::containers_ready(&spec, status.container_statuses.as_deref(), &phase);
            let list = status.conditions.get_or_insert_with(Vec::new);
            for c in [ready_cond, containers_cond] {
                match list.iter_mut().find(|x| x.type_ == c.type_) {
                    Some(slot) => *slot = c,
                    None => list.push(c),
                }
            }
            true
        });
    }

    /// A startup probe result: the container's `started` follows.
    pub fn set_container_startup(&self, uid: &str, id: &ContainerId, started: bool) {
        self.set_container_flag(uid, id, "startup", |status, _| {
            let cid = id.to_string();
            let Some(cs) = status
                .container_statuses
                .iter_mut()
                .flatten()
                .find(|c| c.container_id.as_deref() == Some(cid.as_str()))
            else {
                return false;
            };
            if cs.started == Some(started) {
                return false;
            }
            cs.started = Some(started);
            true
        });
    }

    fn set_container_flag(
        &self,
        uid: &str,
        id: &ContainerId,
        what: &'static str,
        apply: impl FnOnce(&mut ApiPodStatus, &Pod) -> bool,
    ) {
        let Some(pod) = self.pod_manager.get_pod_by_uid(uid) else {
            crate::vlog!(
                4,
                pod_uid = uid,
                what,
                "Pod has been deleted, no need to update the container"
            );
            return;
        };
        let mut inner = self.lock();
        let Some(old) = inner.statuses.get(uid) else {
            tracing::info!(pod = %format_pod(&pod), container_id = %id, what, "Container state changed before pod has synced");
            return;
        };
        let mut status = old.status.clone();
        if !apply(&mut status, &pod) {
            crate::vlog!(4, pod = %format_pod(&pod), container_id = %id, what, "Container state unchanged or container unknown");
            return;
        }
        self.update_internal(&mut inner, &pod, status, false);
    }

    /// The pod is done: containers without a terminated state get one with
    /// an unknown outcome, and the final status is recorded.
    pub fn terminate_pod(&self, pod: &Pod) {
        let mut inner = self.lock();
        let uid = uid_of(pod);
        let mut status = inner
            .statuses
            .get(uid)
            .map(|v| v.status.clone())
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        for list in [
            &mut status.container_statuses,
            &mut status.init_container_statuses,
        ] {
            for cs in list.iter_mut().flatten() {
                if terminated(cs).is_some() {
                    continue;
                }
                cs.state = Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        reason: Some("ContainerStatusUnknown".into()),
                        message: Some(
                            "The container could not be located when the pod was terminated".into(),
                        ),
                        exit_code: 137,
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
        self.update_internal(&mut inner, pod, status, true);
    }

    /// Forgets one pod's status (Go's deletePodStatus): the API sync found
    /// it of no use, and the next status the pod gets is a new version.
    pub fn delete_pod_status(&self, uid: &str) {
        self.lock().statuses.remove(uid);
    }

    /// Forgets the statuses of pods not in `uids`.
    pub fn remove_orphaned_statuses(&self, uids: &HashSet<String>) {
        self.lock().statuses.retain(|uid, _| {
            let keep = uids.contains(uid);
            if !keep {
                crate::vlog!(5, pod_uid = %uid, "Removing pod from status map");
            }
            keep
        });
    }

    fn update_internal(
        &self,
        inner: &mut Inner,
        pod: &Pod,
        mut status: ApiPodStatus,
        force: bool,
    ) -> bool {
        let uid = uid_of(pod).to_string();
        let cached = inner.statuses.get(&uid).cloned();
        let old = match &cached {
            Some(c) => c.status.clone(),
            None => self
                .pod_manager
                .get_mirror_pod_by_pod(pod)
                .and_then(|m| m.status.clone())
                .or_else(|| pod.status.clone())
                .unwrap_or_default(),
        };
        let policy = restart_policy(pod);
        let checks = [
            (&old.container_statuses, &status.container_statuses),
            (
                &old.init_container_statuses,
                &status.init_container_statuses,
            ),
        ];
        for (o, n) in checks {
            if let Err(e) = check_container_state_transition(
                o.as_deref().unwrap_or_default(),
                n.as_deref().unwrap_or_default(),
                policy,
            ) {
                tracing::error!(pod = %format_pod(pod), err = %e, "Status update on pod aborted");
                return false;
            }
        }
        if is_terminal_phase(old.phase.as_deref()) && !is_terminal_phase(status.phase.as_deref()) {
            tracing::error!(pod = %format_pod(pod), old_phase = ?old.phase, phase = ?status.phase, "Pod attempted illegal phase transition; keeping the terminal phase");
            status.phase = old.phase.clone();
        }

        let now = meta_time(self.clock.now());
        let old_conds = old.conditions.clone().unwrap_or_default();
        for t in [CONTAINERS_READY, POD_READY, POD_INITIALIZED, POD_SCHEDULED] {
            if let Some(c) = status
                .conditions
                .iter_mut()
                .flatten()
                .find(|c| c.type_ == t)
            {
                c.last_transition_time = match find_condition(&old_conds, t) {
                    Some(oc) if oc.status == c.status => oc.last_transition_time.clone(),
                    _ => Some(now.clone()),
                };
            }
        }
        if old.start_time.is_some() {
            status.start_time = old.start_time.clone();
        } else if status.start_time.is_none() {
            status.start_time = Some(now);
        }
        normalize_status(pod, &mut status);

        if let Some(c) = &cached
            && !force
            && is_pod_status_by_kubelet_equal(&c.status, &status)
        {
            crate::vlog!(5, pod = %format_pod(pod), "Ignoring same status for pod");
            return false;
        }
        let versioned = VersionedPodStatus {
            status,
            version: cached.as_ref().map_or(0, |c| c.version) + 1,
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            at: cached.as_ref().map_or_else(|| self.clock.now(), |c| c.at),
        };
        inner.statuses.insert(uid.clone(), versioned.clone());
        inner.subscribers.retain(|tx| {
            tx.send(StatusUpdate {
                pod_uid: uid.clone(),
                status: versioned.clone(),
            })
            .is_ok()
        });
        true
    }
}
