//! Async consumers (WQ8): the [`Get`] future, the [`ItemStream`] and the
//! [`Drain`] future. They park with a [`std::task::Waker`], so they run on
//! any executor (tokio's multi-thread or current-thread runtime included)
//! and share one queue with threads blocked in [`Queue::get`].
//!
//! A parked task that is woken and then dropped before taking the item
//! (a cancelled `select!` branch, say) passes the wake-up on to another
//! waiter, so no item is left waiting while someone waits.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use crate::queue::Queue;
use crate::shared::Shared;
use crate::Item;

/// One poll for an item: take one, or report shutdown, or park (`parked`
/// is the task's place in the list of parked tasks).
fn poll_item<T: Item>(
    shared: &Shared<T>,
    parked: &mut Option<u64>,
    cx: &mut Context<'_>,
) -> Poll<Option<T>> {
    let mut locked = shared.lock();
    let result = loop {
        match locked.pop() {
            Some(item) => break Some(item),
            None if locked.guard.state.is_shutting_down() => break None,
            // Due items (see `Queue::try_get`).
            None if locked.release_due() > 0 => {}
            None => {
                locked.guard.waiters.tasks.register(parked, cx.waker());
                return Poll::Pending;
            }
        }
    };
    if let Some(registration) = parked.take() {
        locked.guard.waiters.tasks.remove(registration);
    }
    Poll::Ready(result)
}

/// Drops a parked registration; passes a wake-up on if this task had one.
fn cancel<T: Item>(shared: &Shared<T>, parked: &mut Option<u64>) {
    let Some(registration) = parked.take() else {
        return;
    };
    let mut locked = shared.lock();
    let still_parked = locked.guard.waiters.tasks.remove(registration);
    if !still_parked && locked.guard.state.len() > 0 {
        let inner = &mut *locked.guard;
        inner.waiters.wake_one(&shared.items_cv, &mut locked.wakers);
    }
}

/// Future of [`Queue::get_async`]: the next item, or `None` once the queue
/// is shut down and empty.
#[must_use = "futures do nothing unless polled"]
pub struct Get<'a, T: Item> {
    shared: &'a Shared<T>,
    parked: Option<u64>,
}

impl<'a, T: Item> Get<'a, T> {
    pub(crate) fn new(shared: &'a Shared<T>) -> Self {
        Self {
            shared,
            parked: None,
        }
    }
}

impl<T: Item> Future for Get<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        poll_item(this.shared, &mut this.parked, cx)
    }
}

impl<T: Item> Drop for Get<'_, T> {
    fn drop(&mut self) {
        cancel(self.shared, &mut self.parked);
    }
}

/// Stream of [`Queue::stream`]: items until the queue is shut down and
/// empty. Each item must be `done` like one from `get`.
#[must_use = "streams do nothing unless polled"]
pub struct ItemStream<T: Item> {
    queue: Queue<T>,
    parked: Option<u64>,
}

impl<T: Item> ItemStream<T> {
    pub(crate) fn new(queue: Queue<T>) -> Self {
        Self {
            queue,
            parked: None,
        }
    }
}

impl<T: Item> Stream for ItemStream<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        poll_item(&this.queue.shared, &mut this.parked, cx)
    }
}

impl<T: Item> Drop for ItemStream<T> {
    fn drop(&mut self) {
        cancel(&self.queue.shared, &mut self.parked);
    }
}

/// Future of [`Queue::shut_down_with_drain_async`]: resolves once no item
/// is being processed.
#[must_use = "futures do nothing unless polled"]
pub struct Drain<'a, T: Item> {
    shared: &'a Shared<T>,
    id: Option<u64>,
}

impl<'a, T: Item> Drain<'a, T> {
    pub(crate) fn new(shared: &'a Shared<T>) -> Self {
        Self { shared, id: None }
    }
}

impl<T: Item> Future for Drain<'_, T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut locked = this.shared.lock();
        if locked.drained() {
            if let Some(registration) = this.id.take() {
                locked.guard.waiters.drain_tasks.remove(registration);
            }
            return Poll::Ready(());
        }
        locked
            .guard
            .waiters
            .drain_tasks
            .register(&mut this.id, cx.waker());
        Poll::Pending
    }
}

impl<T: Item> Drop for Drain<'_, T> {
    fn drop(&mut self) {
        if let Some(registration) = self.id.take() {
            self.shared
                .lock()
                .guard
                .waiters
                .drain_tasks
                .remove(registration);
        }
    }
}
