//! [`InformerMetrics`]: optional hooks an informer reports its handlers'
//! activity to (notifications, pending buffer depth, sync state), in the
//! style of the DeltaFIFO's and the reflector's metrics: one object per
//! informer, every method a no-op by default; with the `prometheus`
//! feature, an exporter.

#[cfg(feature = "prometheus")]
pub mod prometheus;

use std::time::Duration;

use crate::notification::NotificationKind;

/// Receives an informer's handler activity. Every method has a no-op
/// default; implement the ones you export. `handler` is the registration's
/// name ([`HandlerOptions::name`](crate::HandlerOptions::name), or
/// `handler-<n>`).
///
/// Calls come from the informer's processing task (`notification_queued`,
/// `pending` as notifications are queued, `handler_synced`) or from the
/// handler's own thread, without the handler's buffer lock held but possibly
/// while the informer processes a change: keep them quick, and never call
/// back into the informer from them.
pub trait InformerMetrics: Send + Sync {
    /// The informer queued a notification of this kind for `handler`
    /// (counts notifications distributed, per handler and kind).
    fn notification_queued(&self, handler: &str, kind: NotificationKind) {
        let _ = (handler, kind);
    }

    /// `handler` returned from a notification after `elapsed`; `panicked`
    /// when it panicked (the panic is caught and logged, and the handler
    /// goes on with the next notification).
    fn notification_handled(
        &self,
        handler: &str,
        kind: NotificationKind,
        elapsed: Duration,
        panicked: bool,
    ) {
        let _ = (handler, kind, elapsed, panicked);
    }

    /// The number of notifications waiting in `handler`'s buffer changed to
    /// `depth` (not counting the one being handled).
    fn pending(&self, handler: &str, depth: usize) {
        let _ = (handler, depth);
    }

    /// `handler` became synced: the informer has synced and the handler has
    /// handled every item of its initial list. Reported once per handler.
    fn handler_synced(&self, handler: &str) {
        let _ = handler;
    }

    /// `handler` was added (`true`) or removed / stopped (`false`).
    fn handler_registered(&self, handler: &str, registered: bool) {
        let _ = (handler, registered);
    }
}

/// Metrics that record nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopInformerMetrics;

impl InformerMetrics for NoopInformerMetrics {}
