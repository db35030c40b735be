//! [`Processor`]: the set of listeners of one informer (client-go's
//! `sharedProcessor`): distributing notifications, deciding which
//! listeners a resync is for, adding and removing listeners.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::oneshot;

use crate::listener::{Listener, ResyncSchedule};
use crate::notification::Notification;
use crate::resync_clock::ResyncClock;

/// One listener and what the processor keeps beside it.
struct Entry<K> {
    listener: Arc<Listener<K>>,
    /// Set by the last [`Processor::should_resync`]: this listener takes
    /// sync notifications until the next check.
    syncing: bool,
    /// Completes when the listener's thread has ended.
    done: oneshot::Receiver<()>,
}

/// The listeners of one informer.
pub(crate) struct Processor<K> {
    listeners: RwLock<Vec<Entry<K>>>,
    clock: ResyncClock,
}

impl<K: Send + Sync + 'static> Processor<K> {
    pub(crate) fn new(clock: ResyncClock) -> Self {
        Self {
            listeners: RwLock::new(Vec::new()),
            clock,
        }
    }

    pub(crate) fn clock(&self) -> &ResyncClock {
        &self.clock
    }

    /// Adds a listener whose thread is running.
    pub(crate) fn add(&self, listener: Arc<Listener<K>>, done: oneshot::Receiver<()>) {
        self.listeners.write().push(Entry {
            listener,
            syncing: false,
            done,
        });
    }

    /// Removes and stops a listener; `false` if it was not there.
    pub(crate) fn remove(&self, id: u64) -> bool {
        let entry = {
            let mut listeners = self.listeners.write();
            let Some(pos) = listeners.iter().position(|e| e.listener.id == id) else {
                return false;
            };
            listeners.remove(pos)
        };
        entry.listener.stop();
        true
    }

    /// Stops every listener and hands back what completes when their
    /// threads have ended.
    pub(crate) fn stop_all(&self) -> Vec<oneshot::Receiver<()>> {
        let entries = std::mem::take(&mut *self.listeners.write());
        entries
            .into_iter()
            .map(|e| {
                e.listener.stop();
                e.done
            })
            .collect()
    }

    /// Hands a notification to every listener, or for a sync notification
    /// only to those whose resync is due (client-go's `distribute`).
    pub(crate) fn distribute(&self, notification: Notification<K>, sync: bool) {
        let listeners = self.listeners.read();
        let mut targets = listeners
            .iter()
            .filter(|e| !sync || e.syncing)
            .map(|e| &e.listener)
            .peekable();
        while let Some(listener) = targets.next() {
            if targets.peek().is_some() {
                listener.add(notification.clone());
            } else {
                listener.add(notification);
                break;
            }
        }
    }

    /// Called on each resync check: marks the listeners whose resync is due
    /// (and schedules their next one), and says whether any is due, so the
    /// caller queues a resync (client-go's `shouldResync`).
    pub(crate) fn should_resync(&self) -> bool {
        let now = self.clock.now();
        let mut any = false;
        for entry in self.listeners.write().iter_mut() {
            let mut schedule = entry.listener.resync.lock();
            entry.syncing = schedule.is_due(now);
            if entry.syncing {
                any = true;
                schedule.next = now + schedule.period;
            }
        }
        any
    }

    /// The informer's check period changed (before start): recompute each
    /// listener's period from what it asked for.
    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        let now = self.clock.now();
        for entry in self.listeners.read().iter() {
            let mut schedule = entry.listener.resync.lock();
            *schedule = ResyncSchedule::new(schedule.requested, check, now);
        }
    }

    /// Calls `f` on every listener.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<Listener<K>>)) {
        for entry in self.listeners.read().iter() {
            f(&entry.listener);
        }
    }

    /// How many listeners there are.
    pub(crate) fn len(&self) -> usize {
        self.listeners.read().len()
    }
}
