//! The Reflector: client-go's ListAndWatch, from the Kubernetes API into a
//! [`DeltaFifo`](kcontrol_deltafifo::DeltaFifo).
//!
//! - [`ListerWatcher`] is what a reflector lists and watches through; it
//!   is implemented for [`Api<K>`](kcontrol_client::Api) and for
//!   [`ListWatch<K>`] (an `Api` with label and field selectors);
//! - [`Reflector`] lists (paged, streamed object by object into the FIFO)
//!   or syncs through WatchList, then watches, with client-go's
//!   resourceVersion rules, 410 handling, backoff and resyncs; the
//!   contracts RF1–RF9 are listed on its page;
//! - [`ReflectorConfig`] holds its options: a [`WatchConfig`] (how it lists
//!   and watches, the value every layer above takes too), with
//!   [`BackoffConfig`], and what it does with the objects;
//!   [`PacingPreset`] chooses kcontrol's pacing or client-go's (RF5);
//! - [`ReflectorError`] is what its error handler receives;
//! - [`metrics`] has the [`ReflectorMetrics`] hooks, and with the
//!   `prometheus` feature an exporter.
//!
//! # Example
//!
//! A reflector filling a FIFO from an in-process API server, and a consumer
//! popping the FIFO into a store (what an informer does):
//!
//! ```
//! use std::sync::Arc;
//! use kcontrol_client::{Api, Client, Config};
//! use kcontrol_deltafifo::{Delta, DeltaFifo, ProcessError};
//! use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
//! use kcontrol_indexer::ThreadSafeStore;
//! use kcontrol_reflector::{ListWatch, Reflector, ReflectorConfig};
//! use kcontrol_testserver::TestServer;
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestServer::start().await?;
//! let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings", "labels": {"app": "web"}}});
//! server.objects().create("configmaps", "default", cm)?;
//!
//! let client = Client::new(Config::new(server.url().parse()?))?;
//! let store = Arc::new(ThreadSafeStore::<ConfigMap>::new());
//! let fifo = DeltaFifo::<ConfigMap>::builder().known_objects(store.clone()).build();
//! let lister_watcher = ListWatch::new(Api::<ConfigMap>::namespaced(client, "default")).labels("app=web");
//! let reflector = Arc::new(Reflector::new(
//!     Arc::new(lister_watcher),
//!     fifo.clone(),
//!     ReflectorConfig::default().name("configmaps"),
//! ));
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (reflector, shutdown) = (reflector.clone(), shutdown.clone());
//!     async move { reflector.run(shutdown).await }
//! });
//!
//! // the consumer: pops for as long as the FIFO is open (an informer's
//! // processing loop), each key's newest delta applied to the store
//! let consumer = tokio::spawn({
//!     let (fifo, store) = (fifo.clone(), store.clone());
//!     async move {
//!         while fifo
//!             .pop_async(|deltas, _initial| {
//!                 match deltas.newest() {
//!                     Delta::Deleted(_) => drop(store.delete_by_key(deltas.key())),
//!                     newest => drop(store.add(newest.object().clone()).map_err(ProcessError::Failed)?),
//!                 }
//!                 Ok(())
//!             })
//!             .await
//!             .is_ok()
//!         {}
//!     }
//! });
//! // synced: the first list is queued whole and every item of it popped
//! // (a pop may come before the list ends, so the consumer cannot stop at
//! // the first synced look: it keeps popping, as an informer does)
//! while !fifo.has_synced() {
//!     tokio::time::sleep(std::time::Duration::from_millis(5)).await;
//! }
//! assert_eq!(store.list_keys(), ["default/settings"]);
//! assert!(fifo.last_sync_resource_version().is_some());
//!
//! shutdown.cancel();
//! running.await?;
//! fifo.close();
//! consumer.await?;
//! # Ok(())
//! # }
//! ```

mod backoff;
mod config;
mod error;
mod list;
mod lister_watcher;
pub mod metrics;
mod reflector;
mod relist;
mod retry;
mod watch;
mod watch_list;

pub use backoff::PacingPreset;
pub use config::{
    BackoffConfig, ErrorHandlerFn, ReflectorConfig, ShouldResyncFn, TransformFn, WatchConfig,
};
pub use error::ReflectorError;
pub use lister_watcher::{ListWatch, ListerWatcher, WatchEventStream};
pub use metrics::{NoopReflectorMetrics, ReflectorMetrics, RestartCause, WatchEventType};
pub use reflector::Reflector;
