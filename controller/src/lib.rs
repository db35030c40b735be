//! Running kcontrol controllers in production.
//!
//! - [`health`]: `/healthz`, `/readyz` (informers and handlers synced, not
//!   shutting down) and `/metrics` on one small HTTP server;
//! - [`leader_election`]: client-go's leader election on
//!   `coordination.k8s.io/v1` Leases, so that of several replicas of a
//!   controller only one writes;
//! - [`metrics`]: the client's request metrics (`rest_client_*`) in a
//!   Prometheus registry.
//!
//! The contracts (HL…, LE…) are in the workspace's `DESIGN.md`.

pub mod health;
pub mod metrics;

pub use health::{Health, Readiness, SharedRegistry};
pub mod leader_election;

pub use leader_election::{
    default_identity, LeaderElectionConfig, LeaderElectionError, LeaderElector,
};
