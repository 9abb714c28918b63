//! The operation executor (operationexecutor + nestedpendingoperations):
//! mount and unmount run as tasks, at most one per (volume, pod) at a
//! time; a failed one blocks retries of the same key for an exponentially
//! growing time (500 ms doubling to 2 min 2 s), reset by a success.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::actual_state::{MarkMountOpts, MountState, MountedVolume};
use super::desired_state::VolumeToMount;
use super::events::{
    EventType, FAILED_MOUNT, PodRef, SUCCESSFUL_MOUNT_VOLUME, VolumeEvent, err_suffix, volume_msg,
    volume_msg_detailed,
};
use super::shared::Shared;
use crate::util::lifecycle::TaskSet;
use crate::volume::spec::MounterArgs;
use crate::volume::subpath::clean_subpaths;

pub const INITIAL_DURATION_BEFORE_RETRY: Duration = Duration::from_millis(500);
pub const MAX_DURATION_BEFORE_RETRY: Duration = Duration::from_secs(2 * 60 + 2);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct OpKey {
    volume_name: String,
    pod_uid: String,
}

struct OpEntry {
    running: bool,
    /// After a failure: no retry before this instant.
    not_before: Option<Instant>,
    last_backoff: Duration,
}

/// Why an operation did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartRefused {
    AlreadyRunning,
    BackingOff,
}

/// Operations under way and their retry backoff.
#[derive(Default)]
pub struct PendingOperations {
    ops: Mutex<HashMap<OpKey, OpEntry>>,
}

impl PendingOperations {
    fn lock(&self) -> MutexGuard<'_, HashMap<OpKey, OpEntry>> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims the key for a new operation.
    pub fn try_start(
        &self,
        volume_name: &str,
        pod_uid: &str,
        now: Instant,
    ) -> Result<(), StartRefused> {
        let key = OpKey {
            volume_name: volume_name.to_string(),
            pod_uid: pod_uid.to_string(),
        };
        let mut ops = self.lock();
        match ops.get_mut(&key) {
            Some(e) if e.running => Err(StartRefused::AlreadyRunning),
            Some(e) if e.not_before.is_some_and(|t| now < t) => Err(StartRefused::BackingOff),
            Some(e) => {
                e.running = true;
                Ok(())
            }
            None => {
                ops.insert(
                    key,
                    OpEntry {
                        running: true,
                        not_before: None,
                        last_backoff: Duration::ZERO,
                    },
                );
                Ok(())
            }
        }
    }

    /// Releases the key; a failure starts or grows its backoff.
    pub fn finish(&self, volume_name: &str, pod_uid: &str, ok: bool, now: Instant) {
        let key = OpKey {
            volume_name: volume_name.to_string(),
            pod_uid: pod_uid.to_string(),
        };
        let mut ops = self.lock();
        if ok {
            ops.remove(&key);
            return;
        }
        if let Some(e) = ops.get_mut(&key) {
            e.running = false;
            e.last_backoff = if e.last_backoff.is_zero() {
                INITIAL_DURATION_BEFORE_RETRY
            } else {
                (e.last_backoff * 2).min(MAX_DURATION_BEFORE_RETRY)
            };
            e.not_before = Some(now + e.last_backoff);
        }
    }

    /// Whether an operation on the volume (any pod when `pod_uid` is
    /// None) is running.
    pub fn is_pending(&self, volume_name: &str, pod_uid: Option<&str>) -> bool {
        self.lock().iter().any(|(k, e)| {
            e.running && k.volume_name == volume_name && pod_uid.is_none_or(|p| p == k.pod_uid)
        })
    }

    /// The backoff now in force for the key (for tests and logs).
    pub fn backoff(&self, volume_name: &str, pod_uid: &str) -> Option<Duration> {
        self.lock()
            .get(&OpKey {
                volume_name: volume_name.to_string(),
                pod_uid: pod_uid.to_string(),
            })
            .map(|e| e.last_backoff)
    }
}

fn pod_name(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    PodRef::from_pod(pod).to_string()
}

/// Starts mounting `vtm` (unless an operation on it is running or backing
/// off). `is_remount`: the volume is mounted and SetUp runs again.
pub fn start_mount(shared: &Arc<Shared>, tasks: &TaskSet, vtm: VolumeToMount, is_remount: bool) {
    let now = shared.clock.monotonic();
    if shared
        .ops
        .try_start(&vtm.volume_name, &vtm.pod_uid, now)
        .is_err()
    {
        return;
    }
    crate::vlog!(5, volume = %vtm.outer_volume_spec_name, pod = %pod_name(&vtm.pod), "Starting operationExecutor.MountVolume");
    let shared = shared.clone();
    tasks.spawn("volume-mount", async move {
        let ok = mount_volume(&shared, &vtm, is_remount).await;
        shared
            .ops
            .finish(&vtm.volume_name, &vtm.pod_uid, ok, shared.clock.monotonic());
    });
}

/// SetUp and the bookkeeping around it; true on success.
pub async fn mount_volume(shared: &Shared, vtm: &VolumeToMount, is_remount: bool) -> bool {
    let name = vtm.outer_volume_spec_name.as_str();
    let pod = pod_name(&vtm.pod);
    let fail = |prefix: &str, err: &dyn std::fmt::Display, record: bool| {
        let simple = volume_msg(prefix, name, &err_suffix(err));
        let detailed = volume_msg_detailed(
            prefix,
            name,
            &vtm.volume_name,
            &pod,
            &vtm.pod_uid,
            &err_suffix(err),
        );
        tracing::error!(pod = %pod, volume = name, "{detailed}");
        shared.events.publish(VolumeEvent {
            pod: PodRef::from_pod(&vtm.pod),
            volume: name.to_string(),
            event_type: EventType::Warning,
            reason: FAILED_MOUNT,
            message: simple,
            record,
        });
    };
    let plugin = match shared.plugins.find_plugin_by_spec(&vtm.spec) {
        Ok(p) => p,
        Err(e) => {
            fail("MountVolume.FindPluginBySpec failed", &e, true);
            return false;
        }
    };
    let mounter = match plugin.new_mounter(&vtm.spec, &vtm.pod) {
        Ok(m) => m,
        Err(e) => {
            fail("MountVolume.NewMounter initialization failed", &e, true);
            return false;
        }
    };
    let args = MounterArgs::for_pod(&vtm.pod);
    let record = MountedVolume {
        pod_uid: vtm.pod_uid.clone(),
        pod_name: pod.clone(),
        volume_name: vtm.volume_name.clone(),
        outer_volume_spec_name: vtm.outer_volume_spec_name.clone(),
        inner_volume_spec_name: vtm.spec.name().to_string(),
        plugin_name: plugin.name().to_string(),
        spec: vtm.spec.clone(),
        path: mounter.path(),
        attributes: mounter.attributes(),
        volume_gid_value: vtm.volume_gid_value.clone(),
        state: MountState::Mounted,
    };
    if let Err(e) = mounter.set_up(&args).await {
        fail("MountVolume.SetUp failed", &e, true);
        return false;
    }
    let detailed = volume_msg_detailed(
        "MountVolume.SetUp succeeded",
        name,
        &vtm.volume_name,
        &pod,
        &vtm.pod_uid,
        "",
    );
    if is_remount {
        crate::vlog!(4, pod = %pod, volume = name, "{detailed}");
    } else {
        crate::vlog!(1, pod = %pod, volume = name, "{detailed}");
        shared.events.publish(VolumeEvent {
            pod: PodRef::from_pod(&vtm.pod),
            volume: name.to_string(),
            event_type: EventType::Normal,
            reason: SUCCESSFUL_MOUNT_VOLUME,
            message: volume_msg("MountVolume.SetUp succeeded", name, ""),
            record: false,
        });
    }
    if let Err(e) = shared
        .asw
        .mark_volume_as_mounted(MarkMountOpts { volume: record })
    {
        fail("MountVolume.MarkVolumeAsMounted failed", &e, true);
        return false;
    }
    true
}

/// Starts unmounting a pod's volume.
pub fn start_unmount(shared: &Arc<Shared>, tasks: &TaskSet, mv: MountedVolume) {
    let now = shared.clock.monotonic();
    if shared
        .ops
        .try_start(&mv.volume_name, &mv.pod_uid, now)
        .is_err()
    {
        return;
    }
    crate::vlog!(5, volume = %mv.outer_volume_spec_name, pod = %mv.pod_name, "Starting operationExecutor.UnmountVolume");
    let shared = shared.clone();
    tasks.spawn("volume-unmount", async move {
        let ok = unmount_volume(&shared, &mv).await;
        shared
            .ops
            .finish(&mv.volume_name, &mv.pod_uid, ok, shared.clock.monotonic());
    });
}

/// Cleans subPath mounts, tears the volume down, forgets the mount; true
/// on success.
pub async fn unmount_volume(shared: &Shared, mv: &MountedVolume) -> bool {
    let name = if mv.outer_volume_spec_name.is_empty() {
        mv.inner_volume_spec_name.as_str()
    } else {
        mv.outer_volume_spec_name.as_str()
    };
    let fail = |prefix: &str, err: &dyn std::fmt::Display| {
        let detailed = volume_msg_detailed(
            prefix,
            name,
            &mv.volume_name,
            &mv.pod_name,
            &mv.pod_uid,
            &err_suffix(err),
        );
        tracing::error!(pod = %mv.pod_name, volume = name, "{detailed}");
    };
    let plugin = match shared.plugins.find_plugin_by_name(&mv.plugin_name) {
        Ok(p) => p,
        Err(e) => {
            fail("UnmountVolume.FindPluginByName failed", &e);
            return false;
        }
    };
    let unmounter = match plugin.new_unmounter(&mv.inner_volume_spec_name, &mv.pod_uid) {
        Ok(u) => u,
        Err(e) => {
            fail("UnmountVolume.NewUnmounter failed", &e);
            return false;
        }
    };
    let host = shared.plugins.host().clone();
    let pod_dir: PathBuf = host.dirs().pod_dir(&mv.pod_uid);
    let inner = mv.inner_volume_spec_name.clone();
    let cleaned = tokio::task::spawn_blocking(move || {
        clean_subpaths(host.mounter().as_ref(), &pod_dir, &inner)
    })
    .await
    .map_err(|e| crate::volume::VolumeError::other(e.to_string()))
    .and_then(|r| r);
    if let Err(e) = cleaned {
        fail("error cleaning subPath mounts", &e);
        return false;
    }
    if let Err(e) = unmounter.tear_down().await {
        if shared.asw.volume_exists(&mv.volume_name) {
            let _ = shared
                .asw
                .mark_volume_mount_as_uncertain(MarkMountOpts { volume: mv.clone() });
        }
        fail("UnmountVolume.TearDown failed", &e);
        return false;
    }
    tracing::info!(
        volume = %mv.volume_name,
        outer = %mv.outer_volume_spec_name,
        pod = %mv.pod_name,
        uid = %mv.pod_uid,
        inner = %mv.inner_volume_spec_name,
        plugin = %mv.plugin_name,
        "UnmountVolume.TearDown succeeded"
    );
    shared
        .asw
        .mark_volume_as_unmounted(&mv.pod_uid, &mv.volume_name);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let ops = PendingOperations::default();
        let t0 = Instant::now();
        ops.try_start("v", "p", t0).expect("first");
        assert_eq!(
            ops.try_start("v", "p", t0),
            Err(StartRefused::AlreadyRunning)
        );
        assert!(ops.is_pending("v", None) && ops.is_pending("v", Some("p")));
        assert!(!ops.is_pending("v", Some("q")) && !ops.is_pending("w", None));
        // Another pod's operation on the same volume runs in parallel.
        ops.try_start("v", "q", t0).expect("other pod");
        ops.finish("v", "q", true, t0);

        let mut now = t0;
        let mut want = vec![];
        let mut d = Duration::from_millis(500);
        for _ in 0..12 {
            want.push(d);
            d = (d * 2).min(MAX_DURATION_BEFORE_RETRY);
        }
        for expected in want {
            ops.finish("v", "p", false, now);
            assert_eq!(ops.backoff("v", "p"), Some(expected));
            assert_eq!(
                ops.try_start("v", "p", now + expected - Duration::from_millis(1)),
                Err(StartRefused::BackingOff)
            );
            now += expected;
            ops.try_start("v", "p", now).expect("after backoff");
        }
        assert_eq!(ops.backoff("v", "p"), Some(MAX_DURATION_BEFORE_RETRY));
        ops.finish("v", "p", true, now);
        assert_eq!(ops.backoff("v", "p"), None);
        ops.try_start("v", "p", now).expect("reset");
    }
}
