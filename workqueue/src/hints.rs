//! The lock-free answer to the commonest add (WQ1 at speed): an add of an
//! item that is already dirty (waiting, or being processed and already
//! marked to be queued again) changes nothing, so it need not take the
//! queue lock.
//!
//! An item becomes *hot* when an add finds it dirty already: it gets a
//! [`Hint`], a shared copy of the item with one atomic flag that mirrors
//! whether the item is dirty. The flag is written only under the queue
//! lock, in the same hold of the lock as the change it mirrors: set when
//! the item is queued or marked dirty while processed, cleared when it is
//! handed out or done without being dirty. Hints are published in a small
//! table indexed by hash; an add looks there for its own item and returns
//! at once if its flag is set. Every other add takes the lock, as in
//! client-go. The lock-free path only reads: it changes nothing, so it
//! cannot lose, double or reorder an item, and it needs no hand-off with
//! consumers going to sleep.
//!
//! The flag is loaded and stored with `SeqCst`. An add that sees it set is
//! ordered before the store that clears it, which the next hand-out of the
//! item makes: so whatever the adder wrote before `add`, under a lock or
//! with `SeqCst` atomics, is visible to the worker that processes the item
//! (the stress test and `tests/loom.rs` check this). An add that returns
//! early writes nothing, so a relaxed or release store made before it needs
//! a lock or `SeqCst` to pair with the worker, as with any read-only check.
//!
//! A hint stays published after its item left the queue (flag cleared), so
//! that the item, when it comes back, takes it up again without a new
//! allocation; the next hot item of its slot replaces it. So the table
//! keeps copies of at most [`SLOTS`] recently hot items.

use std::borrow::Borrow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::sync::{AtomicBool, HintSlot};

/// Slots of the hint table (a power of two): a thousand hot keys rarely
/// share one (about 3% do); allocated (128 KiB) with the first hint.
#[cfg(not(any(test, loom)))]
pub(crate) const SLOTS: usize = 16384;
/// Unit and model-checking tests use a tiny table, so that hot items share
/// slots and displace each other's hints all the time.
#[cfg(any(test, loom))]
pub(crate) const SLOTS: usize = 8;

/// A published copy of a hot item and whether it is dirty.
pub(crate) struct Hint<T> {
    item: T,
    hash: u64,
    dirty: AtomicBool,
}

impl<T> Hint<T> {
    /// A hint of a dirty item.
    pub(crate) fn new(item: T, hash: u64) -> Arc<Self> {
        Arc::new(Self {
            item,
            hash,
            dirty: AtomicBool::new(true),
        })
    }

    /// The item.
    pub(crate) fn item(&self) -> &T {
        &self.item
    }

    /// The item's hash.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// Sets or clears the flag (queue lock held).
    #[inline]
    pub(crate) fn set_dirty(&self, dirty: bool) {
        self.dirty.store(dirty, Ordering::SeqCst);
    }

    /// Whether the item is dirty.
    #[inline]
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::SeqCst)
    }
}

/// The table of published hints.
pub(crate) struct Hints<T> {
    slots: OnceLock<Box<[HintSlot<Hint<T>>]>>,
}

impl<T> Default for Hints<T> {
    fn default() -> Self {
        Self {
            slots: OnceLock::new(),
        }
    }
}

impl<T> Hints<T> {
    #[inline]
    fn slot(&self, hash: u64) -> Option<&HintSlot<Hint<T>>> {
        // The top bits: hashbrown uses the low ones for its buckets.
        self.slots.get()?.get((hash >> 50) as usize & (SLOTS - 1))
    }

    /// Whether `item` is published and dirty: then an add of it is a no-op.
    #[inline]
    pub(crate) fn covers<Q>(&self, item: &Q, hash: u64) -> bool
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let Some(slot) = self.slot(hash) else {
            return false;
        };
        let guard = slot.load();
        guard
            .as_ref()
            .is_some_and(|h| h.hash == hash && h.item.borrow() == item && h.is_dirty())
    }

    /// Publishes `hint` unless its slot holds the hint of another dirty
    /// item (queue lock held: every writer of the table holds it).
    pub(crate) fn publish(&self, hint: &Arc<Hint<T>>) {
        let slots = self
            .slots
            .get_or_init(|| (0..SLOTS).map(|_| HintSlot::empty()).collect());
        let Some(slot) = slots.get((hint.hash >> 50) as usize & (SLOTS - 1)) else {
            return;
        };
        let keep = slot
            .load()
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, hint) || current.is_dirty());
        if !keep {
            slot.store(Some(Arc::clone(hint)));
        }
    }

    /// The published hint of `item`, set dirty again: an item that comes
    /// back after it left the queue takes its hint up again (queue lock
    /// held; `item` is neither waiting nor being processed, so its hint,
    /// if published, is clear).
    pub(crate) fn take_up<Q>(&self, item: &Q, hash: u64) -> Option<Arc<Hint<T>>>
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let guard = self.slot(hash)?.load();
        let hint = guard
            .as_ref()
            .filter(|h| h.hash == hash && h.item.borrow() == item)?;
        hint.set_dirty(true);
        Some(Arc::clone(hint))
    }

    /// Every published hint (tests).
    #[cfg(test)]
    pub(crate) fn published(&self) -> Vec<Arc<Hint<T>>> {
        let Some(slots) = self.slots.get() else {
            return Vec::new();
        };
        slots
            .iter()
            .filter_map(|slot| (*slot.load()).clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_only_published_dirty_hints_of_the_same_item() {
        let hints = Hints::<String>::default();
        let h = 0xabcd_ef01_2345_6789;
        assert!(!hints.covers("a", h), "empty table");
        let a = Hint::new("a".to_owned(), h);
        hints.publish(&a);
        assert!(hints.covers("a", h));
        assert!(!hints.covers("b", h), "another item of the slot");
        assert!(!hints.covers("a", h ^ 1), "another hash");
        a.set_dirty(false);
        assert!(!hints.covers("a", h), "clear: the add takes the lock");
        a.set_dirty(true);
        // a dirty hint is not displaced by another item of its slot
        let b = Hint::new("b".to_owned(), h ^ 1);
        hints.publish(&b);
        assert!(hints.covers("a", h));
        assert!(!hints.covers("b", h ^ 1));
        // gone: clear, still published, taken up by the next add of "a"
        a.set_dirty(false);
        assert!(hints.take_up("b", h ^ 1).is_none());
        let again = hints.take_up("a", h).expect("published");
        assert!(Arc::ptr_eq(&again, &a));
        assert!(hints.covers("a", h));
        // a clear hint gives its slot to the next hot item
        a.set_dirty(false);
        hints.publish(&b);
        assert!(hints.covers("b", h ^ 1));
        assert!(hints.take_up("a", h).is_none());
    }
}
