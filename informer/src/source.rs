//! [`Source`]: what fills an informer's DeltaFIFO once it runs. In use this
//! is a reflector listing and watching the API server; unit tests feed the
//! FIFO by hand through [`FeedSource`].

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
pub(crate) use feed::FeedSource;

#[cfg(test)]
mod feed {
    use super::*;
    use parking_lot::Mutex;

    /// What a started informer handed over: its FIFO, its resync hook and
    /// its resync check period.
    type Started<K> = (Arc<DeltaFifo<K>>, ShouldResync, Option<Duration>);

    /// A source the test drives: it hands over the FIFO and the resync hook.
    #[derive(Default)]
    pub(crate) struct FeedSource<K: KubeObject> {
        started: Mutex<Option<Started<K>>>,
    }

    impl<K: KubeObject> FeedSource<K> {
        /// The FIFO, once the informer runs.
        pub(crate) fn fifo(&self) -> Option<Arc<DeltaFifo<K>>> {
            self.started.lock().as_ref().map(|(f, _, _)| Arc::clone(f))
        }

        /// What the reflector does when its resync timer fires: ask, then
        /// queue a resync if any handler is due. Returns the answer.
        pub(crate) fn resync_tick(&self) -> bool {
            let started = self.started.lock().clone();
            let Some((fifo, should, _)) = started else {
                return false;
            };
            let due = should();
            if due {
                fifo.resync().unwrap();
            }
            due
        }

        /// The check period the informer asked for.
        pub(crate) fn resync_period(&self) -> Option<Duration> {
            self.started.lock().as_ref().and_then(|(_, _, p)| *p)
        }
    }

    impl<K: KubeObject> Source<K> for FeedSource<K> {
        fn start(&self, ctx: SourceContext<K>) -> SourceFuture {
            *self.started.lock() = Some((ctx.fifo, ctx.should_resync, ctx.resync_period));
            let shutdown = ctx.shutdown;
            Box::pin(async move { shutdown.cancelled().await })
        }

        fn last_sync_resource_version(&self) -> Option<String> {
            self.fifo().and_then(|f| f.last_sync_resource_version())
        }
    }
}
