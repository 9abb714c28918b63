//! PodConfig: the pod sources, the merge of what they send, and the one
//! update stream the sync loop reads.
//!
//! Built in the build phase ([`PodConfig::new`], [`PodConfig::add_source`]),
//! started in the start phase ([`PodConfig::start`] spawns each source on the
//! TaskSet). A source sends through a [`SourceSender`], which merges at once
//! under a short lock and never waits for the reader; the reader
//! ([`PodUpdates`]) gets coalesced updates in order.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::merge::PodStorage;
use super::queue::UpdateQueue;
use crate::kubelet::types::{PodOperation, PodUpdate, format_rfc3339_nano, local_time_zone};
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

/// A place pods come from ("file", "http", "api"). `run` delivers updates
/// through `updates` until `stop` is cancelled.
#[async_trait::async_trait]
pub trait PodSource: Send + Sync + 'static {
    /// The source name written into `kubernetes.io/config.source`.
    fn name(&self) -> &'static str;

    /// Watches the source and sends its pods; returns when `stop` fires.
    async fn run(self: Box<Self>, updates: SourceSender, stop: CancellationToken);
}

struct State {
    storage: PodStorage,
    queue: UpdateQueue,
    sources: BTreeSet<String>,
}

struct Shared {
    state: Mutex<State>,
    notify: Notify,
    /// Live handles that can still produce updates (senders and the config).
    handles: AtomicUsize,
    clock: Arc<dyn Clock>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while merging cannot leave the maps half-written in a way
        // that matters more than stopping the kubelet; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn release(&self) {
        self.handles.fetch_sub(1, Ordering::AcqRel);
        self.notify.notify_one();
    }
}

/// Merges pod sources into one stream of updates.
pub struct PodConfig {
    shared: Arc<Shared>,
    pending: Mutex<Vec<Box<dyn PodSource>>>,
}

impl PodConfig {
    /// A config with no sources yet, and the single reader of its updates.
    pub fn new(clock: Arc<dyn Clock>) -> (PodConfig, PodUpdates) {
        // The first-seen annotation is written in the node's zone; read it now.
        local_time_zone();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                storage: PodStorage::default(),
                queue: UpdateQueue::default(),
                sources: BTreeSet::new(),
            }),
            notify: Notify::new(),
            handles: AtomicUsize::new(1),
            clock,
        });
        let updates = PodUpdates {
            shared: shared.clone(),
        };
        (
            PodConfig {
                shared,
                pending: Mutex::new(Vec::new()),
            },
            updates,
        )
    }

    /// Registers a source name and returns the sender for it (Go's
    /// `PodConfig.Channel`). Registered sources count for readiness.
    pub fn channel(&self, source: &str) -> SourceSender {
        self.shared.lock().sources.insert(source.to_string());
        self.shared.handles.fetch_add(1, Ordering::AcqRel);
        SourceSender {
            shared: self.shared.clone(),
            source: source.to_string(),
        }
    }

    /// Adds a source to be started by [`PodConfig::start`].
    pub fn add_source(&self, source: Box<dyn PodSource>) {
        self.shared.lock().sources.insert(source.name().to_string());
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(source);
    }

    /// Spawns every added source on `tasks`; each stops with the task set.
    pub fn start(&self, tasks: &TaskSet) {
        let sources = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        for source in sources {
            let sender = self.channel(source.name());
            let stop = tasks.token();
            tasks.spawn("pod-source", async move {
                source.run(sender, stop).await;
            });
        }
    }

    /// The registered source names.
    pub fn sources(&self) -> Vec<String> {
        self.shared.lock().sources.iter().cloned().collect()
    }

    /// Whether the sync loop has seen every source (`seen`) and every source
    /// has sent at least one SET (Go's `SeenAllSources`).
    pub fn seen_all_sources(&self, seen: &HashSet<String>) -> bool {
        seen_all(&self.shared, seen)
    }

    /// A readiness tracker the sync loop feeds with the sources it sees.
    pub fn sources_ready(&self) -> SourcesReady {
        SourcesReady {
            shared: self.shared.clone(),
            seen: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// Every pod of every source, as merged.
    pub fn merged_state(&self) -> Vec<Arc<Pod>> {
        self.shared.lock().storage.merged_state()
    }
}

impl Drop for PodConfig {
    fn drop(&mut self) {
        self.shared.release();
    }
}

fn seen_all(shared: &Shared, seen: &HashSet<String>) -> bool {
    let state = shared.lock();
    let all_seen = state.sources.iter().all(|s| seen.contains(s));
    crate::vlog!(5, sources = ?state.sources, seen_sources = ?seen, "Looking for sources, have seen");
    all_seen
        && state
            .storage
            .seen_sources(state.sources.iter().map(String::as_str))
}

/// Sends one source's pods into the merge. Cheap to clone; never blocks.
pub struct SourceSender {
    shared: Arc<Shared>,
    source: String,
}

impl Clone for SourceSender {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::AcqRel);
        SourceSender {
            shared: self.shared.clone(),
            source: self.source.clone(),
        }
    }
}

impl Drop for SourceSender {
    fn drop(&mut self) {
        self.shared.release();
    }
}

impl SourceSender {
    /// The source this sender speaks for.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The complete current set of this source's pods.
    pub fn set(&self, pods: Vec<Pod>) {
        self.send(PodOperation::Set, pods);
    }

    /// Merges one update from this source and queues what changed.
    pub fn send(&self, op: PodOperation, pods: Vec<Pod>) {
        self.send_shared(op, pods.into_iter().map(Arc::new).collect());
    }

    /// `send` for pods already behind an `Arc` (a pod that did not change
    /// is not copied).
    pub fn send_shared(&self, op: PodOperation, pods: Vec<Arc<Pod>>) {
        let seen = format_rfc3339_nano(self.shared.clock.now());
        let mut state = self.shared.lock();
        let result = state.storage.merge(&self.source, op, pods, &seen);
        let source = self.source.clone();
        let mut queued = false;
        let mut push = |state: &mut State, op: PodOperation, pods: Vec<Arc<Pod>>| {
            state.queue.push(PodUpdate {
                pods,
                op,
                source: source.clone(),
            });
            queued = true;
        };
        let signal_seen = result.first_set
            && result.adds.is_empty()
            && result.updates.is_empty()
            && result.deletes.is_empty();
        if !result.removes.is_empty() {
            push(&mut state, PodOperation::Remove, result.removes);
        }
        if !result.adds.is_empty() {
            push(&mut state, PodOperation::Add, result.adds);
        }
        if !result.updates.is_empty() {
            push(&mut state, PodOperation::Update, result.updates);
        }
        if !result.deletes.is_empty() {
            push(&mut state, PodOperation::Delete, result.deletes);
        }
        if signal_seen {
            // Tells the sync loop the source is ready even though it has no pods.
            push(&mut state, PodOperation::Add, Vec::new());
        }
        if !result.reconciles.is_empty() {
            push(&mut state, PodOperation::Reconcile, result.reconciles);
        }
        drop(state);
        if queued {
            self.shared.notify.notify_one();
        }
    }
}

/// The reading end: merged, coalesced updates in order.
pub struct PodUpdates {
    shared: Arc<Shared>,
}

impl PodUpdates {
    /// The next update; `None` once the config and every sender are gone and
    /// nothing is pending. Cancel-safe: an update is taken only when returned.
    pub async fn recv(&mut self) -> Option<PodUpdate> {
        loop {
            if let Some(update) = self.try_recv() {
                return Some(update);
            }
            if self.shared.handles.load(Ordering::Acquire) == 0 {
                return self.try_recv();
            }
            self.shared.notify.notified().await;
        }
    }

    /// The next update if one is pending.
    pub fn try_recv(&mut self) -> Option<PodUpdate> {
        self.shared.lock().queue.pop()
    }

    /// Number of pending entries (for metrics and tests).
    pub fn pending(&self) -> usize {
        self.shared.lock().queue.len()
    }
}

/// Whether all configured sources are ready (Go's `SourcesReady`): the sync
/// loop records each source it receives an update from; every source must
/// have been received and have sent a SET.
#[derive(Clone)]
pub struct SourcesReady {
    shared: Arc<Shared>,
    seen: Arc<Mutex<HashSet<String>>>,
}

impl SourcesReady {
    /// Records that an update from `source` reached the sync loop.
    pub fn add_source(&self, source: &str) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(source.to_string());
    }

    /// Whether every configured source is ready.
    pub fn all_ready(&self) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        seen_all(&self.shared, &seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;
    use std::time::Duration;

    fn pod(uid: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.name = Some(uid.into());
        p.metadata.namespace = Some("default".into());
        p
    }

    fn ops(updates: &mut PodUpdates) -> Vec<(PodOperation, String, usize)> {
        std::iter::from_fn(|| updates.try_recv())
            .map(|u| (u.op, u.source, u.pods.len()))
            .collect()
    }

    #[tokio::test]
    async fn updates_in_go_order_and_first_set_signals_the_source() {
        let (config, mut updates) = PodConfig::new(Arc::new(RealClock));
        let file = config.channel("file");
        file.set(vec![]);
        assert_eq!(
            ops(&mut updates),
            vec![(PodOperation::Add, "file".into(), 0)]
        );
        file.set(vec![]);
        assert!(
            ops(&mut updates).is_empty(),
            "a repeated empty SET changes nothing"
        );
        file.set(vec![pod("a"), pod("b")]);
        let mut changed = pod("a");
        changed.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        file.set(vec![changed, pod("c")]);
        assert_eq!(
            ops(&mut updates),
            vec![(PodOperation::Add, "file".into(), 2)],
            "a, b, c were never read: a's update folds into its add, b's remove cancels its add"
        );
        file.set(vec![pod("c")]);
        let mut changed = pod("c");
        changed.status = Some(Default::default());
        changed.status.as_mut().unwrap().phase = Some("Running".into());
        file.set(vec![changed]);
        assert_eq!(
            ops(&mut updates),
            vec![
                (PodOperation::Remove, "file".into(), 1),
                (PodOperation::Reconcile, "file".into(), 1)
            ]
        );
    }

    #[tokio::test]
    async fn sources_ready_needs_a_set_from_every_source_and_the_sync_loop_seeing_it() {
        let (config, mut updates) = PodConfig::new(Arc::new(RealClock));
        let ready = config.sources_ready();
        let file = config.channel("file");
        let http = config.channel("http");
        assert!(!ready.all_ready());
        file.set(vec![pod("a")]);
        http.send(PodOperation::Add, vec![pod("b")]);
        while let Some(u) = updates.try_recv() {
            ready.add_source(&u.source);
        }
        assert!(!ready.all_ready(), "http has sent no SET yet");
        let fresh = config.sources_ready();
        http.set(vec![pod("b")]);
        assert!(ready.all_ready());
        assert!(
            !fresh.all_ready(),
            "this tracker has not seen updates from the sources"
        );
        assert!(config.seen_all_sources(&["file".to_string(), "http".to_string()].into()));
        fresh.add_source("file");
        fresh.add_source("http");
        assert!(fresh.all_ready());
    }

    #[tokio::test]
    async fn recv_waits_for_updates_and_ends_when_every_sender_is_gone() {
        let (config, mut updates) = PodConfig::new(Arc::new(RealClock));
        let file = config.channel("file");
        let later = file.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later.set(vec![pod("a")]);
        });
        let wait = Duration::from_secs(5);
        let u = tokio::time::timeout(wait, updates.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((u.op, u.pods.len()), (PodOperation::Add, 1));
        file.set(vec![]);
        let u = tokio::time::timeout(wait, updates.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((u.op, u.pods.len()), (PodOperation::Remove, 1));
        drop(file);
        drop(config);
        assert!(
            tokio::time::timeout(wait, updates.recv())
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_slow_reader_never_blocks_a_source() {
        let (config, mut updates) = PodConfig::new(Arc::new(RealClock));
        let api = config.channel("api");
        for round in 0..10_000 {
            let mut p = pod("a");
            p.metadata.labels = Some([("round".to_string(), round.to_string())].into());
            api.send(PodOperation::Update, vec![p, pod("b")]);
        }
        assert_eq!(updates.pending(), 2);
        let first = updates.try_recv().unwrap();
        assert_eq!(first.op, PodOperation::Add);
        assert_eq!(
            first.pods[0].metadata.labels.as_ref().unwrap()["round"],
            "9999"
        );
    }

    struct OneShot;

    #[async_trait::async_trait]
    impl PodSource for OneShot {
        fn name(&self) -> &'static str {
            "http"
        }
        async fn run(self: Box<Self>, updates: SourceSender, stop: CancellationToken) {
            updates.set(vec![pod("x")]);
            stop.cancelled().await;
        }
    }

    #[tokio::test]
    async fn started_sources_run_on_the_task_set_and_stop_with_it() {
        let (config, mut updates) = PodConfig::new(Arc::new(RealClock));
        config.add_source(Box::new(OneShot));
        assert_eq!(config.sources(), ["http"]);
        let tasks = TaskSet::new();
        config.start(&tasks);
        let u = tokio::time::timeout(Duration::from_secs(5), updates.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (u.op, u.source.as_str(), u.pods.len()),
            (PodOperation::Add, "http", 1)
        );
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(5))
            .await
            .unwrap();
    }
}
