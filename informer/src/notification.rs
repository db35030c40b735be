//! [`Notification`]: what the informer hands to a listener's buffer, and
//! [`NotificationKind`], its name in metrics and logs.

use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::ObjectOrTombstone;

/// The kind of a handler notification, as metrics and logs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotificationKind {
    /// `on_add`.
    Add,
    /// `on_update` (a change, or a resync).
    Update,
    /// `on_delete`.
    Delete,
}

impl NotificationKind {
    /// `"add"`, `"update"` or `"delete"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Update => "update",
            Self::Delete => "delete",
        }
    }
}

impl fmt::Display for NotificationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event waiting in a listener's buffer. Objects are shared `Arc`s:
/// every listener and the store see the same allocation.
#[derive(Debug)]
pub(crate) enum Notification<K> {
    /// An object appeared; `initial` when it belongs to the initial list
    /// (or the store snapshot a late handler starts with).
    Add { obj: Arc<K>, initial: bool },
    /// An object changed (or was resynced).
    Update { old: Arc<K>, new: Arc<K> },
    /// An object went away.
    Delete(ObjectOrTombstone<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add { obj, initial } => Self::Add {
                obj: Arc::clone(obj),
                initial: *initial,
            },
            Self::Update { old, new } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Delete(obj) => Self::Delete(obj.clone()),
        }
    }
}

impl<K> Notification<K> {
    /// Its kind.
    pub(crate) fn kind(&self) -> NotificationKind {
        match self {
            Self::Add { .. } => NotificationKind::Add,
            Self::Update { .. } => NotificationKind::Update,
            Self::Delete(_) => NotificationKind::Delete,
        }
    }

    /// Whether it is an add of the initial list (tracked for `has_synced`).
    pub(crate) fn is_initial_add(&self) -> bool {
        matches!(self, Self::Add { initial: true, .. })
    }
}
