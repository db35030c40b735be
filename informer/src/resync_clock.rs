//! [`ResyncClock`]: where resync schedules read the time (the work queue has
//! its own public `Clock` for delays; this one is internal); real time in use, a
//! hand-moved clock in tests (client-go injects a fake clock the same way).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// A source of the current time.
#[derive(Clone)]
pub(crate) struct ResyncClock(Option<Arc<dyn Fn() -> Instant + Send + Sync>>);

impl ResyncClock {
    /// The system's monotonic clock.
    pub(crate) fn real() -> Self {
        Self(None)
    }

    /// A clock that reads `now`.
    #[cfg(test)]
    pub(crate) fn from_fn(now: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(now)))
    }

    /// The current time.
    pub(crate) fn now(&self) -> Instant {
        match &self.0 {
            None => Instant::now(),
            Some(now) => now(),
        }
    }
}

impl fmt::Debug for ResyncClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "ResyncClock(manual)"
        } else {
            "ResyncClock(real)"
        })
    }
}

/// A clock moved by hand, for tests.
#[cfg(test)]
#[derive(Clone, Debug)]
pub(crate) struct ManualClock {
    start: Instant,
    offset_ms: Arc<std::sync::atomic::AtomicU64>,
}

#[cfg(test)]
impl ManualClock {
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            offset_ms: Arc::default(),
        }
    }

    /// Moves the clock forward.
    pub(crate) fn advance(&self, by: std::time::Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.offset_ms
            .fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn clock(&self) -> ResyncClock {
        let this = self.clone();
        ResyncClock::from_fn(move || {
            this.start
                + std::time::Duration::from_millis(
                    this.offset_ms.load(std::sync::atomic::Ordering::SeqCst),
                )
        })
    }
}
