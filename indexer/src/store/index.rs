//! One index of a store: each index value maps to the entries (key and
//! object) that have it. Entries hold the object itself, so a lookup by
//! index value needs no second lookup in the item map; a value held by one
//! object costs no map at all.

use std::collections::{hash_map, HashMap};
use std::iter;
use std::sync::Arc;

/// The hasher of every map in the store: fast, seeded per process.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The objects under one index value, by key.
#[derive(Debug)]
pub(crate) enum Entries<K> {
    /// Exactly one object has this value (the common case for unique-ish indexes).
    One(Arc<str>, Arc<K>),
    /// Two or more objects have this value. Boxed so that the common
    /// single-object case stays three words.
    #[allow(clippy::box_collection)]
    Many(Box<HashMap<Arc<str>, Arc<K>, Hasher>>),
}

impl<K> Entries<K> {
    /// Adds the entry, or points an existing one at `obj`.
    fn upsert(&mut self, key: &Arc<str>, obj: &Arc<K>) {
        match self {
            Self::One(existing, stored) if **existing == **key => *stored = Arc::clone(obj),
            Self::One(existing, stored) => {
                let mut map = HashMap::with_capacity_and_hasher(2, Hasher::default());
                map.insert(Arc::clone(existing), Arc::clone(stored));
                map.insert(Arc::clone(key), Arc::clone(obj));
                *self = Self::Many(Box::new(map));
            }
            Self::Many(map) => match map.get_mut(&**key) {
                Some(stored) => *stored = Arc::clone(obj),
                None => {
                    map.insert(Arc::clone(key), Arc::clone(obj));
                }
            },
        }
    }

    /// Removes the entry of `key`; returns whether no entry is left.
    fn remove(&mut self, key: &str) -> bool {
        match self {
            Self::One(existing, _) => **existing == *key,
            Self::Many(map) => {
                map.remove(key);
                if map.len() == 1 {
                    if let Some((k, o)) = map.iter().next() {
                        *self = Self::One(Arc::clone(k), Arc::clone(o));
                    }
                } else if map.len() * 4 < map.capacity() && map.capacity() > 64 {
                    map.shrink_to(map.len() * 2);
                }
                matches!(self, Self::Many(map) if map.is_empty())
            }
        }
    }

    /// How many entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::One(..) => 1,
            Self::Many(map) => map.len(),
        }
    }

    /// The object stored for `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Arc<K>> {
        match self {
            Self::One(existing, obj) => (**existing == *key).then_some(obj),
            Self::Many(map) => map.get(key),
        }
    }

    /// The entries, in no particular order.
    pub(crate) fn iter(&self) -> EntriesIter<'_, K> {
        match self {
            Self::One(key, obj) => EntriesIter::One(iter::once((key, obj))),
            Self::Many(map) => EntriesIter::Many(map.iter()),
        }
    }
}

/// Iterator over [`Entries`].
pub(crate) enum EntriesIter<'a, K> {
    One(iter::Once<(&'a Arc<str>, &'a Arc<K>)>),
    Many(hash_map::Iter<'a, Arc<str>, Arc<K>>),
}

impl<'a, K> Iterator for EntriesIter<'a, K> {
    type Item = (&'a Arc<str>, &'a Arc<K>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::One(it) => it.next(),
            Self::Many(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::One(it) => it.size_hint(),
            Self::Many(it) => it.size_hint(),
        }
    }
}

/// Index value → entries.
#[derive(Debug)]
pub(crate) struct Index<K> {
    values: HashMap<Box<str>, Entries<K>, Hasher>,
}

impl<K> Default for Index<K> {
    fn default() -> Self {
        Self {
            values: HashMap::default(),
        }
    }
}

impl<K> Index<K> {
    /// Records that object `obj` with key `key` has index value `value`, or
    /// points the existing record at this version of the object.
    pub(crate) fn upsert(&mut self, value: &str, key: &Arc<str>, obj: &Arc<K>) {
        match self.values.get_mut(value) {
            Some(entries) => entries.upsert(key, obj),
            None => {
                let entries = Entries::One(Arc::clone(key), Arc::clone(obj));
                self.values.insert(value.into(), entries);
            }
        }
    }

    /// Forgets that the object `key` has index value `value`; a value left
    /// with no entries is dropped.
    pub(crate) fn remove(&mut self, value: &str, key: &str) {
        if let Some(entries) = self.values.get_mut(value) {
            if entries.remove(key) {
                self.values.remove(value);
            }
        }
    }

    /// The entries with index value `value`.
    pub(crate) fn get(&self, value: &str) -> Option<&Entries<K>> {
        self.values.get(value)
    }

    /// Every index value that at least one object has.
    pub(crate) fn values(&self) -> hash_map::Keys<'_, Box<str>, Entries<K>> {
        self.values.keys()
    }

    /// Every (value, entries) pair.
    pub(crate) fn iter(&self) -> hash_map::Iter<'_, Box<str>, Entries<K>> {
        self.values.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(index: &Index<u32>, value: &str) -> Vec<(String, u32)> {
        let mut keys: Vec<(String, u32)> = index
            .get(value)
            .map(|e| e.iter().map(|(k, o)| (k.to_string(), **o)).collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }

    #[test]
    fn a_single_entry_costs_three_words() {
        assert_eq!(
            std::mem::size_of::<Entries<u32>>(),
            3 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn one_entry_needs_no_map_and_empty_values_vanish() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("ns/a"), Arc::from("ns/b"));
        let mut index = Index::default();
        index.upsert("v", &a, &Arc::new(1));
        index.upsert("v", &a, &Arc::new(2));
        assert!(matches!(index.get("v"), Some(Entries::One(..))));
        assert_eq!(keys_of(&index, "v"), [("ns/a".to_owned(), 2)]);
        index.upsert("v", &b, &Arc::new(3));
        assert!(matches!(index.get("v"), Some(Entries::Many(_))));
        index.upsert("v", &b, &Arc::new(4));
        assert_eq!(
            keys_of(&index, "v"),
            [("ns/a".to_owned(), 2), ("ns/b".to_owned(), 4)]
        );
        index.remove("v", "ns/a");
        assert!(matches!(index.get("v"), Some(Entries::One(..))));
        index.remove("v", "ns/x");
        assert_eq!(keys_of(&index, "v"), [("ns/b".to_owned(), 4)]);
        assert_eq!(
            index.get("v").and_then(|e| e.get("ns/b")).map(|o| **o),
            Some(4)
        );
        index.remove("v", "ns/b");
        assert!(index.get("v").is_none());
        assert_eq!(index.values().count(), 0);
    }

    #[test]
    fn keys_and_objects_are_shared_not_copied() {
        let key: Arc<str> = Arc::from("ns/a");
        let obj = Arc::new(7u32);
        let mut index = Index::default();
        index.upsert("x", &key, &obj);
        index.upsert("y", &key, &obj);
        assert_eq!((Arc::strong_count(&key), Arc::strong_count(&obj)), (3, 3));
        index.remove("x", "ns/a");
        assert_eq!((Arc::strong_count(&key), Arc::strong_count(&obj)), (2, 2));
    }

    #[test]
    fn big_maps_shrink_after_mass_removal() {
        let keys: Vec<Arc<str>> = (0..1000).map(|i| Arc::from(format!("k{i}"))).collect();
        let obj = Arc::new(0u32);
        let mut index = Index::default();
        for k in &keys {
            index.upsert("v", k, &obj);
        }
        for k in &keys[..990] {
            index.remove("v", k);
        }
        let Some(Entries::Many(map)) = index.get("v") else {
            panic!("expected a map")
        };
        assert!(map.capacity() < 200, "capacity {}", map.capacity());
        assert!(index
            .get("v")
            .is_some_and(|e| e.len() == 10 && e.get("k995").is_some()));
    }
}
