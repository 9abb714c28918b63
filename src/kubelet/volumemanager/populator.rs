//! The desired state populator (populator/desired_state_of_world_populator.go):
//! every 100 ms it adds the volumes of pods that may run containers and
//! removes those of pods that are gone or terminated once their
//! containers have stopped. A pod is processed once until reprocessing is
//! requested (on every sync of the pod), which also marks its remountable
//! volumes for a new SetUp.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::error::VolumeManagerError;
use super::shared::Shared;
use crate::kubelet::container::helpers::visit_containers;
use crate::util::lifecycle::{Period, TaskSet, run_periodic};
use crate::volume::spec::Spec;

/// The populator's period.
pub const LOOP_SLEEP_DURATION: Duration = Duration::from_millis(100);

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// The names of volumes the pod's containers mount and use as devices
/// (GetPodVolumeNames).
pub fn pod_volume_names(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut mounts = BTreeSet::new();
    let mut devices = BTreeSet::new();
    visit_containers(pod, |c| {
        for m in c.volume_mounts.iter().flatten() {
            mounts.insert(m.name.clone());
        }
        for d in c.volume_devices.iter().flatten() {
            devices.insert(d.name.clone());
        }
    });
    (mounts, devices)
}

/// Starts the populator: until every source is ready it loops without
/// declaring the initial population done, then keeps looping.
pub fn start(shared: &Arc<Shared>, tasks: &TaskSet) {
    let shared = shared.clone();
    let token = tasks.token();
    tasks.spawn("volume-populator", async move {
        tracing::info!("Desired state populator starts to run");
        let clock = shared.clock.clone();
        // Until the sources are ready: wait, then populate (wait.PollUntil).
        let initial = token.child_token();
        let period = Period::sliding(LOOP_SLEEP_DURATION);
        run_periodic(
            initial.clone(),
            period.waiting_first(),
            clock.clone(),
            || {
                let done = shared.sources_ready.all_ready();
                populator_loop(&shared);
                if done {
                    initial.cancel();
                }
                std::future::ready(())
            },
        )
        .await;
        if token.is_cancelled() {
            return;
        }
        if !shared.has_added_pods.swap(true, Ordering::SeqCst) {
            tracing::info!("Finished populating initial desired state of world");
        }
        run_periodic(token, period, clock, || {
            populator_loop(&shared);
            std::future::ready(())
        })
        .await;
    });
}

/// One pass: add new pods' volumes, then remove what is no longer wanted.
pub fn populator_loop(shared: &Shared) {
    find_and_add_new_pods(shared);
    find_and_remove_deleted_pods(shared);
}

fn find_and_add_new_pods(shared: &Shared) {
    for pod in shared.pods.get_pods() {
        if shared
            .pod_state
            .should_pod_containers_be_terminating(&uid(&pod))
        {
            continue;
        }
        process_pod_volumes(shared, &pod);
    }
}

/// Adds the pod's used volumes to the desired state (processPodVolumes).
pub fn process_pod_volumes(shared: &Shared, pod: &Arc<Pod>) {
    let pod_uid = uid(pod);
    if shared.processed().get(&pod_uid).copied() == Some(true) {
        return;
    }
    let (mounts, devices) = pod_volume_names(pod);
    let mut all_added = true;
    for vol in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if !mounts.contains(&vol.name) && !devices.contains(&vol.name) {
            crate::vlog!(4, pod = %pod_uid, volume = %vol.name, "Skipping unused volume");
            continue;
        }
        let spec = match create_volume_spec(vol) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(pod = %pod_uid, volume = %vol.name, error = %e, "Error processing volume");
                shared.dsw.add_error_to_pod(&pod_uid, e.to_string());
                all_added = false;
                continue;
            }
        };
        match shared
            .dsw
            .add_pod_to_volume(&pod_uid, pod, spec, &vol.name, "")
        {
            Ok(_) => {
                crate::vlog!(4, pod = %pod_uid, volume = %vol.name, "Added volume to desired state");
            }
            Err(e) => {
                tracing::error!(pod = %pod_uid, volume = %vol.name, error = %e, "Failed to add volume to desiredStateOfWorld");
                shared.dsw.add_error_to_pod(&pod_uid, e.to_string());
                all_added = false;
            }
        }
    }
    let seen_once = shared.processed().contains_key(&pod_uid);
    if all_added {
        shared.processed().insert(pod_uid.clone(), true);
        shared.asw.mark_remount_required(&pod_uid);
        shared.dsw.pop_pod_errors(&pod_uid);
    } else if seen_once {
        shared.processed().insert(pod_uid, true);
    }
}

/// The plugin spec of an inline pod volume. Claims and generic ephemeral
/// volumes need API objects and a provisioner this kubelet does not have.
fn create_volume_spec(
    vol: &k8s_openapi::api::core::v1::Volume,
) -> Result<Spec, VolumeManagerError> {
    if let Some(pvc) = &vol.persistent_volume_claim {
        return Err(VolumeManagerError::ClaimUnsupported(pvc.claim_name.clone()));
    }
    if vol.ephemeral.is_some() {
        return Err(VolumeManagerError::EphemeralUnsupported(vol.name.clone()));
    }
    Ok(Spec::of(vol))
}

fn find_and_remove_deleted_pods(shared: &Shared) {
    let mut pods_from_cache = BTreeSet::new();
    for vtm in shared.dsw.get_volumes_to_mount() {
        pods_from_cache.insert(vtm.pod_uid.clone());
        let pod_exists = shared.pods.get_pod_by_uid(&vtm.pod_uid).is_some();
        if pod_exists && !shared.pod_state.should_pod_runtime_be_removed(&vtm.pod_uid) {
            continue;
        }
        if !shared.pod_state.should_pod_runtime_be_removed(&vtm.pod_uid) {
            crate::vlog!(4, pod = %vtm.pod_uid, "Pod still has one or more containers in the non-exited state and will not be removed from desired state");
            continue;
        }
        let removed = shared
            .asw
            .pod_removed_from_volume(&vtm.pod_uid, &vtm.volume_name);
        if removed && pod_exists {
            crate::vlog!(4, pod = %vtm.pod_uid, volume = %vtm.outer_volume_spec_name, "Actual state does not yet have volume mount information and pod still exists in pod manager, skip removing volume from desired state");
            continue;
        }
        crate::vlog!(4, pod = %vtm.pod_uid, volume = %vtm.outer_volume_spec_name, "Removing volume from desired state");
        shared
            .dsw
            .delete_pod_from_volume(&vtm.pod_uid, &vtm.volume_name);
        shared.processed().remove(&vtm.pod_uid);
    }
    let orphaned: Vec<String> = shared
        .processed()
        .keys()
        .filter(|k| !pods_from_cache.contains(*k))
        .cloned()
        .collect();
    for uid in orphaned {
        if shared.pods.get_pod_by_uid(&uid).is_none()
            && shared.pod_state.should_pod_runtime_be_removed(&uid)
        {
            shared.processed().remove(&uid);
        }
    }
    for uid in shared.dsw.get_pods_with_errors() {
        if shared.pods.get_pod_by_uid(&uid).is_none() {
            shared.dsw.pop_pod_errors(&uid);
        }
    }
}

/// Forces the pod's volumes to be processed (and remounted) again.
pub fn reprocess_pod(shared: &Shared, pod_uid: &str) {
    shared.processed().insert(pod_uid.to_string(), false);
}
