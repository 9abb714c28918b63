//! The reconciler (reconciler/reconciler.go): every 100 ms it unmounts
//! volumes whose pods no longer want them, then mounts (or remounts) what
//! the desired state asks for, then forgets volumes no pod has mounted.
//! Unmounts come first so a volume moving between pods is released before
//! it is set up again. Once the populator has seen every source, the
//! state is reconciled once with the volume directories on disk
//! (reconstruction, after a kubelet restart).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::actual_state::ExistsError;
use super::operations::{start_mount, start_unmount};
use super::reconstruct::sync_states;
use super::shared::Shared;
use crate::util::lifecycle::{Period, TaskSet};

/// The reconciler's period.
pub const RECONCILER_LOOP_SLEEP_PERIOD: Duration = Duration::from_millis(100);

/// Starts the reconciler task.
pub fn start(shared: &Arc<Shared>, tasks: &TaskSet) {
    let shared = shared.clone();
    let ops_tasks = tasks.clone();
    tracing::info!("Reconciler: starting");
    let period = Period::sliding(RECONCILER_LOOP_SLEEP_PERIOD);
    let clock = shared.clock.clone();
    tasks.spawn_periodic("volume-reconciler", period, clock, move || {
        let (shared, ops_tasks) = (shared.clone(), ops_tasks.clone());
        async move {
            reconcile(&shared, &ops_tasks);
            if shared.has_added_pods() && !shared.states_synced() {
                tracing::info!("Reconciler: start to sync state");
                sync_states(&shared, &ops_tasks).await;
                shared.states_synced.store(true, Ordering::SeqCst);
            }
        }
    });
}

/// One pass of unmount, mount and forget.
pub fn reconcile(shared: &Arc<Shared>, tasks: &TaskSet) {
    unmount_volumes(shared, tasks);
    mount_volumes(shared, tasks);
    forget_unmounted_volumes(shared);
}

fn unmount_volumes(shared: &Arc<Shared>, tasks: &TaskSet) {
    for mv in shared.asw.get_all_mounted_volumes() {
        if !shared
            .dsw
            .pod_exists_in_volume(&mv.pod_uid, &mv.volume_name)
        {
            start_unmount(shared, tasks, mv);
        }
    }
}

fn mount_volumes(shared: &Arc<Shared>, tasks: &TaskSet) {
    for vtm in shared.dsw.get_volumes_to_mount() {
        match shared
            .asw
            .pod_exists_in_volume(&vtm.pod_uid, &vtm.volume_name)
        {
            Err(ExistsError::NotAttached) => {
                // Nothing here attaches: a known volume counts as attached.
                crate::vlog!(5, volume = %vtm.outer_volume_spec_name, "Marking volume attached (plugin is not attachable)");
                shared
                    .asw
                    .mark_volume_as_attached(&vtm.volume_name, &vtm.spec, vtm.plugin_name);
            }
            Ok(false) => start_mount(shared, tasks, vtm, false),
            Err(ExistsError::RemountRequired) => start_mount(shared, tasks, vtm, true),
            Ok(true) => {}
        }
    }
}

fn forget_unmounted_volumes(shared: &Shared) {
    for name in shared.asw.get_unmounted_volumes() {
        if !shared.dsw.volume_exists(&name) && !shared.ops.is_pending(&name, None) {
            crate::vlog!(4, volume = %name, "Volume detached");
            shared.asw.mark_volume_as_detached(&name);
        }
    }
}
