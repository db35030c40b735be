//! The sequential heart of a queue: the FIFO of waiting items, the set of
//! waiting items (for deduplication) and the set of items being processed,
//! with client-go's rules (WQ1, WQ2, WQ4). No locking and no waking here:
//! [`crate::shared`] wraps this in the queue mutex.
//!
//! Layout, chosen so that an item is stored once and a `pop` touches no
//! hash table of waiting items:
//! - `queue` holds each waiting item once, with its hash, in FIFO order.
//! - `waiting` is a hash table of (absolute queue position, hash) pairs,
//!   not of items: a lookup compares against the item stored in `queue`.
//!   `pop` leaves the table alone: an entry whose position is below `head`
//!   is stale; the next add of the same hash reuses it, and stale entries
//!   are swept out before the table would grow, so the table stays within
//!   twice the largest number of waiting items.
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

/// Above this many slots an emptied queue gives its memory back.
const SHRINK_ABOVE: usize = 64 * 1024;

/// A waiting item, its hash and its hint, if it is hot.
struct Slot<T> {
    item: T,
    hash: u64,
    hint: Option<Arc<Hint<T>>>,
}

/// An entry of the waiting table: the absolute queue position of an item
/// and its hash. Positions below `head` were handed out already: such
/// entries are stale, reused by the next add of the same hash and swept
/// out before the table grows.
#[derive(Clone, Copy)]
struct Pos {
    pos: u64,
    hash: u64,
}

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
    queue: VecDeque<Slot<T>>,
    /// Absolute position of `queue[0]`.
    head: u64,
    waiting: HashTable<Pos>,
    processing: HashTable<Processing<T>>,
    shutting_down: bool,
    drain: bool,
}

impl<T> Default for State<T> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            head: 0,
            waiting: HashTable::new(),
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
                    make_hot(&mut p.hint, &p.item, hash, hints);
                    return Ok(AddOutcome::AlreadyDirty);
                }
                p.dirty = true;
                if let Some(hint) = &p.hint {
                    hint.set_dirty(true);
                }
                return Ok(AddOutcome::MarkedDirty);
            }
        }
        let (queue, head) = (&mut self.queue, self.head);
        let found = self.waiting.find(hash, |e| {
            e.hash == hash && slot_at(queue, head, e.pos).is_some_and(|s| s.item.borrow() == item)
        });
        let index = found.and_then(|e| usize::try_from(e.pos.checked_sub(head)?).ok());
        if let Some(slot) = index.and_then(|i| queue.get_mut(i)) {
            make_hot(&mut slot.hint, &slot.item, hash, hints);
            return Ok(AddOutcome::AlreadyQueued);
        }
        Err(hints.take_up(item, hash))
    }

    /// Queues an item known to be neither waiting nor processing.
    fn push(&mut self, item: T, hash: u64, hint: Option<Arc<Hint<T>>>) {
        let pos = self.head + self.queue.len() as u64;
        self.queue.push_back(Slot { item, hash, hint });
        let head = self.head;
        // Reuse a stale entry of the same hash (the item's own, usually).
        if let Some(stale) = self
            .waiting
            .find_mut(hash, |e| e.hash == hash && e.pos < head)
        {
            stale.pos = pos;
            return;
        }
        if self.waiting.len() == self.waiting.capacity() {
            // Sweep stale entries before growing.
            self.waiting.retain(|e| e.pos >= head);
        }
        self.waiting
            .insert_unique(hash, Pos { pos, hash }, |e| e.hash);
    }

    /// Takes the first waiting item and marks it as being processed.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<T> {
        let Slot { item, hash, hint } = self.queue.pop_front()?;
        // Its waiting entry is now stale (position below head).
        self.head += 1;
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
            self.waiting = HashTable::new();
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
        self.queue.back().map(|s| &s.item)
    }
}

/// A redundant add found the item dirty: it is hot. Gives it a hint (set:
/// the item is dirty) if it has none, and publishes the hint.
fn make_hot<T: Clone>(hint: &mut Option<Arc<Hint<T>>>, item: &T, hash: u64, hints: &Hints<T>) {
    let hint = hint.get_or_insert_with(|| Hint::new(item.clone(), hash));
    hints.publish(hint);
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
        self.waiting.len()
    }
}

#[cfg(test)]
impl<T: Eq + std::fmt::Debug> State<T> {
    /// Checks that the hints mirror this state: an attached hint is of its
    /// item and set exactly when its item is dirty (waiting, or processed
    /// and dirty); a published hint that is set is attached to its item.
    /// So a lock-free add that returns on a set hint finds its item dirty.
    pub(crate) fn check_hints(&self, hints: &Hints<T>) -> Result<(), String> {
        let waiting = self.queue.iter().map(|s| (&s.item, &s.hint, true));
        let processing = self.processing.iter().map(|p| (&p.item, &p.hint, p.dirty));
        let attached: Vec<_> = waiting
            .chain(processing)
            .filter_map(|(item, hint, dirty)| Some((item, hint.as_ref()?, dirty)))
            .collect();
        for (item, hint, dirty) in &attached {
            if hint.is_dirty() != *dirty || hint.item() != *item {
                return Err(format!(
                    "{item:?} (dirty: {dirty}) has a hint set: {}",
                    hint.is_dirty()
                ));
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

/// The slot at absolute position `pos` (`None` for a stale position).
fn slot_at<T>(queue: &VecDeque<Slot<T>>, head: u64, pos: u64) -> Option<&Slot<T>> {
    let index = usize::try_from(pos.checked_sub(head)?).ok()?;
    queue.get(index)
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
