//! A small least-recently-used map (the correlator's caches hold 4096
//! entries each, as client-go's).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A bounded map that evicts the least recently used entry.
#[derive(Debug)]
pub struct Lru<K, V> {
    cap: usize,
    tick: u64,
    map: HashMap<K, (V, u64)>,
    order: BTreeMap<u64, K>,
}

impl<K: Eq + Hash + Clone, V> Lru<K, V> {
    pub fn new(cap: usize) -> Self {
        Lru {
            cap: cap.max(1),
            tick: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn touch(&mut self, key: &K) {
        self.tick += 1;
        let t = self.tick;
        if let Some((_, old)) = self.map.get_mut(key) {
            self.order.remove(old);
            *old = t;
            self.order.insert(t, key.clone());
        }
    }

    /// The value for `key`, marking it used.
    pub fn get(&mut self, key: &K) -> Option<&mut V> {
        if !self.map.contains_key(key) {
            return None;
        }
        self.touch(key);
        self.map.get_mut(key).map(|(v, _)| v)
    }

    /// Inserts or replaces, evicting the oldest entry when full.
    pub fn put(&mut self, key: K, value: V) {
        if let Some((v, _)) = self.map.get_mut(&key) {
            *v = value;
            self.touch(&key);
            return;
        }
        if self.map.len() >= self.cap
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.map.remove(&oldest);
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.map.insert(key, (value, self.tick));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let mut l = Lru::new(2);
        l.put("a", 1);
        l.put("b", 2);
        assert_eq!(l.get(&"a").copied(), Some(1));
        l.put("c", 3);
        assert!(l.get(&"b").is_none());
        assert_eq!(l.get(&"a").copied(), Some(1));
        assert_eq!(l.get(&"c").copied(), Some(3));
        l.put("a", 10);
        assert_eq!(l.get(&"a").copied(), Some(10));
        assert_eq!(l.len(), 2);
    }
}
