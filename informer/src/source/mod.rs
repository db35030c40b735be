//! [`Source`]: what fills an informer's DeltaFIFO once it runs. In use this
//! is a [`ReflectorSource`] (`reflector.rs`) listing and watching the API
//! server; unit tests feed the FIFO by hand through `FeedSource` (`feed.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_deltafifo::DeltaFifo;
use kcontrol_indexer::KubeObject;
use kcontrol_reflector::ReflectorConfig;
use tokio_util::sync::CancellationToken;

/// Asked on each resync check whether any handler is due for a resync.
pub(crate) type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// What a source gets when the informer starts.
pub(crate) struct SourceContext<K: KubeObject> {
    /// The FIFO to fill (its known objects are the informer's store).
    pub(crate) fifo: Arc<DeltaFifo<K>>,
    /// How often to ask `should_resync`; `None`: never.
    pub(crate) resync_period: Option<Duration>,
    /// Whether to queue a resync now.
    pub(crate) should_resync: ShouldResync,
    /// Cancelled when the informer stops.
    pub(crate) shutdown: CancellationToken,
}

/// The future that runs a source until shutdown.
pub(crate) type SourceFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Fills an informer's FIFO.
pub(crate) trait Source<K: KubeObject>: Send + Sync + 'static {
    /// Changes the reflector's options before start; `false` if it has
    /// started (or has no such options).
    fn configure(&self, change: &mut dyn FnMut(&mut ReflectorConfig<K>)) -> bool {
        let _ = change;
        false
    }

    /// The future that lists, watches and resyncs into `ctx.fifo` until
    /// `ctx.shutdown` is cancelled (or the FIFO is closed).
    fn start(&self, ctx: SourceContext<K>) -> SourceFuture;

    /// The resourceVersion last synced with the server.
    fn last_sync_resource_version(&self) -> Option<String>;

    /// Whether a relist has delivered part of a new state without
    /// completing it (see `Reflector::relist_incomplete`).
    fn relist_incomplete(&self) -> bool {
        false
    }

    /// The last list or watch failure since the last successful list.
    fn last_error(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod feed;
mod reflector;

#[cfg(test)]
pub(crate) use feed::FeedSource;
pub(crate) use reflector::ReflectorSource;
