//! What the controller did since it started: [`ControllerStats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of the controller's work since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerStats {
    /// Keys handled by a worker (successful or not).
    pub syncs: u64,
    /// Syncs that failed and were re-queued with backoff.
    pub sync_errors: u64,
    /// Deployments created.
    pub deployments_created: u64,
    /// Deployments whose replicas were updated.
    pub deployments_updated: u64,
    /// Foo status writes.
    pub status_updates: u64,
    /// Keys dropped without retry (malformed key, no deploymentName).
    pub dropped: u64,
}

/// The live counters behind [`ControllerStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub syncs: AtomicU64,
    pub sync_errors: AtomicU64,
    pub deployments_created: AtomicU64,
    pub deployments_updated: AtomicU64,
    pub status_updates: AtomicU64,
    pub dropped: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ControllerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ControllerStats {
            syncs: get(&self.syncs),
            sync_errors: get(&self.sync_errors),
            deployments_created: get(&self.deployments_created),
            deployments_updated: get(&self.deployments_updated),
            status_updates: get(&self.status_updates),
            dropped: get(&self.dropped),
        }
    }
}
