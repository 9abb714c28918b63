//! The `Watch` strategy's store (Go's objectCache): a watch of each
//! referenced object (list + watch with `metadata.name=<name>`), started by
//! its first reference and stopped by its last. A read waits (up to a
//! second) for the watch's first list; a watch nobody read for `max_idle`
//! is paused and resumed by the next read; an immutable object is not
//! watched any longer once read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cache_based::ObjectStore;
use super::error::ManagerError;
use super::fetch::ManagedObject;
use crate::util::clock::Clock;
use crate::util::lifecycle::{Period, TaskSet, run_periodic};

/// Idle watches are stopped no sooner than this.
const MIN_IDLE_TIME: Duration = Duration::from_secs(60);
/// How often idle watches are looked for.
const RECYCLE_PERIOD: Duration = Duration::from_secs(60);
/// How long a read waits for a watch's first list.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);

struct ItemState<K> {
    last_access: Instant,
    /// No watch is running (never started, idle, or unreferenced).
    stopped: bool,
    immutable: bool,
    /// The current watch's stop signal.
    stop: CancellationToken,
    /// Bumped for every watch started; events of older watches are dropped.
    generation: u64,
    /// The watch delivered its first list since it (re)started.
    initialized: bool,
    /// The object as last seen; None when it does not exist.
    object: Option<K>,
}

struct Item<K> {
    namespace: String,
    name: String,
    state: Mutex<ItemState<K>>,
    synced: Notify,
}

impl<K> Item<K> {
    fn lock(&self) -> MutexGuard<'_, ItemState<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the watch; false when none was running.
    fn stop(&self) -> bool {
        let mut s = self.lock();
        if s.stopped {
            return false;
        }
        s.stopped = true;
        s.stop.cancel();
        if !s.immutable {
            s.initialized = false;
        }
        true
    }

    fn stop_if_idle(&self, now: Instant, max_idle: Duration) -> bool {
        let idle = {
            let s = self.lock();
            !s.stopped && s.initialized && now > s.last_access + max_idle
        };
        idle && self.stop()
    }
}

struct Entry<K> {
    ref_count: usize,
    item: Arc<Item<K>>,
}

/// Where watches run once the store is started.
#[derive(Clone)]
struct Runtime {
    tasks: TaskSet,
    handle: tokio::runtime::Handle,
}

struct State<K> {
    items: HashMap<(String, String), Entry<K>>,
    runtime: Option<Runtime>,
    /// The kubelet is shutting down: no watch starts any more.
    shut_down: bool,
}

/// Per-object watches of referenced objects.
pub struct WatchStore<K> {
    client: kube::Client,
    clock: Arc<dyn Clock>,
    max_idle: Duration,
    state: Mutex<State<K>>,
}

impl<K: ManagedObject> WatchStore<K> {
    /// A store whose watches pause after `max_idle` without reads (at least
    /// a minute). Watches run once [`WatchStore::start`] is called.
    pub fn new(client: kube::Client, clock: Arc<dyn Clock>, max_idle: Duration) -> Arc<Self> {
        Arc::new(WatchStore {
            client,
            clock,
            max_idle: max_idle.max(MIN_IDLE_TIME),
            state: Mutex::new(State {
                items: HashMap::new(),
                runtime: None,
                shut_down: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the watches of objects already referenced, the idle recycler,
    /// and stops everything when `tasks` shuts down.
    pub fn start(self: &Arc<Self>, tasks: &TaskSet) {
        let runtime = Runtime {
            tasks: tasks.child(),
            handle: tokio::runtime::Handle::current(),
        };
        let pending: Vec<Arc<Item<K>>> = {
            let mut state = self.lock();
            state.runtime = Some(runtime.clone());
            state.items.values().map(|e| e.item.clone()).collect()
        };
        for item in pending {
            self.start_watch(&runtime, &item);
        }
        let this = self.clone();
        let token = runtime.tasks.token();
        let clock = self.clock.clone();
        runtime.tasks.spawn("object-watch-recycler", async move {
            let period = Period::fixed(RECYCLE_PERIOD).waiting_first();
            run_periodic(token, period, clock, || {
                this.recycle_idle();
                std::future::ready(())
            })
            .await;
            this.shut_down();
        });
    }

    fn recycle_idle(&self) {
        let now = self.clock.monotonic();
        let items: Vec<Arc<Item<K>>> = self.lock().items.values().map(|e| e.item.clone()).collect();
        for item in items {
            if item.stop_if_idle(now, self.max_idle) {
                crate::vlog!(4, object = %format!("{}/{}", item.namespace, item.name),
                    max_idle = ?self.max_idle, "Not acquired for long time, Stopped watching for changes");
            }
        }
    }

    fn shut_down(&self) {
        let items: Vec<Arc<Item<K>>> = {
            let mut state = self.lock();
            state.shut_down = true;
            state.items.values().map(|e| e.item.clone()).collect()
        };
        for item in items {
            item.stop();
        }
    }

    /// Starts a watch for `item` unless one runs or it is immutable.
    fn start_watch(&self, runtime: &Runtime, item: &Arc<Item<K>>) {
        let (generation, stop) = {
            let mut s = item.lock();
            if !s.stopped || s.immutable {
                return;
            }
            s.stopped = false;
            s.generation += 1;
            s.stop = runtime.tasks.token().child_token();
            (s.generation, s.stop.clone())
        };
        let api: Api<K> = Api::namespaced(self.client.clone(), &item.namespace);
        let item = item.clone();
        // Registration may come from outside the runtime's context.
        let _guard = runtime.handle.enter();
        runtime.tasks.spawn("object-watch", async move {
            run_watch(api, item, generation, stop).await;
        });
    }

    /// Whether a watch currently runs for the object (for tests and metrics).
    pub fn is_watching(&self, namespace: &str, name: &str) -> bool {
        self.lock()
            .items
            .get(&(namespace.to_string(), name.to_string()))
            .is_some_and(|e| !e.item.lock().stopped)
    }
}

async fn run_watch<K: ManagedObject>(
    api: Api<K>,
    item: Arc<Item<K>>,
    generation: u64,
    stop: CancellationToken,
) {
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={}", item.name))
        .any_semantic();
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    // The object as listed so far by a list in progress.
    let mut listing: Option<Option<K>> = None;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => next,
        };
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                crate::vlog!(4, object = %format!("{}/{}", item.namespace, item.name), err = %e, "Object watch failed; retrying");
                continue;
            }
            None => return,
        };
        let mut s = item.lock();
        if s.generation != generation || s.stopped {
            return;
        }
        match event {
            Event::Init => listing = Some(None),
            Event::InitApply(k) => listing = Some(Some(k)),
            Event::InitDone => {
                s.object = listing.take().flatten();
                s.initialized = true;
                drop(s);
                item.synced.notify_waiters();
            }
            Event::Apply(k) => s.object = Some(k),
            Event::Delete(_) => s.object = None,
        }
    }
}

#[async_trait]
impl<K: ManagedObject> ObjectStore<K> for WatchStore<K> {
    fn add_reference(&self, namespace: &str, name: &str) {
        let (item, runtime) = {
            let mut state = self.lock();
            let runtime = (!state.shut_down).then(|| state.runtime.clone()).flatten();
            let now = self.clock.monotonic();
            let entry = state
                .items
                .entry((namespace.to_string(), name.to_string()))
                .or_insert_with(|| Entry {
                    ref_count: 0,
                    item: Arc::new(Item {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        state: Mutex::new(ItemState {
                            last_access: now,
                            stopped: true,
                            immutable: false,
                            stop: CancellationToken::new(),
                            generation: 0,
                            initialized: false,
                            object: None,
                        }),
                        synced: Notify::new(),
                    }),
                });
            entry.ref_count += 1;
            let new = entry.ref_count == 1;
            (new.then(|| entry.item.clone()), runtime)
        };
        if let (Some(item), Some(runtime)) = (item, runtime) {
            self.start_watch(&runtime, &item);
        }
    }

    fn delete_reference(&self, namespace: &str, name: &str) {
        let mut state = self.lock();
        let key = (namespace.to_string(), name.to_string());
        if let Some(entry) = state.items.get_mut(&key) {
            entry.ref_count = entry.ref_count.saturating_sub(1);
            if entry.ref_count == 0 {
                entry.item.stop();
                state.items.remove(&key);
            }
        }
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<K, ManagerError> {
        let (item, runtime) = {
            let state = self.lock();
            let Some(entry) = state.items.get(&(namespace.to_string(), name.to_string())) else {
                return Err(ManagerError::NotRegistered {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                });
            };
            let runtime = (!state.shut_down).then(|| state.runtime.clone()).flatten();
            (entry.item.clone(), runtime)
        };
        // Recorded whether or not the read succeeds, so a watch is never
        // recycled under a reader.
        item.lock().last_access = self.clock.monotonic();
        if let Some(runtime) = &runtime {
            self.start_watch(runtime, &item);
        }
        let deadline = tokio::time::Instant::now() + SYNC_TIMEOUT;
        loop {
            let synced = item.synced.notified();
            if item.lock().initialized {
                break;
            }
            if tokio::time::timeout_at(deadline, synced).await.is_err() && !item.lock().initialized
            {
                return Err(ManagerError::SyncTimeout {
                    resource: K::RESOURCE,
                });
            }
        }
        let object = item.lock().object.clone();
        let Some(object) = object else {
            return Err(ManagerError::NotFound {
                resource: K::RESOURCE,
                name: name.to_string(),
            });
        };
        if object.is_immutable() {
            item.lock().immutable = true;
            if item.stop() {
                crate::vlog!(4, object = %format!("{namespace}/{name}"), "Stopped watching for changes - object is immutable");
            }
        }
        Ok(object)
    }
}
