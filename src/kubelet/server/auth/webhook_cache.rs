//! Caches of webhook answers: entries expire after their TTL; the map is
//! bounded (oldest entries go first when it is full).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A bounded cache whose entries expire.
pub struct ExpiringCache<K, V> {
    cap: usize,
    inner: Mutex<Inner<K, V>>,
}

struct Inner<K, V> {
    tick: u64,
    map: HashMap<K, (V, Instant, u64)>,
    order: BTreeMap<u64, K>,
}

impl<K: Eq + Hash + Clone, V: Clone> ExpiringCache<K, V> {
    pub fn new(cap: usize) -> Self {
        ExpiringCache {
            cap: cap.max(1),
            inner: Mutex::new(Inner {
                tick: 0,
                map: HashMap::new(),
                order: BTreeMap::new(),
            }),
        }
    }

    /// The live value for `key`.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (v, expires, t) = g.map.get(key).cloned()?;
        if Instant::now() >= expires {
            g.map.remove(key);
            g.order.remove(&t);
            return None;
        }
        Some(v)
    }

    /// Stores `value` for `ttl` (nothing when `ttl` is zero).
    pub fn put(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, t)) = g.map.remove(&key) {
            g.order.remove(&t);
        }
        while g.map.len() >= self.cap {
            let Some((_, oldest)) = g.order.pop_first() else {
                break;
            };
            g.map.remove(&oldest);
        }
        g.tick += 1;
        let t = g.tick;
        g.order.insert(t, key.clone());
        g.map.insert(key, (value, Instant::now() + ttl, t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_and_the_oldest_make_room() {
        let c = ExpiringCache::new(2);
        c.put("a", 1, Duration::from_secs(10));
        c.put("b", 2, Duration::from_secs(1));
        c.put("z", 0, Duration::ZERO);
        assert_eq!(c.get(&"z"), None);
        assert_eq!(c.get(&"a"), Some(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(c.get(&"b"), None);
        c.put("c", 3, Duration::from_secs(10));
        c.put("d", 4, Duration::from_secs(10));
        assert_eq!(c.get(&"a"), None);
        assert_eq!((c.get(&"c"), c.get(&"d")), (Some(3), Some(4)));
    }
}
