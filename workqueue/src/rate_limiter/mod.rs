//! Rate limiters (WQ6): how long an item should wait before it is retried.
//! Like client-go's `workqueue.TypedRateLimiter`: [`RateLimiter::when`]
//! is asked once per retry (and counts it), [`RateLimiter::forget`] resets
//! an item after a success, [`RateLimiter::num_requeues`] tells how many
//! retries an item had.
//!
//! | type | delay |
//! |---|---|
//! | [`ItemExponentialFailureRateLimiter`] | `base * 2^failures`, capped |
//! | [`BucketRateLimiter`] | token bucket shared by all items (reservation semantics) |
//! | [`ItemFastSlowRateLimiter`] | `fast` for the first attempts, then `slow` |
//! | [`MaxOfRateLimiter`] | the longest of several limiters |
//! | [`WithMaxWaitRateLimiter`] | another limiter's delay, capped |

mod bucket;
mod counts;
mod exponential;
mod fast_slow;
mod max_of;
mod max_wait;

use std::time::{Duration, Instant};

pub use bucket::BucketRateLimiter;
pub use exponential::ItemExponentialFailureRateLimiter;
pub use fast_slow::ItemFastSlowRateLimiter;
pub use max_of::MaxOfRateLimiter;
pub use max_wait::WithMaxWaitRateLimiter;

/// Decides how long an item waits before its next retry.
pub trait RateLimiter<T>: Send + Sync {
    /// The delay before `item`'s next retry; counts one retry.
    fn when(&self, item: &T) -> Duration;
    /// [`when`](Self::when), from a caller that read `Instant::now()` just
    /// before, as `now`: a limiter that reads the real clock (the token
    /// bucket) may take `now` instead of reading it again. The default
    /// ignores it.
    fn when_at(&self, item: &T, now: Instant) -> Duration {
        let _ = now;
        self.when(item)
    }
    /// Stops tracking `item` (after a success); unknown items are ignored.
    fn forget(&self, item: &T);
    /// How many retries `item` has had since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// A rate limiter given invalid settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateLimiterError {
    /// The rate is not a positive number.
    #[error("rate limiter qps must be a positive number, got {0}")]
    InvalidQps(f64),
    /// The burst is zero.
    #[error("rate limiter burst must be at least 1")]
    ZeroBurst,
}

/// client-go's default controller limiter: the longest of a per-item
/// exponential backoff (5 ms doubling up to 1000 s) and an overall token
/// bucket (10 qps, burst 100).
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::default_controller()),
    ])
}

/// client-go's default item-based limiter: exponential from 1 ms to 1000 s.
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for std::sync::Arc<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn when_at(&self, item: &T, now: Instant) -> Duration {
        (**self).when_at(item, now)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn when_at(&self, item: &T, now: Instant) -> Duration {
        (**self).when_at(item, now)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}
