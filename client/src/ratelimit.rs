//! Client-side rate limiting of non-watch requests, like client-go's
//! `flowcontrol.NewTokenBucketRateLimiter`: `qps` tokens a second up to
//! `burst`, on the work queue's token bucket
//! ([`BucketRateLimiter`], kcontrol's one). A caller that finds the bucket
//! empty reserves the next token and sleeps until it is due (so waiters
//! are served in arrival order); a caller dropped while waiting gives its
//! token back. Time comes from tokio, so tests can pause the clock.

use std::sync::Arc;
use std::time::Duration;

use kcontrol_workqueue::{BucketRateLimiter, Clock};

use crate::config::RateLimit;

/// tokio's clock (paused and advanced in tests) as the bucket's.
#[derive(Debug)]
struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// The token bucket requests wait on.
pub(crate) struct TokenBucket {
    bucket: BucketRateLimiter,
}

impl TokenBucket {
    /// A full bucket; `None` when the limit would never let a request
    /// through (qps not positive), which callers treat as "no limit".
    pub(crate) fn new(limit: RateLimit) -> Option<Self> {
        if !(limit.qps.is_finite() && limit.qps > 0.0) {
            return None;
        }
        let bucket =
            BucketRateLimiter::with_clock(limit.qps, limit.burst.max(1), Arc::new(TokioClock))
                .ok()?;
        Some(Self { bucket })
    }

    /// Takes a token, waiting for one if the bucket is empty.
    pub(crate) async fn acquire(&self) {
        let wait = self.reserve();
        if wait.is_zero() {
            return;
        }
        let mut reservation = Reservation {
            bucket: &self.bucket,
            done: false,
        };
        tokio::time::sleep(wait).await;
        reservation.done = true;
    }

    /// Takes a token now (zero) or reserves one and returns how long until
    /// it is due.
    fn reserve(&self) -> Duration {
        self.bucket.reserve()
    }
}

/// Returns the reserved token if the waiting caller is dropped.
struct Reservation<'a> {
    bucket: &'a BucketRateLimiter,
    done: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.bucket.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::time::Instant;

    /// Lets every runnable task run, without moving the paused clock.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let start = Instant::now();
        let bucket = Arc::new(
            TokenBucket::new(RateLimit {
                qps: 5.0,
                burst: 10,
            })
            .unwrap(),
        );
        let done = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..30 {
            let (bucket, done) = (bucket.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                bucket.acquire().await;
                done.fetch_add(1, Ordering::SeqCst);
            }));
        }
        settle().await;
        assert_eq!(
            done.load(Ordering::SeqCst),
            10,
            "the burst goes through at once"
        );
        // One more token every 200 ms: check between the due times.
        for (at_ms, expected) in [
            (100, 10),
            (300, 11),
            (500, 12),
            (1100, 15),
            (3900, 29),
            (4100, 30),
        ] {
            tokio::time::sleep_until(start + Duration::from_millis(at_ms)).await;
            settle().await;
            assert_eq!(done.load(Ordering::SeqCst), expected, "at {at_ms} ms");
        }
        for t in tasks {
            t.await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn refills_up_to_burst_only() {
        let bucket = TokenBucket::new(RateLimit { qps: 1.0, burst: 3 }).unwrap();
        tokio::time::advance(Duration::from_secs(3600)).await;
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_waiter_returns_its_token() {
        let bucket = TokenBucket::new(RateLimit { qps: 1.0, burst: 1 }).unwrap();
        bucket.acquire().await;
        let waiting = tokio::time::timeout(Duration::from_millis(10), bucket.acquire()).await;
        assert!(waiting.is_err(), "the second caller has to wait");
        // The cancelled reservation was returned: the next caller waits one
        // token's time from now, not two.
        let wait = bucket.reserve();
        assert!(wait <= Duration::from_secs(1), "{wait:?}");
    }

    #[test]
    fn non_positive_qps_means_no_limit() {
        assert!(TokenBucket::new(RateLimit { qps: 0.0, burst: 1 }).is_none());
        assert!(TokenBucket::new(RateLimit {
            qps: f64::NAN,
            burst: 1
        })
        .is_none());
    }
}
