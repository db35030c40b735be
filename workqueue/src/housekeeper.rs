//! The background thread of a delaying queue (and of a queue with
//! metrics): it sleeps until the earliest scheduled item is due (or the
//! next metrics update), moves due items into the queue, and sleeps again.
//! It moves them a chunk at a time and lets the lock go between chunks
//! (giving the processor away, so a blocked consumer can take it), so when
//! thousands come due at once consumers start on the first ones while the
//! rest are being moved.
//!
//! No tokio runtime is needed, and it never polls: it waits on its
//! [`Signal`] with a deadline. Its deadline is kept under the queue lock
//! ([`Housekeeper::wakes_at`]): an `add_after` of an item due earlier
//! moves it and kicks the thread, under the same lock, and a kick is kept
//! until the thread looks at it, so no kick is lost between the round that
//! set the deadline and the wait. A fake clock that jumps kicks it too. It
//! stops when the queue shuts down or its last handle is dropped (it holds
//! only a weak reference).

use std::sync::{Arc, Weak};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use crate::metrics::recorder::UPDATE_PERIOD;
use crate::shared::Shared;
use crate::sync::{self, Condvar, Mutex};
use crate::Item;

/// The shortest sleep of the background thread: it bounds its wake-ups to
/// 5,000 a second when items come due continuously (threads blocked in
/// `get` release due items on time by themselves).
const MIN_SLEEP: Duration = Duration::from_micros(200);

/// The background thread as the queue lock holder sees it.
#[derive(Default)]
pub(crate) struct Housekeeper {
    /// Whether the thread runs.
    pub(crate) running: bool,
    /// When it wakes next by itself (`None`: only when kicked).
    pub(crate) wakes_at: Option<Instant>,
}

/// How the background thread is told to look again or to stop.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
    cv: Condvar,
}

#[derive(Default)]
struct SignalState {
    kicked: bool,
    closed: bool,
}

impl Signal {
    /// Makes the thread look again now.
    pub(crate) fn kick(&self) {
        let mut s = self.state.lock();
        s.kicked = true;
        self.cv.notify_one();
    }

    /// Makes the thread stop.
    pub(crate) fn close(&self) {
        let mut s = self.state.lock();
        s.closed = true;
        self.cv.notify_one();
    }

    /// Sleeps until kicked, closed or `timeout` passed (forever if `None`).
    /// Returns false once closed.
    fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut s = self.state.lock();
        if !s.kicked && !s.closed {
            match timeout {
                Some(t) => {
                    self.cv.wait_for(&mut s, t);
                }
                None => self.cv.wait(&mut s),
            }
        }
        s.kicked = false;
        !s.closed
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.kick();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.kick();
    }
}

/// Starts the background thread if it does not run yet (queue lock held:
/// `state` is behind it).
pub(crate) fn ensure_running<T: Item>(shared: &Arc<Shared<T>>, state: &mut Housekeeper) {
    if state.running {
        return;
    }
    let Some(signal) = shared.signal.clone() else {
        return;
    };
    let weak = Arc::downgrade(shared);
    let name = if shared.name.is_empty() {
        "workqueue".to_owned()
    } else {
        format!("workqueue-{}", shared.name)
    };
    let jump_waker = Waker::from(Arc::clone(&signal));
    match sync::spawn(name, move || run(&weak, &signal)) {
        Ok(()) => {
            shared.clock.on_jump(jump_waker);
            state.running = true;
            // Its first round comes at once.
            state.wakes_at = None;
        }
        Err(err) => {
            // Retried at the next add_after; due items are still released
            // by blocked threads and by queue operations.
            tracing::error!(queue = %shared.name, error = %err, "cannot start the workqueue timer thread");
        }
    }
}

fn run<T: Item>(weak: &Weak<Shared<T>>, signal: &Signal) {
    let mut next_metrics: Option<Instant> = None;
    loop {
        let Some(timeout) = weak.upgrade().and_then(|s| look(&s, &mut next_metrics)) else {
            return;
        };
        if !signal.wait(timeout) {
            return;
        }
    }
}

/// One round: release due items, update metrics when their time came, and
/// tell how long to sleep (`None` inside: until kicked). `None`: stop.
pub(crate) fn look<T: Item>(
    shared: &Shared<T>,
    next_metrics: &mut Option<Instant>,
) -> Option<Option<Duration>> {
    let mut locked = shared.lock();
    let now = shared.clock.now();
    if !locked.guard.state.is_shutting_down() {
        locked.release_all_due_in_chunks(now);
    }
    let inner = &mut *locked.guard;
    if inner.state.is_shutting_down() {
        inner.housekeeper.running = false;
        return None;
    }
    if let Some(metrics) = &inner.metrics {
        if next_metrics.is_none_or(|t| t <= now) {
            metrics.update_unfinished_work();
            *next_metrics = now.checked_add(UPDATE_PERIOD);
        }
    }
    let next_due = inner.schedule.as_ref().and_then(|s| s.next_due());
    let deadline = match (next_due, inner.metrics.as_ref().and(*next_metrics)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // Sleep at least MIN_SLEEP: items due meanwhile are released together.
    let timeout = deadline.map(|d| d.saturating_duration_since(now).max(MIN_SLEEP));
    inner.housekeeper.wakes_at = timeout.and_then(|t| now.checked_add(t));
    Some(timeout)
}
