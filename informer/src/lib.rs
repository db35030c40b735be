//! Shared index informers for kcontrol: client-go's `SharedIndexInformer`,
//! with per-handler buffering, resync and cache-sync barriers.
//!
//! A [`SharedIndexInformer`] lists and watches one resource (through a
//! reflector) into a DeltaFIFO, pops it into an indexed
//! [`ThreadSafeStore`](kcontrol_indexer::ThreadSafeStore), and tells every
//! registered [`ResourceEventHandler`] about each change:
//!
//! - IN1: each handler has its own unbounded buffer and its own tokio
//!   task (or, if it may block, its own thread); a slow handler delays no
//!   other handler, and never the informer;
//! - IN2: a handler added after start first gets the store's contents as
//!   adds (`is_in_initial_list = true`), then live events;
//! - IN3: `on_update(old, new)` for changes and resyncs; `on_delete` gets a
//!   typed [`ObjectOrTombstone`](kcontrol_indexer::ObjectOrTombstone);
//! - IN4: per-handler resync periods, [`SharedIndexInformer::remove_event_handler`],
//!   and [`HandlerRegistration::has_synced`]: one readiness barrier for the
//!   store and the handler's initial list;
//! - IN5: a transform applied before objects are stored, and a store
//!   filter ([`SharedIndexInformerBuilder::store_filter`]) that keeps out
//!   what a selector cannot express;
//! - IN6: [`wait_for_cache_sync`] over many informers and registrations.
//!
//! [`metrics`] has the [`InformerMetrics`] hooks (handler notifications,
//! buffer depth, sync state) and, with the `prometheus` feature, an exporter.
//!
//! An [`InformerFactory`] hands out one shared informer per resource (and
//! namespace and selectors), starts them all and waits for them all.
//!
//! # Example
//!
//! A controller's start-up against the in-process API server: a shared
//! informer, a handler, the cache-sync barrier, then reads through a lister.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use kcontrol_client::Client;
//! use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, meta_namespace_key, Object};
//! use kcontrol_informer::{wait_for_cache_sync, InformerFactory, ResourceEventHandlerFuncs};
//! use kcontrol_testserver::TestServer;
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestServer::start().await?;
//! let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}});
//! server.objects().create("configmaps", "default", cm)?;
//!
//! let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
//! let factory = InformerFactory::new(client, Duration::from_secs(300));
//! let configmaps = factory.informer::<ConfigMap>();
//!
//! // A handler turns events into work-queue keys; here it just collects them.
//! let (keys, rx) = std::sync::mpsc::channel();
//! let keys = std::sync::Mutex::new(keys);
//! let registration = configmaps.add_event_handler(
//!     ResourceEventHandlerFuncs::new()
//!         .add_func(move |cm: &Arc<ConfigMap>, _initial| {
//!             let _ = keys.lock().unwrap().send(meta_namespace_key(cm.as_ref()).unwrap());
//!         }),
//! )?;
//!
//! let shutdown = CancellationToken::new();
//! factory.start(&shutdown)?;
//! // Ready once the stores hold the initial lists and the handler has seen its own.
//! wait_for_cache_sync(&shutdown, Some(Duration::from_secs(30)), &[&factory, &registration]).await?;
//! assert_eq!(rx.try_recv()?, "default/settings");
//! let lister = configmaps.lister();
//! assert!(lister.namespaced("default").get("settings").is_some());
//!
//! shutdown.cancel();
//! factory.shutdown().await;
//! assert!(configmaps.is_stopped());
//! # Ok(())
//! # }
//! ```

mod add_remove_handlers;
mod async_handler;
mod buffer;
mod builder;
mod error;
mod factory;
mod handle_deltas;
mod handler;
mod informer;
mod listener;
pub mod metrics;
mod notification;
mod processor;
mod registration;
mod resync_clock;
mod source;
mod synced;

#[cfg(test)]
mod tests;

pub use add_remove_handlers::MINIMUM_RESYNC_PERIOD;
pub use async_handler::{AsyncResourceEventHandler, HandlerFuture};
pub use builder::SharedIndexInformerBuilder;
pub use error::InformerError;
#[cfg(feature = "prometheus")]
pub use factory::prometheus_factory_metrics;
pub use factory::{
    CacheSize, FactoryError, FactoryMetrics, InformerFactory, InformerFactoryBuilder, InformerKey,
    InformerScope, SharedInformerFactory,
};
pub use handler::{FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs};
pub use informer::{SharedIndexInformer, StoreFilter};
pub use kcontrol_reflector::{BackoffConfig, PacingPreset, WatchConfig};
pub use metrics::{InformerMetrics, NoopInformerMetrics};
pub use notification::NotificationKind;
pub use registration::{HandlerOptions, HandlerRegistration};
pub use synced::{wait_for_cache_sync, CacheSyncError, HasSynced, SyncedFn};
