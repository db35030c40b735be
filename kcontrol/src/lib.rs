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
//! `cargo run -p kcontrol --features testserver --example first_controller`.
//!
//! The same with the controller layer ([`controller::Controller`]: a
//! builder, a reconciler returning an [`controller::Action`], workers and
//! graceful shutdown included) is `kcontrol-controller`'s example
//! `configmap_to_secret.rs` (100 lines):
//! `cargo run -p kcontrol-controller --example configmap_to_secret -- --embedded`.
//!
//! # Write an operator
//!
//! `kcontrol-controller`'s example `operator.rs` is a whole operator in a
//! page, importing `kcontrol` alone: a custom resource whose CRD comes
//! from its Rust type ([`resource`], [`schema`]), owning a Deployment and a
//! Service through writes that do nothing at steady state
//! (`ctx.apply_owned`), status conditions, a finalizer recording an
//! awaited Event, metrics and health by default, and the usual flags
//! ([`controller::Args`]):
//! `cargo run --release -p kcontrol-controller --example operator -- --embedded`.
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
//! Docs across the crates cite behaviour contracts by id (`WQ3`, `RF7`,
//! `CT14`...): each is defined, with the tests that prove it, in
//! [`design`] (the project's DESIGN.md).
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

// `#[resource]` and `#[schema]` expand to paths under `::kcontrol`, which
// must resolve inside this crate too (its unit tests).
extern crate self as kcontrol;

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

/// Makes the custom resource type of a spec struct and its CRD
/// (kube-derive's `CustomResource` with kcontrol's crate paths; see
/// [`kcontrol_derive::resource`]).
pub use kcontrol_derive::resource;
/// Derives what a type inside a custom resource needs (`Serialize`,
/// `Deserialize`, `JsonSchema`, `Clone`, `Debug`; see
/// [`kcontrol_derive::schema`]).
pub use kcontrol_derive::schema;

/// clap, for flattening [`Args`](controller::Args) into an operator's parser
/// (`use kcontrol::clap;` lets `#[derive(clap::Parser)]` find it).
pub use clap;
/// kube-rs's object model (`Resource`, `CustomResourceExt`), which
/// kcontrol's [`Object`](indexer::Object) and
/// [`TypedResource`](indexer::TypedResource) are implemented over: types
/// from kube-derive's `#[derive(CustomResource)]` work in kcontrol's
/// informers, listers and controllers unchanged.
pub use kube_core;
/// The JSON Schema generator CRD schemas come from.
pub use schemars;
/// serde, for the derives `#[resource]` and `#[schema]` add.
pub use serde;
/// serde_json, for the CRD schema kube-derive builds.
pub use serde_json;
/// tokio, the runtime kcontrol runs on
/// (`#[tokio::main(crate = "kcontrol::tokio")]`).
pub use tokio;

/// The in-process test API server (feature `testserver`).
#[cfg(feature = "testserver")]
pub use kcontrol_testserver as testserver;

/// What the macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use kube_derive::CustomResource;
}

/// The design: layout, data flow, and the numbered behaviour contracts
/// (workqueue `WQ`, indexer `IX`, deltafifo `DF`, reflector `RF`, informer
/// `IN`, controller `CT`, health `HL`, leader election `LE`, sharding `SH`,
/// protobuf `PB`, webhooks `WH`...) that other pages cite by id, each with
/// the tests that prove it. This page is DESIGN.md, so its code blocks are
/// compiled as doc tests too. (Built for rustdoc only: the compiler and
/// clippy need not read a thousand lines of prose.)
#[cfg(any(doc, doctest))]
#[doc = include_str!("../../DESIGN.md")]
pub mod design {}

/// README.md's Rust code blocks, compiled as doc tests (`cargo test -p
/// kcontrol --doc`), so the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
