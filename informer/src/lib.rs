//! Shared index informers for kcontrol: client-go's `SharedIndexInformer`,
//! with per-handler buffering, resync and cache-sync barriers.
//!
//! A [`SharedIndexInformer`] lists and watches one resource (through a
//! reflector) into a DeltaFIFO, pops it into an indexed
//! [`ThreadSafeStore`](kcontrol_indexer::ThreadSafeStore), and tells every
//! registered [`ResourceEventHandler`] about each change:
//!
//! - IN1: each handler has its own unbounded buffer and its own thread;
//!   a slow handler delays no other handler, and never the informer;
//! - IN2: a handler added after start first gets the store's contents as
//!   adds (`is_in_initial_list = true`), then live events;
//! - IN3: `on_update(old, new)` for changes and resyncs; `on_delete` gets a
//!   typed [`ObjectOrTombstone`](kcontrol_indexer::ObjectOrTombstone);
//! - IN4: per-handler resync periods, [`SharedIndexInformer::remove_event_handler`],
//!   and [`HandlerRegistration::has_synced`]: one readiness barrier for the
//!   store and the handler's initial list;
//! - IN5: a transform applied before objects are stored;
//! - IN6: [`wait_for_cache_sync`] over many informers and registrations.
//!
//! [`metrics`] has the [`InformerMetrics`] hooks (handler notifications,
//! buffer depth, sync state) and, with the `prometheus` feature, an exporter.

mod buffer;
mod builder;
mod clock;
mod error;
mod factory;
mod handler;
mod handlers;
mod informer;
mod listener;
pub mod metrics;
mod notification;
mod process;
mod processor;
mod reflector_source;
mod registration;
mod source;
mod synced;

#[cfg(test)]
mod tests;

pub use builder::SharedIndexInformerBuilder;
pub use error::InformerError;
pub use factory::{
    FactoryError, InformerFactory, InformerFactoryBuilder, InformerKey, InformerScope,
};
pub use handler::{FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs};
pub use handlers::MINIMUM_RESYNC_PERIOD;
pub use informer::SharedIndexInformer;
pub use metrics::{InformerMetrics, NoopInformerMetrics};
pub use notification::NotificationKind;
pub use registration::{HandlerOptions, HandlerRegistration};
pub use synced::{
    wait_for_cache_sync, wait_for_cache_sync_timeout, CacheSyncError, HasSynced, SyncedFn,
};
