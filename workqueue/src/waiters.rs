//! Who is waiting for an item (or for a drain to finish): OS threads
//! blocked on a condition variable and tokio (or any executor's) tasks
//! parked with a [`Waker`]. Kept under the queue lock, so a producer knows
//! exactly whether anyone sleeps and wakes nobody needlessly.
//!
//! A woken waiter is taken off the list by its waker. A task that is woken
//! but dropped before it takes an item passes the wake-up on (see
//! [`crate::get`]), so no item is stranded while someone waits.

use std::collections::VecDeque;
use std::task::Waker;

use crate::sync::Condvar;

/// Parked tasks, in arrival order.
#[derive(Default)]
pub(crate) struct TaskList {
    next_id: u64,
    list: VecDeque<(u64, Waker)>,
}

impl TaskList {
    /// Registers (or refreshes) the task whose registration is `id`.
    pub(crate) fn register(&mut self, id: &mut Option<u64>, waker: &Waker) {
        if let Some(current) = *id {
            if let Some((_, w)) = self.list.iter_mut().find(|(i, _)| *i == current) {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                return;
            }
        }
        let new_id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.list.push_back((new_id, waker.clone()));
        *id = Some(new_id);
    }

    /// Removes a registration; false when it was already taken by a wake-up.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        match self.list.iter().position(|(i, _)| *i == id) {
            Some(index) => {
                self.list.remove(index);
                true
            }
            None => false,
        }
    }

    fn pop(&mut self) -> Option<Waker> {
        self.list.pop_front().map(|(_, w)| w)
    }

    fn take_all(&mut self, out: &mut Vec<Waker>) {
        out.extend(self.list.drain(..).map(|(_, w)| w));
    }
}

/// Waiters for items and for drains.
#[derive(Default)]
pub(crate) struct Waiters {
    /// Threads blocked in `get` that no one has notified yet.
    pub(crate) sleeping: usize,
    /// Tasks parked in `get().await` or a stream.
    pub(crate) tasks: TaskList,
    /// Threads blocked in `shut_down_with_drain`.
    pub(crate) drain_sleeping: usize,
    /// Tasks awaiting a drain.
    pub(crate) drain_tasks: TaskList,
}

impl Waiters {
    /// Wakes one waiter for an item, if any waits: a task (its waker goes
    /// to `out`, to be woken after the lock is released) or else a thread.
    #[inline]
    pub(crate) fn wake_one(&mut self, items: &Condvar, out: &mut Vec<Waker>) {
        if let Some(w) = self.tasks.pop() {
            out.push(w);
        } else if self.sleeping > 0 {
            self.sleeping -= 1;
            items.notify_one();
        }
    }

    /// Whether any item waiter waits.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.sleeping > 0 || !self.tasks.list.is_empty()
    }

    /// Wakes every item waiter (shutdown).
    pub(crate) fn wake_all(&mut self, items: &Condvar, out: &mut Vec<Waker>) {
        self.tasks.take_all(out);
        if self.sleeping > 0 {
            self.sleeping = 0;
            items.notify_all();
        }
    }

    /// Wakes every drain waiter.
    pub(crate) fn wake_drainers(&mut self, drain: &Condvar, out: &mut Vec<Waker>) {
        self.drain_tasks.take_all(out);
        if self.drain_sleeping > 0 {
            self.drain_sleeping = 0;
            drain.notify_all();
        }
    }
}
