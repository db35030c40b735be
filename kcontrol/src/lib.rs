//! kcontrol: client-go's controller machinery for Rust.
//!
//! # Write your first controller
//!
//! Depend on `kcontrol` alone and `use kcontrol::prelude::*;`: the client,
//! the informer factory and handlers, the cache-sync barrier, the work
//! queue and the [`CancellationToken`] that stops them. The example
//! `examples/first_controller.rs` is a whole controller (informer →
//! handler → rate-limited queue → two workers → writes through the API),
//! run against the in-process test API server:
//! `cargo run -p kcontrol --example first_controller`.
//!
//! The same with the controller layer ([`controller::Controller`]: a
//! builder, a reconciler returning an [`controller::Action`], workers and
//! graceful shutdown included) is `kcontrol-controller`'s example
//! `configmap_to_secret.rs` (100 lines):
//! `cargo run -p kcontrol-controller --example configmap_to_secret -- --embedded`.
//!
//! This crate re-exports the kcontrol crates under one name, so a
//! controller depends on `kcontrol` alone:
//!
//! | module | crate | client-go counterpart |
//! |---|---|---|
//! | [`client`] | `kcontrol-client` | `rest`, `tools/clientcmd`, typed clients, `tools/record` |
//! | [`indexer`] | `kcontrol-indexer` | `tools/cache` store, indexers, listers; `labels` |
//! | [`deltafifo`] | `kcontrol-deltafifo` | `tools/cache` DeltaFIFO |
//! | [`reflector`] | `kcontrol-reflector` | `tools/cache` Reflector, ListerWatcher |
//! | [`informer`] | `kcontrol-informer` | shared informers, informer factory |
//! | [`workqueue`] | `kcontrol-workqueue` | `util/workqueue` |
//! | [`controller`] | `kcontrol-controller` | controller-runtime's builder and reconciler, sample-controller's worker loop and owner mapping, `metav1` controller refs; `tools/leaderelection`; component-base `/healthz`, `/readyz`, `/metrics` |
//!
//! The data flow is client-go's: a reflector lists and watches the API
//! server into a DeltaFIFO; the informer pops it into a thread-safe indexed
//! store and calls event handlers; handlers enqueue `namespace/name` keys on
//! a rate-limited work queue drained by workers that reconcile.
//!
//! # Example
//!
//! An informer feeding a work queue, against the in-process test API server
//! (`kcontrol-testserver`), so it runs without a cluster:
//!
//! ```
//! use std::time::Duration;
//!
//! use kcontrol::client::{Api, Client, PostParams};
//! use kcontrol::k8s_openapi::api::core::v1::ConfigMap;
//! use kcontrol::indexer::meta_namespace_key;
//! use kcontrol::informer::{wait_for_cache_sync, InformerFactory, ResourceEventHandlerFuncs};
//! use kcontrol::workqueue::RateLimitingQueue;
//! use kcontrol_testserver::TestServer;
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestServer::start().await?;
//! let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
//!
//! // One shared informer per resource; its handler enqueues keys.
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
//! let factory = InformerFactory::new(client.clone(), Duration::ZERO);
//! let configmaps = factory.informer::<ConfigMap>();
//! let enqueue = queue.clone();
//! let registration = configmaps.add_event_handler(
//!     ResourceEventHandlerFuncs::new().add_func(move |cm: &std::sync::Arc<ConfigMap>, _initial| {
//!         if let Ok(key) = meta_namespace_key(cm.as_ref()) {
//!             enqueue.add(key);
//!         }
//!     }),
//! )?;
//!
//! let shutdown = CancellationToken::new();
//! factory.start(&shutdown)?;
//! // Ready once the store holds the initial list and the handler has seen it.
//! wait_for_cache_sync(&shutdown, Some(Duration::from_secs(10)), &[&factory, &registration]).await?;
//!
//! // A write on the server becomes a key on the queue.
//! let api: Api<ConfigMap> = Api::namespaced(client, "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! api.create(&PostParams::default(), &cm).await?;
//!
//! let key = tokio::time::timeout(Duration::from_secs(10), queue.get_async()).await?;
//! assert_eq!(key.as_deref(), Some("default/settings"));
//! // ... reconcile, then:
//! if let Some(key) = key {
//!     queue.forget(&key);
//!     queue.done(&key);
//! }
//!
//! queue.shut_down();
//! shutdown.cancel();
//! factory.shutdown().await;
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub use kcontrol_client as client;
pub use kcontrol_controller as controller;
pub use kcontrol_deltafifo as deltafifo;
pub use kcontrol_indexer as indexer;
pub use kcontrol_informer as informer;
pub use kcontrol_reflector as reflector;
pub use kcontrol_workqueue as workqueue;

mod error;
pub mod prelude;

pub use error::{Error, Result};
/// Defines a custom resource type in one macro call (see
/// [`indexer::custom_resource!`]).
pub use kcontrol_indexer::custom_resource;
/// Define a lean type of a resource (only the fields read, compact
/// metadata; see [`indexer::lean_resource!`]).
pub use kcontrol_indexer::lean_resource;

/// The token that stops informers, factories and waits (tokio-util's), so
/// a controller needs no tokio-util dependency of its own.
pub use tokio_util::sync::CancellationToken;

/// The `k8s-openapi` crate kcontrol's typed objects come from (feature `v1_33`).
pub use kcontrol_indexer::k8s_openapi;

/// README.md's Rust code blocks, compiled as doc tests (`cargo test -p
/// kcontrol --doc`), so the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
