//! [`DelayingQueue`]: a [`Queue`] that can also add an item after a delay
//! (client-go's `DelayingInterface`, WQ5). A zero delay adds at once; an
//! item scheduled twice keeps the earlier time; scheduled items are dropped
//! at shutdown.
//!
//! Scheduled items wait in a [`crate::schedule::Schedule`] under the queue
//! lock and move into the queue when due: by the queue's background thread
//! (no tokio runtime needed; it sleeps until the next due time, at least
//! 200 µs, is started by the first delayed add, and stops at shutdown or
//! when the last handle is dropped), by threads blocked in `get` (they wake
//! at the next due time themselves), by any consumer that finds the queue
//! empty (`get`, `try_get`, `get_async`), and by the counts (`len`,
//! `scheduled_len`, `Debug`). A timer slower than the consumers is
//! therefore never in the way of a blocking consumer.

use std::fmt;
use std::time::{Duration, Instant};

use crate::clock::saturating_add;
use crate::config::QueueConfig;
use crate::housekeeper;
use crate::queue::Queue;
use crate::shared::RELEASE_CHUNK;
use crate::Item;

/// A work queue with [`DelayingQueue::add_after`], and every method of
/// [`Queue`] (also reachable through [`DelayingQueue::queue`]); clones are
/// handles to the same queue.
///
/// ```
/// use std::time::Duration;
/// use kcontrol_workqueue::DelayingQueue;
///
/// let queue: DelayingQueue<String> = DelayingQueue::new();
/// queue.add_after("default/a".to_owned(), Duration::from_millis(5));
/// assert_eq!(queue.get().as_deref(), Some("default/a")); // after ~5 ms
/// # queue.done(&"default/a".to_owned());
/// # queue.shut_down();
/// ```
pub struct DelayingQueue<T: Item> {
    queue: Queue<T>,
}

impl<T: Item> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T: Item> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DelayingQueue").field(&self.queue).finish()
    }
}

impl<T: Item> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> DelayingQueue<T> {
    /// An unnamed delaying queue without metrics, on the real clock.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A delaying queue with the name, metrics provider and clock of
    /// `config`.
    pub fn with_config(config: QueueConfig<T>) -> Self {
        Self {
            queue: Queue::build(config, true),
        }
    }

    /// The plain queue handle (a clone of it is a [`Queue`] of the same
    /// items, for code that takes one).
    pub fn queue(&self) -> &Queue<T> {
        &self.queue
    }

    crate::forward::queue_methods!();

    /// Adds `item` once `delay` has passed (client-go `AddAfter`). A zero
    /// delay adds now; if the item is already scheduled, the earlier time
    /// wins. Dropped after shutdown. Counts as a retry in the metrics.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_from(item, || self.queue.shared.clock.now(), delay);
    }

    /// Whether the queue's clock is the real one ([`Clock::is_real`]).
    pub(crate) fn clock_is_real(&self) -> bool {
        self.queue.shared.clock.is_real()
    }

    /// [`add_after`](Self::add_after), `delay` counted from `now()` (the
    /// queue clock's reading; asked only for a delay that is not zero).
    pub(crate) fn add_after_from(&self, item: T, now: impl FnOnce() -> Instant, delay: Duration) {
        let shared = &self.queue.shared;
        if let Some(retries) = &shared.retries {
            retries.inc();
        }
        if delay.is_zero() {
            self.queue.add(item);
            return;
        }
        let hash = shared.hash(&item);
        let now = now();
        let due = saturating_add(now, delay);
        let mut locked = shared.lock();
        if locked.schedule(item, hash, due) {
            housekeeper::ensure_running(shared, &mut locked.guard.housekeeper);
        }
        // What has come due meanwhile goes to the queue now (a chunk): a
        // producer that keeps taking the lock would keep the timer out.
        locked.release_due_at(now, RELEASE_CHUNK);
    }

    /// Number of items scheduled for later (not yet in the queue).
    pub fn scheduled_len(&self) -> usize {
        let mut locked = self.queue.shared.lock();
        locked.release_all_due();
        locked.guard.schedule.as_ref().map_or(0, |s| s.len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::time::Instant;

    use super::*;
    use crate::clock::{Clock, FakeClock};

    /// Many more items than one release chunk come due at once: `len`
    /// counts them all, and consumers get every one, in due order, then
    /// the queue is empty.
    #[test]
    fn wq5_a_burst_larger_than_a_chunk_is_released_whole_and_in_order() {
        let clock = Arc::new(FakeClock::new());
        let q: DelayingQueue<usize> =
            DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
        let n = 3 * RELEASE_CHUNK + 17;
        // Scheduled in reverse: item i is due after n - i microseconds.
        for i in (0..n).rev() {
            q.add_after(i, Duration::from_micros(1 + (n - i) as u64));
        }
        assert_eq!(q.len(), 0);
        assert_eq!(q.scheduled_len(), n);
        clock.step(Duration::from_secs(1));
        assert_eq!(q.len(), n);
        assert_eq!(q.scheduled_len(), 0);
        let got: Vec<usize> = std::iter::from_fn(|| {
            let item = q.try_get().into_item()?;
            q.done(&item);
            Some(item)
        })
        .collect();
        let want: Vec<usize> = (0..n).rev().collect();
        assert_eq!(got, want);
        assert!(q.is_empty());
        q.shut_down();
    }

    /// A clock that jumps without telling anyone: the timer thread sleeps
    /// on, so only the queue operations of the test see items come due.
    #[derive(Debug)]
    struct SilentClock {
        start: Instant,
        jumped: parking_lot::Mutex<Duration>,
    }

    impl Clock for SilentClock {
        fn now(&self) -> Instant {
            self.start + *self.jumped.lock()
        }
    }

    /// A queue with more than three chunks of items scheduled an hour out,
    /// and its silent clock moved two hours on: all are due, and only queue
    /// operations (or a timer round) can see it. Returns the queue and the
    /// number of items.
    fn burst_due_on_a_silent_clock() -> (DelayingQueue<usize>, usize) {
        let clock = Arc::new(SilentClock {
            start: Instant::now(),
            jumped: parking_lot::Mutex::new(Duration::ZERO),
        });
        let q: DelayingQueue<usize> =
            DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
        let n = 3 * RELEASE_CHUNK + 17;
        for i in 0..n {
            q.add_after(
                i,
                Duration::from_secs(3600) + Duration::from_micros(i as u64),
            );
        }
        *clock.jumped.lock() = Duration::from_secs(7200);
        (q, n)
    }

    /// Issue 14: `len`, `scheduled_len` and `Debug` release a burst of due
    /// items a chunk per hold of the lock, not all in one.
    #[test]
    fn counts_release_a_burst_a_chunk_per_hold_of_the_lock() {
        type Count = fn(&DelayingQueue<usize>) -> usize;
        let counts: [(&str, Count); 3] = [
            ("len", |q| q.len()),
            ("scheduled_len", |q| q.scheduled_len()),
            ("Debug", |q| format!("{q:?}").len()),
        ];
        for (name, count) in counts {
            let (q, n) = burst_due_on_a_silent_clock();
            count(&q);
            let most = q.queue.shared.lock().guard.released_per_hold.1;
            assert!(
                most <= RELEASE_CHUNK,
                "{name}: {most} items released in one hold"
            );
            assert_eq!(q.len(), n, "{name}");
            q.shut_down();
        }
    }

    /// The thread that schedules an item also releases what has come due,
    /// a chunk per hold of the lock: due items do not wait for the timer
    /// thread to win the lock from a producer that keeps taking it.
    #[test]
    fn add_after_releases_a_chunk_of_items_already_due() {
        let (q, n) = burst_due_on_a_silent_clock();
        q.add_after(n, Duration::from_secs(3600));
        let waiting = q.queue.shared.lock().guard.state.len();
        assert_eq!(waiting, RELEASE_CHUNK, "released by the add_after");
        assert_eq!(q.len(), n, "the rest are due, the new item is not");
        q.shut_down();
    }

    /// The background thread's round releases a burst a chunk per hold of
    /// the lock too (it once released two chunks in its first hold: a
    /// chunk when it took the lock, then the first of its loop).
    #[test]
    fn timer_round_releases_a_burst_a_chunk_per_hold_of_the_lock() {
        let (q, n) = burst_due_on_a_silent_clock();
        let round = crate::housekeeper::look(&q.queue.shared, &mut None);
        assert!(round.is_some(), "the queue is not shutting down");
        let most = q.queue.shared.lock().guard.released_per_hold.1;
        assert!(most <= RELEASE_CHUNK, "{most} items released in one hold");
        assert_eq!(q.len(), n);
        q.shut_down();
    }

    /// A queue whose next due chunk holds only items being processed (they
    /// just become dirty), with `LAST` due after them; the clock has passed
    /// every due time.
    fn chunk_of_processing_items_then_one() -> (Arc<FakeClock>, DelayingQueue<usize>) {
        let clock = Arc::new(FakeClock::new());
        let q: DelayingQueue<usize> =
            DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
        let n = RELEASE_CHUNK + 44;
        for i in 0..n {
            q.add(i);
        }
        for _ in 0..n {
            assert!(q.try_get().into_item().is_some());
        }
        for i in 0..=n {
            let item = if i == n { LAST } else { i };
            q.add_after(item, Duration::from_micros(1 + i as u64));
        }
        clock.step(Duration::from_secs(1));
        (clock, q)
    }

    const LAST: usize = 1_000_000;

    /// The item due behind a chunk of processing items is not stranded:
    /// `try_get`, `get` and the async `get` each hand it out at once.
    #[test]
    fn wq5_items_behind_a_chunk_of_processing_items_are_not_stranded() {
        let (_clock, q) = chunk_of_processing_items_then_one();
        assert_eq!(q.try_get().into_item(), Some(LAST));
        q.shut_down();

        let (_clock, q) = chunk_of_processing_items_then_one();
        assert_eq!(
            q.get_timeout(Duration::from_secs(10)).into_item(),
            Some(LAST)
        );
        q.shut_down();

        let (_clock, q) = chunk_of_processing_items_then_one();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let got = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), q.get_async()).await });
        assert_eq!(got.ok().flatten(), Some(LAST));
        q.shut_down();
    }

    /// The same burst taken by `try_get` alone (no `len` first): each
    /// lock releases a chunk, and nothing is lost or reordered.
    #[test]
    fn wq5_a_burst_is_handed_out_chunk_by_chunk_in_order() {
        let clock = Arc::new(FakeClock::new());
        let q: DelayingQueue<usize> =
            DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
        let n = 2 * RELEASE_CHUNK + 1;
        for i in 0..n {
            q.add_after(i, Duration::from_micros(1 + i as u64));
        }
        clock.step(Duration::from_secs(1));
        let mut got = Vec::new();
        while let Some(item) = q.try_get().into_item() {
            got.push(item);
            q.done(&item);
        }
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        assert_eq!(q.scheduled_len(), 0);
        q.shut_down();
    }
}
