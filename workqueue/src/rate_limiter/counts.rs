//! Per-item retry counts, shared by the per-item limiters: a hash table of
//! (item, count) under a mutex. An item is cloned once, when first counted,
//! and dropped by `forget`, so nothing outlives its last retry.

use std::hash::{BuildHasher, Hash};

use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::Mutex;

/// Retry counts by item.
pub(crate) struct Counts<T> {
    table: Mutex<HashTable<(T, u32)>>,
    hasher: DefaultHashBuilder,
}

impl<T> Default for Counts<T> {
    fn default() -> Self {
        Self {
            table: Mutex::new(HashTable::new()),
            hasher: DefaultHashBuilder::default(),
        }
    }
}

impl<T: Hash + Eq + Clone> Counts<T> {
    /// Counts one more retry of `item`; returns the count before it.
    pub(crate) fn bump(&self, item: &T) -> u32 {
        let hash = self.hasher.hash_one(item);
        let mut table = self.table.lock();
        if let Some((_, n)) = table.find_mut(hash, |(k, _)| k == item) {
            let before = *n;
            *n = n.saturating_add(1);
            return before;
        }
        let hasher = &self.hasher;
        table.insert_unique(hash, (item.clone(), 1), |(k, _)| hasher.hash_one(k));
        0
    }

    /// The count of `item` (0 when unknown).
    pub(crate) fn get(&self, item: &T) -> u32 {
        let hash = self.hasher.hash_one(item);
        self.table
            .lock()
            .find(hash, |(k, _)| k == item)
            .map_or(0, |(_, n)| *n)
    }

    /// Forgets `item`.
    pub(crate) fn remove(&self, item: &T) {
        let hash = self.hasher.hash_one(item);
        let mut table = self.table.lock();
        if let Ok(entry) = table.find_entry(hash, |(k, _)| k == item) {
            entry.remove();
        }
        if table.is_empty() && table.capacity() > 4096 {
            table.shrink_to(0, |_| 0);
        }
    }

    /// Sets the count of `item` (tests).
    #[cfg(test)]
    pub(crate) fn set(&self, item: &T, count: u32) {
        self.bump(item);
        let hash = self.hasher.hash_one(item);
        if let Some((_, n)) = self.table.lock().find_mut(hash, |(k, _)| k == item) {
            *n = count;
        }
    }

    /// Number of items counted.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }
}
