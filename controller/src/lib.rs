//! Writing and running kcontrol controllers.
//!
//! The controller layer, on client-go's parts (informers, listers, a
//! rate-limited work queue):
//!
//! - [`Controller`], built as `Controller::new(client).for_resource::<K>().owns::<Child>()
//!   .watches::<T>(mapper).run(reconciler, shutdown)`: informers from one
//!   shared factory, predicates ([`predicate`]), a [`Reconciler`] returning
//!   an [`Action`], an error policy, graceful shutdown;
//! - for hand-written, client-go-shaped controllers: [`handlers`] (enqueue
//!   an object's key, or its controller owner's), [`run_workers`] (client-go's
//!   `processNextWorkItem` loop, panics contained, graceful drain),
//!   [`owner`] (controller references), [`signals`] (SIGINT/SIGTERM);
//!   [`wait_for_caches`] (the cache-sync barrier over informers and
//!   handler registrations);
//! - operator helpers: [`finalizer()`] (cleanup before deletion),
//!   [`conditions`] (status conditions) and [`expectations`] (creations
//!   and deletions not yet seen in the cache, client-go's
//!   `ControllerExpectations`).
//!
//! Running them in production:
//!
//! - [`health`]: `/healthz`, `/readyz` (informers and handlers synced, not
//!   shutting down) and `/metrics` on one small HTTP server;
//! - [`leader_election`]: client-go's leader election on
//!   `coordination.k8s.io/v1` Leases, so that of several replicas of a
//!   controller only one writes;
//! - [`metrics`]: the client's request metrics (`rest_client_*`) in a
//!   Prometheus registry;
//! - [`webhook`]: admission (defaulting, validating) and conversion
//!   webhooks on an HTTPS server with a reloadable certificate, served by
//!   [`Manager::serve_webhooks`] beside the controllers.
//!
//! The contracts (CT…, HL…, LE…) are in the workspace's `DESIGN.md`; the
//! example `examples/configmap_to_secret.rs` is a whole controller.

mod builder;
pub mod conditions;
pub mod expectations;
pub mod finalizer;
pub mod handlers;
pub mod health;
pub mod leader_election;
mod manager;
pub mod metrics;
pub mod owner;
pub mod predicate;
mod reconciler;
pub mod signals;
pub mod webhook;
pub mod workers;

pub use builder::{wait_for_caches, Controller, ControllerBuilder, ControllerError};
pub use expectations::Expectations;
pub use finalizer::{finalizer, FinalizerError};
pub use health::{Health, Readiness, SharedRegistry};
pub use leader_election::{
    default_identity, LeaderElectionConfig, LeaderElectionError, LeaderElector,
};
pub use manager::{Manager, ManagerError};
pub use reconciler::{Action, CacheWaitError, Context, Reconciler};
pub use workers::run_workers;
