//! Another limiter's delay, capped (client-go's `WithMaxWaitRateLimiter`).

use std::fmt;
use std::time::{Duration, Instant};

use super::RateLimiter;

/// Waits what `limiter` says, but never more than `max_wait`.
pub struct WithMaxWaitRateLimiter<T> {
    limiter: Box<dyn RateLimiter<T>>,
    max_wait: Duration,
}

impl<T> fmt::Debug for WithMaxWaitRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithMaxWaitRateLimiter")
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl<T> WithMaxWaitRateLimiter<T> {
    /// `limiter`'s delays, capped at `max_wait`.
    pub fn new(limiter: Box<dyn RateLimiter<T>>, max_wait: Duration) -> Self {
        Self { limiter, max_wait }
    }
}

impl<T> RateLimiter<T> for WithMaxWaitRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_wait)
    }

    fn when_at(&self, item: &T, now: Instant) -> Duration {
        self.limiter.when_at(item, now).min(self.max_wait)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate_limiter::ItemExponentialFailureRateLimiter;

    #[test]
    fn wq6_max_wait_caps_the_inner_delay() {
        let ms = Duration::from_millis;
        let r = WithMaxWaitRateLimiter::<u8>::new(
            Box::new(ItemExponentialFailureRateLimiter::new(
                ms(10),
                Duration::from_secs(100),
            )),
            ms(35),
        );
        assert_eq!(r.when(&1), ms(10));
        assert_eq!(r.when(&1), ms(20));
        assert_eq!(r.when(&1), ms(35));
        assert_eq!(r.when(&1), ms(35));
        assert_eq!(r.num_requeues(&1), 4);
        r.forget(&1);
        assert_eq!(r.num_requeues(&1), 0);
        assert_eq!(r.when(&1), ms(10));
    }
}
