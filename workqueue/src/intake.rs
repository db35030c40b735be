//! Where `add_after` drops scheduled items: a short vector under its own
//! small lock, merged into the delay heap (under the queue lock) by the
//! next queue operation, by the background thread, or by the producer that
//! fills it. A producer never waits on the queue lock that consumers use,
//! so consumers keep getting items while producers schedule many.
//!
//! The background thread publishes the time it will next wake (`armed`);
//! a producer scheduling an earlier item kicks it. Both sides put a
//! sequentially consistent fence between their store and their load (the
//! thread stores `armed`, then looks at `pending`; a producer bumps
//! `pending`, then reads `armed`), so
//! either the thread sees the new item before sleeping or the producer sees
//! the thread's deadline and kicks it. A merge by another thread bumps
//! `merges` before emptying the buffer, so the thread also notices items
//! that others merged while it was deciding how long to sleep.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::sync::{fence, AtomicU64, AtomicUsize, Mutex};

/// The producer that brings the intake to this size merges it.
pub(crate) const MERGE_AT: usize = 256;

/// "No deadline": the background thread sleeps until kicked.
pub(crate) const NOT_ARMED: u64 = u64::MAX;

/// A scheduled item on its way to the heap.
pub(crate) struct Incoming<T> {
    pub(crate) item: T,
    pub(crate) hash: u64,
    pub(crate) due: Instant,
}

/// Scheduled items not merged yet; see the module documentation.
pub(crate) struct Intake<T> {
    buf: Mutex<Vec<Incoming<T>>>,
    pending: AtomicUsize,
    /// Bumped by every merge (before the merge empties the buffer).
    merges: AtomicU64,
    /// When the background thread wakes next, in nanoseconds since
    /// `origin`; 0 while it is awake, [`NOT_ARMED`] when it has no deadline.
    armed: AtomicU64,
    origin: Instant,
}

impl<T> Intake<T> {
    pub(crate) fn new(origin: Instant) -> Self {
        Self {
            buf: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
            merges: AtomicU64::new(0),
            armed: AtomicU64::new(NOT_ARMED),
            origin,
        }
    }

    /// Nanoseconds from the origin to `at` (saturating).
    pub(crate) fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Adds an item; returns the number of items waiting to be merged.
    pub(crate) fn push(&self, incoming: Incoming<T>) -> usize {
        let mut buf = self.buf.lock();
        buf.push(incoming);
        let len = buf.len();
        if len == 1 {
            // Written once per batch: while the buffer is not empty, the
            // flag stays set (only a merge, which takes everything, clears
            // it), so later pushes need not touch the shared cache line.
            self.pending.store(1, Ordering::SeqCst);
        }
        len
    }

    /// Whether the background thread must be kicked for an item due at
    /// `due` (it would sleep past it).
    pub(crate) fn needs_kick(&self, due: Instant) -> bool {
        let due = self.nanos(due);
        // Between our `push` and our look at `armed`, as in `arm`: one of
        // the two sides sees the other.
        fence(Ordering::SeqCst);
        // Read first: the line stays shared while the thread sleeps.
        self.armed.load(Ordering::SeqCst) > due && self.armed.fetch_min(due, Ordering::SeqCst) > due
    }

    /// Whether items wait to be merged (a hint unless called by the thread
    /// that pushed, or after `arm`).
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }

    /// Moves the waiting items into `out` (which should be empty).
    pub(crate) fn take_into(&self, out: &mut Vec<Incoming<T>>) {
        self.merges.fetch_add(1, Ordering::SeqCst);
        let mut buf = self.buf.lock();
        std::mem::swap(&mut *buf, out);
        self.pending.store(0, Ordering::SeqCst);
    }

    /// How many merges happened: the background thread looks again before
    /// sleeping if another thread merged since its own look (it may have
    /// merged an item due before the thread's deadline).
    pub(crate) fn merges(&self) -> u64 {
        self.merges.load(Ordering::SeqCst)
    }

    /// The background thread is awake (no kicks needed).
    pub(crate) fn wake(&self) {
        self.armed.store(0, Ordering::SeqCst);
    }

    /// The background thread will sleep until `deadline` (`None`: until
    /// kicked).
    pub(crate) fn arm(&self, deadline: Option<Instant>) {
        let at = deadline.map_or(NOT_ARMED, |d| self.nanos(d));
        self.armed.store(at, Ordering::SeqCst);
        // Before the caller's look at `pending` (see `needs_kick`).
        fence(Ordering::SeqCst);
    }

    /// Drops everything waiting (shutdown).
    pub(crate) fn clear(&self) {
        let dropped = std::mem::take(&mut *self.buf.lock());
        self.pending.store(0, Ordering::SeqCst);
        drop(dropped);
    }
}
