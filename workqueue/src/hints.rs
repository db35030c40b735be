//! The lock-free fast path for adds of "hot" items (WQ1 at speed).
//!
//! When an add finds its item already waiting or being processed, the item
//! is hot and gets a [`Hint`]: a shared copy of the item with an atomic
//! state that mirrors the queue's: `QUEUED` (waiting, or claimed: see
//! below), `PROCESSING` (handed out, not dirty), `DIRTY` (handed out and to
//! be queued again on `done`) or `IDLE` (gone). Hints are published in a
//! small fixed table indexed by hash. An add first looks there, for its own
//! item:
//! - `QUEUED` or `DIRTY`: the add changes nothing; it returns without the
//!   queue lock and without writing to shared memory;
//! - `PROCESSING`: it marks it `DIRTY` with one compare-and-swap; `done`
//!   (which swaps `PROCESSING` for `IDLE` under the lock) sees that and
//!   queues the item again;
//! - `IDLE`: it claims the item (`IDLE` to `QUEUED`) and hands the hint to
//!   [`Claims`]; the next locked operation (every one merges claims first)
//!   queues it. A claim is made under the claims' own small lock, with the
//!   claims marked pending before the hint turns `QUEUED`: any add that
//!   then finds the hint `QUEUED` (and returns, taking the item for
//!   queued) is followed by operations that see the pending claim and wait
//!   on that small lock for it, so an add that returned is never missing
//!   from a `try_get`, a `len` or a shutdown that comes after it.
//!   A consumer about to sleep announces it in
//!   `consumers_waiting`, then looks for claims; a claiming add looks at
//!   `consumers_waiting` after handing its claim over and, if anyone may
//!   sleep, takes the lock to wake them. Both sides put a sequentially
//!   consistent fence between their store and their load, so one of them
//!   always sees the other (`tests/loom.rs` checks it).
//!
//! The lock holder changes states under the lock, with sequentially
//! consistent operations, at the same time as the change they mirror; the
//! fast path uses sequentially consistent loads and compare-and-swaps. So
//! an add that returns early is ordered before the `get` that hands the
//! item out next: whatever the adder wrote before `add`, under a lock or
//! with sequentially consistent atomics (how threads share data in safe
//! Rust, and how informers' stores are shared), is visible to the worker
//! that processes the item (the stress test and `tests/loom.rs` check
//! this). An add that returns early writes nothing, so it cannot publish a
//! relaxed or release store of its own: as with any read-only check, such
//! a store needs a lock or `SeqCst` to pair with the worker.
//! The fast path writes only when no metrics are recorded (they count such
//! adds) and before shutdown.
//!
//! The table holds at most [`SLOTS`] hints. A hint stays published (idle)
//! after its item leaves the queue, so that the item, if it comes back,
//! reuses it; it is replaced by the next hot item of its slot. So the
//! table keeps copies of at most [`SLOTS`] recently hot items, and the
//! claims buffer at most one entry per hint.

use std::borrow::Borrow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::sync::{AtomicU8, AtomicUsize, HintSlot, Mutex};

/// Slots of the hint table (a power of two).
/// Large enough that a thousand hot keys rarely share a slot (about 3% do);
/// allocated (128 KiB) when the first hint is published.
#[cfg(not(any(test, loom)))]
pub(crate) const SLOTS: usize = 16384;
/// Unit and model-checking tests use a tiny table, so that hot items share
/// slots and displace each other's hints all the time.
#[cfg(any(test, loom))]
pub(crate) const SLOTS: usize = 8;

/// Gone from the queue: an add must take the lock.
pub(crate) const IDLE: u8 = 0;
/// Waiting in the queue.
pub(crate) const QUEUED: u8 = 1;
/// Being processed and dirty.
pub(crate) const DIRTY: u8 = 2;
/// Being processed, not dirty.
pub(crate) const PROCESSING: u8 = 3;

/// What a lock-free add of a hot item did.
pub(crate) enum HotAdd {
    /// Nothing more to do (it was waiting or dirty, or is now dirty).
    Done,
    /// The item was gone and is now claimed (`QUEUED`) and handed to
    /// [`Claims`], to be merged into the queue under the lock.
    Claimed,
    /// Take the locked path.
    Locked,
}

/// What the locked path found for an item that is neither waiting nor
/// being processed.
pub(crate) enum Reclaim<T> {
    /// Its idle hint, now `QUEUED`, to attach to the new entry.
    Hint(Arc<Hint<T>>),
    /// A lock-free add claimed it a moment ago: it is as good as queued.
    Claimed,
    /// No hint.
    None,
}

/// Hot items re-added without the lock, waiting to be merged into the
/// queue (under the lock, by the next locked operation, in claim order).
/// Holds at most one entry per claimed hint.
pub(crate) struct Claims<T> {
    buf: Mutex<Vec<Arc<Hint<T>>>>,
    pending: AtomicUsize,
}

impl<T> Default for Claims<T> {
    fn default() -> Self {
        Self {
            buf: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
        }
    }
}

impl<T> Claims<T> {
    /// Claims the idle `hint` (`IDLE` to `QUEUED`) and hands it over, as
    /// one step for every merge: the claims are marked pending before the
    /// hint turns `QUEUED`, and the buffer stays locked until it holds the
    /// hint. `Err` holds the state found instead of `IDLE`.
    pub(crate) fn claim(&self, hint: &Arc<Hint<T>>) -> Result<(), u8> {
        let mut buf = self.buf.lock();
        // Stays set while the buffer is not empty (see `Intake::push`).
        self.pending.store(1, Ordering::SeqCst);
        match hint
            .state
            .compare_exchange(IDLE, QUEUED, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => {
                buf.push(Arc::clone(hint));
                Ok(())
            }
            Err(now) => {
                if buf.is_empty() {
                    self.pending.store(0, Ordering::SeqCst);
                }
                Err(now)
            }
        }
    }

    /// Whether claims wait to be merged.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }

    /// Moves the claims into `out` (which should be empty).
    pub(crate) fn take_into(&self, out: &mut Vec<Arc<Hint<T>>>) {
        let mut buf = self.buf.lock();
        std::mem::swap(&mut *buf, out);
        self.pending.store(0, Ordering::SeqCst);
    }
}

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

    /// The item.
    pub(crate) fn item(&self) -> &T {
        &self.item
    }

    /// The item's hash.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// Sets the state (queue lock held).
    #[inline]
    pub(crate) fn set(&self, state: u8) {
        self.state.store(state, Ordering::SeqCst);
    }

    /// Marks a processed item dirty. Returns false if it already was.
    #[inline]
    pub(crate) fn mark_dirty(&self) -> bool {
        self.state
            .compare_exchange(PROCESSING, DIRTY, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Ends processing (queue lock held): returns whether the item was
    /// dirty (then it is `QUEUED` again), else it is now `IDLE`.
    #[inline]
    pub(crate) fn finish(&self) -> bool {
        match self
            .state
            .compare_exchange(PROCESSING, IDLE, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => false,
            Err(_) => {
                self.state.store(QUEUED, Ordering::SeqCst);
                true
            }
        }
    }
}

/// The table of published hints.
pub(crate) struct Hints<T> {
    slots: OnceLock<Box<[HintSlot<Hint<T>>]>>,
    /// Number of occupied slots; the fast path is skipped while it is zero.
    published: AtomicUsize,
}

impl<T> Default for Hints<T> {
    fn default() -> Self {
        Self {
            slots: OnceLock::new(),
            published: AtomicUsize::new(0),
        }
    }
}

impl<T> Hints<T> {
    #[inline]
    fn slot(&self, hash: u64) -> Option<&HintSlot<Hint<T>>> {
        // The top bits: hashbrown uses the low ones for its buckets.
        self.slots.get()?.get((hash >> 50) as usize & (SLOTS - 1))
    }

    /// Adds `item` without the lock if it is hot: done if it is waiting or
    /// dirty (nothing to do) or was being processed and is now marked
    /// dirty; claimed into `claims` if it was gone (both only when
    /// `may_write`).
    #[inline]
    pub(crate) fn try_add<Q>(
        &self,
        item: &Q,
        hash: u64,
        may_write: bool,
        claims: &Claims<T>,
    ) -> HotAdd
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        if self.published.load(Ordering::Relaxed) == 0 {
            return HotAdd::Locked;
        }
        let Some(slot) = self.slot(hash) else {
            return HotAdd::Locked;
        };
        let guard = slot.load();
        let Some(hint) = &*guard else {
            return HotAdd::Locked;
        };
        if hint.hash != hash || hint.item.borrow() != item {
            return HotAdd::Locked;
        }
        let mut state = hint.state.load(Ordering::SeqCst);
        loop {
            let result = match state {
                QUEUED | DIRTY => return HotAdd::Done,
                PROCESSING if may_write => hint
                    .state
                    .compare_exchange(PROCESSING, DIRTY, Ordering::SeqCst, Ordering::SeqCst)
                    .map(|_| HotAdd::Done),
                IDLE if may_write => claims.claim(hint).map(|()| HotAdd::Claimed),
                _ => return HotAdd::Locked,
            };
            match result {
                Ok(done) => return done,
                Err(now) => state = now,
            }
        }
    }

    /// Publishes `hint` unless its slot holds another live hint (queue lock
    /// held: all writers of the table hold it).
    pub(crate) fn publish(&self, hint: &Arc<Hint<T>>) {
        self.slots
            .get_or_init(|| (0..SLOTS).map(|_| HintSlot::empty()).collect());
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

    /// The published, idle hint of `item`, now `QUEUED` again: an item
    /// that comes back after it left the queue reuses its hint (queue lock
    /// held).
    pub(crate) fn reclaim<Q>(&self, item: &Q, hash: u64) -> Reclaim<T>
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        if self.published.load(Ordering::Relaxed) == 0 {
            return Reclaim::None;
        }
        let Some(slot) = self.slot(hash) else {
            return Reclaim::None;
        };
        let guard = slot.load();
        let Some(hint) = guard.as_ref() else {
            return Reclaim::None;
        };
        if hint.hash != hash || hint.item.borrow() != item {
            return Reclaim::None;
        }
        match hint
            .state
            .compare_exchange(IDLE, QUEUED, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => Reclaim::Hint(Arc::clone(hint)),
            // Only a lock-free add moves a hint away from IDLE without the
            // lock: it claimed the item and will hand it over.
            Err(QUEUED) => Reclaim::Claimed,
            Err(_) => Reclaim::None,
        }
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
impl<T> Hint<T> {
    /// The state (tests).
    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<T> Hints<T> {
        fn covers<Q>(&self, item: &Q, hash: u64) -> bool
        where
            T: Borrow<Q>,
            Q: ?Sized + Eq,
        {
            matches!(
                self.try_add(item, hash, false, &Claims::default()),
                HotAdd::Done
            )
        }
    }

    #[test]
    fn covers_only_published_live_hints_of_the_same_item() {
        let hints = Hints::<String>::default();
        let claims = Claims::default();
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
        // processing: marked dirty without the lock, only when allowed
        a.set(PROCESSING);
        assert!(matches!(
            hints.try_add("a", h, false, &claims),
            HotAdd::Locked
        ));
        assert!(matches!(hints.try_add("a", h, true, &claims), HotAdd::Done));
        assert_eq!(a.state.load(Ordering::SeqCst), DIRTY);
        assert!(a.finish());
        assert_eq!(a.state.load(Ordering::SeqCst), QUEUED);
        a.set(PROCESSING);
        assert!(!a.finish());
        assert_eq!(a.state.load(Ordering::SeqCst), IDLE);
        a.set(DIRTY);
        // a live hint is not displaced by another one of the same slot
        let b = Hint::new("b".to_owned(), h, QUEUED);
        hints.publish(&b);
        assert!(hints.covers("a", h));
        assert!(!hints.covers("b", h));
        // gone: idle, still published, reclaimed by the next add of "a"
        a.set(IDLE);
        assert!(!hints.covers("a", h));
        assert!(matches!(hints.reclaim("b", h), Reclaim::None));
        let Reclaim::Hint(again) = hints.reclaim("a", h) else {
            panic!("not reclaimed")
        };
        assert!(Arc::ptr_eq(&again, &a));
        assert!(hints.covers("a", h));
        assert!(
            matches!(hints.reclaim("a", h), Reclaim::Claimed),
            "a live hint is not reclaimed twice"
        );
        // a gone item is claimed by a lock-free add
        a.set(IDLE);
        assert!(!claims.has_pending());
        assert!(matches!(
            hints.try_add("a", h, true, &claims),
            HotAdd::Claimed
        ));
        assert!(claims.has_pending());
        let mut claimed = Vec::new();
        claims.take_into(&mut claimed);
        assert!(matches!(&claimed[..], [c] if Arc::ptr_eq(c, &a)));
        assert!(!claims.has_pending());
        assert!(matches!(hints.try_add("a", h, true, &claims), HotAdd::Done));
        // an idle hint gives its slot to the next hot item
        a.set(IDLE);
        hints.publish(&b);
        assert!(hints.covers("b", h));
    }
}
