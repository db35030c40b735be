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
//!   the cache-sync barrier is the informer crate's
//!   [`wait_for_cache_sync`](kcontrol_informer::wait_for_cache_sync), the
//!   one the builder runs;
//! - operator helpers: [`finalizer()`] (cleanup before deletion),
//!   [`conditions`] (status conditions), [`expectations`] (creations
//!   and deletions not yet seen in the cache, client-go's
//!   `ControllerExpectations`), [`converge`] (writes that do nothing when
//!   nothing differs: [`create_or_update`], [`Context::apply_owned`]),
//!   [`crd`] (CRDs from Rust types: printed, installed) and [`Args`]
//!   (an operator's flags, building the client, logging and the
//!   [`Manager`] in one call).
//!
//! Running them in production:
//!
//! - [`health`]: `/healthz`, `/readyz` (informers and handlers synced, not
//!   shutting down) and `/metrics` on one small HTTP server;
//! - [`leader_election`]: client-go's leader election on
//!   `coordination.k8s.io/v1` Leases, so that of several replicas of a
//!   controller only one writes;
//! - [`metrics`]: the [`SharedRegistry`] every family goes to (a
//!   [`Manager`] and the builder fill one by default: `workqueue_*`,
//!   `rest_client_*`, `reflector_*`, `informer_*`,
//!   `controller_reconcile_*`, `leader_election_master_status`);
//! - [`sharding`]: one controller's objects sharded across replicas on
//!   Leases ([`Manager::sharded`]): each replica caches and reconciles
//!   its share, no key is reconciled by two replicas at once;
//! - [`webhook`]: admission (defaulting, validating) and conversion
//!   webhooks on an HTTPS server with a reloadable certificate, served by
//!   [`Manager::serve_webhooks`] beside the controllers.
//!
//! The contracts (CT…, HL…, LE…) are in the workspace's `DESIGN.md`; the
//! example `examples/configmap_to_secret.rs` is a whole controller.

pub mod args;
mod builder;
pub mod conditions;
pub mod converge;
pub mod crd;
pub mod expectations;
pub mod finalizers;
pub mod handlers;
pub mod health;
pub mod leader_election;
mod manager;
pub mod metrics;
pub mod owner;
pub mod predicate;
mod reconciler;
pub mod sharding;
pub mod signals;
mod watched;
pub mod webhook;
pub mod workers;

pub use args::{Args, ArgsError};
pub use builder::{Controller, ControllerBuilder, ControllerError};
pub use converge::{create_or_update, Operation};
pub use expectations::Expectations;
pub use finalizers::{finalizer, FinalizerError};
pub use health::{Health, Readiness};
pub use leader_election::{
    default_identity, LeaderElectionConfig, LeaderElectionError, LeaderElector,
};
pub use manager::{Manager, ManagerError};
pub use metrics::SharedRegistry;
pub use reconciler::{Action, Context, NotCachedError, Reconciler};
pub use sharding::{ShardGate, Sharder, ShardingConfig, ShardingError};
pub use workers::run_workers;
