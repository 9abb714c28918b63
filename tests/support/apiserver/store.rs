//! The object store: one global resourceVersion counter (as etcd's revision),
//! the current objects per resource, the change history watches replay, and
//! compaction of that history.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::watch;

use super::meta;
use super::resources::ResourceDef;

/// Namespace ("" for cluster-scoped) and name; orders as etcd keys do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    pub fn of(res: &ResourceDef, obj: &Value) -> Self {
        let ns = if res.namespaced {
            meta::namespace(obj)
        } else {
            ""
        };
        Self::new(ns, meta::name(obj))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One write, as a watch replays it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub res: &'static str,
    pub key: ObjKey,
    pub kind: ChangeKind,
    /// The object after the change (for a delete: as it was, at `rv`).
    pub object: Value,
    /// The object before the change (modify and delete).
    pub previous: Option<Value>,
}

/// The history is gone before this resourceVersion.
#[derive(Debug, Clone, Copy)]
pub struct Compacted(pub u64);

type Table = BTreeMap<ObjKey, Value>;

/// State under the store's lock; `Store::tx` hands it out.
#[derive(Default)]
pub struct Inner {
    rv: u64,
    compacted: u64,
    tables: HashMap<&'static str, Table>,
    /// The tables as they were at `compacted`, for reads at an older RV.
    base: HashMap<&'static str, Table>,
    log: Vec<Change>,
    watch_epoch: u64,
}

fn stamp(obj: &mut Value, rv: u64) {
    meta::metadata(obj).insert("resourceVersion".into(), Value::String(rv.to_string()));
}

impl Inner {
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn compacted_rv(&self) -> u64 {
        self.compacted
    }

    pub fn watch_epoch(&self) -> u64 {
        self.watch_epoch
    }

    pub fn get(&self, res: &ResourceDef, key: &ObjKey) -> Option<&Value> {
        self.tables.get(res.id)?.get(key)
    }

    /// Current objects of `res`, in key order, optionally in one namespace.
    pub fn list(&self, res: &ResourceDef, namespace: Option<&str>) -> Vec<Value> {
        let Some(t) = self.tables.get(res.id) else {
            return Vec::new();
        };
        t.iter()
            .filter(|(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Objects of `res` as they were at resourceVersion `at`.
    pub fn list_at(
        &self,
        res: &ResourceDef,
        namespace: Option<&str>,
        at: u64,
    ) -> Result<Vec<Value>, Compacted> {
        if at < self.compacted {
            return Err(Compacted(self.compacted));
        }
        if at >= self.rv {
            return Ok(self.list(res, namespace));
        }
        let mut t: Table = self.base.get(res.id).cloned().unwrap_or_default();
        for c in self.log.iter().take_while(|c| c.rv <= at) {
            if c.res != res.id {
                continue;
            }
            match c.kind {
                ChangeKind::Deleted => {
                    t.remove(&c.key);
                }
                _ => {
                    t.insert(c.key.clone(), c.object.clone());
                }
            }
        }
        Ok(t.into_iter()
            .filter(|(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .map(|(_, v)| v)
            .collect())
    }

    fn record(&mut self, change: Change) {
        self.log.push(change);
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Stores a new object; stamps and returns it (ADDED).
    pub fn insert(&mut self, res: &'static ResourceDef, mut obj: Value) -> Value {
        let rv = self.next_rv();
        stamp(&mut obj, rv);
        let key = ObjKey::of(res, &obj);
        self.tables
            .entry(res.id)
            .or_default()
            .insert(key.clone(), obj.clone());
        self.record(Change {
            rv,
            res: res.id,
            key,
            kind: ChangeKind::Added,
            object: obj.clone(),
            previous: None,
        });
        obj
    }

    /// Replaces an existing object; stamps and returns it (MODIFIED).
    pub fn replace(&mut self, res: &'static ResourceDef, mut obj: Value) -> Value {
        let rv = self.next_rv();
        stamp(&mut obj, rv);
        let key = ObjKey::of(res, &obj);
        let previous = self
            .tables
            .entry(res.id)
            .or_default()
            .insert(key.clone(), obj.clone());
        self.record(Change {
            rv,
            res: res.id,
            key,
            kind: ChangeKind::Modified,
            object: obj.clone(),
            previous,
        });
        obj
    }

    /// Removes an object; returns it stamped with the delete's RV (DELETED).
    pub fn remove(&mut self, res: &'static ResourceDef, key: &ObjKey) -> Option<Value> {
        let previous = self.tables.get_mut(res.id)?.remove(key)?;
        let rv = self.next_rv();
        let mut obj = previous.clone();
        stamp(&mut obj, rv);
        self.record(Change {
            rv,
            res: res.id,
            key: key.clone(),
            kind: ChangeKind::Deleted,
            object: obj.clone(),
            previous: Some(previous),
        });
        Some(obj)
    }

    /// Changes after `rv`, oldest first.
    pub fn changes_since(&self, rv: u64) -> Result<Vec<Change>, Compacted> {
        if rv < self.compacted {
            return Err(Compacted(self.compacted));
        }
        let start = self.log.partition_point(|c| c.rv <= rv);
        Ok(self.log[start..].to_vec())
    }

    /// Forgets all history: any read or watch from an earlier RV gets 410.
    /// The counter moves on by one so that every RV handed out so far is
    /// older than the compaction point.
    pub fn compact(&mut self) {
        let rv = self.next_rv();
        self.compacted = rv;
        self.base = self.tables.clone();
        self.log.clear();
    }

    /// Ends every open watch (they see the epoch change).
    pub fn close_watches(&mut self) {
        self.watch_epoch += 1;
    }
}

/// The store: `Inner` behind a lock, and a channel that ticks on each write.
pub struct Store {
    inner: Mutex<Inner>,
    notify: watch::Sender<(u64, u64)>,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            inner: Mutex::new(Inner::default()),
            notify: watch::channel((0, 0)).0,
        }
    }
}

impl Store {
    /// Runs `f` with the lock held; wakes watchers when it wrote anything or
    /// changed the watch epoch.
    pub fn tx<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let before = (g.rv, g.watch_epoch);
        let r = f(&mut g);
        let after = (g.rv, g.watch_epoch);
        drop(g);
        if after != before {
            self.notify.send_replace(after);
        }
        r
    }

    /// Ticks with (resourceVersion, watch epoch) after each write.
    pub fn subscribe(&self) -> watch::Receiver<(u64, u64)> {
        self.notify.subscribe()
    }
}
