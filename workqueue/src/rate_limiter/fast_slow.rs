//! Fast, then slow (client-go's `ItemFastSlowRateLimiter`): the first
//! `max_fast_attempts` retries of an item wait `fast`, later ones `slow`.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use super::counts::Counts;
use super::RateLimiter;

/// `fast` for an item's first `max_fast_attempts` retries, then `slow`.
pub struct ItemFastSlowRateLimiter<T> {
    attempts: Counts<T>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish_non_exhaustive()
    }
}

impl<T> ItemFastSlowRateLimiter<T> {
    /// `fast` for the first `max_fast_attempts` retries, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            attempts: Counts::default(),
            fast,
            slow,
            max_fast_attempts,
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let attempt = self.attempts.bump(item).saturating_add(1);
        if attempt <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.attempts.remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.attempts.get(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wq6_fast_slow_switches_after_max_fast_attempts() {
        let fast = Duration::from_millis(5);
        let slow = Duration::from_secs(10);
        let r = ItemFastSlowRateLimiter::<&str>::new(fast, slow, 3);
        assert_eq!([r.when(&"a"), r.when(&"a"), r.when(&"a")], [fast; 3]);
        assert_eq!(r.when(&"a"), slow);
        assert_eq!(r.when(&"a"), slow);
        assert_eq!(r.num_requeues(&"a"), 5);
        assert_eq!(r.when(&"b"), fast);
        r.forget(&"a");
        assert_eq!(r.num_requeues(&"a"), 0);
        assert_eq!(r.when(&"a"), fast);
        r.forget(&"unknown");
    }

    #[test]
    fn wq6_fast_slow_with_zero_fast_attempts_is_always_slow() {
        let r = ItemFastSlowRateLimiter::<u8>::new(Duration::ZERO, Duration::from_secs(1), 0);
        assert_eq!(r.when(&1), Duration::from_secs(1));
    }
}
