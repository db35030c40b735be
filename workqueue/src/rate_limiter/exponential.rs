//! Per-item exponential backoff: `base * 2^failures`, capped at `max`
//! (client-go's `ItemExponentialFailureRateLimiter`). Computed in integer
//! nanoseconds: no overflow, whatever the failure count.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use super::counts::Counts;
use super::RateLimiter;

/// Waits `base * 2^n` before the `n`-th retry of an item (counting from
/// 0), never more than `max`.
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Counts<T>,
    base: Duration,
    max: Duration,
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Backoff from `base` doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Counts::default(),
            base,
            max,
        }
    }

    /// The delay after `failures` earlier failures.
    pub fn delay_for(&self, failures: u32) -> Duration {
        exponential(self.base, self.max, failures)
    }
}

/// `base * 2^exp`, or `max` if that is larger (or does not fit).
pub(crate) fn exponential(base: Duration, max: Duration, exp: u32) -> Duration {
    let Some(factor) = 1u128.checked_shl(exp).filter(|_| exp < 64) else {
        return max;
    };
    match base.as_nanos().checked_mul(factor) {
        Some(nanos) if nanos < max.as_nanos() => from_nanos(nanos).unwrap_or(max),
        _ => max,
    }
}

fn from_nanos(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
}

impl<T: Hash + Eq + Clone + Send + Sync> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.delay_for(self.failures.bump(item))
    }

    fn forget(&self, item: &T) {
        self.failures.remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.get(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn wq6_exponential_doubles_from_base_and_forget_resets() {
        let r = ItemExponentialFailureRateLimiter::<String>::new(5 * MS, Duration::from_secs(1000));
        let a = "a".to_owned();
        assert_eq!(r.when(&a), 5 * MS);
        assert_eq!(r.when(&a), 10 * MS);
        assert_eq!(r.when(&a), 20 * MS);
        assert_eq!(r.when(&a), 40 * MS);
        assert_eq!(r.num_requeues(&a), 4);
        // items are independent
        assert_eq!(r.when(&"b".to_owned()), 5 * MS);
        r.forget(&a);
        assert_eq!(r.num_requeues(&a), 0);
        assert_eq!(r.when(&a), 5 * MS);
        // forgetting an unknown item is harmless
        r.forget(&"never".to_owned());
        assert_eq!(r.failures.len(), 2);
    }

    #[test]
    fn wq6_exponential_caps_at_max() {
        let max = Duration::from_secs(1000);
        let r = ItemExponentialFailureRateLimiter::<u32>::new(5 * MS, max);
        let delays: Vec<Duration> = (0..40).map(|_| r.when(&7)).collect();
        // 5 ms * 2^17 = 655 s < 1000 s < 5 ms * 2^18
        assert_eq!(delays[17], Duration::from_millis(5 << 17));
        assert!(delays[18..].iter().all(|d| *d == max));
    }

    #[test]
    fn wq6_exponential_never_overflows() {
        let max = Duration::MAX;
        for exp in [0, 1, 31, 32, 63, 64, 65, 127, 128, 1000, u32::MAX] {
            let d = exponential(Duration::from_secs(u64::MAX / 2), max, exp);
            assert!(d <= max);
            let d = exponential(5 * MS, Duration::from_secs(1000), exp);
            assert!(d <= Duration::from_secs(1000));
        }
        assert_eq!(exponential(5 * MS, Duration::MAX, 2), 20 * MS);
        assert_eq!(
            exponential(Duration::ZERO, Duration::from_secs(1), u32::MAX),
            Duration::from_secs(1)
        );
        assert_eq!(
            exponential(Duration::ZERO, Duration::from_secs(1), 3),
            Duration::ZERO
        );
        // the count saturates instead of wrapping
        let r = ItemExponentialFailureRateLimiter::<u8>::new(MS, Duration::from_secs(1));
        r.failures.set(&1, u32::MAX);
        assert_eq!(r.when(&1), Duration::from_secs(1));
        assert_eq!(r.num_requeues(&1), u32::MAX);
    }
}
