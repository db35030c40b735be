//! The sequential heart of a queue: the FIFO of waiting items, the set of
//! waiting items (for deduplication) and the set of items being processed,
//! with client-go's rules (WQ1, WQ2, WQ4). No locking and no waking here:
//! [`crate::shared`] wraps this in a mutex.
//!
//! Layout, chosen for speed:
//! - `queue` holds each waiting item once, with its hash, in FIFO order.
//! - `waiting` is a hash table of absolute queue positions (8 bytes each),
//!   not of items: a lookup compares against the item stored in `queue`, so
//!   an added item is stored once, never cloned, and `pop` removes its
//!   position without hashing or comparing items.
//! - `processing` holds a clone of each item handed out by `pop` (there are
//!   usually as many as workers), with its dirty flag (added again while
//!   being processed).

use std::borrow::Borrow;
use std::collections::VecDeque;

use hashbrown::HashTable;

/// Above this many slots an emptied queue gives its memory back.
const SHRINK_ABOVE: usize = 64 * 1024;

/// A waiting item and its hash.
struct Slot<T> {
    item: T,
    hash: u64,
}

/// An item being processed.
struct Processing<T> {
    item: T,
    hash: u64,
    dirty: bool,
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

/// Where an item stands, for the lookup part of an add.
enum Found {
    Absent,
    Waiting,
    Processing { dirty: bool },
}

/// Queue contents and flags; see the module documentation.
pub(crate) struct State<T> {
    queue: VecDeque<Slot<T>>,
    /// Absolute position of `queue[0]`.
    head: u64,
    waiting: HashTable<u64>,
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
    pub(crate) fn add(&mut self, item: T, hash: u64) -> AddOutcome {
        if self.shutting_down {
            return AddOutcome::ShuttingDown;
        }
        match self.find(&item, hash) {
            Found::Absent => {
                self.push(item, hash);
                AddOutcome::Queued
            }
            found => self.settle(found, &item, hash),
        }
    }

    /// Adds a borrowed item, cloning it only when it is newly queued.
    pub(crate) fn add_ref<Q>(&mut self, item: &Q, hash: u64) -> AddOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = T>,
    {
        if self.shutting_down {
            return AddOutcome::ShuttingDown;
        }
        match self.find(item, hash) {
            Found::Absent => {
                self.push(item.to_owned(), hash);
                AddOutcome::Queued
            }
            found => self.settle(found, item, hash),
        }
    }

    fn settle<Q>(&mut self, found: Found, item: &Q, hash: u64) -> AddOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        match found {
            Found::Waiting => AddOutcome::AlreadyQueued,
            Found::Processing { dirty: true } => AddOutcome::AlreadyDirty,
            Found::Processing { dirty: false } | Found::Absent => {
                if let Some(p) = self.processing.find_mut(hash, |p| p.item.borrow() == item) {
                    p.dirty = true;
                }
                AddOutcome::MarkedDirty
            }
        }
    }

    fn find<Q>(&self, item: &Q, hash: u64) -> Found
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        if !self.processing.is_empty() {
            if let Some(p) = self.processing.find(hash, |p| p.item.borrow() == item) {
                return Found::Processing { dirty: p.dirty };
            }
        }
        let (queue, head) = (&self.queue, self.head);
        let hit = self.waiting.find(hash, |&pos| {
            slot_at(queue, head, pos).is_some_and(|s| s.item.borrow() == item)
        });
        if hit.is_some() {
            Found::Waiting
        } else {
            Found::Absent
        }
    }

    /// Queues an item known to be neither waiting nor processing.
    fn push(&mut self, item: T, hash: u64) {
        let pos = self.head + self.queue.len() as u64;
        self.queue.push_back(Slot { item, hash });
        let (queue, head) = (&self.queue, self.head);
        self.waiting.insert_unique(hash, pos, |&p| {
            slot_at(queue, head, p).map_or(0, |s| s.hash)
        });
    }

    /// Takes the first waiting item and marks it as being processed.
    pub(crate) fn pop(&mut self) -> Option<(T, u64)> {
        let Slot { item, hash } = self.queue.pop_front()?;
        let pos = self.head;
        self.head += 1;
        if let Ok(entry) = self.waiting.find_entry(hash, |&p| p == pos) {
            entry.remove();
        }
        let copy = item.clone();
        self.processing.insert_unique(
            hash,
            Processing {
                item: copy,
                hash,
                dirty: false,
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
        if p.dirty {
            self.push(p.item, p.hash);
            DoneOutcome::Requeued
        } else {
            DoneOutcome::Finished
        }
    }

    fn shrink_if_large(&mut self) {
        if self.queue.capacity() > SHRINK_ABOVE {
            self.queue.shrink_to_fit();
        }
        if self.waiting.capacity() > SHRINK_ABOVE {
            self.waiting.shrink_to(0, |_| 0);
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
}

/// The slot at absolute position `pos`.
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

    fn add(st: &mut State<String>, s: &str) -> AddOutcome {
        st.add(s.to_owned(), h(s))
    }

    #[test]
    fn wq1_duplicate_add_is_a_no_op_and_order_is_fifo() {
        let mut st = State::default();
        assert_eq!(add(&mut st, "a"), AddOutcome::Queued);
        assert_eq!(add(&mut st, "b"), AddOutcome::Queued);
        assert_eq!(add(&mut st, "a"), AddOutcome::AlreadyQueued);
        assert_eq!(st.add_ref("b", h("b")), AddOutcome::AlreadyQueued);
        assert_eq!(st.len(), 2);
        assert_eq!(st.pop().unwrap().0, "a");
        assert_eq!(st.pop().unwrap().0, "b");
        assert!(st.pop().is_none());
    }

    #[test]
    fn wq2_add_while_processing_requeues_once_on_done() {
        let mut st = State::default();
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
        let mut st = State::default();
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
    fn wq4_adds_after_shutdown_are_dropped() {
        let mut st = State::default();
        add(&mut st, "a");
        st.shut_down(false);
        assert_eq!(add(&mut st, "b"), AddOutcome::ShuttingDown);
        assert_eq!(st.pop().unwrap().0, "a");
        assert!(st.pop().is_none());
    }
}
