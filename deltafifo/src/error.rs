//! Errors of [`DeltaFifo`](crate::DeltaFifo) operations, and what a pop's
//! processor may answer.

use kcontrol_indexer::KeyError;

/// Why a producer operation (`add`, `update`, `delete`, `replace`, `resync`,
/// ...) did nothing. A failed operation leaves the FIFO unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FifoError {
    /// The object has no key (it has no name); nothing was queued.
    #[error("cannot queue the object: {0}")]
    Key(#[from] KeyError),
    /// The FIFO was closed; it takes no more changes.
    #[error("the DeltaFIFO is closed")]
    Closed,
    /// A replace (streaming or not) is already under way; finish or drop it first.
    #[error("a replace is already in progress on this DeltaFIFO")]
    ReplaceInProgress,
    /// Called from inside a pop's processor, where it would wait for itself
    /// (`delete`, `resync`, replace `finish` and `pop` wait until no
    /// processor runs; `add` and `update` may be called from a processor).
    #[error("called from inside this DeltaFIFO's pop processor, where it would deadlock")]
    CalledFromProcessor,
}

/// What a pop's processor answers when it could not handle the deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessError<E> {
    /// Put the deltas back in the queue (in front of any change queued for
    /// the same key meanwhile) and report `E` from `pop`.
    Requeue(E),
    /// Drop the deltas and report `E` from `pop`.
    Failed(E),
}

/// Why a pop handed nothing, or its processor reported an error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PopError<E> {
    /// The FIFO is closed and empty.
    #[error("the DeltaFIFO is closed")]
    Closed,
    /// `pop` was called from inside this FIFO's processor.
    #[error("pop called from inside this DeltaFIFO's pop processor, where it would deadlock")]
    CalledFromProcessor,
    /// The processor asked for a requeue; the deltas are queued again.
    #[error("processing failed, deltas requeued: {0}")]
    Requeued(E),
    /// The processor failed; the deltas were dropped.
    #[error("processing failed, deltas dropped: {0}")]
    Failed(E),
}
