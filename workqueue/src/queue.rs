//! [`Queue`]: the deduplicating FIFO work queue (client-go's
//! `workqueue.Interface`), shared by cheap clones of one handle.
//!
//! Rules (DESIGN.md, WQ1–WQ4):
//! - `add` of an item already waiting does nothing; items are handed out
//!   in the order they were first added.
//! - `add` of an item being processed marks it dirty: it is queued again,
//!   once, when its `done` comes.
//! - an item is never handed to two consumers at the same time.
//! - after `shut_down`, adds are dropped; `get` hands out what is still
//!   queued, then reports the shutdown.
//!
//! Misuse is harmless: `done` on an item that is not being processed (never
//! handed out, or already done) does nothing; `add` after shutdown drops the
//! item. Nothing panics and nothing is kept.

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::saturating_add;
use crate::config::QueueConfig;
use crate::get::{Drain, Get, ItemStream};
use crate::shared::Shared;
use crate::Item;

/// Result of a [`Queue::try_get`] or [`Queue::get_timeout`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TryGet<T> {
    /// An item, now being processed: call `done` when finished with it.
    Item(T),
    /// Nothing waiting (or nothing came in time).
    Empty,
    /// The queue is shut down and nothing is left.
    ShutDown,
}

impl<T> TryGet<T> {
    /// The item, if one was handed out.
    pub fn into_item(self) -> Option<T> {
        match self {
            Self::Item(item) => Some(item),
            Self::Empty | Self::ShutDown => None,
        }
    }
}

/// A deduplicating FIFO work queue. Clones are handles to the same queue.
///
/// ```
/// use kcontrol_workqueue::Queue;
///
/// let queue: Queue<String> = Queue::new();
/// queue.add("default/a".to_owned());
/// queue.add("default/a".to_owned()); // already waiting: no-op
/// assert_eq!(queue.len(), 1);
/// let key = queue.get().unwrap(); // blocks while the queue is empty
/// queue.done(&key);
/// queue.shut_down();
/// assert!(queue.get().is_none());
/// ```
pub struct Queue<T: Item> {
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T: Item> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Item> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut locked = self.shared.lock();
        locked.release_all_due();
        f.debug_struct("Queue")
            .field("name", &self.shared.name)
            .field("len", &locked.guard.state.len())
            .field("processing", &locked.guard.state.processing_len())
            .field("shutting_down", &locked.guard.state.is_shutting_down())
            .finish()
    }
}

impl<T: Item> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> Queue<T> {
    /// An unnamed queue without metrics.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A queue with the name, metrics provider and clock of `config`.
    pub fn with_config(config: QueueConfig<T>) -> Self {
        Self::build(config, false)
    }

    pub(crate) fn build(config: QueueConfig<T>, delaying: bool) -> Self {
        let metrics = config.recorder();
        let retries = config.retries_metric();
        let QueueConfig { name, clock, .. } = config;
        let shared = Arc::new(Shared::new(name, clock, delaying, metrics, retries));
        let queue = Self { shared };
        {
            let mut locked = queue.shared.lock();
            let inner = &mut *locked.guard;
            if inner.metrics.is_some() {
                crate::housekeeper::ensure_running(&queue.shared, &mut inner.housekeeper);
            }
        }
        queue
    }

    /// The queue's name ("" when unnamed).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Adds an item (client-go `Add`): queued at the back unless already
    /// waiting; marked dirty if being processed; dropped after shutdown.
    ///
    /// Adding a hot item that is already waiting (the common case for a
    /// busy object) takes no lock and writes no shared memory.
    #[inline]
    pub fn add(&self, item: T) {
        let hash = self.shared.hash(&item);
        if self.shared.hints.covers(&item, hash) {
            return;
        }
        self.shared.lock().add(item, hash);
    }

    /// Adds a borrowed item, cloning it only if it is queued (for example
    /// `add_ref("ns/name")` on a `Queue<String>`): the cheapest add of an
    /// item that is often already waiting.
    #[inline]
    pub fn add_ref<Q>(&self, item: &Q)
    where
        T: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = T>,
    {
        let hash = self.shared.hash(item);
        if self.shared.hints.covers(item, hash) {
            return;
        }
        self.shared.lock().add_ref(item, hash);
    }

    /// Takes the next item, blocking the calling thread while the queue is
    /// empty (client-go `Get`). `None` once the queue is shut down and
    /// empty. Call [`Queue::done`] when finished with the item.
    ///
    /// Do not call this from an async task: use [`Queue::get_async`].
    pub fn get(&self) -> Option<T> {
        self.get_until(None).into_item()
    }

    /// Takes the next item without blocking.
    pub fn try_get(&self) -> TryGet<T> {
        let mut locked = self.shared.lock();
        loop {
            match locked.pop() {
                Some(item) => return TryGet::Item(item),
                None if locked.guard.state.is_shutting_down() => return TryGet::ShutDown,
                // Due items go to the back of the queue: release them only
                // once it is empty. Each call takes at least one item off
                // the schedule (it may have been processed: then it is
                // only marked dirty), so this ends.
                None if locked.release_due() > 0 => {}
                None => return TryGet::Empty,
            }
        }
    }

    /// Takes the next item, blocking at most `timeout`.
    pub fn get_timeout(&self, timeout: Duration) -> TryGet<T> {
        self.get_until(Some(saturating_add(Instant::now(), timeout)))
    }

    /// Blocks until an item comes, the queue shuts down or `deadline`
    /// passes. A thread waiting on a delaying queue also wakes when the
    /// next scheduled item is due, and moves it into the queue itself.
    fn get_until(&self, deadline: Option<Instant>) -> TryGet<T> {
        let mut locked = self.shared.lock();
        loop {
            match locked.pop() {
                Some(item) => return TryGet::Item(item),
                None if locked.guard.state.is_shutting_down() => return TryGet::ShutDown,
                None if locked.release_due() > 0 => continue,
                None if deadline.is_some_and(|d| Instant::now() >= d) => return TryGet::Empty,
                None => {}
            }
            let wake_at = match (locked.next_due_deadline(), deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            locked.guard.waiters.sleeping += 1;
            let cv = &self.shared.items_cv;
            let notified = match wake_at {
                Some(at) => !cv.wait_until(&mut locked.guard, at).timed_out(),
                None => {
                    cv.wait(&mut locked.guard);
                    true
                }
            };
            if !notified {
                // Not notified: take our count back.
                let waiters = &mut locked.guard.waiters;
                waiters.sleeping = waiters.sleeping.saturating_sub(1);
            }
        }
    }

    /// Takes the next item in an async task: resolves to `None` once the
    /// queue is shut down and empty. Threads blocked in [`Queue::get`] and
    /// tasks awaiting this share the items; cancelling the future loses
    /// nothing.
    pub fn get_async(&self) -> Get<'_, T> {
        Get::new(&self.shared)
    }

    /// A stream of items for async consumers; it ends once the queue is
    /// shut down and empty. Call [`Queue::done`] for each item.
    pub fn stream(&self) -> ItemStream<T> {
        ItemStream::new(self.clone())
    }

    /// Ends the processing of an item (client-go `Done`); if it was added
    /// again meanwhile, it is queued again now. Harmless for an item that
    /// is not being processed. Takes the item as `get` gave it, like
    /// [`crate::RateLimitingQueue::forget`].
    #[inline]
    pub fn done(&self, item: &T) {
        let hash = self.shared.hash(item);
        // No release of due items here: consumers release them at `get`.
        self.shared.lock().done(item, hash);
    }

    /// Number of items waiting to be handed out (not those being processed
    /// nor, on a delaying queue, those whose time has not come).
    pub fn len(&self) -> usize {
        let mut locked = self.shared.lock();
        locked.release_all_due();
        locked.guard.state.len()
    }

    /// Whether no item is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of items being processed (handed out, not yet done).
    pub fn processing_len(&self) -> usize {
        self.shared.lock().guard.state.processing_len()
    }

    /// Starts shutting down: later adds are dropped, scheduled items are
    /// forgotten, and consumers get what is queued, then `None`. Cancels a
    /// [`Queue::shut_down_with_drain`] in progress (as client-go does).
    pub fn shut_down(&self) {
        self.shared.lock().shut_down(false);
    }

    /// Shuts down like [`Queue::shut_down`], then blocks until no item is
    /// being processed. Items still waiting keep being handed out to
    /// consumers that ask. Do not call it from a worker holding an item
    /// (it would wait for itself) nor from an async task (use
    /// [`Queue::shut_down_with_drain_async`]).
    pub fn shut_down_with_drain(&self) {
        let mut locked = self.shared.lock();
        locked.shut_down(true);
        while !locked.drained() {
            locked.guard.waiters.drain_sleeping += 1;
            self.shared.drain_cv.wait(&mut locked.guard);
        }
    }

    /// [`Queue::shut_down_with_drain`] waiting at most `timeout`; returns
    /// whether the drain finished.
    pub fn shut_down_with_drain_timeout(&self, timeout: Duration) -> bool {
        let deadline = saturating_add(Instant::now(), timeout);
        let mut locked = self.shared.lock();
        locked.shut_down(true);
        while !locked.drained() {
            locked.guard.waiters.drain_sleeping += 1;
            if self
                .shared
                .drain_cv
                .wait_until(&mut locked.guard, deadline)
                .timed_out()
            {
                let waiters = &mut locked.guard.waiters;
                waiters.drain_sleeping = waiters.drain_sleeping.saturating_sub(1);
                return locked.drained();
            }
        }
        true
    }

    /// [`Queue::shut_down_with_drain`] for async tasks: shuts down at once
    /// and resolves when no item is being processed.
    pub fn shut_down_with_drain_async(&self) -> Drain<'_, T> {
        self.shared.lock().shut_down(true);
        Drain::new(&self.shared)
    }

    /// Whether the queue is shutting down (client-go `ShuttingDown`).
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().guard.state.is_shutting_down()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashSet, VecDeque};

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Add(u8),
        Get,
        Done(u8),
        ShutDown,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..12).prop_map(Op::Add),
            4 => Just(Op::Get),
            4 => (0u8..12).prop_map(Op::Done),
            1 => Just(Op::ShutDown),
        ]
    }

    /// client-go's rules, sequentially.
    #[derive(Default)]
    struct Model {
        waiting: VecDeque<u8>,
        dirty: HashSet<u8>,
        processing: HashSet<u8>,
        shut: bool,
    }

    impl Model {
        fn apply(&mut self, op: &Op) -> Option<TryGet<u8>> {
            match *op {
                Op::Add(k) if !self.shut && self.dirty.insert(k) => {
                    if !self.processing.contains(&k) {
                        self.waiting.push_back(k);
                    }
                }
                Op::Add(_) => {}
                Op::Get => {
                    return Some(match self.waiting.pop_front() {
                        Some(k) => {
                            self.dirty.remove(&k);
                            self.processing.insert(k);
                            TryGet::Item(k)
                        }
                        None if self.shut => TryGet::ShutDown,
                        None => TryGet::Empty,
                    })
                }
                Op::Done(k) => {
                    if self.processing.remove(&k) && self.dirty.contains(&k) {
                        self.waiting.push_back(k);
                    }
                }
                Op::ShutDown => self.shut = true,
            }
            None
        }
    }

    fn run(ops: &[Op]) -> Result<(), TestCaseError> {
        let queue: Queue<u8> = Queue::new();
        let mut model = Model::default();
        for (step, op) in ops.iter().enumerate() {
            let got = match *op {
                Op::Add(k) => {
                    queue.add(k);
                    None
                }
                Op::Get => Some(queue.try_get()),
                Op::Done(k) => {
                    queue.done(&k);
                    None
                }
                Op::ShutDown => {
                    queue.shut_down();
                    None
                }
            };
            prop_assert_eq!(got, model.apply(op), "step {} {:?}", step, op);
            let locked = queue.shared.lock();
            let state = &locked.guard.state;
            prop_assert_eq!(state.len(), model.waiting.len(), "step {}", step);
            if let Err(e) = state.check_hints(&queue.shared.hints) {
                return Err(TestCaseError::fail(format!("step {step} {op:?}: {e}")));
            }
        }
        Ok(())
    }

    /// WQ4: threads blocked in `get` wake at shutdown and get `None`. The
    /// test waits until all four sleep (the count only the crate sees).
    #[test]
    fn wq4_shut_down_wakes_blocked_threads() {
        let queue: Queue<u32> = Queue::new();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4).map(|_| s.spawn(|| queue.get())).collect();
            let deadline = Instant::now() + Duration::from_secs(30);
            while queue.shared.lock().guard.waiters.sleeping < 4 {
                assert!(Instant::now() < deadline, "the workers never slept");
                std::thread::yield_now();
            }
            queue.shut_down();
            for w in workers {
                assert_eq!(w.join().ok(), Some(None));
            }
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// A real queue never holds a published, set hint for an item that
        /// is not dirty (an add that returns on it would be lost). Twelve
        /// keys on the tests' eight-slot table, so hot items keep
        /// displacing each other's hints; lock-free adds, requeues and
        /// shutdown all run, and the queue answers as client-go's rules
        /// say.
        #[test]
        fn hints_mirror_the_queue_and_no_add_is_lost(ops in prop::collection::vec(op(), 1..200)) {
            run(&ops)?;
        }
    }
}
