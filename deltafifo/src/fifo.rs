//! [`DeltaFifo`]: the shared queue itself, its producer operations (add,
//! update, delete, resync; replace lives in [`crate::replace`]) and its
//! read-only accessors. Popping lives in [`crate::pop`].
//!
//! # Locking
//!
//! Two locks, always taken in this order:
//! - `processing` is held while a processor runs, and by every operation that
//!   reads the known-objects store (`delete`, `resync`, replace `finish`).
//!   The processor is what updates that store, so those operations always
//!   see a store that agrees with the queue: an object popped but not yet
//!   stored cannot be mistaken for an unknown one (client-go gets the same
//!   guarantee by running the processor under its single lock).
//! - `state` guards the queue and flags and is only held briefly. `add`,
//!   `update` and streaming replace `add` take only this one, so the watch
//!   and list hot paths never wait for a processor.

use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::{
    DeletedFinalStateUnknown, KeyError, KnownObjects, KubeObject, ObjectOrTombstone,
};
use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::delta::{Delta, DeltaType, Deltas};
use crate::error::FifoError;
use crate::metrics::FifoMetrics;
use crate::queue::Queue;
use crate::reentry;

/// How a [`DeltaFifo`] computes the key of an object.
pub type KeyFn<K> = Arc<dyn Fn(&K) -> Result<String, KeyError> + Send + Sync>;

/// Everything the `state` lock guards.
pub(crate) struct State<K> {
    pub(crate) queue: Queue<K>,
    /// The initial population is defined: the first replace finished, or an
    /// add/update/delete came first.
    pub(crate) populated: bool,
    /// A replace (streaming or not) is under way.
    pub(crate) replace_active: bool,
    /// The replace under way is the first one: `has_synced` stays false
    /// until it finishes.
    pub(crate) initial_replace_active: bool,
    pub(crate) closed: bool,
    pub(crate) last_sync_resource_version: Option<String>,
    /// Threads blocked in `pop`.
    pub(crate) thread_waiters: usize,
    /// Tasks waiting in `pop_async`.
    pub(crate) task_waiters: usize,
}

/// A queue of object changes, grouped per key, between a reflector
/// (producer) and an informer (consumer), with client-go's DeltaFIFO
/// semantics:
///
/// - DF1: the changes of one key accumulate in order and the key is queued
///   once, at the place of its first unpopped change;
/// - DF2: two deletions in a row collapse into the more informative one;
/// - DF3: deleting an object that is neither queued nor known is ignored;
/// - DF4: [`replace`](DeltaFifo::replace) (or the streaming
///   [`begin_replace`](DeltaFifo::begin_replace)) queues a `Replaced` delta
///   per listed object and a tombstone deletion for every known or queued key
///   the list lacks;
/// - DF5: [`has_synced`](DeltaFifo::has_synced) turns true once the initial
///   population has been processed;
/// - DF6: [`resync`](DeltaFifo::resync) queues `Sync` deltas for known keys
///   that are not queued;
/// - DF7: [`pop`](DeltaFifo::pop) / [`pop_async`](DeltaFifo::pop_async) hand
///   a key's whole delta list to a processor and requeue it on request;
///   [`close`](DeltaFifo::close) wakes every popper.
///
/// Build one with [`DeltaFifo::builder`]; it is shared as an `Arc`.
pub struct DeltaFifo<K: KubeObject> {
    pub(crate) state: Mutex<State<K>>,
    pub(crate) processing: Mutex<()>,
    pub(crate) wake_threads: Condvar,
    pub(crate) wake_tasks: Notify,
    pub(crate) key_fn: KeyFn<K>,
    pub(crate) known: Option<Arc<dyn KnownObjects<K>>>,
    /// `Replaced`, or `Sync` when `emit_delta_type_replaced` is off.
    pub(crate) replace_kind: DeltaType,
    pub(crate) metrics: Option<Arc<dyn FifoMetrics>>,
}

impl<K: KubeObject> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("DeltaFifo")
            .field("len", &st.queue.len())
            .field("closed", &st.closed)
            .field("populated", &st.populated)
            .field("initial_pending", &st.queue.initial_pending())
            .field("known_objects", &self.known.is_some())
            .field("replace_kind", &self.replace_kind)
            .finish_non_exhaustive()
    }
}

impl<K: KubeObject> DeltaFifo<K> {
    pub(crate) fn from_parts(
        key_fn: KeyFn<K>,
        known: Option<Arc<dyn KnownObjects<K>>>,
        replace_kind: DeltaType,
        metrics: Option<Arc<dyn FifoMetrics>>,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                queue: Queue::default(),
                populated: false,
                replace_active: false,
                initial_replace_active: false,
                closed: false,
                last_sync_resource_version: None,
                thread_waiters: 0,
                task_waiters: 0,
            }),
            processing: Mutex::new(()),
            wake_threads: Condvar::new(),
            wake_tasks: Notify::new(),
            key_fn,
            known,
            replace_kind,
            metrics,
        }
    }

    /// Identity of this FIFO for the reentrancy check.
    pub(crate) fn id(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Fails when called from inside this FIFO's processor.
    pub(crate) fn check_not_in_processor(&self) -> Result<(), FifoError> {
        if reentry::inside(self.id()) {
            return Err(FifoError::CalledFromProcessor);
        }
        Ok(())
    }

    /// The key of an object or tombstone: a tombstone keys to its own key,
    /// an object through the key function.
    pub fn key_of(&self, obj: &ObjectOrTombstone<K>) -> Result<String, KeyError> {
        match obj {
            ObjectOrTombstone::Object(o) => (self.key_fn)(o),
            ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
        }
    }

    /// Queues an `Added` delta for the object (a watch `ADDED` event).
    ///
    /// Fails with [`FifoError::Key`] for an object without a name and with
    /// [`FifoError::Closed`] after [`close`](Self::close); nothing is queued then.
    pub fn add(&self, obj: impl Into<Arc<K>>) -> Result<(), FifoError> {
        self.queue_change(DeltaType::Added, obj.into())
    }

    /// Queues an `Updated` delta for the object (a watch `MODIFIED` event).
    /// Fails like [`add`](Self::add).
    pub fn update(&self, obj: impl Into<Arc<K>>) -> Result<(), FifoError> {
        self.queue_change(DeltaType::Updated, obj.into())
    }

    fn queue_change(&self, kind: DeltaType, obj: Arc<K>) -> Result<(), FifoError> {
        let key = (self.key_fn)(&obj)?;
        let depth = {
            let mut st = self.state.lock();
            if st.closed {
                return Err(FifoError::Closed);
            }
            let initial = !st.populated;
            st.populated = true;
            let (_, new) = st.queue.push(key, Delta::new(kind, obj), initial);
            self.wake(&st, usize::from(new));
            st.queue.len()
        };
        self.report(kind, 1, depth);
        Ok(())
    }

    /// Queues a `Deleted` delta carrying the object's final state (a watch
    /// `DELETED` event), unless the key is neither queued nor known (DF3: a
    /// relist already reported it). Waits while a processor runs.
    ///
    /// Fails with [`FifoError::Key`], [`FifoError::Closed`] or
    /// [`FifoError::CalledFromProcessor`]; nothing is queued then.
    pub fn delete(&self, obj: impl Into<Arc<K>>) -> Result<(), FifoError> {
        self.queue_deletion(ObjectOrTombstone::Object(obj.into()))
    }

    /// Queues a `Deleted` delta carrying a tombstone, for a deletion whose
    /// final state is unknown; otherwise like [`delete`](Self::delete).
    pub fn delete_tombstone(
        &self,
        tombstone: DeletedFinalStateUnknown<K>,
    ) -> Result<(), FifoError> {
        self.queue_deletion(ObjectOrTombstone::Tombstone(tombstone))
    }

    fn queue_deletion(&self, obj: ObjectOrTombstone<K>) -> Result<(), FifoError> {
        let key = self.key_of(&obj)?;
        self.check_not_in_processor()?;
        let _processing = self.processing.lock();
        let known = self
            .known
            .as_ref()
            .is_some_and(|known| known.get_by_key(&key).is_some());
        let depth = {
            let mut st = self.state.lock();
            if st.closed {
                return Err(FifoError::Closed);
            }
            let initial = !st.populated;
            st.populated = true;
            if !known && !st.queue.contains(&key) {
                tracing::trace!(key, "DeltaFIFO ignores the deletion of an unknown object");
                return Ok(());
            }
            let (_, new) = st.queue.push(key, Delta::Deleted(obj), initial);
            self.wake(&st, usize::from(new));
            st.queue.len()
        };
        self.report(DeltaType::Deleted, 1, depth);
        Ok(())
    }

    /// Queues a `Sync` delta for every known object whose key is not queued
    /// (DF6): a queued key will be processed anyway, and re-announcing the
    /// store's older state after it would undo the newer one. Does nothing
    /// without a known-objects store. Waits while a processor runs.
    ///
    /// Fails with [`FifoError::Closed`] or [`FifoError::CalledFromProcessor`].
    pub fn resync(&self) -> Result<(), FifoError> {
        self.check_not_in_processor()?;
        let _processing = self.processing.lock();
        if self.state.lock().closed {
            return Err(FifoError::Closed);
        }
        let Some(known) = &self.known else {
            return Ok(());
        };
        // No processor runs, so the store is stable: read it without
        // holding up producers.
        let objects: Vec<(String, Arc<K>)> = known
            .list_keys()
            .into_iter()
            .filter_map(|key| known.get_by_key(&key).map(|obj| (key, obj)))
            .collect();
        let (queued, depth) = {
            let mut st = self.state.lock();
            if st.closed {
                return Err(FifoError::Closed);
            }
            let mut queued = 0;
            for (key, obj) in objects {
                if !st.queue.contains(&key) {
                    st.queue.push(key, Delta::Sync(obj), false);
                    queued += 1;
                }
            }
            self.wake(&st, queued);
            (queued, st.queue.len())
        };
        self.report(DeltaType::Sync, queued, depth);
        Ok(())
    }

    /// Closes the FIFO: producers get [`FifoError::Closed`] from now on, and
    /// every popper, blocked or not, gets
    /// [`PopError::Closed`](crate::PopError::Closed) once the queue is empty
    /// (what is already queued can still be popped, as in client-go).
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        self.wake_threads.notify_all();
        self.wake_tasks.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Whether the initial population has been processed (DF5).
    ///
    /// The initial population is what the first replace queued (every
    /// listed object and every tombstone), or, if an `add`, `update` or
    /// `delete` came before any replace, what that first call queued. It
    /// counts as processed when each of its entries was popped and its
    /// processor did not ask for a requeue. While the first replace is still
    /// streaming this is false, even if everything streamed so far was popped.
    pub fn has_synced(&self) -> bool {
        Self::synced(&self.state.lock())
    }

    pub(crate) fn synced(st: &State<K>) -> bool {
        st.populated && !st.initial_replace_active && st.queue.initial_pending() == 0
    }

    /// The resource version given to the last finished replace.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.state.lock().last_sync_resource_version.clone()
    }

    /// The queued keys, in the order they will be popped.
    pub fn list_keys(&self) -> Vec<String> {
        let st = self.state.lock();
        st.queue.keys().map(|k| k.to_string()).collect()
    }

    /// The deltas queued for the object's key.
    pub fn get(&self, obj: &K) -> Result<Option<Deltas<K>>, KeyError> {
        let key = (self.key_fn)(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The deltas queued for a key (a copy: the objects are shared).
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        let st = self.state.lock();
        st.queue.get(key).map(|entry| entry.deltas.clone())
    }

    /// The number of queued keys.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether no key is queued.
    pub fn is_empty(&self) -> bool {
        self.state.lock().queue.is_empty()
    }

    /// Wakes up to `new_keys` waiting poppers of each kind. Called with the
    /// state lock held, right after queueing, so no wakeup is lost.
    pub(crate) fn wake(&self, st: &MutexGuard<'_, State<K>>, new_keys: usize) {
        for _ in 0..new_keys.min(st.thread_waiters) {
            self.wake_threads.notify_one();
        }
        for _ in 0..new_keys.min(st.task_waiters) {
            self.wake_tasks.notify_one();
        }
    }

    /// Reports `count` queued deltas of a kind and the new depth.
    pub(crate) fn report(&self, kind: DeltaType, count: usize, depth: usize) {
        if let Some(metrics) = &self.metrics {
            for _ in 0..count {
                metrics.delta_queued(kind);
            }
            metrics.depth(depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cm, fifo_with, pop_into, pop_one, summary, Store};
    use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
    use DeltaType::{Added, Deleted, Sync, Updated};

    fn plain() -> Arc<DeltaFifo<ConfigMap>> {
        DeltaFifo::builder().build()
    }

    #[test]
    fn df1_changes_accumulate_per_key_and_the_key_is_queued_once() {
        let fifo = plain();
        fifo.add(cm("a", 1)).unwrap();
        fifo.add(cm("b", 1)).unwrap();
        fifo.update(cm("a", 2)).unwrap();
        fifo.update(cm("a", 3)).unwrap();
        assert_eq!(fifo.list_keys(), ["ns/a", "ns/b"]);
        assert_eq!(fifo.len(), 2);
        let a = fifo.get_by_key("ns/a").unwrap();
        assert_eq!(
            summary(&a),
            [
                (Added, "1".into(), false),
                (Updated, "2".into(), false),
                (Updated, "3".into(), false)
            ]
        );
        assert_eq!(summary(&fifo.get(&cm("b", 9)).unwrap().unwrap()).len(), 1);
        // popping follows first-queued order, with the whole list
        let (first, _) = pop_one(&fifo);
        assert_eq!(first.key(), "ns/a");
        assert_eq!(first.len(), 3);
        fifo.add(cm("a", 4)).unwrap();
        assert_eq!(fifo.list_keys(), ["ns/b", "ns/a"]);
    }

    #[test]
    fn df1_objects_are_shared_not_copied() {
        let fifo = plain();
        let obj = cm("a", 1);
        fifo.add(Arc::clone(&obj)).unwrap();
        let (deltas, _) = pop_one(&fifo);
        assert!(Arc::ptr_eq(deltas.newest().object(), &obj));
    }

    #[test]
    fn df2_two_deletions_collapse_keeping_the_object_over_a_tombstone() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        fifo.delete(cm("a", 2)).unwrap();
        fifo.delete_tombstone(DeletedFinalStateUnknown {
            key: "ns/a".into(),
            obj: cm("a", 1),
        })
        .unwrap();
        fifo.delete(cm("a", 3)).unwrap();
        let a = fifo.get_by_key("ns/a").unwrap();
        assert_eq!(summary(&a), [(Deleted, "2".into(), false)]);
    }

    #[test]
    fn df3_deleting_an_object_neither_queued_nor_known_is_ignored() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        fifo.delete(cm("x", 1)).unwrap();
        assert!(fifo.is_empty());
        // known: queued
        store.insert(&cm("k", 1));
        fifo.delete(cm("k", 2)).unwrap();
        assert_eq!(fifo.list_keys(), ["ns/k"]);
        // queued but unknown: queued too
        fifo.add(cm("q", 1)).unwrap();
        fifo.delete(cm("q", 2)).unwrap();
        let q = fifo.get_by_key("ns/q").unwrap();
        assert_eq!(
            summary(&q),
            [(Added, "1".into(), false), (Deleted, "2".into(), false)]
        );
        // without a known-objects store only queued keys count
        let bare = plain();
        bare.delete(cm("x", 1)).unwrap();
        assert!(bare.is_empty());
    }

    #[test]
    fn df3_a_deletion_after_its_pop_is_not_lost() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        fifo.add(cm("a", 1)).unwrap();
        pop_into(&fifo, &store);
        fifo.delete(cm("a", 2)).unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Deleted, "2".into(), false)]
        );
    }

    #[test]
    fn df6_resync_queues_sync_for_known_keys_that_are_not_queued() {
        let store = Arc::new(Store::default());
        for name in ["a", "b", "c"] {
            store.insert(&cm(name, 1));
        }
        let fifo = fifo_with(&store);
        fifo.update(cm("b", 2)).unwrap();
        fifo.resync().unwrap();
        assert_eq!(fifo.list_keys(), ["ns/b", "ns/a", "ns/c"]);
        // the queued key keeps only its own change: no stale Sync after it
        assert_eq!(
            summary(&fifo.get_by_key("ns/b").unwrap()),
            [(Updated, "2".into(), false)]
        );
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Sync, "1".into(), false)]
        );
        // a second resync adds nothing: everything is queued
        fifo.resync().unwrap();
        assert_eq!(fifo.get_by_key("ns/a").unwrap().len(), 1);
    }

    #[test]
    fn df6_resync_skips_a_key_whose_deletion_is_queued() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        fifo.delete(cm("a", 2)).unwrap();
        fifo.resync().unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Deleted, "2".into(), false)]
        );
    }

    #[test]
    fn df6_resync_without_known_objects_does_nothing() {
        let fifo = plain();
        fifo.resync().unwrap();
        assert!(fifo.is_empty());
    }

    #[test]
    fn df5_a_first_add_is_the_initial_population() {
        let fifo = plain();
        assert!(!fifo.has_synced());
        fifo.add(cm("a", 1)).unwrap();
        fifo.add(cm("b", 1)).unwrap();
        assert!(!fifo.has_synced());
        let (_, initial) = pop_one(&fifo);
        assert!(initial);
        assert!(fifo.has_synced());
        let (_, initial) = pop_one(&fifo);
        assert!(!initial);
    }

    #[test]
    fn df5_an_ignored_first_delete_leaves_nothing_to_wait_for() {
        let fifo = plain();
        fifo.delete(cm("a", 1)).unwrap();
        assert!(fifo.has_synced());
    }

    #[test]
    fn objects_without_a_name_give_a_key_error_and_change_nothing() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        let nameless = Arc::new(ConfigMap::default());
        for result in [
            fifo.add(Arc::clone(&nameless)),
            fifo.update(Arc::clone(&nameless)),
            fifo.delete(Arc::clone(&nameless)),
            fifo.replace([cm("a", 1), Arc::clone(&nameless)], "5"),
        ] {
            assert!(
                matches!(result, Err(FifoError::Key(KeyError::MissingName))),
                "{result:?}"
            );
        }
        assert!(fifo.get(&nameless).is_err());
        assert!(fifo.is_empty());
        assert!(!fifo.has_synced(), "a rejected call does not populate");
        assert_eq!(fifo.last_sync_resource_version(), None);
        // no replace was left open
        fifo.replace([cm("a", 1)], "6").unwrap();
        assert_eq!(fifo.list_keys(), ["ns/a"]);
    }

    #[test]
    fn a_closed_fifo_rejects_changes() {
        let store = Arc::new(Store::default());
        store.insert(&cm("k", 1));
        let fifo = fifo_with(&store);
        fifo.add(cm("a", 1)).unwrap();
        fifo.close();
        assert!(fifo.is_closed());
        assert!(matches!(fifo.add(cm("b", 1)), Err(FifoError::Closed)));
        assert!(matches!(fifo.update(cm("a", 2)), Err(FifoError::Closed)));
        assert!(matches!(fifo.delete(cm("k", 2)), Err(FifoError::Closed)));
        assert!(matches!(fifo.resync(), Err(FifoError::Closed)));
        assert!(matches!(
            fifo.replace([cm("a", 3)], "1"),
            Err(FifoError::Closed)
        ));
        assert_eq!(fifo.list_keys(), ["ns/a"]);
        assert_eq!(fifo.get_by_key("ns/a").unwrap().len(), 1);
    }

    #[test]
    fn key_of_uses_the_tombstone_key() {
        let fifo = plain();
        let t = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "other/key".into(),
            obj: cm("a", 1),
        });
        assert_eq!(fifo.key_of(&t).unwrap(), "other/key");
        assert_eq!(
            fifo.key_of(&ObjectOrTombstone::Object(cm("a", 1))).unwrap(),
            "ns/a"
        );
    }

    #[test]
    fn a_custom_key_function_is_used() {
        let fifo = DeltaFifo::<ConfigMap>::builder()
            .key_fn(|o| Ok(format!("custom:{}", o.name().unwrap_or("?"))))
            .build();
        fifo.add(cm("a", 1)).unwrap();
        assert_eq!(fifo.list_keys(), ["custom:a"]);
    }

    #[derive(Default)]
    struct Counting {
        deltas: std::sync::atomic::AtomicUsize,
        depth: std::sync::atomic::AtomicUsize,
        processed: std::sync::atomic::AtomicUsize,
    }

    impl FifoMetrics for Counting {
        fn delta_queued(&self, _: DeltaType) {
            self.deltas
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        fn depth(&self, depth: usize) {
            self.depth
                .store(depth, std::sync::atomic::Ordering::Relaxed);
        }
        fn processed(&self, _: std::time::Duration, _: bool) {
            self.processed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn metrics_hooks_see_deltas_depth_and_processing() {
        use std::sync::atomic::Ordering::Relaxed;
        let metrics = Arc::new(Counting::default());
        let fifo = DeltaFifo::<ConfigMap>::builder()
            .metrics(Arc::clone(&metrics) as Arc<dyn FifoMetrics>)
            .build();
        fifo.replace([cm("a", 1), cm("b", 1)], "1").unwrap();
        fifo.update(cm("a", 2)).unwrap();
        assert_eq!(metrics.deltas.load(Relaxed), 3);
        assert_eq!(metrics.depth.load(Relaxed), 2);
        pop_one(&fifo);
        assert_eq!(metrics.processed.load(Relaxed), 1);
        assert_eq!(metrics.depth.load(Relaxed), 1);
    }
}
