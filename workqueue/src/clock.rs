//! Time sources: the real monotonic clock, and a [`FakeClock`] that tests
//! move by hand (like client-go's `clock/testing.FakeClock`). Delays, rate
//! limiters and metrics read time only through [`Clock`].

use std::fmt;
use std::task::Waker;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A source of monotonic time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Instant;

    /// Asks to have `waker` woken each time this clock jumps (moves other
    /// than by real time passing), so that timers sleeping on it look again.
    /// Real clocks never jump; the default does nothing.
    fn on_jump(&self, waker: Waker) {
        drop(waker);
    }

    /// Whether [`now`](Self::now) is [`Instant::now`]: a caller that has
    /// just read `Instant::now()` may then use its reading instead of
    /// asking again (one clock read per rate-limited add instead of two).
    /// The default says no.
    fn is_real(&self) -> bool {
        false
    }
}

/// The real monotonic clock ([`Instant::now`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn is_real(&self) -> bool {
        true
    }
}

/// A clock that stands still until [`FakeClock::step`] moves it.
///
/// Queues built with it release delayed items when a test steps the clock,
/// never by themselves, so tests of delays are exact and instant. It keeps
/// one small waker per queue that registered with it.
#[derive(Debug)]
pub struct FakeClock {
    inner: Mutex<FakeInner>,
}

#[derive(Debug)]
struct FakeInner {
    now: Instant,
    wakers: Vec<Waker>,
}

impl FakeClock {
    /// A fake clock that reads the real time of its creation.
    pub fn new() -> Self {
        Self::starting_at(Instant::now())
    }

    /// A fake clock that reads `now`.
    pub fn starting_at(now: Instant) -> Self {
        Self {
            inner: Mutex::new(FakeInner {
                now,
                wakers: Vec::new(),
            }),
        }
    }

    /// Moves the clock forward by `by` and wakes the timers that watch it.
    /// A step past the largest representable instant stops there.
    pub fn step(&self, by: Duration) {
        let wakers = {
            let mut inner = self.inner.lock();
            inner.now = saturating_add(inner.now, by);
            inner.wakers.clone()
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.inner.lock().now
    }

    fn on_jump(&self, waker: Waker) {
        self.inner.lock().wakers.push(waker);
    }
}

/// `at + by`, or the latest instant this platform can represent near it.
pub(crate) fn saturating_add(at: Instant, by: Duration) -> Instant {
    if let Some(t) = at.checked_add(by) {
        return t;
    }
    // Halve the step until it fits: ~64 tries at most.
    let mut step = by;
    let mut t = at;
    while step > Duration::from_nanos(1) {
        step /= 2;
        if let Some(next) = t.checked_add(step) {
            t = next;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_stepped() {
        let c = FakeClock::new();
        let t0 = c.now();
        // Wait until real time has moved on (it does within microseconds).
        let real = Instant::now();
        while Instant::now() == real {
            std::hint::spin_loop();
        }
        assert_eq!(c.now(), t0);
        c.step(Duration::from_secs(5));
        assert_eq!(c.now(), t0 + Duration::from_secs(5));
    }

    #[test]
    fn saturating_add_never_panics() {
        let now = Instant::now();
        let far = saturating_add(now, Duration::MAX);
        assert!(far > now);
        assert_eq!(saturating_add(now, Duration::ZERO), now);
        let c = FakeClock::starting_at(now);
        c.step(Duration::MAX);
        c.step(Duration::MAX);
        assert!(c.now() >= far);
    }
}
