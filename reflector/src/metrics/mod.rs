//! [`ReflectorMetrics`]: hooks a [`Reflector`](crate::Reflector) reports
//! its activity to — lists and relists (by cause), items listed, watches
//! and watch restarts (by cause), watch events by type, resyncs, the last
//! synced resourceVersion — and, with the
//! `prometheus` feature, an implementation that exports them.

#[cfg(feature = "prometheus")]
pub mod prometheus;

use std::fmt;
use std::time::Duration;

/// The type of a watch event, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
    /// `BOOKMARK`.
    Bookmark,
    /// `ERROR`.
    Error,
}

impl WatchEventType {
    /// The wire name: `"ADDED"`, `"MODIFIED"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
            Self::Error => "ERROR",
        }
    }
}

impl fmt::Display for WatchEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a reflector relists or watches again: what ended the previous
/// ListAndWatch iteration or watch. A small fixed set, fit for a metric
/// label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RestartCause {
    /// The server ended the watch (its timeout, a closed or cut
    /// connection).
    Closed,
    /// 410 Expired: the version asked for is no longer served.
    Expired,
    /// 429 TooManyRequests.
    TooManyRequests,
    /// The server could not be reached (refused, or broken before any
    /// answer).
    Unreachable,
    /// A 5xx answer or `ERROR` event (504 "too large resource version"
    /// too).
    ServerError,
    /// A watch ended without any event in under a second.
    ShortWatch,
    /// An event or object that does not decode or is of another kind (RF7).
    BadData,
    /// Anything else (403, a FIFO refusal...).
    Other,
}

impl RestartCause {
    /// The label value: `"closed"`, `"expired"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Expired => "expired",
            Self::TooManyRequests => "too_many_requests",
            Self::Unreachable => "unreachable",
            Self::ServerError => "server_error",
            Self::ShortWatch => "short_watch",
            Self::BadData => "bad_data",
            Self::Other => "other",
        }
    }
}

impl fmt::Display for RestartCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receives one reflector's activity. Every method has a no-op default;
/// implement the ones you export. Calls come from the reflector's task and
/// should be quick.
pub trait ReflectorMetrics: Send + Sync {
    /// A list started (a WatchList's initial events count as a list).
    /// `relist` is false for the reflector's first list only.
    fn list_started(&self, relist: bool) {
        let _ = relist;
    }

    /// A list finished successfully with `items` objects after `elapsed`.
    fn list_finished(&self, items: u64, elapsed: Duration) {
        let _ = (items, elapsed);
    }

    /// A relist begins (before its `list_started(true)`), because the
    /// previous ListAndWatch iteration ended for `cause`.
    fn relisting(&self, cause: RestartCause) {
        let _ = cause;
    }

    /// A watch request was sent.
    fn watch_started(&self) {}

    /// A watch is about to be started again (before its `watch_started`),
    /// because the previous one ended (or failed to start) for `cause`.
    fn watch_restarting(&self, cause: RestartCause) {
        let _ = cause;
    }

    /// A watch stream ended (normally or not) after `events` events and
    /// `elapsed`.
    fn watch_ended(&self, events: u64, elapsed: Duration) {
        let _ = (events, elapsed);
    }

    /// A watch event was received.
    fn watch_event(&self, event: WatchEventType) {
        let _ = event;
    }

    /// A resync was queued.
    fn resync(&self) {}

    /// A list or watch failed (the error handler gets the error itself).
    fn failure(&self) {}

    /// The reflector waits `delay` before retrying.
    fn backoff(&self, delay: Duration) {
        let _ = delay;
    }

    /// The last synced resourceVersion changed.
    fn last_resource_version(&self, resource_version: &str) {
        let _ = resource_version;
    }

    /// A list or WatchList started delivering a new state into the FIFO
    /// (`true`), or the replace that completes it ended (`false`): see
    /// [`Reflector::relist_incomplete`](crate::Reflector::relist_incomplete).
    fn relist_incomplete(&self, incomplete: bool) {
        let _ = incomplete;
    }
}

/// Metrics that record nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopReflectorMetrics;

impl ReflectorMetrics for NoopReflectorMetrics {}
