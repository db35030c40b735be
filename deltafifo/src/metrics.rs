//! [`FifoMetrics`]: optional hooks a [`DeltaFifo`](crate::DeltaFifo) reports
//! its activity to (queue depth, queued deltas, processing time).

use std::time::Duration;

use crate::delta::DeltaType;

/// Receives a [`DeltaFifo`](crate::DeltaFifo)'s activity. Every method has a
/// no-op default; implement the ones you export. Calls are made without the
/// FIFO's locks held, so an implementation may take its own locks, but it
/// should be quick: it runs on the producer's or the popper's thread.
pub trait FifoMetrics: Send + Sync {
    /// A delta of this kind was appended to a key's list (before a collapse
    /// of two deletions, which is not reported separately).
    fn delta_queued(&self, kind: DeltaType) {
        let _ = kind;
    }

    /// The number of queued keys changed to `depth`.
    fn depth(&self, depth: usize) {
        let _ = depth;
    }

    /// A processor ran for `elapsed`; `requeued` when it asked for a requeue.
    fn processed(&self, elapsed: Duration, requeued: bool) {
        let _ = (elapsed, requeued);
    }
}
