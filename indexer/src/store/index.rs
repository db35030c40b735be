//! One index of a store: each index value maps to the keys of the objects
//! that have it. A value held by one object costs no set at all.

use std::collections::{hash_map, hash_set, HashMap, HashSet};
use std::iter;
use std::sync::Arc;

/// The hasher of every map in the store: fast, seeded per process.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The keys under one index value: one key inline, or a set.
#[derive(Debug)]
pub(crate) enum Keys {
    /// Exactly one object has this value (the common case for unique-ish indexes).
    One(Arc<str>),
    /// Two or more objects have this value. Boxed so that the common
    /// single-key case stays two words.
    #[allow(clippy::box_collection)]
    Many(Box<HashSet<Arc<str>, Hasher>>),
}

impl Keys {
    fn insert(&mut self, key: &Arc<str>) {
        match self {
            Self::One(existing) if **existing == **key => {}
            Self::One(existing) => {
                let mut set = HashSet::with_capacity_and_hasher(2, Hasher::default());
                set.insert(Arc::clone(existing));
                set.insert(Arc::clone(key));
                *self = Self::Many(Box::new(set));
            }
            Self::Many(set) => {
                if !set.contains(&**key) {
                    set.insert(Arc::clone(key));
                }
            }
        }
    }

    /// Removes `key`; returns whether no key is left.
    fn remove(&mut self, key: &str) -> bool {
        match self {
            Self::One(existing) => **existing == *key,
            Self::Many(set) => {
                set.remove(key);
                if set.len() == 1 {
                    if let Some(last) = set.iter().next().cloned() {
                        *self = Self::One(last);
                    }
                } else if set.len() * 4 < set.capacity() && set.capacity() > 64 {
                    set.shrink_to(set.len() * 2);
                }
                set_is_empty(self)
            }
        }
    }

    /// How many keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::One(_) => 1,
            Self::Many(set) => set.len(),
        }
    }

    /// Whether `key` is among them.
    pub(crate) fn contains(&self, key: &str) -> bool {
        match self {
            Self::One(existing) => **existing == *key,
            Self::Many(set) => set.contains(key),
        }
    }

    /// The keys, in no particular order.
    pub(crate) fn iter(&self) -> KeysIter<'_> {
        match self {
            Self::One(key) => KeysIter::One(iter::once(key)),
            Self::Many(set) => KeysIter::Many(set.iter()),
        }
    }
}

fn set_is_empty(keys: &Keys) -> bool {
    matches!(keys, Keys::Many(set) if set.is_empty())
}

/// Iterator over [`Keys`].
pub(crate) enum KeysIter<'a> {
    One(iter::Once<&'a Arc<str>>),
    Many(hash_set::Iter<'a, Arc<str>>),
}

impl<'a> Iterator for KeysIter<'a> {
    type Item = &'a Arc<str>;

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

/// Index value → keys.
#[derive(Debug, Default)]
pub(crate) struct Index {
    values: HashMap<Box<str>, Keys, Hasher>,
}

impl Index {
    /// Records that the object `key` has index value `value`.
    pub(crate) fn add(&mut self, value: &str, key: &Arc<str>) {
        match self.values.get_mut(value) {
            Some(keys) => keys.insert(key),
            None => {
                self.values.insert(value.into(), Keys::One(Arc::clone(key)));
            }
        }
    }

    /// Forgets that the object `key` has index value `value`; a value left
    /// with no keys is dropped.
    pub(crate) fn remove(&mut self, value: &str, key: &str) {
        if let Some(keys) = self.values.get_mut(value) {
            if keys.remove(key) {
                self.values.remove(value);
            }
        }
    }

    /// The keys with index value `value`.
    pub(crate) fn get(&self, value: &str) -> Option<&Keys> {
        self.values.get(value)
    }

    /// Every index value that at least one object has.
    pub(crate) fn values(&self) -> hash_map::Keys<'_, Box<str>, Keys> {
        self.values.keys()
    }

    /// Every (value, keys) pair.
    pub(crate) fn iter(&self) -> hash_map::Iter<'_, Box<str>, Keys> {
        self.values.iter()
    }

    /// An index with room for about `values` distinct values.
    pub(crate) fn with_capacity(values: usize) -> Self {
        Self {
            values: HashMap::with_capacity_and_hasher(values, Hasher::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(index: &Index, value: &str) -> Vec<String> {
        let mut keys: Vec<String> = index
            .get(value)
            .map(|k| k.iter().map(|k| k.to_string()).collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }

    #[test]
    fn a_single_key_costs_two_words() {
        assert_eq!(std::mem::size_of::<Keys>(), 2 * std::mem::size_of::<usize>());
    }

    #[test]
    fn one_key_needs_no_set_and_empty_values_vanish() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("ns/a"), Arc::from("ns/b"));
        let mut index = Index::default();
        index.add("v", &a);
        index.add("v", &a);
        assert!(matches!(index.get("v"), Some(Keys::One(_))));
        index.add("v", &b);
        assert!(matches!(index.get("v"), Some(Keys::Many(_))));
        assert_eq!(keys_of(&index, "v"), ["ns/a", "ns/b"]);
        index.remove("v", "ns/a");
        assert!(matches!(index.get("v"), Some(Keys::One(_))));
        assert_eq!(keys_of(&index, "v"), ["ns/b"]);
        index.remove("v", "ns/x");
        assert_eq!(keys_of(&index, "v"), ["ns/b"]);
        index.remove("v", "ns/b");
        assert!(index.get("v").is_none());
        assert_eq!(index.values().count(), 0);
    }

    #[test]
    fn keys_are_shared_not_copied() {
        let key: Arc<str> = Arc::from("ns/a");
        let mut index = Index::default();
        index.add("x", &key);
        index.add("y", &key);
        assert_eq!(Arc::strong_count(&key), 3);
        index.remove("x", "ns/a");
        assert_eq!(Arc::strong_count(&key), 2);
    }

    #[test]
    fn big_sets_shrink_after_mass_removal() {
        let keys: Vec<Arc<str>> = (0..1000).map(|i| Arc::from(format!("k{i}"))).collect();
        let mut index = Index::default();
        for k in &keys {
            index.add("v", k);
        }
        for k in &keys[..990] {
            index.remove("v", k);
        }
        let Some(Keys::Many(set)) = index.get("v") else {
            panic!("expected a set")
        };
        assert_eq!(set.len(), 10);
        assert!(set.capacity() < 200, "capacity {}", set.capacity());
        assert!(index
            .get("v")
            .is_some_and(|k| k.len() == 10 && k.contains("k995")));
    }
}
