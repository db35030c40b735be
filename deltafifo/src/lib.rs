//! client-go's DeltaFIFO for kcontrol informers.
//!
//! A [`DeltaFifo`] sits between a reflector, which lists and watches the API
//! server and queues every change ([`add`](DeltaFifo::add),
//! [`update`](DeltaFifo::update), [`delete`](DeltaFifo::delete),
//! [`replace`](DeltaFifo::replace) or the streaming
//! [`begin_replace`](DeltaFifo::begin_replace),
//! [`resync`](DeltaFifo::resync)), and an informer, which
//! [`pop`](DeltaFifo::pop)s each key's accumulated [`Deltas`] to update its
//! store and notify handlers. The contracts DF1–DF7 of DESIGN.md are listed
//! on [`DeltaFifo`].
//!
//! A deletion the watch missed reaches the consumer as
//! [`Delta::Deleted`] carrying
//! [`ObjectOrTombstone::Tombstone`](kcontrol_indexer::ObjectOrTombstone):
//! the type tells, no runtime check needed.
//!
//! ```
//! use std::convert::Infallible;
//! use kcontrol_deltafifo::{Delta, DeltaFifo, PopError, ProcessError};
//! use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, Object};
//!
//! fn config_map(name: &str, rv: &str) -> ConfigMap {
//!     let mut cm = ConfigMap::default();
//!     cm.meta_mut().namespace = Some("default".into());
//!     cm.meta_mut().name = Some(name.into());
//!     cm.meta_mut().resource_version = Some(rv.into());
//!     cm
//! }
//!
//! let fifo = DeltaFifo::<ConfigMap>::builder().build();
//!
//! // The reflector: a relist, then watch events.
//! fifo.replace([config_map("a", "1"), config_map("b", "1")], "1")?;
//! fifo.update(config_map("a", "2"))?;
//! fifo.delete(config_map("b", "3"))?;
//!
//! // The informer: one pop per key, with everything that happened to it.
//! let mut seen = Vec::new();
//! while !fifo.is_empty() {
//!     fifo.pop(|deltas, is_in_initial_list| {
//!         let kinds: Vec<String> = deltas.iter().map(|d| d.kind().to_string()).collect();
//!         seen.push(format!("{} {} {is_in_initial_list}", deltas.key(), kinds.join(",")));
//!         if let Delta::Deleted(gone) = deltas.newest() {
//!             assert!(!gone.is_tombstone()); // the watch saw the final state
//!         }
//!         Ok::<_, ProcessError<Infallible>>(())
//!     })?;
//! }
//! assert_eq!(seen, ["default/a Replaced,Updated true", "default/b Replaced,Deleted true"]);
//! assert!(fifo.has_synced());
//!
//! fifo.close();
//! assert!(matches!(fifo.pop(|_, _| Ok::<_, ProcessError<Infallible>>(())), Err(PopError::Closed)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod builder;
mod delta;
mod error;
mod fifo;
mod metrics;
mod pop;
mod queue;
mod reentry;
mod replace;

#[cfg(test)]
mod test_support;

pub use builder::DeltaFifoBuilder;
pub use delta::{Delta, DeltaType, Deltas};
pub use error::{FifoError, PopError, ProcessError};
pub use fifo::{DeltaFifo, KeyFn};
pub use metrics::FifoMetrics;
pub use replace::ReplaceStream;
