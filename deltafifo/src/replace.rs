//! Replace (DF4), streaming first: [`ReplaceStream`] queues each listed
//! object as it arrives and, at [`finish`](ReplaceStream::finish), a
//! tombstone deletion for every key that was known or queued before but not
//! listed. [`DeltaFifo::replace`] is the same mechanism fed from a `Vec`.
//!
//! Streaming is what lets a relist never hold the whole list twice (RF9):
//! an object handed to [`ReplaceStream::add`] can be popped and stored at
//! once, so the older version it replaces is freed while the list is still
//! arriving. The stream itself keeps only the keys that were queued or
//! known when it began and that it has not listed yet: the candidates for
//! deletion. The first list of an informer starts from none, so it queues
//! its objects without keeping any key, and ends without reading the store.

use std::collections::HashSet;
use std::sync::Arc;

use foldhash::fast::RandomState;
use kcontrol_indexer::{DeletedFinalStateUnknown, KubeObject, ObjectOrTombstone};

use crate::delta::{Delta, DeltaType};
use crate::error::FifoError;
use crate::fifo::DeltaFifo;

/// A replace under way, from [`DeltaFifo::begin_replace`].
///
/// - [`add`](Self::add) queues a `Replaced` (or `Sync`) delta for one listed
///   object right away;
/// - [`finish`](Self::finish) queues the tombstone deletions and records the
///   resource version; if this is the FIFO's first replace, its entries
///   (objects added through this stream and tombstones) form the initial
///   population and [`DeltaFifo::has_synced`] can turn true from then on;
/// - dropping the stream without `finish` (the relist failed) queues no
///   deletion and leaves what was added queued: those are real, newer
///   states. A first replace dropped this way does not make the FIFO synced;
///   the next replace is again the first one.
///
/// Only one replace runs at a time.
#[must_use = "a replace stream does nothing for vanished keys until finish is called"]
pub struct ReplaceStream<'a, K: KubeObject> {
    fifo: &'a DeltaFifo<K>,
    /// The keys queued or known when the replace began that it has not
    /// listed (or has taken back): what [`finish`](Self::finish) deletes.
    unlisted: HashSet<Arc<str>, RandomState>,
    /// Objects listed, less those taken back.
    listed: usize,
    initial: bool,
    done: bool,
}

impl<K: KubeObject> std::fmt::Debug for ReplaceStream<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaceStream")
            .field("listed", &self.listed)
            .field("unlisted", &self.unlisted.len())
            .field("initial", &self.initial)
            .finish_non_exhaustive()
    }
}

impl<K: KubeObject> DeltaFifo<K> {
    /// Starts a streaming replace: feed it the listed objects as they are
    /// decoded, then call [`ReplaceStream::finish`] with the list's resource
    /// version. The keys queued or known now are the ones `finish` deletes
    /// unless the stream lists them; a key another producer first queues
    /// after this call is not one of them (the replace counts as begun
    /// here). Waits while a processor runs.
    ///
    /// Fails with [`FifoError::ReplaceInProgress`] while another stream is
    /// alive, [`FifoError::Closed`] after close, and
    /// [`FifoError::CalledFromProcessor`] from inside this FIFO's processor.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use kcontrol_deltafifo::{DeltaFifo, DeltaType, ProcessError};
    /// use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, Object};
    ///
    /// let fifo = DeltaFifo::<ConfigMap>::builder().build();
    /// let mut relist = fifo.begin_replace()?;
    /// for name in ["a", "b"] {
    ///     let mut cm = ConfigMap::default();
    ///     cm.meta_mut().name = Some(name.into());
    ///     cm.meta_mut().namespace = Some("default".into());
    ///     relist.add(cm)?; // queued now: a consumer may already pop it
    /// }
    /// assert_eq!(fifo.len(), 2);
    /// assert!(!fifo.has_synced()); // not before finish
    /// relist.finish("42")?;
    /// assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("42"));
    /// let kind = fifo.pop(|deltas, _| Ok::<_, ProcessError<Infallible>>(deltas.newest().kind()))?;
    /// assert_eq!(kind, DeltaType::Replaced);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_replace(&self) -> Result<ReplaceStream<'_, K>, FifoError> {
        self.check_not_in_processor()?;
        let mut st = self.state.lock();
        if st.closed {
            return Err(FifoError::Closed);
        }
        if st.replace_active {
            return Err(FifoError::ReplaceInProgress);
        }
        st.replace_active = true;
        let initial = !st.populated;
        st.initial_replace_active |= initial;
        drop(st);
        let unlisted = self.queued_or_known_keys();
        Ok(ReplaceStream {
            fifo: self,
            unlisted,
            listed: 0,
            initial,
            done: false,
        })
    }

    /// Every key queued or known now. Waits while a processor runs, so that
    /// no key is between the queue and the store; a key queued after this
    /// (by another producer) comes after the replace, as if it had begun
    /// here.
    fn queued_or_known_keys(&self) -> HashSet<Arc<str>, RandomState> {
        let _processing = self.processing.lock();
        let mut keys: HashSet<Arc<str>, RandomState> =
            self.state.lock().queue.keys().cloned().collect();
        if let Some(known) = &self.known {
            keys.extend(known.list_shared_keys());
        }
        keys
    }

    /// Replaces the FIFO's view with `list` at `resource_version` (DF4): a
    /// `Replaced` delta (or `Sync`, by option) for every listed object, and
    /// for every key known to the store or queued but absent from the list, a
    /// `Deleted` delta carrying a [`DeletedFinalStateUnknown`] tombstone with
    /// the last known object (the newest queued one if the key is queued,
    /// else the store's).
    ///
    /// All keys are computed first: an object without a key fails the whole
    /// call with [`FifoError::Key`] and nothing changes. Other errors are
    /// those of [`begin_replace`](Self::begin_replace) and
    /// [`ReplaceStream::finish`].
    pub fn replace<I>(&self, list: I, resource_version: impl Into<String>) -> Result<(), FifoError>
    where
        I: IntoIterator,
        I::Item: Into<Arc<K>>,
    {
        let keyed = list
            .into_iter()
            .map(|obj| {
                let obj = obj.into();
                (self.key_fn)(&obj).map(|key| (key, obj))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut stream = self.begin_replace()?;
        stream.add_all_keyed(keyed)?;
        stream.finish(resource_version)
    }
}

impl<K: KubeObject> ReplaceStream<'_, K> {
    /// Queues a `Replaced` (or `Sync`) delta for one listed object, at once.
    ///
    /// Fails with [`FifoError::Key`] for an object without a name (nothing
    /// changes; the stream goes on) and [`FifoError::Closed`] after close.
    pub fn add(&mut self, obj: impl Into<Arc<K>>) -> Result<(), FifoError> {
        let obj = obj.into();
        let key = (self.fifo.key_fn)(&obj)?;
        self.add_keyed(key, obj)
    }

    /// Queues listed objects in order, as [`add`](Self::add) each, under
    /// one lock and with one wake-up of a waiting consumer: what a list
    /// decoded a chunk at a time hands over (a wake-up per object cost a
    /// tenth of the producer's time).
    ///
    /// An object without a name fails with [`FifoError::Key`]: the objects
    /// before it are queued, it and those after it are not.
    pub fn extend<I>(&mut self, objs: I) -> Result<(), FifoError>
    where
        I: IntoIterator,
        I::Item: Into<Arc<K>>,
    {
        let objs = objs.into_iter();
        let mut keyed = Vec::with_capacity(objs.size_hint().0);
        let mut failed = None;
        for obj in objs {
            let obj = obj.into();
            match (self.fifo.key_fn)(&obj) {
                Ok(key) => keyed.push((key, obj)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.add_all_keyed(keyed)?;
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    fn add_keyed(&mut self, key: String, obj: Arc<K>) -> Result<(), FifoError> {
        self.add_all_keyed(std::iter::once((key, obj)))
    }

    /// Queues keyed objects under one lock, waking consumers once.
    fn add_all_keyed(
        &mut self,
        keyed: impl IntoIterator<Item = (String, Arc<K>)>,
    ) -> Result<(), FifoError> {
        let fifo = self.fifo;
        let kind = fifo.replace_kind;
        let (count, depth) = {
            let mut st = fifo.state.lock();
            if st.closed {
                return Err(FifoError::Closed);
            }
            let (mut count, mut new_keys) = (0, 0);
            for (key, obj) in keyed {
                if !self.unlisted.is_empty() {
                    self.unlisted.remove(key.as_str());
                }
                let (_, new) = st.queue.push(key, Delta::new(kind, obj), self.initial);
                new_keys += usize::from(new);
                count += 1;
            }
            fifo.wake(&st, new_keys);
            (count, st.queue.len())
        };
        self.listed += count;
        fifo.report(kind, count, depth);
        Ok(())
    }

    /// Takes back a listed object deleted before the list ended (a DELETED
    /// among WatchList's initial events, on servers that send them): its key
    /// counts as not listed, so [`finish`](Self::finish) queues its
    /// deletion if it is queued or known, like any vanished key.
    ///
    /// Fails with [`FifoError::Key`] for an object without a name.
    pub fn remove(&mut self, obj: &K) -> Result<(), FifoError> {
        let key = (self.fifo.key_fn)(obj)?;
        self.unlisted.insert(key.into());
        self.listed = self.listed.saturating_sub(1);
        Ok(())
    }

    /// How many objects this stream has listed so far, less those taken
    /// back with [`remove`](Self::remove).
    pub fn len(&self) -> usize {
        self.listed
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.listed == 0
    }

    /// Whether this is the FIFO's first replace (its entries are the initial
    /// population, and their pops report `is_in_initial_list`).
    pub fn is_initial(&self) -> bool {
        self.initial
    }

    /// Ends the list: queues a tombstone deletion for every key that is
    /// queued or known but was not listed, records `resource_version`, and
    /// completes the initial population if this is the first replace. Waits
    /// while a processor runs.
    ///
    /// Fails with [`FifoError::Closed`] (no deletion is queued) or
    /// [`FifoError::CalledFromProcessor`]; the stream then ends as if dropped.
    pub fn finish(mut self, resource_version: impl Into<String>) -> Result<(), FifoError> {
        let fifo = self.fifo;
        fifo.check_not_in_processor()?;
        let _processing = fifo.processing.lock();
        // No processor runs, so the store agrees with the queue; read the
        // (usually few) vanished objects without holding up producers.
        let vanished = self.unlisted_known_objects();
        let (tombstones, depth) = {
            let mut st = fifo.state.lock();
            if st.closed {
                return Err(FifoError::Closed);
            }
            let mut tombstones = 0;
            let mut new_keys = 0;
            for (key, known) in vanished {
                if st.queue.tombstone(&key, self.initial) {
                    tombstones += 1;
                    continue;
                }
                let Some(obj) = known else {
                    continue;
                };
                let tombstone = DeletedFinalStateUnknown {
                    key: key.to_string(),
                    obj,
                };
                let delta = Delta::Deleted(ObjectOrTombstone::Tombstone(tombstone));
                st.queue.push(key, delta, self.initial);
                new_keys += 1;
            }
            tombstones += new_keys;
            st.populated = true;
            st.replace_active = false;
            if self.initial {
                st.initial_replace_active = false;
            }
            st.last_sync_resource_version = Some(resource_version.into());
            fifo.wake(&st, new_keys);
            (tombstones, st.queue.len())
        };
        self.done = true;
        fifo.report(DeltaType::Deleted, tombstones, depth);
        Ok(())
    }

    /// The keys not listed, each with its known object (if the store has
    /// it), in key order.
    fn unlisted_known_objects(&mut self) -> Vec<(Arc<str>, Option<Arc<K>>)> {
        let known = self.fifo.known.as_ref();
        let mut unlisted: Vec<_> = self
            .unlisted
            .drain()
            .map(|key| {
                let obj = known.and_then(|known| known.get_by_key(&key));
                (key, obj)
            })
            .collect();
        unlisted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        unlisted
    }
}

impl<K: KubeObject> Drop for ReplaceStream<'_, K> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.fifo.state.lock();
        st.replace_active = false;
        if self.initial {
            st.initial_replace_active = false;
        }
        tracing::debug!(
            listed = self.listed,
            "DeltaFIFO replace abandoned before finish; no deletions queued"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cm, fifo_with, pop_into, pop_one, summary, Store};
    use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
    use DeltaType::{Added, Deleted, Replaced, Sync, Updated};

    fn tombstone_of(fifo: &DeltaFifo<ConfigMap>, key: &str) -> DeletedFinalStateUnknown<ConfigMap> {
        match fifo.get_by_key(key).unwrap().newest() {
            Delta::Deleted(ObjectOrTombstone::Tombstone(t)) => t.clone(),
            other => panic!("{key}: expected a tombstone, got {other:?}"),
        }
    }

    #[test]
    fn df4_an_object_removed_from_the_stream_is_deleted_at_finish() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        stream.add(cm("a", 2)).unwrap();
        stream.add(cm("b", 3)).unwrap();
        // "a" then deleted before the end of the initial events
        stream.remove(&cm("a", 4)).unwrap();
        assert_eq!(stream.len(), 1);
        stream.finish("5").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Replaced, "2".into(), false), (Deleted, "2".into(), true)]
        );
        assert_eq!(
            summary(&fifo.get_by_key("ns/b").unwrap()),
            [(Replaced, "3".into(), false)]
        );
    }

    #[test]
    fn df4_listed_objects_get_replaced_and_vanished_known_keys_tombstones() {
        let store = Arc::new(Store::default());
        let old_b = cm("b", 1);
        store.insert(&cm("a", 1));
        store.insert(&old_b);
        let fifo = fifo_with(&store);
        fifo.replace([cm("a", 2), cm("c", 2)], "10").unwrap();
        assert_eq!(fifo.list_keys(), ["ns/a", "ns/c", "ns/b"]);
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Replaced, "2".into(), false)]
        );
        assert_eq!(
            summary(&fifo.get_by_key("ns/b").unwrap()),
            [(Deleted, "1".into(), true)]
        );
        let t = tombstone_of(&fifo, "ns/b");
        assert_eq!(t.key, "ns/b");
        assert!(
            Arc::ptr_eq(&t.obj, &old_b),
            "the tombstone carries the store's object"
        );
        assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("10"));
    }

    #[test]
    fn df4_queued_but_unknown_keys_get_a_tombstone_with_the_last_queued_object() {
        let fifo = DeltaFifo::<ConfigMap>::builder().build(); // no known objects
        let newest = cm("x", 2);
        fifo.add(cm("x", 1)).unwrap();
        fifo.update(Arc::clone(&newest)).unwrap();
        fifo.replace(Vec::<Arc<ConfigMap>>::new(), "3").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/x").unwrap()),
            [
                (Added, "1".into(), false),
                (Updated, "2".into(), false),
                (Deleted, "2".into(), true)
            ]
        );
        assert!(Arc::ptr_eq(&tombstone_of(&fifo, "ns/x").obj, &newest));
    }

    #[test]
    fn df4_a_key_known_and_queued_takes_its_tombstone_from_the_queue() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        let queued = cm("a", 2);
        fifo.update(Arc::clone(&queued)).unwrap();
        fifo.replace(Vec::<Arc<ConfigMap>>::new(), "3").unwrap();
        let a = fifo.get_by_key("ns/a").unwrap();
        assert_eq!(
            summary(&a),
            [(Updated, "2".into(), false), (Deleted, "2".into(), true)]
        );
        assert!(Arc::ptr_eq(&tombstone_of(&fifo, "ns/a").obj, &queued));
    }

    #[test]
    fn df2_df4_a_queued_deletion_absorbs_the_relist_tombstone() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        fifo.delete(cm("a", 2)).unwrap();
        fifo.replace(Vec::<Arc<ConfigMap>>::new(), "3").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Deleted, "2".into(), false)]
        );
    }

    #[test]
    fn df2_df4_a_watch_deletion_after_the_relist_tombstone_replaces_it() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        fifo.replace(Vec::<Arc<ConfigMap>>::new(), "3").unwrap();
        fifo.delete(cm("a", 2)).unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Deleted, "2".into(), false)]
        );
    }

    #[test]
    fn df4_delete_after_replace_is_queued_behind_the_replaced_delta() {
        let fifo = DeltaFifo::<ConfigMap>::builder().build();
        fifo.replace([cm("a", 1)], "1").unwrap();
        fifo.delete(cm("a", 2)).unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Replaced, "1".into(), false), (Deleted, "2".into(), false)]
        );
        // and once popped and stored, a relist without it tombstones it
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        fifo.replace([cm("a", 1)], "1").unwrap();
        pop_into(&fifo, &store);
        fifo.replace(Vec::<Arc<ConfigMap>>::new(), "2").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Deleted, "1".into(), true)]
        );
    }

    #[test]
    fn df4_a_relisted_object_after_a_queued_deletion_is_kept() {
        let store = Arc::new(Store::default());
        store.insert(&cm("a", 1));
        let fifo = fifo_with(&store);
        fifo.delete(cm("a", 1)).unwrap();
        fifo.replace([cm("a", 5)], "5").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Deleted, "1".into(), false), (Replaced, "5".into(), false)]
        );
    }

    #[test]
    fn df4_emits_sync_when_replaced_is_turned_off() {
        let fifo = DeltaFifo::<ConfigMap>::builder()
            .emit_delta_type_replaced(false)
            .build();
        fifo.replace([cm("a", 1)], "1").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Sync, "1".into(), false)]
        );
    }

    #[test]
    fn df4_a_first_replace_keeps_no_keys() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        for name in ["a", "b", "c"] {
            stream.add(cm(name, 1)).unwrap();
        }
        // nothing was queued or known when it began: nothing to delete
        assert!(stream.unlisted.is_empty());
        assert_eq!(stream.len(), 3);
        stream.finish("1").unwrap();
        assert_eq!(fifo.list_keys(), ["ns/a", "ns/b", "ns/c"]);
    }

    #[test]
    fn df4_a_replace_counts_as_begun_for_keys_another_producer_queues_during_it() {
        let store = Arc::new(Store::default());
        store.insert(&cm("old", 1));
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        stream.add(cm("a", 2)).unwrap();
        // queued by another producer after the replace began, not listed:
        // it comes after the replace, so its finish does not delete it
        fifo.add(cm("late", 3)).unwrap();
        stream.finish("4").unwrap();
        assert_eq!(
            summary(&fifo.get_by_key("ns/late").unwrap()),
            [(Added, "3".into(), false)]
        );
        // known when it began and not listed: deleted
        assert!(fifo.get_by_key("ns/old").unwrap().newest().is_tombstone());
    }

    #[test]
    fn df4_streamed_objects_can_be_popped_before_finish() {
        let store = Arc::new(Store::default());
        store.insert(&cm("gone", 1));
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        assert!(stream.is_initial());
        stream.add(cm("a", 1)).unwrap();
        let (deltas, initial) = pop_one(&fifo);
        assert_eq!(deltas.key(), "ns/a");
        assert!(initial);
        stream.add(cm("b", 1)).unwrap();
        assert_eq!(stream.len(), 2);
        assert!(!fifo.has_synced());
        stream.finish("7").unwrap();
        // a was popped during the stream yet is not tombstoned: it was listed
        assert_eq!(fifo.list_keys(), ["ns/b", "ns/gone"]);
        assert!(fifo.get_by_key("ns/gone").unwrap().newest().is_tombstone());
    }

    #[test]
    fn df5_has_synced_waits_for_finish_even_when_everything_streamed_was_popped() {
        let store = Arc::new(Store::default());
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        stream.add(cm("a", 1)).unwrap();
        pop_into(&fifo, &store);
        assert!(fifo.is_empty());
        assert!(!fifo.has_synced());
        stream.finish("1").unwrap();
        assert!(fifo.has_synced());
    }

    #[test]
    fn df5_has_synced_counts_the_tombstones_of_the_first_replace() {
        let store = Arc::new(Store::default());
        store.insert(&cm("gone", 1));
        let fifo = fifo_with(&store);
        fifo.replace([cm("a", 1)], "1").unwrap();
        let (_, initial) = pop_one(&fifo);
        assert!(initial);
        assert!(!fifo.has_synced());
        let (deltas, initial) = pop_one(&fifo);
        assert!(deltas.newest().is_tombstone() && initial);
        assert!(fifo.has_synced());
        // a later replace is not initial
        fifo.replace([cm("a", 2)], "2").unwrap();
        assert!(fifo.has_synced());
        let (_, initial) = pop_one(&fifo);
        assert!(!initial);
    }

    #[test]
    fn an_aborted_stream_queues_no_deletion_and_keeps_what_it_added() {
        let store = Arc::new(Store::default());
        store.insert(&cm("old", 1));
        let fifo = fifo_with(&store);
        {
            let mut stream = fifo.begin_replace().unwrap();
            stream.add(cm("a", 1)).unwrap();
        }
        assert_eq!(fifo.list_keys(), ["ns/a"]);
        assert!(!fifo.has_synced(), "an aborted first replace does not sync");
        assert_eq!(fifo.last_sync_resource_version(), None);
        // the retry is the first replace again, and finishing it syncs
        let mut retry = fifo.begin_replace().unwrap();
        assert!(retry.is_initial());
        retry.add(cm("a", 2)).unwrap();
        retry.finish("2").unwrap();
        assert_eq!(fifo.list_keys(), ["ns/a", "ns/old"]);
        assert_eq!(
            summary(&fifo.get_by_key("ns/a").unwrap()),
            [(Replaced, "1".into(), false), (Replaced, "2".into(), false)]
        );
        while !fifo.is_empty() {
            assert!(pop_one(&fifo).1);
        }
        assert!(fifo.has_synced());
    }

    #[test]
    fn only_one_replace_runs_at_a_time() {
        let fifo = DeltaFifo::<ConfigMap>::builder().build();
        let stream = fifo.begin_replace().unwrap();
        assert!(matches!(
            fifo.begin_replace(),
            Err(FifoError::ReplaceInProgress)
        ));
        assert!(matches!(
            fifo.replace([cm("a", 1)], "1"),
            Err(FifoError::ReplaceInProgress)
        ));
        drop(stream);
        fifo.begin_replace().unwrap().finish("1").unwrap();
    }

    #[test]
    fn a_stream_of_a_closed_fifo_fails_and_queues_no_deletion() {
        let store = Arc::new(Store::default());
        store.insert(&cm("old", 1));
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        stream.add(cm("a", 1)).unwrap();
        fifo.close();
        assert!(matches!(stream.add(cm("b", 1)), Err(FifoError::Closed)));
        assert!(matches!(stream.finish("1"), Err(FifoError::Closed)));
        assert_eq!(fifo.list_keys(), ["ns/a"]);
        assert!(!fifo.has_synced());
        assert!(matches!(fifo.begin_replace(), Err(FifoError::Closed)));
    }

    #[test]
    fn a_nameless_streamed_object_is_rejected_and_the_stream_goes_on() {
        let fifo = DeltaFifo::<ConfigMap>::builder().build();
        let mut stream = fifo.begin_replace().unwrap();
        assert!(matches!(
            stream.add(ConfigMap::default()),
            Err(FifoError::Key(_))
        ));
        stream.add(cm("a", 1)).unwrap();
        stream.finish("1").unwrap();
        assert_eq!(fifo.list_keys(), ["ns/a"]);
    }

    #[test]
    fn df4_extend_queues_in_order_up_to_a_nameless_object() {
        let store = Arc::new(Store::default());
        store.insert(&cm("old", 1));
        let fifo = fifo_with(&store);
        let mut stream = fifo.begin_replace().unwrap();
        stream.extend([cm("b", 2), cm("a", 2)]).unwrap();
        let failed = stream.extend([cm("c", 3), Arc::new(ConfigMap::default()), cm("d", 3)]);
        assert!(matches!(failed, Err(FifoError::Key(_))));
        assert_eq!(stream.len(), 3);
        stream.extend([cm("old", 4)]).unwrap();
        stream.finish("5").unwrap();
        // listed in order; nothing after the nameless object; "old" listed
        // by the last batch, so not deleted
        assert_eq!(fifo.list_keys(), ["ns/b", "ns/a", "ns/c", "ns/old"]);
        assert_eq!(
            summary(&fifo.get_by_key("ns/old").unwrap()),
            [(Replaced, "4".into(), false)]
        );
    }
}
