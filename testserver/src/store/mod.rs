//! The storage engine: one global, strictly increasing resourceVersion;
//! per resource an ordered map of objects (by `namespace/name`) and a
//! bounded event history behind one lock; an index of owner references for
//! the garbage collector. Past states (exact-resourceVersion lists and
//! continue tokens) are read by rolling the retained history back, so the
//! history window plays the role of both kube's watch cache and etcd's
//! compaction horizon. A rank index of the keys counts the items after a
//! page without walking them.

mod continue_token;
mod history;
mod key_ranks;
mod object;

pub(crate) use continue_token::ContinueToken;
pub use history::Event;
pub(crate) use history::Evicted;
pub use object::{StoredObject, WatchEventType};

use crate::meta;
use crate::resource::StorageKey;
use history::History;
use key_ranks::KeyRanks;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// A write could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object could not be encoded as JSON.
    #[error("encoding object: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Location of an object: its resource's storage key and its object key.
pub(crate) type ObjectLocation = (StorageKey, String);

#[derive(Default)]
struct OwnerIndex {
    by_uid: HashMap<String, ObjectLocation>,
    dependents: HashMap<String, HashSet<ObjectLocation>>,
}

impl OwnerIndex {
    fn remove(&mut self, loc: &ObjectLocation, obj: &StoredObject) {
        if self.by_uid.get(obj.uid()).is_some_and(|l| l == loc) {
            self.by_uid.remove(obj.uid());
        }
        for owner in meta::owner_uids(obj.value()) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(loc);
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    fn add(&mut self, loc: &ObjectLocation, obj: &StoredObject) {
        if !obj.uid().is_empty() {
            self.by_uid.insert(obj.uid().to_owned(), loc.clone());
        }
        for owner in meta::owner_uids(obj.value()) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(loc.clone());
        }
    }
}

/// Whether `a` and `b` give the owner index the same entries (same uid,
/// same ownerReferences), so a write from one to the other leaves it as is.
fn same_owner_entry(a: &StoredObject, b: &StoredObject) -> bool {
    a.uid() == b.uid() && owner_refs_raw(a) == owner_refs_raw(b)
}

/// `metadata.ownerReferences` as stored.
fn owner_refs_raw(o: &StoredObject) -> Option<&Value> {
    meta::metadata(o.value())?.get("ownerReferences")
}

/// All stored objects of all resources.
pub struct Store {
    rv: AtomicU64,
    history_capacity: AtomicUsize,
    resources: RwLock<HashMap<StorageKey, Arc<ResourceStore>>>,
    index: Mutex<OwnerIndex>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.current_rv())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// An empty store whose resources keep `history_capacity` events each.
    pub(crate) fn new(history_capacity: usize) -> Self {
        Self {
            rv: AtomicU64::new(1),
            history_capacity: AtomicUsize::new(history_capacity.max(1)),
            resources: RwLock::new(HashMap::new()),
            index: Mutex::new(OwnerIndex::default()),
        }
    }

    /// The newest resourceVersion handed out.
    pub fn current_rv(&self) -> u64 {
        self.rv.load(Ordering::SeqCst)
    }

    fn next_rv(&self) -> u64 {
        self.rv.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The storage of a resource, created on first use.
    pub(crate) fn ensure_resource(&self, key: &StorageKey) -> Arc<ResourceStore> {
        if let Some(r) = self.resources.read().get(key) {
            return r.clone();
        }
        let mut map = self.resources.write();
        map.entry(key.clone())
            .or_insert_with(|| {
                let cap = self.history_capacity.load(Ordering::Relaxed);
                Arc::new(ResourceStore::new(key.clone(), cap, self.current_rv()))
            })
            .clone()
    }

    /// The storage of a resource, if it exists.
    pub(crate) fn resource(&self, key: &StorageKey) -> Option<Arc<ResourceStore>> {
        self.resources.read().get(key).cloned()
    }

    /// Removes a resource and everything stored for it; its watchers end.
    pub(crate) fn remove_resource(&self, key: &StorageKey) {
        let removed = self.resources.write().remove(key);
        if let Some(rs) = removed {
            let state = rs.state.read();
            let mut index = self.index.lock();
            for (k, obj) in &state.objects {
                index.remove(&(key.clone(), k.clone()), obj);
            }
            drop(index);
            drop(state);
            rs.closed_tx.send_replace(true);
        }
    }

    /// Every resource's storage.
    pub(crate) fn all_resources(&self) -> Vec<Arc<ResourceStore>> {
        self.resources.read().values().cloned().collect()
    }

    /// Drops all retained history: older watches, continue tokens and exact
    /// reads now get 410 Expired.
    pub fn compact(&self) {
        for rs in self.all_resources() {
            let mut st = rs.state.write();
            let rv = self.current_rv();
            st.history.compact(rv);
        }
    }

    /// What a restarted API server looks like from here: the version moves
    /// on (the server's own writes while it starts) and the history is
    /// gone, so watches from before the restart get 410.
    pub(crate) fn restart(&self) {
        self.next_rv();
        self.compact();
    }

    /// Where the object with this uid is stored.
    pub(crate) fn locate_uid(&self, uid: &str) -> Option<ObjectLocation> {
        self.index.lock().by_uid.get(uid).cloned()
    }

    /// Objects whose ownerReferences name `uid`.
    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<ObjectLocation> {
        self.index
            .lock()
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// The state under a resource's lock.
pub(crate) struct ResourceState {
    objects: BTreeMap<String, Arc<StoredObject>>,
    /// The keys of `objects`, with ranks.
    keys: KeyRanks,
    history: History,
}

/// One resource's objects and history.
pub(crate) struct ResourceStore {
    key: StorageKey,
    state: RwLock<ResourceState>,
    seq_tx: watch::Sender<u64>,
    closed_tx: watch::Sender<bool>,
}

/// Which part of a resource a list reads.
pub(crate) struct ListQuery<'a> {
    /// Key prefix (`ns/`), empty for all.
    pub prefix: String,
    /// First key relative to the prefix (from a continue token), inclusive.
    pub start: Option<String>,
    /// Read the state at this resourceVersion; `None` reads the latest.
    pub at_rv: Option<u64>,
    /// Page size.
    pub limit: Option<usize>,
    /// Which objects to return.
    pub filter: &'a (dyn Fn(&StoredObject) -> bool + Sync),
    /// Count the keys after the page (only meaningful without filters).
    pub count_remaining: bool,
}

/// One page of a list.
#[derive(Debug)]
pub(crate) struct ListPage {
    pub items: Vec<Arc<StoredObject>>,
    /// The resourceVersion the page was read at.
    pub rv: u64,
    /// The last returned key relative to the prefix, when more keys follow.
    pub last_key: Option<String>,
    /// Keys after this page (when counted).
    pub remaining: Option<u64>,
}

/// A list asked for a state older than the retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooOld {
    pub floor: u64,
}

/// A write transaction on one resource (holds its lock).
pub(crate) struct WriteTxn<'a> {
    store: &'a Store,
    rs: &'a ResourceStore,
    state: RwLockWriteGuard<'a, ResourceState>,
}

impl WriteTxn<'_> {
    /// The current object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<StoredObject>> {
        self.state.objects.get(key).cloned()
    }

    /// Stores `value` under `key` at a new resourceVersion and records an
    /// ADDED or MODIFIED event.
    pub(crate) fn put(&mut self, key: &str, mut value: Value) -> Result<Arc<Event>, StoreError> {
        let rv = self.store.next_rv();
        meta::set_meta_str(&mut value, "resourceVersion", &rv.to_string());
        let prev = self.state.objects.get(key).cloned();
        let kind = if prev.is_some() {
            WatchEventType::Modified
        } else {
            WatchEventType::Added
        };
        let (obj, frame) = object::encode(kind, value, rv, key.to_owned())?;
        let obj = Arc::new(obj);
        self.state.objects.insert(key.to_owned(), obj.clone());
        if prev.is_none() {
            self.state.keys.insert(key);
        }
        if !prev.as_ref().is_some_and(|p| same_owner_entry(p, &obj)) {
            let loc = (self.rs.key.clone(), key.to_owned());
            let mut index = self.store.index.lock();
            if let Some(p) = &prev {
                index.remove(&loc, p);
            }
            index.add(&loc, &obj);
        }
        let ev = self.state.history.push(kind, obj, prev, frame);
        self.rs.seq_tx.send_replace(ev.seq + 1);
        Ok(ev)
    }

    /// Removes the object under `key` and records a DELETED event carrying
    /// its last state with the deletion's resourceVersion.
    pub(crate) fn delete(&mut self, key: &str) -> Result<Option<Arc<Event>>, StoreError> {
        let Some(prev) = self.state.objects.get(key).cloned() else {
            return Ok(None);
        };
        let rv = self.store.next_rv();
        let mut value = prev.value().clone();
        meta::set_meta_str(&mut value, "resourceVersion", &rv.to_string());
        let (obj, frame) = object::encode(WatchEventType::Deleted, value, rv, key.to_owned())?;
        self.state.objects.remove(key);
        self.state.keys.remove(key);
        self.store
            .index
            .lock()
            .remove(&(self.rs.key.clone(), key.to_owned()), &prev);
        let ev = self
            .state
            .history
            .push(WatchEventType::Deleted, Arc::new(obj), Some(prev), frame);
        self.rs.seq_tx.send_replace(ev.seq + 1);
        Ok(Some(ev))
    }
}

impl ResourceStore {
    fn new(key: StorageKey, capacity: usize, start_rv: u64) -> Self {
        Self {
            key,
            state: RwLock::new(ResourceState {
                objects: BTreeMap::new(),
                keys: KeyRanks::default(),
                history: History::new(capacity, start_rv),
            }),
            seq_tx: watch::Sender::new(0),
            closed_tx: watch::Sender::new(false),
        }
    }

    /// The group and resource this storage belongs to.
    pub(crate) fn key(&self) -> &StorageKey {
        &self.key
    }

    /// Starts a write transaction.
    pub(crate) fn write<'a>(&'a self, store: &'a Store) -> WriteTxn<'a> {
        WriteTxn {
            store,
            rs: self,
            state: self.state.write(),
        }
    }

    /// The current object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<StoredObject>> {
        self.state.read().objects.get(key).cloned()
    }

    /// Number of stored objects.
    pub(crate) fn len(&self) -> usize {
        self.state.read().objects.len()
    }

    /// Keys (relative to nothing) of all objects under `prefix`.
    pub(crate) fn keys_with_prefix(&self, prefix: &str) -> Vec<String> {
        let st = self.state.read();
        range(&st.objects, prefix, None)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Current objects under `prefix`, the resourceVersion they are current
    /// at, and the history position right after them (for watches that
    /// start with the current state).
    pub(crate) fn snapshot(
        &self,
        store: &Store,
        prefix: &str,
    ) -> (Vec<Arc<StoredObject>>, u64, u64) {
        let st = self.state.read();
        let items = range(&st.objects, prefix, None)
            .map(|(_, o)| o.clone())
            .collect();
        (items, store.current_rv(), st.history.next_seq())
    }

    /// History position of the first event newer than `rv`; `Err(floor)`
    /// when `rv` is older than the retained history.
    pub(crate) fn seq_after(&self, rv: u64) -> Result<u64, u64> {
        self.state.read().history.seq_after(rv)
    }

    /// Up to `max` events from history position `seq`.
    pub(crate) fn events_from(&self, seq: u64, max: usize) -> Result<Vec<Arc<Event>>, Evicted> {
        self.state.read().history.events_from(seq, max)
    }

    /// The resourceVersion a bookmark may report to a watcher that has
    /// consumed history up to `next_seq`: the global version when it is
    /// caught up (no later write to this resource can get a smaller one),
    /// else the version of the last event it received.
    pub(crate) fn bookmark_rv(&self, store: &Store, next_seq: u64, last_sent: u64) -> u64 {
        let st = self.state.read();
        if next_seq >= st.history.next_seq() {
            store.current_rv().max(last_sent)
        } else {
            last_sent
        }
    }

    /// Notified with the next history position after every write.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.seq_tx.subscribe()
    }

    /// Becomes true when the resource is removed.
    pub(crate) fn subscribe_closed(&self) -> watch::Receiver<bool> {
        self.closed_tx.subscribe()
    }

    /// Reads one page of a list (see [`ListQuery`]).
    pub(crate) fn list_page(&self, store: &Store, q: &ListQuery<'_>) -> Result<ListPage, TooOld> {
        let st = self.state.read();
        let current = store.current_rv();
        let rv = q.at_rv.unwrap_or(current).min(current);
        if rv < st.history.floor_rv() {
            return Err(TooOld {
                floor: st.history.floor_rv(),
            });
        }
        let start = q.start.as_ref().map(|s| format!("{}{s}", q.prefix));
        // the listed keys written after `rv`, with their state at `rv`
        let mut overrides: BTreeMap<String, Option<Arc<StoredObject>>> = BTreeMap::new();
        if st.history.last_rv().is_some_and(|last| last > rv) {
            for ev in st.history.events_after(rv) {
                let key = ev.object.key();
                if key.starts_with(q.prefix.as_str()) && start.as_deref().is_none_or(|s| key >= s) {
                    overrides
                        .entry(key.to_owned())
                        .or_insert_with(|| ev.prev.clone());
                }
            }
        }
        let current_iter =
            range(&st.objects, &q.prefix, start.as_deref()).map(|(k, v)| (k, Some(v)));
        let override_iter =
            range(&overrides, &q.prefix, start.as_deref()).map(|(k, v)| (k, v.as_ref()));
        let mut merged =
            MergeByKey::new(current_iter, override_iter).filter_map(|(k, v)| v.map(|o| (k, o)));
        let limit = q.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key = None;
        for (key, obj) in merged.by_ref() {
            if (q.filter)(obj) {
                items.push(obj.clone());
                if items.len() >= limit {
                    last_key = Some(key.clone());
                    break;
                }
            }
        }
        let mut remaining = None;
        if let Some(k) = &last_key {
            let rest = if q.count_remaining {
                count_after(&st, &overrides, &q.prefix, k)
            } else {
                u64::from(merged.next().is_some())
            };
            if rest == 0 {
                last_key = None;
            } else {
                if q.count_remaining {
                    remaining = Some(rest);
                }
                last_key = Some(k.strip_prefix(q.prefix.as_str()).unwrap_or(k).to_owned());
            }
        }
        Ok(ListPage {
            items,
            rv,
            last_key,
            remaining,
        })
    }
}

/// Keys after `last` (a key starting with `prefix`) that start with
/// `prefix`, in the current keys with `overrides` (every listed key written
/// after the listed version, with its state then) applied: O(log n) for the
/// current keys plus one step per override after `last`.
fn count_after(
    st: &ResourceState,
    overrides: &BTreeMap<String, Option<Arc<StoredObject>>>,
    prefix: &str,
    last: &str,
) -> u64 {
    // keys starting with `prefix` or sorting before it form a prefix of
    // the sorted keys, as do the keys up to `last`
    let end = st
        .keys
        .partition_point(|k| k < prefix || k.starts_with(prefix));
    let through_last = st.keys.partition_point(|k| k <= last);
    let current = end.saturating_sub(through_last);
    let (mut gone, mut back) = (0usize, 0usize);
    let changed = overrides
        .range::<str, _>((Bound::Excluded(last), Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(prefix));
    for (k, then) in changed {
        gone += usize::from(st.objects.contains_key(k));
        back += usize::from(then.is_some());
    }
    (current + back).saturating_sub(gone) as u64
}

/// Entries of `map` whose key starts with `prefix`, from `start` (inclusive).
fn range<'a, V>(
    map: &'a BTreeMap<String, V>,
    prefix: &str,
    start: Option<&str>,
) -> impl Iterator<Item = (&'a String, &'a V)> + 'a {
    let lo = match start {
        Some(s) if s > prefix => s.to_owned(),
        _ => prefix.to_owned(),
    };
    let prefix = prefix.to_owned();
    map.range::<str, _>((Bound::Included(lo.as_str()), Bound::Unbounded))
        .take_while(move |(k, _)| k.starts_with(prefix.as_str()))
}

/// Merges two key-ordered iterators; on equal keys the second one wins.
struct MergeByKey<'a, A, B, V>
where
    A: Iterator<Item = (&'a String, V)>,
    B: Iterator<Item = (&'a String, V)>,
{
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<'a, A, B, V> MergeByKey<'a, A, B, V>
where
    A: Iterator<Item = (&'a String, V)>,
    B: Iterator<Item = (&'a String, V)>,
{
    fn new(a: A, b: B) -> Self {
        Self {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<'a, A, B, V> Iterator for MergeByKey<'a, A, B, V>
where
    A: Iterator<Item = (&'a String, V)>,
    B: Iterator<Item = (&'a String, V)>,
{
    type Item = (&'a String, V);

    fn next(&mut self) -> Option<Self::Item> {
        let order = match (self.a.peek(), self.b.peek()) {
            (None, None) => return None,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
        };
        match order {
            std::cmp::Ordering::Less => self.a.next(),
            std::cmp::Ordering::Greater => self.b.next(),
            std::cmp::Ordering::Equal => {
                self.a.next();
                self.b.next()
            }
        }
    }
}

#[cfg(test)]
mod tests;
