//! What every handle of one queue shares: the locked [`Inner`] (queue
//! state, waiters, scheduled items, metrics bookkeeping, the timer thread's
//! deadline), the condition variables threads sleep on, the hasher, the
//! clock and the hint table of the lock-free path. [`Locked`] is the lock
//! guard through which every locked operation goes; it wakes parked tasks
//! only after the lock is released.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use hashbrown::DefaultHashBuilder;

use crate::clock::Clock;
use crate::hints::Hints;
use crate::housekeeper::{Housekeeper, Signal};
use crate::metrics::recorder::Recorder;
use crate::metrics::CounterMetric;
use crate::schedule::Schedule;
use crate::state::{AddOutcome, DoneOutcome, State};
use crate::sync::{self, Condvar, Mutex, MutexGuard};
use crate::waiters::Waiters;
use crate::Item;

/// Everything behind the queue lock.
pub(crate) struct Inner<T> {
    pub(crate) state: State<T>,
    pub(crate) waiters: Waiters,
    /// Scheduled items, for delaying queues.
    pub(crate) schedule: Option<Schedule<T>>,
    /// Metrics bookkeeping, for named queues with a metrics provider.
    pub(crate) metrics: Option<Recorder<T>>,
    /// The background thread, if it runs, and when it wakes next.
    pub(crate) housekeeper: Housekeeper,
    /// Delayed items released in the current hold of the lock, and the
    /// most in any hold (tests).
    #[cfg(test)]
    pub(crate) released_per_hold: (usize, usize),
}

/// Keeps the queue lock on cache lines of its own, so that taking it does
/// not slow down the lock-free reads of the fields beside it.
#[repr(align(128))]
struct Padded<T>(T);

/// The state shared by all handles of one queue.
pub(crate) struct Shared<T> {
    inner: Padded<Mutex<Inner<T>>>,
    pub(crate) items_cv: Condvar,
    pub(crate) drain_cv: Condvar,
    hasher: DefaultHashBuilder,
    /// Lock-free answers for adds of hot items.
    pub(crate) hints: Hints<T>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) name: String,
    /// The background thread's signal, for queues that may have one.
    pub(crate) signal: Option<Arc<Signal>>,
    /// The retries metric, counted without the lock.
    pub(crate) retries: Option<Box<dyn CounterMetric>>,
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
        delaying: bool,
        metrics: Option<Recorder<T>>,
        retries: Option<Box<dyn CounterMetric>>,
    ) -> Self {
        let signal = (delaying || metrics.is_some()).then(|| Arc::new(Signal::default()));
        let origin = clock.now();
        Self {
            inner: Padded(Mutex::new(Inner {
                state: State::default(),
                waiters: Waiters::default(),
                schedule: delaying.then(|| Schedule::new(origin)),
                metrics,
                housekeeper: Housekeeper::default(),
                #[cfg(test)]
                released_per_hold: (0, 0),
            })),
            items_cv: Condvar::new(),
            drain_cv: Condvar::new(),
            hasher: DefaultHashBuilder::default(),
            hints: Hints::default(),
            clock,
            name,
            signal,
            retries,
        }
    }

    /// The hash of an item, as every table of this queue computes it.
    #[inline]
    pub(crate) fn hash<Q: ?Sized + Hash>(&self, item: &Q) -> u64 {
        self.hasher.hash_one(item)
    }

    /// Locks the queue.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_, T> {
        #[allow(unused_mut)]
        let mut guard = self.inner.0.lock();
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

/// The most delayed items one hold of the lock moves into the queue (about
/// 0.1 ms of work): a consumer holding the lock to release thousands of
/// items would keep every other consumer from the first of them.
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
        let shared = self.shared;
        let item = inner.state.pop(|item| shared.hash(item))?;
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
        let outcome = self.guard.state.done(item, hash);
        match outcome {
            DoneOutcome::NotProcessing => return outcome,
            DoneOutcome::Requeued => self.wake_one(),
            DoneOutcome::Finished => {}
        }
        let inner = &mut *self.guard;
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

    /// Schedules `item` at `due` (`add_after`); returns whether the
    /// background thread must be started. Kicks it if it would sleep past
    /// `due`.
    pub(crate) fn schedule(&mut self, item: T, hash: u64, due: Instant) -> bool {
        let inner = &mut *self.guard;
        let Some(schedule) = &mut inner.schedule else {
            return false;
        };
        if inner.state.is_shutting_down() || !schedule.schedule(item, hash, due) {
            return false;
        }
        if !inner.housekeeper.running {
            return true;
        }
        if inner.housekeeper.wakes_at.is_none_or(|at| due < at) {
            inner.housekeeper.wakes_at = Some(due);
            if let Some(signal) = &self.shared.signal {
                signal.kick();
            }
        }
        false
    }

    /// Moves at most [`RELEASE_CHUNK`] delayed items that are due into the
    /// queue, earliest first. Returns how many it moved.
    #[inline]
    pub(crate) fn release_due(&mut self) -> usize {
        match &self.guard.schedule {
            Some(schedule) if schedule.next_due().is_some() => {
                let now = self.shared.clock.now();
                self.release_due_at(now, RELEASE_CHUNK)
            }
            _ => 0,
        }
    }

    /// Moves at most `limit` delayed items due at `now` into the queue,
    /// earliest first. Returns how many it moved.
    pub(crate) fn release_due_at(&mut self, now: Instant, limit: usize) -> usize {
        let mut moved = 0;
        while moved < limit {
            let Some((item, hash)) = self.guard.schedule.as_mut().and_then(|s| s.pop_due(now))
            else {
                break;
            };
            self.add(item, hash);
            moved += 1;
            #[cfg(test)]
            {
                let (hold, most) = &mut self.guard.released_per_hold;
                *hold += 1;
                *most = (*most).max(*hold);
            }
        }
        moved
    }

    /// Releases every delayed item due now, [`RELEASE_CHUNK`] per hold of
    /// the lock (for counts: `len`, `scheduled_len`, `Debug`).
    pub(crate) fn release_all_due(&mut self) {
        if self.guard.schedule.is_some() {
            let now = self.shared.clock.now();
            self.release_all_due_in_chunks(now);
        }
    }

    /// Releases every delayed item due at `now`, [`RELEASE_CHUNK`] at a
    /// time, letting the lock go between chunks and giving the processor
    /// away (so a consumer blocked on the lock can take it before this
    /// thread takes it back), so consumers take the first released items
    /// while the rest are still being released.
    pub(crate) fn release_all_due_in_chunks(&mut self, now: Instant) {
        while self.release_due_at(now, RELEASE_CHUNK) == RELEASE_CHUNK {
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
        let due = self.guard.schedule.as_ref()?.next_due()?;
        let wait = due.saturating_duration_since(self.shared.clock.now());
        Some(crate::clock::saturating_add(Instant::now(), wait))
    }

    /// Starts shutting down (`drain` as in client-go): forgets scheduled
    /// items, wakes every waiter and stops the background thread.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        let inner = &mut *self.guard;
        inner.state.shut_down(drain);
        if let Some(schedule) = &mut inner.schedule {
            schedule.clear();
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
