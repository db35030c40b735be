//! The synchronization primitives the queue is built on, behind one small
//! API: parking_lot's locks and std's atomics in normal builds, loom's
//! under `--cfg loom`, where `tests/loom.rs` model-checks the queue's
//! protocols (every interleaving of a few threads, within loom's bounds).
//!
//! Only what the queue uses is here: a mutex whose guard can be let go for
//! a moment (`unlocked`, `unlocked_fair`), a condition variable with
//! deadlines, the hints' atomic flag and published-hint slot (`arc-swap`),
//! and the timer thread. Under loom a timed wait whose deadline has not
//! passed waits for a notification (loom has no time), and the hint slot
//! is a small mutex (arc-swap's loads and stores are linearizable, which a
//! mutex models).

#[cfg(not(loom))]
mod imp {
    pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
    pub(crate) use std::sync::atomic::AtomicBool;

    /// A published hint, or none.
    pub(crate) type HintSlot<T> = arc_swap::ArcSwapOption<T>;

    /// Runs `f` with the lock released, then takes it back.
    #[inline]
    pub(crate) fn unlocked<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
        MutexGuard::unlocked(guard, f)
    }

    /// Like [`unlocked`], handing the lock to a thread blocked on it.
    #[inline]
    pub(crate) fn unlocked_fair<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
        MutexGuard::unlocked_fair(guard, f)
    }

    /// Starts the named background thread.
    pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        std::thread::Builder::new().name(name).spawn(f).map(drop)
    }
}

#[cfg(loom)]
mod imp {
    use std::ops::{Deref, DerefMut};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    pub(crate) use loom::sync::atomic::AtomicBool;

    /// A loom mutex with parking_lot's API.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Self::new(T::default())
        }
    }

    /// Its guard; empty only while [`unlocked`] runs or a wait sleeps.
    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a loom::sync::Mutex<T>,
        guard: Option<loom::sync::MutexGuard<'a, T>>,
    }

    /// Locks a loom mutex (it is never poisoned: a panic ends the model).
    fn lock<T>(mutex: &loom::sync::Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.0,
                guard: Some(lock(&self.0)),
            }
        }
    }

    impl<T> MutexGuard<'_, T> {
        fn held(&self) -> &loom::sync::MutexGuard<'_, T> {
            match &self.guard {
                Some(guard) => guard,
                None => unreachable!("a released guard is not reachable"),
            }
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            self.held()
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match &mut self.guard {
                Some(guard) => guard,
                None => unreachable!("a released guard is not reachable"),
            }
        }
    }

    pub(crate) fn unlocked<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
        drop(guard.guard.take());
        let result = f();
        guard.guard = Some(lock(guard.mutex));
        result
    }

    pub(crate) fn unlocked_fair<T, R>(guard: &mut MutexGuard<'_, T>, f: impl FnOnce() -> R) -> R {
        unlocked(guard, f)
    }

    /// Whether a timed wait timed out.
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            self.0
        }
    }

    /// A loom condition variable with parking_lot's API.
    #[derive(Debug)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Default for Condvar {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Condvar {
        pub(crate) fn new() -> Self {
            Self(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            if let Some(held) = guard.guard.take() {
                let held = self
                    .0
                    .wait(held)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                guard.guard = Some(held);
            }
        }

        /// Returns at once, timed out, if `deadline` has passed; else waits
        /// for a notification.
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            deadline: Instant,
        ) -> WaitTimeoutResult {
            if deadline <= Instant::now() {
                return WaitTimeoutResult(true);
            }
            self.wait(guard);
            WaitTimeoutResult(false)
        }

        pub(crate) fn wait_for<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            timeout: Duration,
        ) -> WaitTimeoutResult {
            if timeout.is_zero() {
                return WaitTimeoutResult(true);
            }
            self.wait(guard);
            WaitTimeoutResult(false)
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// A published hint, or none: a loom mutex around the `Arc`.
    pub(crate) struct HintSlot<T>(loom::sync::Mutex<Option<Arc<T>>>);

    impl<T> HintSlot<T> {
        pub(crate) fn empty() -> Self {
            Self(loom::sync::Mutex::new(None))
        }

        pub(crate) fn load(&self) -> Loaded<T> {
            Loaded(lock(&self.0).clone())
        }

        pub(crate) fn store(&self, value: Option<Arc<T>>) {
            *lock(&self.0) = value;
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

pub(crate) use imp::*;
