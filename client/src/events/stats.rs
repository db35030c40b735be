//! What a recorder did with the events it was given: [`RecorderStats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of a [`Recorder`](super::Recorder)'s events since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Events accepted into the buffer.
    pub recorded: u64,
    /// Events dropped because the buffer was full (or the writer was gone).
    pub dropped: u64,
    /// Events the per-object spam filter dropped.
    pub filtered: u64,
    /// Events written as a new Event (POST).
    pub created: u64,
    /// Repeats written as a patch of an earlier Event's count (PATCH).
    pub patched: u64,
    /// Writes tried again after a transient failure.
    pub retried: u64,
    /// Events given up after a permanent failure or too many attempts.
    pub failed: u64,
}

impl RecorderStats {
    /// Events the writer has finished with: written, filtered or given up.
    pub fn processed(&self) -> u64 {
        self.created + self.patched + self.filtered + self.failed
    }
}

/// The live counters behind [`RecorderStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub recorded: AtomicU64,
    pub dropped: AtomicU64,
    pub filtered: AtomicU64,
    pub created: AtomicU64,
    pub patched: AtomicU64,
    pub retried: AtomicU64,
    pub failed: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RecorderStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RecorderStats {
            recorded: get(&self.recorded),
            dropped: get(&self.dropped),
            filtered: get(&self.filtered),
            created: get(&self.created),
            patched: get(&self.patched),
            retried: get(&self.retried),
            failed: get(&self.failed),
        }
    }
}
