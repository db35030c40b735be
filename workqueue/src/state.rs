//! The sequential heart of a queue: the FIFO of waiting items, the set of
//! waiting items (for deduplication) and the set of items being processed,
//! with client-go's rules (WQ1, WQ2, WQ4). No locking and no waking here:
//! [`crate::shared`] wraps this in a mutex.
//!
//! Layout, chosen for speed:
//! - `queue` holds each waiting item once, with its hash, in FIFO order.
//! - `waiting` is a hash table of (absolute queue position, hash) pairs,
//!   not of items: a lookup compares against the item stored in `queue`,
//!   so an added item is stored once and never cloned. `pop` does not touch
//!   the table at all: an entry whose position is below `head` is stale; the
//!   next add of the same hash reuses it, and stale entries are swept out
//!   before the table would grow, so the table stays within twice the
//!   largest number of waiting items.
//! - `processing` holds a clone of each item handed out by `pop` (there are
//!   usually as many as workers), with its dirty flag (added again while
//!   being processed) and the item's hint, if it is hot (see
//!   [`crate::hints`]).

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::hints::{Hint, Hints, Reclaim, DIRTY, IDLE, PROCESSING, QUEUED};

/// Above this many slots an emptied queue gives its memory back.
const SHRINK_ABOVE: usize = 64 * 1024;

/// A waiting item, its hash and its published hint, if it is hot.
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
    pub(crate) fn add(&mut self, item: T, hash: u64, hints: &Hints<T>) -> AddOutcome {
        if self.shutting_down {
            return AddOutcome::ShuttingDown;
        }
        match self.settle(&item, hash, hints) {
            Some(outcome) => outcome,
            None => match hints.reclaim(&item, hash) {
                Reclaim::Claimed => AddOutcome::AlreadyQueued,
                Reclaim::Hint(hint) => {
                    self.push(item, hash, Some(hint));
                    AddOutcome::Queued
                }
                Reclaim::None => {
                    self.push(item, hash, None);
                    AddOutcome::Queued
                }
            },
        }
    }

    /// Adds a borrowed item, cloning it only when it is newly queued.
    pub(crate) fn add_ref<Q>(&mut self, item: &Q, hash: u64, hints: &Hints<T>) -> AddOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = T>,
    {
        if self.shutting_down {
            return AddOutcome::ShuttingDown;
        }
        match self.settle(item, hash, hints) {
            Some(outcome) => outcome,
            None => match hints.reclaim(item, hash) {
                Reclaim::Claimed => AddOutcome::AlreadyQueued,
                Reclaim::Hint(hint) => {
                    self.push(item.to_owned(), hash, Some(hint));
                    AddOutcome::Queued
                }
                Reclaim::None => {
                    self.push(item.to_owned(), hash, None);
                    AddOutcome::Queued
                }
            },
        }
    }

    /// Applies an add that claimed the idle `hint` without the lock (it is
    /// `QUEUED`): queues the item with its hint, or, if the item is in the
    /// queue already (its hint had been replaced meanwhile), adds it the
    /// usual way and leaves the claimed hint idle.
    pub(crate) fn add_claimed(&mut self, hint: Arc<Hint<T>>, hints: &Hints<T>) -> AddOutcome {
        let hash = hint.hash();
        if self.shutting_down {
            hint.set(IDLE);
            return AddOutcome::ShuttingDown;
        }
        match self.settle(hint.item(), hash, hints) {
            Some(outcome) => {
                hint.set(IDLE);
                outcome
            }
            None => {
                let item = hint.item().clone();
                self.push(item, hash, Some(hint));
                AddOutcome::Queued
            }
        }
    }

    /// Handles an add of an item that is waiting or being processed;
    /// `None` when it is neither (it must be queued). A redundant add makes
    /// the item hot: it gets a published hint.
    fn settle<Q>(&mut self, item: &Q, hash: u64, hints: &Hints<T>) -> Option<AddOutcome>
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        if !self.processing.is_empty() {
            if let Some(p) = self.processing.find_mut(hash, |p| p.item.borrow() == item) {
                return Some(match &p.hint {
                    Some(hint) if hint.mark_dirty() => AddOutcome::MarkedDirty,
                    Some(_) => AddOutcome::AlreadyDirty,
                    None => {
                        // Added while processed: hot. From now on its hint
                        // holds its dirty flag.
                        let outcome = if p.dirty {
                            AddOutcome::AlreadyDirty
                        } else {
                            AddOutcome::MarkedDirty
                        };
                        p.dirty = true;
                        let hint = Hint::new(p.item.clone(), hash, DIRTY);
                        hints.publish(&hint);
                        p.hint = Some(hint);
                        outcome
                    }
                });
            }
        }
        let (queue, head) = (&mut self.queue, self.head);
        let found = self.waiting.find(hash, |e| {
            e.hash == hash && slot_at(queue, head, e.pos).is_some_and(|s| s.item.borrow() == item)
        });
        let index = found.and_then(|e| usize::try_from(e.pos.checked_sub(head)?).ok())?;
        if let Some(slot) = queue.get_mut(index) {
            if slot.hint.is_none() {
                let hint = Hint::new(slot.item.clone(), hash, QUEUED);
                hints.publish(&hint);
                slot.hint = Some(hint);
            }
        }
        Some(AddOutcome::AlreadyQueued)
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
    pub(crate) fn pop(&mut self) -> Option<(T, u64)> {
        let Slot { item, hash, hint } = self.queue.pop_front()?;
        // Its waiting entry is now stale (position below head).
        self.head += 1;
        if let Some(hint) = &hint {
            hint.set(PROCESSING);
        }
        let copy = item.clone();
        self.processing.insert_unique(
            hash,
            Processing {
                item: copy,
                hash,
                dirty: false,
                hint,
            },
            |p| p.hash,
        );
        if self.queue.is_empty() {
            self.shrink_if_large();
        }
        Some((item, hash))
    }

    /// Ends the processing of an item; a dirty item is queued again.
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
        // With a hint, the hint holds the dirty flag (adds may set it
        // without the lock); `finish` reads and resets it atomically.
        let dirty = match &p.hint {
            Some(hint) => hint.finish(),
            None => p.dirty,
        };
        if dirty {
            self.push(p.item, p.hash, p.hint);
            DoneOutcome::Requeued
        } else {
            // A hint stays published, idle, for the item's return.
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
    /// Checks that the hints mirror this state (call it with the claims
    /// merged and no add in flight): an attached hint is of its item and
    /// in the state of its entry; a published hint that is `QUEUED` is
    /// attached to a waiting item, one that is `PROCESSING` or `DIRTY` to
    /// an item being processed, and an `IDLE` one to nothing. So an add
    /// that takes a `QUEUED` hint for a claim (and queues nothing) can only
    /// meet one in flight.
    pub(crate) fn check_hints(&self, hints: &Hints<T>) -> Result<(), String> {
        let waiting = self.queue.iter().map(|s| (&s.item, &s.hint, true));
        let processing = self.processing.iter().map(|p| (&p.item, &p.hint, false));
        let attached: Vec<_> = waiting
            .chain(processing)
            .filter_map(|(item, hint, waits)| Some((item, hint.as_ref()?, waits)))
            .collect();
        for (item, hint, waits) in &attached {
            let ok = match hint.state() {
                QUEUED => *waits,
                PROCESSING | DIRTY => !*waits,
                _ => false,
            };
            if !ok || hint.item() != *item {
                return Err(format!(
                    "{item:?} (waiting: {waits}) has a hint in state {}",
                    hint.state()
                ));
            }
        }
        for hint in hints.published() {
            let holder = attached.iter().find(|(_, h, _)| Arc::ptr_eq(h, &hint));
            if (hint.state() == IDLE) != holder.is_none() {
                return Err(format!(
                    "published hint of {:?} in state {} is attached: {}",
                    hint.item(),
                    hint.state(),
                    holder.is_some()
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
    /// holds one of each). Tests never share a table: a hint of another
    /// state's item would make `add` take it for claimed (issue 11).
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
        assert_eq!(st.pop().unwrap().0, "a");
        assert_eq!(st.pop().unwrap().0, "b");
        assert!(st.pop().is_none());
    }

    #[test]
    fn wq2_add_while_processing_requeues_once_on_done() {
        let mut st = Fixture::default();
        add(&mut st, "a");
        let (a, ha) = st.pop().unwrap();
        assert_eq!(add(&mut st, "a"), AddOutcome::MarkedDirty);
        assert_eq!(add(&mut st, "a"), AddOutcome::AlreadyDirty);
        assert_eq!(st.len(), 0);
        assert_eq!(st.done(a.as_str(), ha), DoneOutcome::Requeued);
        assert_eq!(st.len(), 1);
        assert_eq!(st.done("a", ha), DoneOutcome::NotProcessing);
        let (a, ha) = st.pop().unwrap();
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
                let (k, hk) = st.pop().unwrap();
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
            let (k, hk) = st.pop().unwrap();
            st.done(&k, hk);
        }
        assert_eq!(st.waiting_entries(), 1);
        // many items cycling once each: swept before the table grows
        add(&mut st, "keep");
        for i in 0..100_000 {
            let k = format!("k{i}");
            add(&mut st, &k);
            assert_eq!(add(&mut st, &k), AddOutcome::AlreadyQueued);
            let (first, hf) = st.pop().unwrap();
            st.done(&first, hf);
        }
        assert!(st.waiting_entries() < 4096, "{}", st.waiting_entries());
        assert_eq!(st.len(), 1);
        assert_eq!(add(&mut st, "k99999"), AddOutcome::AlreadyQueued);
    }

    #[test]
    fn wq4_adds_after_shutdown_are_dropped() {
        let mut st = Fixture::default();
        add(&mut st, "a");
        st.shut_down(false);
        assert_eq!(add(&mut st, "b"), AddOutcome::ShuttingDown);
        assert_eq!(st.pop().unwrap().0, "a");
        assert!(st.pop().is_none());
    }
}
