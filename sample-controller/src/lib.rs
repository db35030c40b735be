//! kubernetes/sample-controller on kcontrol: a controller that keeps, for
//! each Foo (`samplecontroller.k8s.io/v1alpha1`), a Deployment of nginx
//! with the Foo's replicas, and reports the available replicas in the Foo's
//! status.
//!
//! The library holds everything the `sample-controller` binary runs, so
//! tests and benchmarks can run it in-process:
//!
//! - [`foo`]: the Foo type;
//! - [`deployment`]: the Deployment a Foo owns, and ownership checks;
//! - [`sync`]: the sync handler, over a [`sync::Backend`];
//! - [`handlers`]: what the informers' events put in the work queue;
//! - [`artifacts`]: the CRD and example manifests, built in;
//! - [`controller`]: informers, queue and workers put together;
//! - [`app`]: the binary's `main`;
//! - [`cli`]: flags, client configuration and exit codes;
//! - [`embedded`]: the `--embedded` demo's in-process server and progress;
//! - [`backend`]: the sync handler's backend over listers and the API;
//! - [`metrics`]: the `/metrics` endpoint;
//! - [`signals`]: SIGINT / SIGTERM handling.

// The resource is called Foo; clippy's placeholder-name lint would flag
// every variable holding one.
#![allow(clippy::disallowed_names)]

pub mod app;
pub mod artifacts;
pub mod backend;
pub mod cli;
pub mod controller;
pub mod deployment;
pub mod embedded;
pub mod foo;
pub mod handlers;
mod informers;
pub mod metrics;
pub mod signals;
mod stats;
pub mod sync;

pub use foo::{Foo, FooSpec, FooStatus};
pub use stats::ControllerStats;
