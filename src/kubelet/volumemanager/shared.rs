//! The state the volume manager's tasks and queries share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::actual_state::ActualStateOfWorld;
use super::desired_state::DesiredStateOfWorld;
use super::events::EventSink;
use super::operations::PendingOperations;
use super::seams::{PodLister, PodStateProvider, SourcesReadyCheck};
use crate::util::clock::Clock;
use crate::volume::plugin::PluginManager;

/// Everything behind the VolumeManager handle.
pub struct Shared {
    pub dsw: DesiredStateOfWorld,
    pub asw: ActualStateOfWorld,
    pub plugins: Arc<PluginManager>,
    pub ops: PendingOperations,
    pub events: EventSink,
    pub pods: Arc<dyn PodLister>,
    pub pod_state: Arc<dyn PodStateProvider>,
    pub sources_ready: Arc<dyn SourcesReadyCheck>,
    pub clock: Arc<dyn Clock>,
    /// Pod UID → processed (true) or to be reprocessed (false).
    pub processed_pods: Mutex<HashMap<String, bool>>,
    /// The populator has seen the pods of every source at least once.
    pub has_added_pods: AtomicBool,
    /// Reconstruction from disk has run.
    pub states_synced: AtomicBool,
}

impl Shared {
    pub fn processed(&self) -> MutexGuard<'_, HashMap<String, bool>> {
        self.processed_pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn has_added_pods(&self) -> bool {
        self.has_added_pods.load(Ordering::SeqCst)
    }

    pub fn states_synced(&self) -> bool {
        self.states_synced.load(Ordering::SeqCst)
    }
}
