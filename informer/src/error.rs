//! [`InformerError`]: why an informer refused an operation.

use kcontrol_indexer::StoreError;

/// An informer operation that was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The informer has stopped: it takes no more handlers or indexers.
    #[error("informer {informer:?} has stopped")]
    Stopped {
        /// The informer's name.
        informer: String,
    },
    /// The setting can only be changed before the informer starts.
    #[error("informer {informer:?} has already started; {what} can only be set before start")]
    AlreadyStarted {
        /// The informer's name.
        informer: String,
        /// What was being set.
        what: &'static str,
    },
    /// `run` was polled outside a tokio runtime: nothing was started.
    #[error("informer {informer:?} must be run on a tokio runtime; nothing was started")]
    NoRuntime {
        /// The informer's name.
        informer: String,
    },
    /// `run` was called on an informer that was run before (an informer
    /// runs once).
    #[error("informer {informer:?} was run before; an informer runs once")]
    AlreadyRun {
        /// The informer's name.
        informer: String,
    },
    /// An async handler was added outside a tokio runtime: it runs on a
    /// task of the runtime it is added on.
    #[error("async handler {handler:?} must be added on a tokio runtime (it runs on a task)")]
    NoRuntimeForHandler {
        /// The registration's name.
        handler: String,
    },
    /// The registration was made by another informer.
    #[error("handler {handler:?} is not registered with informer {informer:?}")]
    ForeignRegistration {
        /// The informer's name.
        informer: String,
        /// The registration's name.
        handler: String,
    },
    /// The store refused the indexers.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The handler's thread could not be started.
    #[error("cannot start the thread of handler {handler:?}: {source}")]
    Spawn {
        /// The registration's name.
        handler: String,
        /// What the operating system said.
        source: std::io::Error,
    },
}
