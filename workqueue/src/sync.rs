//! The synchronization primitives the queue is built on, behind one small
//! API: std's mutex, condition variable and atomics in normal builds,
//! loom's under `--cfg loom`, where `tests/loom.rs` model-checks the
//! queue's protocols (every interleaving of a few threads, within loom's
//! bounds). Both have the same API, so one wrapper serves both.
//!
//! Only what the queue uses is here: a mutex whose guard can be let go for
//! a moment (`unlocked`, `unlocked_fair`), a condition variable with
//! deadlines, the hints' atomic flag and published-hint slot (`arc-swap`),
//! and the timer thread. Under loom a timed wait whose deadline has not
//! passed waits for a notification (loom has no time), and the hint slot
//! is a small mutex (arc-swap's loads and stores are linearizable, which a
//! mutex models).
//!
//! Why std's mutex and not parking_lot's: on the queue lock, four threads
//! on two cores (two adding, two getting) spent a third of their time in
//! the kernel, most of it from parking_lot's spin-then-`sched_yield` (half
//! a million yields a second, each a context switch); std's futex lock
//! spins briefly and then sleeps until woken, and the same runs move a
//! fifth to two fifths more items (BENCHMARKS.md, `workers-2`).
//!
//! Poison is ignored, as parking_lot has none: a panic in an item's
//! `Hash`, `Eq` or `Clone` while the lock is held does not make every later
//! call on the queue panic too.

use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;
use std::time::{Duration, Instant};

#[cfg(loom)]
use loom::sync as base;
#[cfg(not(loom))]
use std::sync as base;

pub(crate) use imp::*;

/// The queue's mutex (std's, or loom's in model checks).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(base::Mutex<T>);

/// Its guard; empty only while [`unlocked`] runs or a wait sleeps.
pub(crate) struct MutexGuard<'a, T> {
    mutex: &'a base::Mutex<T>,
    guard: Option<base::MutexGuard<'a, T>>,
}

/// Locks, ignoring poison (see the module documentation).
#[inline]
fn lock<T>(mutex: &base::Mutex<T>) -> base::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(base::Mutex::new(value))
    }

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            mutex: &self.0,
            guard: Some(lock(&self.0)),
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match &self.guard {
            Some(guard) => guard,
            None => unreachable!("a released guard is not reachable"),
        }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        match &mut self.guard {
            Some(guard) => guard,
            None => unreachable!("a released guard is not reachable"),
        }
    }
}

/// Runs `f` with the lock released, then takes it back.
pub(crate) fn unlocked<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
    drop(guard.guard.take());
    let result = f();
    guard.guard = Some(lock(guard.mutex));
    result
}

/// Like [`unlocked`], giving the processor away before taking the lock
/// back, so that a thread blocked on the lock (woken by the release) can
/// take it first.
pub(crate) fn unlocked_fair<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
    unlocked(guard, || {
        let result = f();
        yield_now();
        result
    })
}

/// Whether a timed wait timed out.
pub(crate) struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub(crate) fn timed_out(&self) -> bool {
        self.0
    }
}

/// The queue's condition variable, waited on with a [`MutexGuard`].
#[derive(Debug, Default)]
pub(crate) struct Condvar(base::Condvar);

impl Condvar {
    pub(crate) fn new() -> Self {
        Self(base::Condvar::new())
    }

    /// Sleeps until notified (or woken spuriously).
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        if let Some(held) = guard.guard.take() {
            let held = self.0.wait(held).unwrap_or_else(PoisonError::into_inner);
            guard.guard = Some(held);
        }
    }

    /// Sleeps until notified or until `deadline` (timed out at once if it
    /// has passed).
    pub(crate) fn wait_until<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Instant,
    ) -> WaitTimeoutResult {
        self.wait_for(guard, deadline.saturating_duration_since(Instant::now()))
    }

    /// Sleeps until notified or for at most `timeout` (timed out at once if
    /// it is zero).
    pub(crate) fn wait_for<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
    ) -> WaitTimeoutResult {
        if timeout.is_zero() {
            return WaitTimeoutResult(true);
        }
        let Some(held) = guard.guard.take() else {
            return WaitTimeoutResult(true);
        };
        let (held, timed_out) = timed_wait(&self.0, held, timeout);
        guard.guard = Some(held);
        WaitTimeoutResult(timed_out)
    }

    #[inline]
    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

#[cfg(not(loom))]
mod imp {
    use std::sync::{Condvar, MutexGuard, PoisonError};
    use std::time::Duration;

    pub(crate) use std::sync::atomic::AtomicBool;
    pub(crate) use std::thread::yield_now;

    /// A published hint, or none.
    pub(crate) type HintSlot<T> = arc_swap::ArcSwapOption<T>;

    /// A wait of at most `timeout`; true if it timed out.
    pub(super) fn timed_wait<'a, T>(
        cv: &Condvar,
        held: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        let (held, result) = cv
            .wait_timeout(held, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        (held, result.timed_out())
    }

    /// Starts the named background thread.
    pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        std::thread::Builder::new().name(name).spawn(f).map(drop)
    }
}

#[cfg(loom)]
mod imp {
    use std::ops::Deref;
    use std::sync::{Arc, PoisonError};
    use std::time::Duration;

    use loom::sync::{Condvar, MutexGuard};

    pub(crate) use loom::sync::atomic::AtomicBool;
    pub(crate) use loom::thread::yield_now;

    /// Loom has no time: a wait whose deadline has not passed waits for a
    /// notification, and never times out.
    pub(super) fn timed_wait<'a, T>(
        cv: &Condvar,
        held: MutexGuard<'a, T>,
        _timeout: Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        (cv.wait(held).unwrap_or_else(PoisonError::into_inner), false)
    }

    /// A published hint, or none: a loom mutex around the `Arc`.
    pub(crate) struct HintSlot<T>(loom::sync::Mutex<Option<Arc<T>>>);

    impl<T> HintSlot<T> {
        pub(crate) fn empty() -> Self {
            Self(loom::sync::Mutex::new(None))
        }

        pub(crate) fn load(&self) -> Loaded<T> {
            Loaded(super::lock(&self.0).clone())
        }

        pub(crate) fn store(&self, value: Option<Arc<T>>) {
            *super::lock(&self.0) = value;
        }
    }

    /// A loaded hint (arc-swap's guard).
    pub(crate) struct Loaded<T>(Option<Arc<T>>);

    impl<T> Deref for Loaded<T> {
        type Target = Option<Arc<T>>;

        fn deref(&self) -> &Option<Arc<T>> {
            &self.0
        }
    }

    /// Starts the background thread as a loom thread.
    pub(crate) fn spawn(_name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        drop(loom::thread::spawn(f));
        Ok(())
    }
}
