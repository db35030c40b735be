//! The longest delay of several limiters (client-go's
//! `MaxOfRateLimiter`). Every limiter is asked (and counts the retry).

use std::fmt;
use std::time::{Duration, Instant};

use super::RateLimiter;

/// The longest delay of its limiters; `forget` forgets in all of them and
/// `num_requeues` is the largest count.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T> MaxOfRateLimiter<T> {
    /// The longest delay of `limiters` (zero when empty).
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }

    /// The longest of the delays `delay` gives for each limiter (every
    /// one is asked, and counts the retry).
    fn longest(&self, delay: impl Fn(&dyn RateLimiter<T>) -> Duration) -> Duration {
        self.limiters
            .iter()
            .map(|l| delay(l.as_ref()))
            .max()
            .unwrap_or_default()
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.longest(|l| l.when(item))
    }

    fn when_at(&self, item: &T, now: Instant) -> Duration {
        self.longest(|l| l.when_at(item, now))
    }

    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate_limiter::{ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter};

    #[test]
    fn wq6_max_of_takes_the_longest_delay() {
        let ms = Duration::from_millis;
        let r = MaxOfRateLimiter::<u32>::new(vec![
            Box::new(ItemExponentialFailureRateLimiter::new(ms(1), ms(1000))),
            Box::new(ItemFastSlowRateLimiter::new(ms(4), ms(100), 2)),
        ]);
        // exp: 1 2 4 8 ...; fast/slow: 4 4 100 100
        assert_eq!(r.when(&1), ms(4));
        assert_eq!(r.when(&1), ms(4));
        assert_eq!(r.when(&1), ms(100));
        assert_eq!(r.num_requeues(&1), 3);
        r.forget(&1);
        assert_eq!(r.num_requeues(&1), 0);
        assert_eq!(r.when(&1), ms(4));
        let empty = MaxOfRateLimiter::<u32>::new(Vec::new());
        assert_eq!(empty.when(&1), Duration::ZERO);
        assert_eq!(empty.num_requeues(&1), 0);
    }

    #[test]
    fn wq6_default_controller_limiter_is_max_of_exponential_and_bucket() {
        let r = crate::default_controller_rate_limiter::<String>();
        let k = "ns/a".to_owned();
        // the bucket's burst of 100 is not exhausted: exponential wins
        assert_eq!(r.when(&k), ms(5));
        assert_eq!(r.when(&k), ms(10));
        assert_eq!(r.when(&k), ms(20));
        assert_eq!(r.num_requeues(&k), 3);
        r.forget(&k);
        assert_eq!(r.when(&k), ms(5));
        // once the burst is spent the bucket's 100 ms spacing wins
        for i in 0..200 {
            let _ = r.when(&format!("other-{i}"));
        }
        assert!(r.when(&"fresh".to_owned()) > ms(5));
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
}
