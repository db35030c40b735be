//! kubernetes/sample-controller on kcontrol: a controller that keeps, for
//! each Foo (`samplecontroller.k8s.io/v1alpha1`), a Deployment of nginx
//! with the Foo's replicas, and reports the available replicas in the Foo's
//! status.
//!
//! The library holds everything the `sample-controller` binary runs, so
//! tests and benchmarks can run it in-process:
//!
//! - [`foo`]: the Foo type;
//! - [`deployment`]: the Deployment a Foo owns;
//! - [`sync`]: the sync handler, over a [`sync::Backend`];
//! - [`artifacts`]: the CRD and example manifests, built in;
//! - [`controller`]: informers, listers, queue and workers put together
//!   from kcontrol-controller's parts (event handlers, workers, signals,
//!   health server, leader election);
//! - [`app`]: the binary's `main`;
//! - [`cli`]: flags, client configuration and exit codes;
//! - [`embedded`] (feature `embedded`, on by default): the `--embedded`
//!   demo's in-process server and progress; a production build can leave
//!   the test API server out with `--no-default-features --features jemalloc`;
//! - [`backend`]: the sync handler's backend over listers and the API;
//! - [`metrics`]: the controller's counters on `/metrics`.
//!
//! Running the controller in-process against the in-process API server,
//! as the tests do:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use kcontrol_client::RateLimit;
//! use sample_controller::controller::{Controller, ControllerError, ControllerOptions};
//! use sample_controller::{artifacts, embedded};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = embedded::start_server().await?;
//! let client = embedded::client_for(&server, RateLimit { qps: 100.0, burst: 100 })?;
//! artifacts::install_foo_crd(&client, Duration::from_secs(10)).await?;
//! embedded::create_foos(&client, 2).await?;
//!
//! let controller = Arc::new(Controller::new(client, ControllerOptions::default())?);
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (controller, shutdown) = (Arc::clone(&controller), shutdown.clone());
//!     async move { controller.run(shutdown).await }
//! });
//! // every Foo gets its Deployment, and its status the available replicas
//! let objects = server.objects();
//! for _ in 0..200 {
//!     if embedded::progress(&objects).all_synced() {
//!         break;
//!     }
//!     tokio::time::sleep(Duration::from_millis(50)).await;
//! }
//! assert!(embedded::progress(&objects).all_synced());
//! assert_eq!(controller.deployments().list().len(), 2);
//! shutdown.cancel();
//! running.await??;
//! // a controller runs once: a second run is an error at once
//! let again = tokio::time::timeout(Duration::from_secs(10), controller.run(CancellationToken::new())).await?;
//! assert!(matches!(again, Err(ControllerError::AlreadyRun)));
//! # Ok(())
//! # }
//! ```

// The resource is called Foo; clippy's placeholder-name lint would flag
// every variable holding one.
#![allow(clippy::disallowed_names)]

pub mod app;
pub mod artifacts;
pub mod backend;
pub mod cli;
pub mod controller;
#[cfg(feature = "embedded")]
mod demo;
pub mod deployment;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod foo;
pub mod metrics;
pub mod reconcile_log;
mod stats;
pub mod sync;

pub use foo::{Foo, FooSpec, FooStatus};

/// The jemalloc options the binary starts with (NUL-terminated, as
/// jemalloc's `malloc_conf` wants it): one arena, so objects freed by a
/// relist on one thread are reused by the next list decoded on another
/// instead of growing a second arena; and a background thread that returns
/// freed pages to the system while the controller is idle. With them a
/// relist of 10,000 Foos peaks 1.08x the steady RSS and settles back; with
/// jemalloc's defaults it peaked 1.35x and stayed there (`kcontrol-bench
/// controller`).
pub const JEMALLOC_CONF: &[u8] = b"narenas:1,background_thread:true\0";
pub use stats::ControllerStats;
