//! The sequential heart of a queue: the FIFO of waiting items, the set of
//! waiting items (for deduplication) and the set of items being processed,
//! with client-go's rules (WQ1, WQ2, WQ4). No locking and no waking here:
//! [`crate::shared`] wraps this in the queue mutex.
//!
//! Layout, chosen so that an add touches as little memory as it can (a
//! queue of a million distinct keys does not fit in a cache, so each line
//! an add touches is a miss) and a `pop` touches no table of waiting
//! items:
//! - `queue` holds each waiting item once, in FIFO order, and nothing
//!   else: a `pop` recomputes the item's hash.
//! - `waiting` ([`Positions`]) finds a waiting item's place in `queue`:
//!   8-byte entries of hash bits and queue position, one cache line per
//!   lookup and insert. A lookup compares against the item stored in
//!   `queue`, so an entry that points at another item (a stale one, or a
//!   position that wrapped) never makes two items one. `pop` leaves the
//!   table alone: an entry whose position has left the queue is stale, and
//!   the table reuses or sweeps it.
//! - `hot` holds the hints of hot waiting items (few; empty unless adds
//!   repeat), so that a waiting item needs no room for one.
//! - `processing` holds a clone of each item handed out by `pop` (usually
//!   as many as workers), with its dirty flag (added again while being
//!   processed).
//!
//! A hot item (one added again while dirty) carries a [`Hint`] whose flag
//! mirrors its dirty state, set and cleared here, in the same hold of the
//! lock as the change (see [`crate::hints`]).

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::hints::{Hint, Hints};
use crate::positions::Positions;

/// Above this many slots an emptied queue gives its memory back.
const SHRINK_ABOVE: usize = 64 * 1024;

/// An item being processed.
struct Processing<T> {
    item: T,
    hash: u64,
    dirty: bool,
    hint: Option<Arc<Hint<T>>>,
}

/// Where an added item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AddOutcome {
    /// Newly queued at the back.
    Queued,
    /// Already waiting: nothing changed (WQ1).
    AlreadyQueued,
    /// Being processed: now dirty, queued again on `done` (WQ2).
    MarkedDirty,
    /// Being processed and already dirty: nothing changed.
    AlreadyDirty,
    /// The queue is shutting down: the item was dropped (WQ4).
    ShuttingDown,
}

/// What `done` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DoneOutcome {
    /// The item was dirty and is queued again.
    Requeued,
    /// The item is no longer known to the queue.
    Finished,
    /// The item was not being processed: nothing changed.
    NotProcessing,
}

/// Queue contents and flags; see the module documentation.
pub(crate) struct State<T> {
    queue: VecDeque<T>,
    /// Absolute position of `queue[0]`.
    head: u64,
    waiting: Positions,
    /// Hints of hot waiting items.
    hot: HashTable<Arc<Hint<T>>>,
    processing: HashTable<Processing<T>>,
    shutting_down: bool,
    drain: bool,
}

impl<T> Default for State<T> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            head: 0,
            waiting: Positions::default(),
            hot: HashTable::new(),
            processing: HashTable::new(),
            shutting_down: false,
            drain: false,
        }
    }
}

impl<T: Eq + Clone> State<T> {
    /// Adds an owned item whose hash is `hash`.
    #[inline]
    pub(crate) fn add(&mut self, item: T, hash: u64, hints: &Hints<T>) -> AddOutcome {
        match self.admit(&item, hash, hints) {
            Ok(outcome) => outcome,
            Err(hint) => {
                self.push(item, hash, hint);
                AddOutcome::Queued
            }
        }
    }

    /// Adds a borrowed item, cloning it only when it is newly queued.
    #[inline]
    pub(crate) fn add_ref<Q>(&mut self, item: &Q, hash: u64, hints: &Hints<T>) -> AddOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = T>,
    {
        match self.admit(item, hash, hints) {
            Ok(outcome) => outcome,
            Err(hint) => {
                self.push(item.to_owned(), hash, hint);
                AddOutcome::Queued
            }
        }
    }

    /// What an add of `item` does to an item that is waiting or being
    /// processed (or to any item after shutdown); `Err` when the item must
    /// be queued, with the hint it takes up, if any. A redundant add makes
    /// the item hot.
    fn admit<Q>(
        &mut self,
        item: &Q,
        hash: u64,
        hints: &Hints<T>,
    ) -> Result<AddOutcome, Option<Arc<Hint<T>>>>
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        if self.shutting_down {
            return Ok(AddOutcome::ShuttingDown);
        }
        if !self.processing.is_empty() {
            if let Some(p) = self.processing.find_mut(hash, |p| p.item.borrow() == item) {
                if p.dirty {
                    let hint = p
                        .hint
                        .get_or_insert_with(|| Hint::new(p.item.clone(), hash));
                    hints.publish(hint);
                    return Ok(AddOutcome::AlreadyDirty);
                }
                p.dirty = true;
                if let Some(hint) = &p.hint {
                    hint.set_dirty(true);
                }
                return Ok(AddOutcome::MarkedDirty);
            }
        }
        if let Some(index) = self.waiting_index(item, hash) {
            self.make_hot(index, hash, hints);
            return Ok(AddOutcome::AlreadyQueued);
        }
        Err(hints.take_up(item, hash))
    }

    /// The queue index of `item`, if it is waiting.
    #[inline]
    fn waiting_index<Q>(&self, item: &Q, hash: u64) -> Option<usize>
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let queue = &self.queue;
        let is_item = |i: usize| queue[i].borrow() == item;
        self.waiting.find(hash, self.head, queue.len(), is_item)
    }

    /// A redundant add found the waiting item at `index`: it is hot. Gives
    /// it a hint (set: the item is dirty) if it has none, and publishes
    /// the hint.
    fn make_hot(&mut self, index: usize, hash: u64, hints: &Hints<T>) {
        let item = &self.queue[index];
        if let Some(hint) = self.hot.find(hash, |h| h.item() == item) {
            hints.publish(hint);
            return;
        }
        let hint = Hint::new(item.clone(), hash);
        hints.publish(&hint);
        self.hot.insert_unique(hash, hint, |h| h.hash());
    }

    /// Queues an item known to be neither waiting nor processing.
    fn push(&mut self, item: T, hash: u64, hint: Option<Arc<Hint<T>>>) {
        self.queue.push_back(item);
        if let Some(hint) = hint {
            self.hot.insert_unique(hash, hint, |h| h.hash());
        }
        self.waiting.insert(hash, self.head, self.queue.len() - 1);
    }

    /// Takes the first waiting item and marks it as being processed;
    /// `hash_of` is the queue's hash function.
    #[inline]
    pub(crate) fn pop(&mut self, hash_of: impl Fn(&T) -> u64) -> Option<T> {
        let item = self.queue.pop_front()?;
        // Its waiting entry is now stale (position out of the queue).
        self.head += 1;
        let hash = hash_of(&item);
        let hint = if self.hot.is_empty() {
            None
        } else {
            let entry = self.hot.find_entry(hash, |h| *h.item() == item);
            entry.ok().map(|e| e.remove().0)
        };
        if let Some(hint) = &hint {
            hint.set_dirty(false);
        }
        let processing = Processing {
            item: item.clone(),
            hash,
            dirty: false,
            hint,
        };
        self.processing.insert_unique(hash, processing, |p| p.hash);
        if self.queue.is_empty() {
            self.shrink_if_large();
        }
        Some(item)
    }

    /// Ends the processing of an item; a dirty item is queued again (its
    /// hint stays set), else its hint, already clear, stays published for
    /// its return.
    #[inline]
    pub(crate) fn done<Q>(&mut self, item: &Q, hash: u64) -> DoneOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let Ok(entry) = self
            .processing
            .find_entry(hash, |p| p.item.borrow() == item)
        else {
            return DoneOutcome::NotProcessing;
        };
        let (p, _) = entry.remove();
        if p.dirty {
            self.push(p.item, p.hash, p.hint);
            DoneOutcome::Requeued
        } else {
            DoneOutcome::Finished
        }
    }

    fn shrink_if_large(&mut self) {
        if self.queue.capacity() > SHRINK_ABOVE {
            self.queue = VecDeque::new();
        }
        if self.waiting.capacity() > SHRINK_ABOVE {
            // Every entry is stale once the queue is empty.
            self.waiting.clear();
        }
    }

    /// The item being processed that equals `item`, if any.
    pub(crate) fn processing_item<Q>(&self, item: &Q, hash: u64) -> Option<&T>
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        self.processing
            .find(hash, |p| p.item.borrow() == item)
            .map(|p| &p.item)
    }

    /// The most recently queued item.
    pub(crate) fn last_queued(&self) -> Option<&T> {
        self.queue.back()
    }
}

impl<T> State<T> {
    /// Number of waiting items.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Number of items being processed.
    pub(crate) fn processing_len(&self) -> usize {
        self.processing.len()
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.drain
    }

    /// Starts shutting down; `drain` as in client-go (a plain shutdown
    /// cancels a drain in progress).
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
    }

    /// Entries of the waiting table, stale ones included (tests).
    #[cfg(test)]
    fn waiting_entries(&self) -> usize {
        self.waiting.entries()
    }
}

#[cfg(test)]
impl<T: Eq + std::fmt::Debug> State<T> {
    /// Checks that the hints mirror this state: an attached hint is of its
    /// item and set exactly when its item is dirty (waiting, or processed
    /// and dirty); a published hint that is set is attached to its item.
    /// So a lock-free add that returns on a set hint finds its item dirty.
    pub(crate) fn check_hints(&self, hints: &Hints<T>) -> Result<(), String> {
        let waiting = self.hot.iter().map(|h| (h.item(), h, true));
        let processing = self.processing.iter();
        let processing = processing.filter_map(|p| Some((&p.item, p.hint.as_ref()?, p.dirty)));
        let attached: Vec<_> = waiting.chain(processing).collect();
        for (item, hint, dirty) in &attached {
            if hint.is_dirty() != *dirty || hint.item() != *item {
                return Err(format!(
                    "{item:?} (dirty: {dirty}) has a hint set: {}",
                    hint.is_dirty()
                ));
            }
        }
        for hint in self.hot.iter() {
            if !self.queue.contains(hint.item()) {
                return Err(format!("hot hint of {:?} is not waiting", hint.item()));
            }
        }
        for hint in hints.published() {
            let attached = attached.iter().any(|(_, h, _)| Arc::ptr_eq(h, &hint));
            if hint.is_dirty() && !attached {
                return Err(format!(
                    "published hint of {:?} is set and not attached",
                    hint.item()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> u64 {
        use std::hash::BuildHasher;
        static HASHER: std::sync::LazyLock<hashbrown::DefaultHashBuilder> =
            std::sync::LazyLock::new(Default::default);
        HASHER.hash_one(s)
    }

    /// A state and its own hint table, as every queue has (`Shared`
    /// holds one of each). Tests never share a table: a state would take
    /// up the hints of another state's items (issue 11).
    #[derive(Default)]
    struct Fixture {
        st: State<String>,
        hints: Hints<String>,
    }

    impl std::ops::Deref for Fixture {
        type Target = State<String>;

        fn deref(&self) -> &State<String> {
            &self.st
        }
    }

    impl std::ops::DerefMut for Fixture {
        fn deref_mut(&mut self) -> &mut State<String> {
            &mut self.st
        }
    }

    impl Fixture {
        fn pop(&mut self) -> Option<String> {
            self.st.pop(|s| h(s))
        }
    }

    fn add(f: &mut Fixture, s: &str) -> AddOutcome {
        f.st.add(s.to_owned(), h(s), &f.hints)
    }

    #[test]
    fn wq1_duplicate_add_is_a_no_op_and_order_is_fifo() {
        let mut st = Fixture::default();
        assert_eq!(add(&mut st, "a"), AddOutcome::Queued);
        assert_eq!(add(&mut st, "b"), AddOutcome::Queued);
        assert_eq!(add(&mut st, "a"), AddOutcome::AlreadyQueued);
        assert_eq!(
            st.st.add_ref("b", h("b"), &st.hints),
            AddOutcome::AlreadyQueued
        );
        assert_eq!(st.len(), 2);
        assert_eq!(st.pop().unwrap(), "a");
        assert_eq!(st.pop().unwrap(), "b");
        assert!(st.pop().is_none());
    }

    #[test]
    fn wq2_add_while_processing_requeues_once_on_done() {
        let mut st = Fixture::default();
        add(&mut st, "a");
        let a = st.pop().unwrap();
        let ha = h(&a);
        assert_eq!(add(&mut st, "a"), AddOutcome::MarkedDirty);
        assert_eq!(add(&mut st, "a"), AddOutcome::AlreadyDirty);
        assert_eq!(st.len(), 0);
        assert_eq!(st.done(a.as_str(), ha), DoneOutcome::Requeued);
        assert_eq!(st.len(), 1);
        assert_eq!(st.done("a", ha), DoneOutcome::NotProcessing);
        let a = st.pop().unwrap();
        let ha = h(&a);
        assert_eq!(st.done(&a, ha), DoneOutcome::Finished);
        assert_eq!(st.processing_len(), 0);
    }

    #[test]
    fn positions_survive_wraparound_and_growth() {
        let mut st = Fixture::default();
        for round in 0..3 {
            for i in 0..1000 {
                add(&mut st, &format!("k{i}"));
            }
            for i in 0..1000 {
                assert_eq!(add(&mut st, &format!("k{i}")), AddOutcome::AlreadyQueued);
            }
            for i in 0..1000 {
                let k = st.pop().unwrap();
                let hk = h(&k);
                assert_eq!(k, format!("k{i}"), "round {round}");
                assert_eq!(st.done(&k, hk), DoneOutcome::Finished);
            }
        }
        assert_eq!(st.len(), 0);
    }

    /// Positions that cross 2^32 still find their items.
    #[test]
    fn positions_wrap() {
        let mut st = Fixture::default();
        st.st.head = u64::from(u32::MAX) - 500;
        for i in 0..1000 {
            assert_eq!(add(&mut st, &format!("k{i}")), AddOutcome::Queued);
        }
        for i in 0..1000 {
            let k = format!("k{i}");
            assert_eq!(add(&mut st, &k), AddOutcome::AlreadyQueued, "{k}");
        }
        for i in 0..1000 {
            assert_eq!(st.pop().unwrap(), format!("k{i}"));
        }
        assert_eq!(add(&mut st, "k1"), AddOutcome::MarkedDirty);
    }

    #[test]
    fn stale_entries_are_reused_and_swept() {
        let mut st = Fixture::default();
        // one hot item cycling: its stale entry is reused every time
        for _ in 0..10_000 {
            add(&mut st, "hot");
            let k = st.pop().unwrap();
            let hk = h(&k);
            st.done(&k, hk);
        }
        assert_eq!(st.waiting_entries(), 1);
        // many items cycling once each: swept before the table grows
        add(&mut st, "keep");
        for i in 0..100_000 {
            let k = format!("k{i}");
            add(&mut st, &k);
            assert_eq!(add(&mut st, &k), AddOutcome::AlreadyQueued);
            let first = st.pop().unwrap();
            let hf = h(&first);
            st.done(&first, hf);
        }
        assert!(st.waiting_entries() < 4096, "{}", st.waiting_entries());
        assert_eq!(st.len(), 1);
        assert_eq!(add(&mut st, "k99999"), AddOutcome::AlreadyQueued);
    }

    /// A redundant add makes the item hot; its hint then follows the item
    /// (set while it is dirty) and is taken up again when it comes back.
    #[test]
    fn a_hint_is_set_exactly_while_its_item_is_dirty() {
        let mut st = Fixture::default();
        let covered = |st: &Fixture| {
            st.check_hints(&st.hints).unwrap();
            st.hints.covers("a", h("a"))
        };
        assert_eq!(add(&mut st, "a"), AddOutcome::Queued);
        assert!(!covered(&st), "not hot yet");
        assert_eq!(add(&mut st, "a"), AddOutcome::AlreadyQueued);
        assert!(covered(&st), "hot and waiting");
        let a = st.pop().unwrap();
        assert!(!covered(&st), "processed, not dirty");
        assert_eq!(add(&mut st, "a"), AddOutcome::MarkedDirty);
        assert!(covered(&st), "processed and dirty");
        assert_eq!(st.done(&a, h("a")), DoneOutcome::Requeued);
        assert!(covered(&st), "queued again");
        let a = st.pop().unwrap();
        assert_eq!(st.done(&a, h("a")), DoneOutcome::Finished);
        assert!(!covered(&st), "gone");
        assert_eq!(st.hints.published().len(), 1, "still published");
        assert_eq!(add(&mut st, "a"), AddOutcome::Queued);
        assert!(covered(&st), "back: the hint is taken up at once");
        st.shut_down(false);
        assert_eq!(add(&mut st, "a"), AddOutcome::ShuttingDown);
        assert!(covered(&st), "still waiting");
    }

    #[test]
    fn wq4_adds_after_shutdown_are_dropped() {
        let mut st = Fixture::default();
        add(&mut st, "a");
        st.shut_down(false);
        assert_eq!(add(&mut st, "b"), AddOutcome::ShuttingDown);
        assert_eq!(st.pop().unwrap(), "a");
        assert!(st.pop().is_none());
    }
}
