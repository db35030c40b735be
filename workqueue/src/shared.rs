//! What every handle of one queue shares: the locked [`Inner`] (queue state,
//! waiters, scheduled items, metrics bookkeeping), the condition variables
//! threads sleep on, the hasher, the clock, the hint table and claims of
//! the lock-free path, the `add_after` intake, and the signal of the
//! background thread. [`Locked`] is the lock guard through which every
//! locked operation goes: [`Shared::lock`] merges the claims of lock-free
//! adds and releases due delayed items first, and the guard wakes parked
//! tasks only after the lock is released.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use hashbrown::DefaultHashBuilder;

use crate::clock::Clock;
use crate::delay::DelayHeap;
use crate::hints::{Claims, Hint, Hints, HotAdd};
use crate::housekeeper::Signal;
use crate::intake::{Incoming, Intake};
use crate::metrics::recorder::Recorder;
use crate::state::{AddOutcome, DoneOutcome, State};
use crate::sync::{self, AtomicBool, AtomicUsize, Condvar, Mutex, MutexGuard};
use crate::waiters::Waiters;
use crate::Item;

/// Everything behind the queue lock.
pub(crate) struct Inner<T> {
    pub(crate) state: State<T>,
    pub(crate) waiters: Waiters,
    /// Scheduled items, for delaying queues.
    pub(crate) delay: Option<DelayHeap<T>>,
    /// Metrics bookkeeping, for named queues with a metrics provider.
    pub(crate) metrics: Option<Recorder<T>>,
    /// Whether the background thread runs.
    pub(crate) housekeeper_running: bool,
    /// Spare buffer swapped with the intake's when merging.
    merge_buf: Vec<Incoming<T>>,
    /// Delayed items released in the current hold of the lock, and the
    /// most in any hold (tests).
    #[cfg(test)]
    pub(crate) released_per_hold: (usize, usize),
}

/// Keeps what it wraps on cache lines of its own, so that writes under the
/// lock do not slow down the lock-free reads of the fields beside it.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// The state shared by all handles of one queue.
pub(crate) struct Shared<T> {
    inner: Padded<Mutex<Inner<T>>>,
    pub(crate) items_cv: Padded<Condvar>,
    pub(crate) drain_cv: Condvar,
    hasher: DefaultHashBuilder,
    /// Lock-free answers for adds of hot items.
    pub(crate) hints: Hints<T>,
    /// Hot items re-added without the lock, not merged yet.
    pub(crate) claims: Padded<Claims<T>>,
    /// Consumers (threads and tasks) that may be asleep; an over-estimate.
    /// A lock-free add that leaves a claim takes the lock to wake one when
    /// this is not zero.
    pub(crate) consumers_waiting: AtomicUsize,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) name: String,
    /// The background thread's signal, for queues that may have one.
    pub(crate) signal: Option<Arc<Signal>>,
    /// Items scheduled by `add_after`, not merged into the heap yet.
    pub(crate) intake: Option<Padded<Intake<T>>>,
    /// Mirrors the state's flag, for `add_after` (which does not lock).
    pub(crate) shutting_down: AtomicBool,
    /// Whether the background thread was started (read without the lock).
    pub(crate) housekeeper_started: AtomicBool,
    /// Whether the queue records metrics.
    has_metrics: bool,
    /// The retries metric, counted without the lock.
    pub(crate) retries: Option<Box<dyn crate::metrics::CounterMetric>>,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // The last handle is gone: the background thread must stop.
        if let Some(signal) = &self.signal {
            signal.close();
        }
    }
}

impl<T: Item> Shared<T> {
    pub(crate) fn new(
        name: String,
        clock: Arc<dyn Clock>,
        delay: bool,
        metrics: Option<Recorder<T>>,
        retries: Option<Box<dyn crate::metrics::CounterMetric>>,
    ) -> Self {
        let signal = (delay || metrics.is_some()).then(|| Arc::new(Signal::default()));
        let origin = clock.now();
        let has_metrics = metrics.is_some();
        Self {
            inner: Padded(Mutex::new(Inner {
                state: State::default(),
                waiters: Waiters::default(),
                delay: delay.then(|| DelayHeap::new(origin)),
                metrics,
                housekeeper_running: false,
                merge_buf: Vec::new(),
                #[cfg(test)]
                released_per_hold: (0, 0),
            })),
            items_cv: Padded(Condvar::new()),
            drain_cv: Condvar::new(),
            hasher: DefaultHashBuilder::default(),
            hints: Hints::default(),
            claims: Padded(Claims::default()),
            consumers_waiting: AtomicUsize::new(0),
            clock,
            name,
            signal,
            intake: delay.then(|| Padded(Intake::new(origin))),
            shutting_down: AtomicBool::new(false),
            housekeeper_started: AtomicBool::new(false),
            has_metrics,
            retries,
        }
    }

    /// The lock-free add of a hot item (see [`crate::hints`]); false when
    /// the add must take the lock. Marking an item dirty without the lock is
    /// only allowed when no metrics are recorded (they count such adds) and
    /// before shutdown (adds after it are dropped).
    #[inline]
    pub(crate) fn try_add_hot<Q>(&self, item: &Q, hash: u64) -> bool
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let may_write = !self.has_metrics && !self.shutting_down.load(Ordering::SeqCst);
        match self.hints.try_add(item, hash, may_write, &self.claims) {
            HotAdd::Done => true,
            HotAdd::Locked => false,
            HotAdd::Claimed => {
                // Either a consumer about to sleep sees the claim, or we
                // see it and wake it (see `announce_sleep`).
                sync::fence(Ordering::SeqCst);
                if self.consumers_waiting.load(Ordering::SeqCst) > 0 {
                    drop(self.lock());
                }
                true
            }
        }
    }

    /// Counts a consumer that may go to sleep (when `count`), before it
    /// looks for claims: a fence between the count and the look, as
    /// between a claim and the claimer's look at the count, so that one of
    /// the two sides always sees the other.
    #[inline]
    pub(crate) fn announce_sleep(&self, count: bool) {
        if count {
            self.consumers_waiting.fetch_add(1, Ordering::SeqCst);
        }
        sync::fence(Ordering::SeqCst);
    }

    /// The hash of an item, as every table of this queue computes it.
    #[inline]
    pub(crate) fn hash<Q: ?Sized + Hash>(&self, item: &Q) -> u64 {
        self.hasher.hash_one(item)
    }

    /// Locks the queue, merging the claims of lock-free adds and releasing
    /// delayed items that are due, at most [`RELEASE_CHUNK`] of them (the
    /// rest go at the next lock, in due order: a consumer holding the lock
    /// to release thousands of items would keep every other consumer from
    /// the first of them).
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_, T> {
        let mut locked = self.lock_only();
        locked.merge_claims();
        locked.release_due(RELEASE_CHUNK);
        locked
    }

    /// Locks the queue like [`Shared::lock`], then releases every item
    /// due now, [`RELEASE_CHUNK`] per hold of the lock (for counts: `len`,
    /// `scheduled_len`, `Debug`).
    pub(crate) fn lock_released(&self) -> Locked<'_, T> {
        let mut locked = self.lock_only();
        locked.merge_claims();
        locked.merge_intake();
        if locked.guard.delay.is_some() {
            let now = self.clock.now();
            locked.release_all_due_in_chunks(now);
        }
        locked
    }

    /// Locks the queue without looking at the clock.
    #[inline]
    pub(crate) fn lock_only(&self) -> Locked<'_, T> {
        #[allow(unused_mut)]
        let mut guard = self.inner.lock();
        #[cfg(test)]
        {
            guard.released_per_hold.0 = 0;
        }
        Locked {
            guard,
            wakers: Vec::new(),
            shared: self,
        }
    }
}

/// The most delayed items one hold of the lock moves into the queue, in
/// [`Shared::lock`] and in each step of the background thread (about 0.1 ms
/// of work).
pub(crate) const RELEASE_CHUNK: usize = 256;

/// The queue lock, held; see the module documentation.
pub(crate) struct Locked<'a, T: Item> {
    pub(crate) guard: MutexGuard<'a, Inner<T>>,
    /// Tasks to wake once the lock is released.
    pub(crate) wakers: Vec<Waker>,
    pub(crate) shared: &'a Shared<T>,
}

impl<T: Item> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        if !self.wakers.is_empty() {
            let wakers = std::mem::take(&mut self.wakers);
            sync::unlocked(&mut self.guard, || wakers.into_iter().for_each(Waker::wake));
        }
    }
}

impl<T: Item> Locked<'_, T> {
    /// Adds an owned item.
    #[inline]
    pub(crate) fn add(&mut self, item: T, hash: u64) -> AddOutcome {
        if self.guard.metrics.is_some() {
            // Metrics need the item after the state took it.
            return self.add_ref(&item, hash);
        }
        let outcome = self.guard.state.add(item, hash, &self.shared.hints);
        if outcome == AddOutcome::Queued {
            self.wake_one();
        }
        outcome
    }

    /// Adds a borrowed item, cloning it only if it is queued.
    #[inline]
    pub(crate) fn add_ref<Q>(&mut self, item: &Q, hash: u64) -> AddOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = T>,
    {
        let inner = &mut *self.guard;
        let outcome = inner.state.add_ref(item, hash, &self.shared.hints);
        if let Some(m) = &mut inner.metrics {
            let dirty = match outcome {
                AddOutcome::Queued => inner.state.last_queued(),
                AddOutcome::MarkedDirty => inner.state.processing_item(item, hash),
                _ => None,
            };
            if let Some(dirty) = dirty {
                m.on_add(dirty);
            }
        }
        if outcome == AddOutcome::Queued {
            self.wake_one();
        }
        outcome
    }

    /// Wakes one item waiter, if any waits.
    #[inline]
    fn wake_one(&mut self) {
        let inner = &mut *self.guard;
        if inner.waiters.any() {
            inner
                .waiters
                .wake_one(&self.shared.items_cv, &mut self.wakers);
        }
    }

    /// Hands out the first waiting item.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<T> {
        let inner = &mut *self.guard;
        let (item, _hash) = inner.state.pop()?;
        if let Some(m) = &mut inner.metrics {
            m.on_get(&item);
        }
        Some(item)
    }

    /// Ends the processing of an item.
    #[inline]
    pub(crate) fn done<Q>(&mut self, item: &Q, hash: u64) -> DoneOutcome
    where
        T: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let inner = &mut *self.guard;
        let outcome = inner.state.done(item, hash);
        match outcome {
            DoneOutcome::NotProcessing => return outcome,
            DoneOutcome::Requeued => {
                if inner.waiters.any() {
                    inner
                        .waiters
                        .wake_one(&self.shared.items_cv, &mut self.wakers);
                }
            }
            DoneOutcome::Finished => {}
        }
        if let Some(m) = &mut inner.metrics {
            m.on_done(item);
        }
        if inner.state.processing_len() == 0 && inner.state.is_draining() {
            inner
                .waiters
                .wake_drainers(&self.shared.drain_cv, &mut self.wakers);
        }
        outcome
    }

    /// Queues the items that lock-free adds claimed.
    #[inline]
    pub(crate) fn merge_claims(&mut self) {
        if !self.shared.claims.has_pending() {
            return;
        }
        let mut batch: Vec<Arc<Hint<T>>> = Vec::new();
        self.shared.claims.take_into(&mut batch);
        for hint in batch {
            let outcome = self.guard.state.add_claimed(hint, &self.shared.hints);
            if outcome == crate::state::AddOutcome::Queued {
                self.wake_one();
            }
        }
    }

    /// Merges the intake into the heap.
    #[inline]
    pub(crate) fn merge_intake(&mut self) {
        let Some(intake) = &self.shared.intake else {
            return;
        };
        if !intake.has_pending() {
            return;
        }
        let inner = &mut *self.guard;
        let mut batch = std::mem::take(&mut inner.merge_buf);
        intake.take_into(&mut batch);
        if let Some(heap) = &mut inner.delay {
            if !inner.state.is_shutting_down() {
                for Incoming { item, hash, due } in batch.drain(..) {
                    heap.schedule(item, hash, due);
                }
            }
        }
        batch.clear();
        inner.merge_buf = batch;
    }

    /// Moves at most `limit` delayed items that are due into the queue,
    /// earliest first. Returns whether more are due.
    #[inline]
    pub(crate) fn release_due(&mut self, limit: usize) -> bool {
        self.merge_intake();
        let Some(delay) = &self.guard.delay else {
            return false;
        };
        if delay.next_due().is_none() {
            return false;
        }
        let now = self.shared.clock.now();
        self.release_due_at(now, limit)
    }

    /// Moves at most `limit` delayed items due at `now` into the queue,
    /// earliest first. Returns whether more are due.
    #[inline]
    pub(crate) fn release_due_at(&mut self, now: Instant, limit: usize) -> bool {
        let Some(next) = self.guard.delay.as_ref().and_then(|d| d.next_due()) else {
            return false;
        };
        if next > now {
            return false;
        }
        let mut left = limit;
        while left > 0 {
            let Some((item, hash)) = self.guard.delay.as_mut().and_then(|d| d.pop_due(now)) else {
                return false;
            };
            self.add(item, hash);
            left -= 1;
            #[cfg(test)]
            {
                let (hold, most) = &mut self.guard.released_per_hold;
                *hold += 1;
                *most = (*most).max(*hold);
            }
        }
        // `next_due` may name a stale entry: then the next call finds
        // nothing, which is harmless.
        self.guard
            .delay
            .as_ref()
            .and_then(|d| d.next_due())
            .is_some_and(|next| next <= now)
    }

    /// Releases every delayed item due at `now`, [`RELEASE_CHUNK`] at a
    /// time, handing the lock to waiting threads between chunks (fairly:
    /// a consumer blocked on the lock gets it before this thread takes it
    /// back), so consumers take the first released items while the rest
    /// are still being released.
    pub(crate) fn release_all_due_in_chunks(&mut self, now: Instant) {
        while self.release_due_at(now, RELEASE_CHUNK) {
            let wakers = std::mem::take(&mut self.wakers);
            sync::unlocked_fair(&mut self.guard, || {
                wakers.into_iter().for_each(Waker::wake);
            });
            #[cfg(test)]
            {
                self.guard.released_per_hold.0 = 0;
            }
            if self.guard.state.is_shutting_down() {
                return;
            }
        }
    }

    /// When, in real time, the next scheduled item is due.
    pub(crate) fn next_due_deadline(&self) -> Option<Instant> {
        let due = self.guard.delay.as_ref()?.next_due()?;
        let wait = due.saturating_duration_since(self.shared.clock.now());
        Some(crate::clock::saturating_add(Instant::now(), wait))
    }

    /// Starts shutting down (`drain` as in client-go).
    pub(crate) fn shut_down(&mut self, drain: bool) {
        let inner = &mut *self.guard;
        inner.state.shut_down(drain);
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        if let Some(delay) = &mut inner.delay {
            delay.clear();
        }
        if let Some(intake) = &self.shared.intake {
            intake.clear();
        }
        inner
            .waiters
            .wake_all(&self.shared.items_cv, &mut self.wakers);
        if !drain || inner.state.processing_len() == 0 {
            inner
                .waiters
                .wake_drainers(&self.shared.drain_cv, &mut self.wakers);
        }
        if let Some(signal) = &self.shared.signal {
            signal.close();
        }
    }

    /// Whether a drain is over (or was cancelled by a plain shutdown).
    pub(crate) fn drained(&self) -> bool {
        self.guard.state.processing_len() == 0 || !self.guard.state.is_draining()
    }
}
