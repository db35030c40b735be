//! [`RateLimitingQueue`]: a [`DelayingQueue`] whose retries wait what a
//! [`RateLimiter`] says (client-go's `RateLimitingInterface`). A worker
//! calls `add_rate_limited` when processing an item failed and `forget`
//! when it succeeded.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::QueueConfig;
use crate::delaying_queue::DelayingQueue;
use crate::queue::Queue;
use crate::rate_limiter::{default_controller_rate_limiter, RateLimiter};
use crate::Item;

/// A delaying queue with a rate limiter, and every method of
/// [`DelayingQueue`] and [`Queue`] (also reachable through
/// [`RateLimitingQueue::delaying_queue`] and [`RateLimitingQueue::queue`]);
/// clones are handles to the same queue.
///
/// ```
/// use kcontrol_workqueue::RateLimitingQueue;
///
/// let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
/// queue.add("default/a".to_owned());
/// let key = queue.get().unwrap();
/// // processing failed: retry after the limiter's delay (5 ms first)
/// queue.add_rate_limited(key.clone());
/// queue.done(&key);
/// assert_eq!(queue.num_requeues(&key), 1);
/// let key = queue.get().unwrap();
/// // processing succeeded: reset the backoff
/// queue.forget(&key);
/// queue.done(&key);
/// # queue.shut_down();
/// ```
pub struct RateLimitingQueue<T: Item> {
    queue: DelayingQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T: Item> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<T: Item> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RateLimitingQueue")
            .field(&self.queue)
            .finish()
    }
}

impl<T: Item> Default for RateLimitingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> RateLimitingQueue<T> {
    /// An unnamed queue with [`default_controller_rate_limiter`].
    pub fn new() -> Self {
        Self::with_rate_limiter(default_controller_rate_limiter())
    }

    /// An unnamed queue with `limiter`.
    pub fn with_rate_limiter(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, QueueConfig::new())
    }

    /// A queue with `limiter` and the name, metrics provider and clock of
    /// `config` (client-go's `NewTypedRateLimitingQueueWithConfig`).
    pub fn with_config(limiter: impl RateLimiter<T> + 'static, config: QueueConfig<T>) -> Self {
        Self {
            queue: DelayingQueue::with_config(config),
            limiter: Arc::new(limiter),
        }
    }

    /// The delaying queue handle.
    pub fn delaying_queue(&self) -> &DelayingQueue<T> {
        &self.queue
    }

    /// The plain queue handle.
    pub fn queue(&self) -> &Queue<T> {
        self.queue.queue()
    }

    /// The rate limiter.
    pub fn rate_limiter(&self) -> &Arc<dyn RateLimiter<T>> {
        &self.limiter
    }

    /// Adds `item` after the delay the rate limiter gives it (and counts a
    /// retry of it). Dropped after shutdown (the retry is still counted).
    pub fn add_rate_limited(&self, item: T) {
        if self.queue.clock_is_real() {
            // one clock read for the limiter and the schedule
            let now = Instant::now();
            let delay = self.limiter.when_at(&item, now);
            self.queue.add_after_from(item, || now, delay);
        } else {
            let delay = self.limiter.when(&item);
            self.queue.add_after(item, delay);
        }
    }

    /// Resets the rate limiter's memory of `item` (call it when processing
    /// succeeded). Harmless for an unknown item. It does not remove the item
    /// from the queue. Takes the item as `get` gave it, like `done`.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was retried since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// Adds `item` once `delay` has passed (client-go `AddAfter`); see
    /// [`DelayingQueue::add_after`].
    pub fn add_after(&self, item: T, delay: Duration) {
        self.queue.add_after(item, delay);
    }

    /// Number of items scheduled for later; see
    /// [`DelayingQueue::scheduled_len`].
    pub fn scheduled_len(&self) -> usize {
        self.queue.scheduled_len()
    }

    crate::forward::queue_methods!();
}
