//! The lock-free fast path for adds of "hot" items (WQ1 at speed).
//!
//! When an add finds its item already waiting (a redundant add), the item
//! gets a [`Hint`]: a shared copy of the item with an atomic state that
//! mirrors the queue's: `QUEUED` (waiting), `DIRTY` (being processed and
//! already marked to run again) or `IDLE` (neither). Hints are published in
//! a small fixed table indexed by hash. An add first looks there: if it
//! finds its own item `QUEUED` or `DIRTY`, the add changes nothing, so it
//! returns without taking the queue lock and without writing to any shared
//! memory.
//!
//! Every state change happens under the queue lock, at the same time as
//! the change it mirrors, with sequentially consistent stores; the fast
//! path reads with a sequentially consistent load. So an add that returns
//! early is ordered before the `get` that hands the item out next: whatever
//! the adder wrote before `add` is visible to the worker that processes
//! the item (the stress test checks exactly this).
//!
//! The table holds at most [`SLOTS`] hints; a hint leaves it when its item
//! leaves the queue, so nothing outlives the queue's own contents.

use std::borrow::Borrow;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

/// Slots of the hint table (a power of two).
pub(crate) const SLOTS: usize = 4096;

/// Neither waiting nor dirty: an add must take the lock.
pub(crate) const IDLE: u8 = 0;
/// Waiting in the queue.
pub(crate) const QUEUED: u8 = 1;
/// Being processed and dirty.
pub(crate) const DIRTY: u8 = 2;

/// A published copy of a hot item and its state.
pub(crate) struct Hint<T> {
    item: T,
    hash: u64,
    state: AtomicU8,
}

impl<T> Hint<T> {
    pub(crate) fn new(item: T, hash: u64, state: u8) -> Arc<Self> {
        Arc::new(Self {
            item,
            hash,
            state: AtomicU8::new(state),
        })
    }

    /// Sets the state (queue lock held).
    #[inline]
    pub(crate) fn set(&self, state: u8) {
        self.state.store(state, Ordering::SeqCst);
    }
}

/// The table of published hints.
pub(crate) struct Hints<T> {
    slots: Box<[ArcSwapOption<Hint<T>>]>,
    /// Number of occupied slots; the fast path is skipped while it is zero.
    published: AtomicUsize,
}

impl<T> Default for Hints<T> {
    fn default() -> Self {
        Self {
            slots: (0..SLOTS).map(|_| ArcSwapOption::empty()).collect(),
            published: AtomicUsize::new(0),
        }
    }
}

impl<T> Hints<T> {
    #[inline]
    fn slot(&self, hash: u64) -> Option<&ArcSwapOption<Hint<T>>> {
        // The top bits: hashbrown uses the low ones for its buckets.
        self.slots.get((hash >> 52) as usize & (SLOTS - 1))
    }

    /// Whether an add of `item` would change nothing (it is waiting, or
    /// being processed and dirty). Lock-free; false when unsure.
    #[inline]
    pub(crate) fn covers<Q>(&self, item: &Q, hash: u64) -> bool
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        if self.published.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let Some(slot) = self.slot(hash) else {
            return false;
        };
        let guard = slot.load();
        match &*guard {
            Some(hint) => {
                hint.hash == hash
                    && hint.state.load(Ordering::SeqCst) != IDLE
                    && hint.item.borrow() == item
            }
            None => false,
        }
    }

    /// Publishes `hint` unless its slot holds another live hint (queue lock
    /// held: all writers of the table hold it).
    pub(crate) fn publish(&self, hint: &Arc<Hint<T>>) {
        let Some(slot) = self.slot(hint.hash) else {
            return;
        };
        let current = slot.load();
        match &*current {
            Some(other) if other.state.load(Ordering::Relaxed) != IDLE => {}
            Some(_) => slot.store(Some(Arc::clone(hint))),
            None => {
                slot.store(Some(Arc::clone(hint)));
                self.published.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The item of `hint` left the queue: marks it idle and unpublishes it
    /// (queue lock held).
    pub(crate) fn retire(&self, hint: &Arc<Hint<T>>) {
        hint.set(IDLE);
        let Some(slot) = self.slot(hint.hash) else {
            return;
        };
        let current = slot.load();
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, hint)) {
            slot.store(None);
            self.published.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_only_published_live_hints_of_the_same_item() {
        let hints = Hints::<String>::default();
        let h = 0xabcd_ef01_2345_6789;
        assert!(!hints.covers("a", h));
        let a = Hint::new("a".to_owned(), h, QUEUED);
        hints.publish(&a);
        assert!(hints.covers("a", h));
        assert!(!hints.covers("b", h));
        assert!(!hints.covers("a", h ^ 1));
        a.set(IDLE);
        assert!(!hints.covers("a", h));
        a.set(DIRTY);
        assert!(hints.covers("a", h));
        // a live hint is not displaced by another one of the same slot
        let b = Hint::new("b".to_owned(), h, QUEUED);
        hints.publish(&b);
        assert!(hints.covers("a", h));
        assert!(!hints.covers("b", h));
        hints.retire(&a);
        assert!(!hints.covers("a", h));
        assert_eq!(hints.published.load(Ordering::Relaxed), 0);
        // retiring a hint that is not published leaves the slot alone
        hints.publish(&b);
        hints.retire(&a);
        assert!(hints.covers("b", h));
    }
}
