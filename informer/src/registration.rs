//! [`HandlerRegistration`]: the handle `add_event_handler` returns (its
//! per-handler `has_synced`, IN4), and [`HandlerOptions`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::listener::{HandlerSync, ResyncSchedule};
use crate::synced::HasSynced;

/// Options of one event handler (client-go's `HandlerOptions`).
#[derive(Clone, Debug, Default)]
pub struct HandlerOptions {
    /// The handler's name in logs, metrics and its thread's name; default
    /// `handler-<n>`.
    pub name: Option<String>,
    /// How often the handler wants every object again as a resync
    /// (`on_update` with equal resourceVersions); default the informer's
    /// resync period. Zero: never. Below 1 s it is raised to 1 s, and below
    /// the informer's resync check period it is raised to that period once
    /// the informer has started (before start it lowers the check period).
    pub resync_period: Option<Duration>,
    /// Whether a plain handler may block (wait on I/O, a lock held
    /// elsewhere, a channel): it then gets an OS thread of its own.
    /// Default false: it runs on a tokio task of its own, which is what a
    /// handler that only enqueues keys (every controller's) needs, and
    /// costs no thread per registration. Outside a tokio runtime a handler
    /// always gets a thread. Async handlers ignore it.
    pub blocking: bool,
}

impl HandlerOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the resync period.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Says whether the (plain) handler may block, and so needs an OS
    /// thread of its own instead of a tokio task (the `blocking` field).
    #[must_use]
    pub fn blocking(mut self, blocking: bool) -> Self {
        self.blocking = blocking;
        self
    }
}

/// A registered event handler: ask whether it has synced, or pass it to
/// [`SharedIndexInformer::remove_event_handler`](crate::SharedIndexInformer::remove_event_handler).
/// Cheap to clone; not generic, so registrations of informers of different
/// kinds go in one list for [`wait_for_cache_sync`](crate::wait_for_cache_sync).
#[derive(Clone)]
pub struct HandlerRegistration {
    pub(crate) informer_id: u64,
    pub(crate) listener_id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) sync: Arc<HandlerSync>,
    pub(crate) resync: Arc<Mutex<ResyncSchedule>>,
}

impl fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("name", &self.name)
            .field("resync_period", &self.resync_period())
            .field("synced", &self.has_synced())
            .finish()
    }
}

impl HandlerRegistration {
    /// True once the informer has synced and this handler has handled every
    /// add of its initial list (the informer's initial list, or for a
    /// handler added later, the store contents it started with): one
    /// readiness barrier for the store and the handler. Once true, stays true.
    pub fn has_synced(&self) -> bool {
        self.sync.has_synced()
    }

    /// The handler's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The resync period in force (zero: none): what was asked for, after
    /// the informer's rules (see [`HandlerOptions::resync_period`]).
    pub fn resync_period(&self) -> Duration {
        self.resync.lock().period
    }
}

impl HasSynced for HandlerRegistration {
    fn has_synced(&self) -> bool {
        HandlerRegistration::has_synced(self)
    }

    fn unsynced(&self) -> Vec<String> {
        crate::synced::unsynced_name(self.has_synced(), &format!("handler {}", self.name))
    }
}
