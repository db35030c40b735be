//! Sharding one controller's objects across replicas on Leases, so that
//! each replica caches and reconciles about 1/N of them and no key is
//! reconciled by two replicas at once (contracts SH1-SH8 in `DESIGN.md`).
//!
//! - **Membership** ([`run_sharded`]): each replica holds a
//!   `coordination.k8s.io/v1` Lease of its own, named after the member
//!   and labelled `sharding.kcontrol.dev/ring: <ring>`, acquired and
//!   renewed by leader election's machinery (renew deadline, retry
//!   period, LE2's local expiry). A replica that cannot renew within its
//!   renew deadline stops reconciling; graceful shutdown releases it.
//! - **Assignment** ([`ring`]): rendezvous hashing of each object's key
//!   over the live members. The [`Sharder`], run by the replica elected
//!   on the Lease `<ring>-sharder`, watches the ring's Leases and the
//!   objects' metadata and writes the assignment as the label
//!   `shard.kcontrol.dev/<ring>: <member>`. It caches only the objects
//!   that are not where the ring names them ([`decide::settled`]), so its
//!   memory does not grow with the objects it shards; each change of the
//!   live members lists them again. Owned objects follow where
//!   their controller owner is going, ahead of it (an owner is assigned
//!   once its children carry its new shard, or after 30 s). Each
//!   replica's informers select `shard.kcontrol.dev/<ring>=<member>`.
//! - **Moves** ([`decide`], [`ShardGate`]): a live owner is asked to let go
//!   through the label `drain.kcontrol.dev/<ring>`; it stops starting
//!   reconciles of the key, waits for the one in flight, and removes both
//!   labels in one write guarded by the `resourceVersion`; only then does
//!   the sharder assign the new owner (once the children are there). A
//!   dead owner's keys (its Lease expired by the sharder's local
//!   observation, or released) are reassigned without a drain.

mod children;
mod config;
pub mod decide;
mod gate;
pub mod members;
pub mod ring;
mod run;
mod sharder;

pub use config::{
    ShardingConfig, ShardingError, DRAIN_LABEL_PREFIX, RING_LABEL, SHARD_LABEL_PREFIX,
};
pub use gate::{InFlight, ShardGate};
pub use run::run_sharded;
pub use sharder::{MemberWatch, Sharder};
