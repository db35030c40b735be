//! A token bucket shared by all items (client-go's `BucketRateLimiter`
//! over `golang.org/x/time/rate`): `burst` tokens, refilled at `qps` per
//! second. Each `when` reserves a token, even one that only comes in the
//! future, and returns how long until it comes, exactly like `rate.Limiter`'s
//! `Reserve().Delay()`: once the burst is spent, calls are spaced
//! `1/qps` apart, and every call pushes later ones further out. A caller
//! that reserved a token and then did not use it gives it back
//! ([`BucketRateLimiter::give_back`], `rate.Reservation.Cancel`).
//!
//! This is kcontrol's one token bucket: the work queue's limiter, and the
//! client's request rate limit (client-go's `flowcontrol` token bucket),
//! which waits on it through a tokio clock.
//!
//! Implemented as GCRA on one atomic integer (nanoseconds since the
//! limiter was made): lock-free, exact, and saturating instead of
//! overflowing.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{RateLimiter, RateLimiterError};
use crate::clock::{Clock, RealClock};

/// Token bucket: `burst` tokens, `qps` new tokens per second.
pub struct BucketRateLimiter {
    clock: Arc<dyn Clock>,
    origin: Instant,
    /// Nanoseconds between tokens.
    interval: u64,
    /// `burst * interval`: how far ahead of now reservations may run free.
    tolerance: u64,
    /// When the bucket will be full again, in nanoseconds since `origin`
    /// (the "theoretical arrival time" of GCRA).
    full_at: AtomicU64,
    qps: f64,
    burst: u32,
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilled at `qps` per second
    /// (`f64::INFINITY`: no limit).
    pub fn new(qps: f64, burst: u32) -> Result<Self, RateLimiterError> {
        Self::with_clock(qps, burst, Arc::new(RealClock))
    }

    /// Like [`BucketRateLimiter::new`], reading time from `clock`.
    pub fn with_clock(
        qps: f64,
        burst: u32,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, RateLimiterError> {
        if qps.is_nan() || qps <= 0.0 {
            return Err(RateLimiterError::InvalidQps(qps));
        }
        if burst == 0 {
            return Err(RateLimiterError::ZeroBurst);
        }
        let interval = interval_nanos(qps);
        let origin = clock.now();
        Ok(Self {
            clock,
            origin,
            interval,
            tolerance: interval.saturating_mul(u64::from(burst)).min(MAX_AHEAD),
            full_at: AtomicU64::new(0),
            qps,
            burst,
        })
    }

    /// 10 qps, burst 100: the bucket of the default controller limiter.
    pub fn default_controller() -> Self {
        Self {
            clock: Arc::new(RealClock),
            origin: Instant::now(),
            interval: 100_000_000,
            tolerance: 100 * 100_000_000,
            full_at: AtomicU64::new(0),
            qps: 10.0,
            burst: 100,
        }
    }

    /// Reserves one token; returns how long until it is available.
    pub fn reserve(&self) -> Duration {
        self.reserve_from(self.now_nanos())
    }

    /// [`reserve`](Self::reserve) at `now`, read from the real clock by
    /// the caller: taken when this bucket reads the real clock too, else
    /// the bucket reads its own.
    fn reserve_at(&self, now: Instant) -> Duration {
        if self.clock.is_real() {
            self.reserve_from(self.nanos_at(now))
        } else {
            self.reserve()
        }
    }

    /// Reserves one token at `now` nanoseconds since `origin`.
    fn reserve_from(&self, now: u64) -> Duration {
        let mut current = self.full_at.load(Ordering::Relaxed);
        loop {
            let next = current.max(now).saturating_add(self.interval);
            match self.full_at.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let ready_at = next.saturating_sub(self.tolerance);
                    return Duration::from_nanos(ready_at.saturating_sub(now));
                }
                Err(seen) => current = seen,
            }
        }
    }

    /// Gives back one token reserved by [`BucketRateLimiter::reserve`]
    /// that its caller did not use (it gave up waiting): the next
    /// reservation comes one token sooner, but the bucket never holds
    /// more than `burst`.
    pub fn give_back(&self) {
        let now = self.now_nanos();
        let mut current = self.full_at.load(Ordering::Relaxed);
        loop {
            let next = current.saturating_sub(self.interval).max(now);
            if next >= current {
                return;
            }
            match self.full_at.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }

    /// Nanoseconds from `origin` to the clock's now (saturating).
    fn now_nanos(&self) -> u64 {
        self.nanos_at(self.clock.now())
    }

    /// Nanoseconds from `origin` to `now` (saturating).
    fn nanos_at(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Bound of the interval and of the tolerance, so that reservations keep
/// counting (and delays keep growing) long before the clock saturates.
const MAX_AHEAD: u64 = u64::MAX / 4;

/// Nanoseconds between tokens at `qps` (0 for an infinite rate).
fn interval_nanos(qps: f64) -> u64 {
    let nanos = (1e9 / qps).round();
    if nanos >= MAX_AHEAD as f64 {
        MAX_AHEAD
    } else {
        // in range and not NaN: qps > 0
        nanos as u64
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn when_at(&self, _item: &T, now: Instant) -> Duration {
        self.reserve_at(now)
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn wq6_bucket_allows_the_burst_then_spaces_by_one_over_qps() {
        let clock = Arc::new(FakeClock::new());
        let b = BucketRateLimiter::with_clock(10.0, 100, clock.clone()).unwrap();
        for _ in 0..100 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        // reservations in the future push each other out
        assert_eq!(b.reserve(), 100 * MS);
        assert_eq!(b.reserve(), 200 * MS);
        assert_eq!(b.reserve(), 300 * MS);
        clock.step(250 * MS);
        assert_eq!(b.reserve(), 150 * MS);
        // after a long pause the bucket is full again, not fuller
        clock.step(Duration::from_secs(3600));
        for _ in 0..100 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert_eq!(b.reserve(), 100 * MS);
        assert_eq!(RateLimiter::<u8>::num_requeues(&b, &1), 0);
    }

    /// A caller's reading of the real clock is the bucket's time when the
    /// bucket reads the real clock too (so reservations at one `now` are
    /// exactly an interval apart), and is ignored by a bucket on another
    /// clock; a max-of limiter passes it on.
    #[test]
    fn wq6_when_at_takes_the_callers_reading_of_the_real_clock_only() {
        let real = BucketRateLimiter::new(10.0, 1).unwrap();
        let now = Instant::now();
        assert_eq!(RateLimiter::<u8>::when_at(&real, &1, now), Duration::ZERO);
        assert_eq!(RateLimiter::<u8>::when_at(&real, &1, now), 100 * MS);
        assert_eq!(RateLimiter::<u8>::when_at(&real, &1, now), 200 * MS);

        let clock = Arc::new(FakeClock::new());
        let fake = BucketRateLimiter::with_clock(10.0, 1, clock.clone()).unwrap();
        let far = clock.now() + Duration::from_secs(3600);
        assert_eq!(RateLimiter::<u8>::when_at(&fake, &1, far), Duration::ZERO);
        // an hour of the caller's clock did not refill the fake one's bucket
        assert_eq!(RateLimiter::<u8>::when_at(&fake, &1, far), 100 * MS);

        let max = crate::rate_limiter::MaxOfRateLimiter::<u8>::new(vec![
            Box::new(crate::rate_limiter::ItemExponentialFailureRateLimiter::new(
                5 * MS,
                Duration::from_secs(1),
            )),
            Box::new(BucketRateLimiter::new(10.0, 1).unwrap()),
        ]);
        let now = Instant::now();
        assert_eq!(max.when_at(&1, now), 5 * MS);
        assert_eq!(max.when_at(&1, now), 100 * MS);
    }

    #[test]
    fn wq6_a_token_given_back_is_reserved_again_but_never_beyond_the_burst() {
        let clock = Arc::new(FakeClock::new());
        let b = BucketRateLimiter::with_clock(10.0, 1, clock.clone()).unwrap();
        assert_eq!(b.reserve(), Duration::ZERO);
        assert_eq!(b.reserve(), 100 * MS);
        assert_eq!(b.reserve(), 200 * MS);
        // the caller of the 200 ms reservation gave up
        b.give_back();
        assert_eq!(b.reserve(), 200 * MS);
        // giving back more than was reserved fills the bucket, no more
        for _ in 0..10 {
            b.give_back();
        }
        assert_eq!(b.reserve(), Duration::ZERO);
        assert_eq!(b.reserve(), 100 * MS);
    }

    #[test]
    fn wq6_bucket_refills_at_qps() {
        let clock = Arc::new(FakeClock::new());
        let b = BucketRateLimiter::with_clock(2.0, 1, clock.clone()).unwrap();
        assert_eq!(b.reserve(), Duration::ZERO);
        assert_eq!(b.reserve(), 500 * MS);
        clock.step(Duration::from_secs(1));
        // the token reserved at +500 ms is spent; the next comes at +1 s
        assert_eq!(b.reserve(), Duration::ZERO);
    }

    #[test]
    fn wq6_bucket_rejects_bad_settings_and_saturates() {
        assert_eq!(
            BucketRateLimiter::new(0.0, 1).unwrap_err(),
            RateLimiterError::InvalidQps(0.0)
        );
        assert!(BucketRateLimiter::new(f64::NAN, 1).is_err());
        assert!(BucketRateLimiter::new(-1.0, 1).is_err());
        assert_eq!(
            BucketRateLimiter::new(1.0, 0).unwrap_err(),
            RateLimiterError::ZeroBurst
        );
        let unlimited = BucketRateLimiter::new(f64::INFINITY, 1).unwrap();
        for _ in 0..1000 {
            assert_eq!(unlimited.reserve(), Duration::ZERO);
        }
        let slow = BucketRateLimiter::new(1e-30, 1).unwrap();
        assert_eq!(slow.reserve(), Duration::ZERO);
        for _ in 0..10 {
            assert!(slow.reserve() > Duration::from_secs(1_000_000_000));
        }
    }

    #[test]
    fn wq6_bucket_is_exact_under_concurrency() {
        let clock = Arc::new(FakeClock::new());
        let b = Arc::new(BucketRateLimiter::with_clock(10.0, 100, clock).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = Arc::clone(&b);
                std::thread::spawn(move || (0..1000).map(|_| b.reserve()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<Duration> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort();
        // every reservation got its own slot: 100 free, then one per 100 ms
        for (i, d) in all.iter().enumerate() {
            let expected = (i as u64).saturating_sub(99) * 100;
            assert_eq!(*d, Duration::from_millis(expected), "reservation {i}");
        }
    }
}
