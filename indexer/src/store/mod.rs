//! [`ThreadSafeStore`]: objects by key, with named indexes kept exact on
//! every change, safe to share between threads.
//!
//! One `RwLock` guards the items and every index together, so readers run
//! side by side and never see an update half applied. Writers run the index
//! functions under an upgradable read lock (readers keep going) and take
//! the write lock only to apply the already computed change, which runs no
//! user code: a panicking index function leaves the store unchanged.
//!
//! Keys are `Arc<str>`, allocated once per object and shared by the item
//! map and every index. Index entries hold the object too, so a lookup by
//! index value is one hash lookup, like a lookup by key. An index value held
//! by a single object needs no map. Maps use a fast seeded hasher (foldhash).

mod index;
mod index_funcs;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use parking_lot::{RwLock, RwLockUpgradableReadGuard};

use crate::keys::{meta_namespace_key, KeyError};
use crate::known::KnownObjects;
use crate::object::KubeObject;
use index::{Entries, EntriesIter, Hasher, Index};
use index_funcs::{IndexFn, Values};

pub use index_funcs::{namespace_index_func, IndexFunc, Indexers, NAMESPACE_INDEX};

/// A store operation that was refused; the store is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The object has no key (it has no name).
    #[error(transparent)]
    Key(#[from] KeyError),
    /// No index with this name was added.
    #[error("index {name:?} does not exist")]
    UnknownIndex {
        /// The name asked for.
        name: String,
    },
    /// An indexer with this name already exists; none of the given indexers was added.
    #[error("indexer {name:?} already exists")]
    IndexerExists {
        /// The conflicting name.
        name: String,
    },
}

/// One named index and the function it is computed with.
struct Indexer<K> {
    name: String,
    func: IndexFn<K>,
    index: Index<K>,
}

/// Everything the lock guards.
struct Inner<K> {
    items: HashMap<Arc<str>, Arc<K>, Hasher>,
    indexers: Vec<Indexer<K>>,
}

impl<K> Inner<K> {
    fn indexer(&self, name: &str) -> Result<&Indexer<K>, StoreError> {
        self.indexers
            .iter()
            .find(|ix| ix.name == name)
            .ok_or_else(|| StoreError::UnknownIndex {
                name: name.to_owned(),
            })
    }
}

/// The objects of index entries.
fn objects<K>(entries: EntriesIter<'_, K>) -> Vec<Arc<K>> {
    let mut out = Vec::with_capacity(entries.size_hint().0);
    out.extend(entries.map(|(_, obj)| Arc::clone(obj)));
    out
}

/// A thread-safe map from key (`namespace/name`) to `Arc<K>`, with named
/// indexes (client-go's `ThreadSafeStore` + `Indexer`).
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcontrol_indexer::{Object, ThreadSafeStore, NAMESPACE_INDEX};
///
/// fn cm(ns: &str, name: &str, app: &str) -> Arc<ConfigMap> {
///     let mut cm = ConfigMap::default();
///     cm.meta_mut().namespace = Some(ns.into());
///     cm.meta_mut().name = Some(name.into());
///     cm.meta_mut().labels = Some([("app".to_owned(), app.to_owned())].into());
///     Arc::new(cm)
/// }
///
/// let store = ThreadSafeStore::new();
/// store.add_indexer("by-app", |cm: &ConfigMap| {
///     cm.labels().get("app").cloned().into_iter().collect()
/// })?;
/// store.add(cm("prod", "a", "web"))?;
/// store.add(cm("prod", "b", "db"))?;
/// store.add(cm("dev", "a", "web"))?;
///
/// assert!(store.get_by_key("prod/a").is_some());
/// assert_eq!(store.by_index(NAMESPACE_INDEX, "prod")?.len(), 2);
/// let mut web = store.index_keys("by-app", "web")?;
/// web.sort();
/// assert_eq!(web, ["dev/a", "prod/a"]);
///
/// store.update(cm("prod", "a", "db"))?; // old index values are dropped
/// assert_eq!(store.index_keys("by-app", "web")?, ["dev/a"]);
/// # Ok::<(), kcontrol_indexer::StoreError>(())
/// ```
pub struct ThreadSafeStore<K> {
    inner: RwLock<Inner<K>>,
}

impl<K: KubeObject> Default for ThreadSafeStore<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> fmt::Debug for ThreadSafeStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("ThreadSafeStore")
            .field("len", &inner.items.len())
            .field(
                "indexers",
                &inner.indexers.iter().map(|ix| &ix.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<K: KubeObject> ThreadSafeStore<K> {
    /// An empty store with the built-in [`NAMESPACE_INDEX`].
    pub fn new() -> Self {
        Self::with_namespace_index_and(Indexers::new())
    }

    /// An empty store with the built-in [`NAMESPACE_INDEX`] and these
    /// indexers. An indexer given under the name [`NAMESPACE_INDEX`] is
    /// taken to be the namespace index and served by the built-in one.
    pub fn with_namespace_index_and(indexers: Indexers<K>) -> Self {
        let builtin = Indexer {
            name: NAMESPACE_INDEX.to_owned(),
            func: IndexFn::Namespace,
            index: Index::default(),
        };
        let custom = indexers
            .into_iter()
            .filter(|(name, _)| name != NAMESPACE_INDEX)
            .map(|(name, f)| Indexer {
                name,
                func: IndexFn::Custom(f),
                index: Index::default(),
            });
        Self::from_indexers(std::iter::once(builtin).chain(custom).collect())
    }

    /// An empty store with exactly these indexers (no built-in namespace
    /// index unless given, e.g. with [`namespace_index_func`]).
    pub fn with_indexers(indexers: Indexers<K>) -> Self {
        Self::from_indexers(
            indexers
                .into_iter()
                .map(|(name, f)| Indexer {
                    name,
                    func: IndexFn::Custom(f),
                    index: Index::default(),
                })
                .collect(),
        )
    }

    fn from_indexers(indexers: Vec<Indexer<K>>) -> Self {
        Self {
            inner: RwLock::new(Inner {
                items: HashMap::default(),
                indexers,
            }),
        }
    }

    /// Adds or replaces the object under its key; returns the object it replaced.
    pub fn add(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        let key = meta_namespace_key(obj.as_ref())?;
        Ok(self.upsert(key, obj))
    }

    /// The same as [`ThreadSafeStore::add`] (client-go has both names).
    pub fn update(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        self.add(obj)
    }

    /// Removes the object with the key of `obj`; returns what was stored.
    pub fn delete(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        let key = meta_namespace_key(obj)?;
        Ok(self.delete_by_key(&key))
    }

    /// Removes the object with this key; returns what was stored.
    pub fn delete_by_key(&self, key: &str) -> Option<Arc<K>> {
        let guard = self.inner.upgradable_read();
        let old = guard.items.get(key).cloned()?;
        let old_values: Vec<Values<'_>> = guard
            .indexers
            .iter()
            .map(|ix| ix.func.values(&old))
            .collect();
        let mut inner = RwLockUpgradableReadGuard::upgrade(guard);
        for (ix, values) in inner.indexers.iter_mut().zip(&old_values) {
            for value in values.iter() {
                ix.index.remove(value, key);
            }
        }
        inner.items.remove(key)
    }

    fn upsert(&self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        let guard = self.inner.upgradable_read();
        let old = guard
            .items
            .get_key_value(key.as_str())
            .map(|(k, v)| (Arc::clone(k), Arc::clone(v)));
        let new_values: Vec<Values<'_>> = guard
            .indexers
            .iter()
            .map(|ix| ix.func.values(&obj))
            .collect();
        let old_values: Vec<Values<'_>> = match &old {
            Some((_, old_obj)) => guard
                .indexers
                .iter()
                .map(|ix| ix.func.values(old_obj))
                .collect(),
            None => Vec::new(),
        };
        let key: Arc<str> = match &old {
            Some((k, _)) => Arc::clone(k),
            None => Arc::from(key),
        };
        let mut inner = RwLockUpgradableReadGuard::upgrade(guard);
        for (i, (ix, new)) in inner.indexers.iter_mut().zip(&new_values).enumerate() {
            if let Some(old) = old_values.get(i) {
                for value in old.iter().filter(|v| !new.contains(v)) {
                    ix.index.remove(value, &key);
                }
            }
            // Unchanged values too: their entries must hold the new object.
            for value in new.iter() {
                ix.index.upsert(value, &key, &obj);
            }
        }
        inner.items.insert(key, obj)
    }

    /// Replaces the whole content with `objects` and rebuilds every index.
    /// If any object has no key, nothing changes. Later objects win over
    /// earlier ones with the same key.
    pub fn replace<I>(&self, objects: I) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Arc<K>>,
    {
        let objects = objects.into_iter();
        let mut items = HashMap::with_capacity_and_hasher(objects.size_hint().0, Hasher::default());
        for obj in objects {
            let key = meta_namespace_key(obj.as_ref())?;
            items.insert(Arc::from(key), obj);
        }
        let guard = self.inner.upgradable_read();
        let indexes: Vec<Index<K>> = guard
            .indexers
            .iter()
            .map(|ix| build_index(&ix.func, &items))
            .collect();
        let mut inner = RwLockUpgradableReadGuard::upgrade(guard);
        let old_items = std::mem::replace(&mut inner.items, items);
        let old_indexes: Vec<Index<K>> = inner
            .indexers
            .iter_mut()
            .zip(indexes)
            .map(|(ix, index)| std::mem::replace(&mut ix.index, index))
            .collect();
        drop(inner);
        // Freed after the lock is released.
        drop((old_items, old_indexes));
        Ok(())
    }

    /// Adds named indexers and indexes every stored object with them. If
    /// any name is taken (or given twice), none is added.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), StoreError> {
        let guard = self.inner.upgradable_read();
        if let Some(ix) = guard
            .indexers
            .iter()
            .find(|ix| indexers.contains_key(&ix.name))
        {
            return Err(StoreError::IndexerExists {
                name: ix.name.clone(),
            });
        }
        let new: Vec<Indexer<K>> = indexers
            .into_iter()
            .map(|(name, f)| {
                let func = IndexFn::Custom(f);
                let index = build_index(&func, &guard.items);
                Indexer { name, func, index }
            })
            .collect();
        RwLockUpgradableReadGuard::upgrade(guard)
            .indexers
            .extend(new);
        Ok(())
    }

    /// Adds one named indexer (see [`ThreadSafeStore::add_indexers`]).
    pub fn add_indexer<F>(&self, name: impl Into<String>, func: F) -> Result<(), StoreError>
    where
        F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
    {
        let func: IndexFunc<K> = Arc::new(func);
        self.add_indexers(Indexers::from([(name.into(), func)]))
    }

    /// The names of the indexers, in the order they were added.
    pub fn indexer_names(&self) -> Vec<String> {
        self.inner
            .read()
            .indexers
            .iter()
            .map(|ix| ix.name.clone())
            .collect()
    }

    /// The stored object with the key of `obj`.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, StoreError> {
        let key = meta_namespace_key(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The stored object with this key.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Whether an object with this key is stored.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    /// Every stored object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// The stored objects for which `keep` is true, in no particular order.
    /// `keep` runs under the store's read lock: it must not call the store.
    pub fn list_filtered(&self, mut keep: impl FnMut(&K) -> bool) -> Vec<Arc<K>> {
        let inner = self.inner.read();
        inner
            .items
            .values()
            .filter(|obj| keep(obj))
            .cloned()
            .collect()
    }

    /// Every stored key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.inner
            .read()
            .items
            .keys()
            .map(|k| k.to_string())
            .collect()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects that share at least one value of index `index_name`
    /// with `obj` (`obj` itself need not be stored).
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, StoreError> {
        let inner = self.inner.read();
        let ix = inner.indexer(index_name)?;
        let values = ix.func.values(obj);
        let found: Vec<&Entries<K>> = values.iter().filter_map(|v| ix.index.get(v)).collect();
        Ok(match found.as_slice() {
            [] => Vec::new(),
            [entries] => objects(entries.iter()),
            many => {
                let unique: HashMap<&Arc<str>, &Arc<K>, Hasher> =
                    many.iter().flat_map(|e| e.iter()).collect();
                unique.into_values().cloned().collect()
            }
        })
    }

    /// The keys of the objects whose index `index_name` holds `value`.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<String>, StoreError> {
        let inner = self.inner.read();
        let entries = inner.indexer(index_name)?.index.get(value);
        Ok(entries
            .map(|e| e.iter().map(|(key, _)| key.to_string()).collect())
            .unwrap_or_default())
    }

    /// The objects whose index `index_name` holds `value`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        let inner = self.inner.read();
        let entries = inner.indexer(index_name)?.index.get(value);
        Ok(entries.map(|e| objects(e.iter())).unwrap_or_default())
    }

    /// The objects whose index `index_name` holds `value` and for which
    /// `keep` is true. `keep` runs under the store's read lock: it must not
    /// call the store.
    pub fn by_index_filtered(
        &self,
        index_name: &str,
        value: &str,
        mut keep: impl FnMut(&K) -> bool,
    ) -> Result<Vec<Arc<K>>, StoreError> {
        let inner = self.inner.read();
        let Some(entries) = inner.indexer(index_name)?.index.get(value) else {
            return Ok(Vec::new());
        };
        Ok(entries
            .iter()
            .filter(|(_, obj)| keep(obj))
            .map(|(_, obj)| Arc::clone(obj))
            .collect())
    }

    /// Every value of index `index_name` that at least one stored object has.
    pub fn list_index_values(&self, index_name: &str) -> Result<Vec<String>, StoreError> {
        let inner = self.inner.read();
        Ok(inner
            .indexer(index_name)?
            .index
            .values()
            .map(|v| v.to_string())
            .collect())
    }

    /// Checks that every index agrees with the items, for tests and
    /// debugging: each index entry is a stored key holding the stored object,
    /// which has that index value, and each stored object is indexed under
    /// exactly its values. Returns the first disagreement found, in words.
    pub fn check_consistency(&self) -> Result<(), String> {
        let inner = self.inner.read();
        for ix in &inner.indexers {
            let name = &ix.name;
            let mut indexed = 0usize;
            for (value, entries) in ix.index.iter() {
                for (key, obj) in entries.iter() {
                    indexed += 1;
                    let Some(stored) = inner.items.get(&**key) else {
                        return Err(format!(
                            "index {name:?} value {value:?}: key {key:?} is not stored"
                        ));
                    };
                    if !Arc::ptr_eq(stored, obj) {
                        return Err(format!(
                            "index {name:?} value {value:?}: {key:?} holds an old object"
                        ));
                    }
                    if !ix.func.values(obj).contains(value) {
                        return Err(format!(
                            "index {name:?}: {key:?} is under {value:?} but no longer has it"
                        ));
                    }
                }
            }
            let mut expected = 0usize;
            for (key, obj) in &inner.items {
                let values = ix.func.values(obj);
                let distinct: HashSet<&str, Hasher> = values.iter().collect();
                expected += distinct.len();
                for value in distinct {
                    if ix.index.get(value).and_then(|e| e.get(key)).is_none() {
                        return Err(format!(
                            "index {name:?}: {key:?} is missing under {value:?}"
                        ));
                    }
                }
            }
            if indexed != expected {
                return Err(format!(
                    "index {name:?} holds {indexed} entries, want {expected}"
                ));
            }
        }
        Ok(())
    }
}

/// An index of `items` computed from scratch.
fn build_index<K: KubeObject>(
    func: &IndexFn<K>,
    items: &HashMap<Arc<str>, Arc<K>, Hasher>,
) -> Index<K> {
    let mut index = Index::default();
    for (key, obj) in items {
        for value in func.values(obj).iter() {
            index.upsert(value, key, obj);
        }
    }
    index
}

impl<K: KubeObject> KnownObjects<K> for ThreadSafeStore<K> {
    fn list_keys(&self) -> Vec<String> {
        ThreadSafeStore::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        ThreadSafeStore::get_by_key(self, key)
    }

    fn list_shared_keys(&self) -> Vec<Arc<str>> {
        self.inner.read().items.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
