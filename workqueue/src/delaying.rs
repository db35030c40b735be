//! [`DelayingQueue`]: a [`Queue`] that can also add an item after a delay
//! (client-go's `DelayingInterface`, WQ5). A zero delay adds at once; an
//! item scheduled twice keeps the earlier time; scheduled items are dropped
//! at shutdown.
//!
//! `add_after` only drops the item into an intake (see [`crate::intake`]),
//! so producers never wait for consumers. Scheduled items move into the
//! queue when due: by the queue's background thread (no tokio runtime
//! needed; it sleeps until the next due time, at least 200 µs, is started
//! by the first delayed add, and stops at shutdown or when the last handle
//! is dropped), by threads blocked in `get` (they wake at the next due time
//! themselves), and by any `add`, `get`, `try_get`, `len` or other
//! operation except `done` that finds them due. A timer slower than the
//! consumers is therefore never in the way of a blocking consumer.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::clock::saturating_add;
use crate::config::QueueConfig;
use crate::housekeeper;
use crate::intake::Incoming;
use crate::intake::MERGE_AT;
use crate::queue::Queue;
use crate::Item;

/// A work queue with [`DelayingQueue::add_after`]. Derefs to [`Queue`] for
/// every other operation; clones are handles to the same queue.
///
/// ```
/// use std::time::Duration;
/// use kcontrol_workqueue::DelayingQueue;
///
/// let queue: DelayingQueue<String> = DelayingQueue::new();
/// queue.add_after("default/a".to_owned(), Duration::from_millis(5));
/// assert_eq!(queue.get().as_deref(), Some("default/a")); // after ~5 ms
/// # queue.done("default/a");
/// # queue.shut_down();
/// ```
pub struct DelayingQueue<T: Item> {
    queue: Queue<T>,
}

impl<T: Item> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T: Item> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DelayingQueue").field(&self.queue).finish()
    }
}

impl<T: Item> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> Deref for DelayingQueue<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T: Item> DelayingQueue<T> {
    /// An unnamed delaying queue without metrics, on the real clock.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A delaying queue with a name, metrics provider and clock from
    /// `config` (its rate limiter is ignored).
    pub fn with_config(config: QueueConfig<T>) -> Self {
        Self {
            queue: Queue::build(config, true),
        }
    }

    /// The plain queue handle.
    pub fn queue(&self) -> &Queue<T> {
        &self.queue
    }

    /// Adds `item` once `delay` has passed (client-go `AddAfter`). A zero
    /// delay adds now; if the item is already scheduled, the earlier time
    /// wins. Dropped after shutdown. Counts as a retry in the metrics.
    pub fn add_after(&self, item: T, delay: Duration) {
        let shared = &self.queue.shared;
        if let Some(retries) = &shared.retries {
            retries.inc();
        }
        if delay.is_zero() {
            self.queue.add(item);
            return;
        }
        let (Some(intake), Some(signal)) = (&shared.intake, &shared.signal) else {
            return;
        };
        if shared.shutting_down.load(Ordering::Acquire) {
            return;
        }
        let hash = shared.hash(&item);
        let due = saturating_add(shared.clock.now(), delay);
        let pending = intake.push(Incoming { item, hash, due });
        if pending >= MERGE_AT || !shared.housekeeper_started.load(Ordering::Acquire) {
            let mut locked = shared.lock_only();
            locked.merge_intake();
            let inner = &mut *locked.guard;
            if !inner.housekeeper_running && !inner.state.is_shutting_down() {
                housekeeper::ensure_running(shared, &mut inner.housekeeper_running);
            }
        }
        if intake.needs_kick(due) {
            signal.kick();
        }
    }

    /// Number of items scheduled for later (not yet in the queue).
    pub fn scheduled_len(&self) -> usize {
        let locked = self.queue.shared.lock();
        locked.guard.delay.as_ref().map_or(0, |d| d.len())
    }
}
