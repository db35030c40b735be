//! [`FeedSource`]: a source unit tests drive by hand.

use std::sync::Arc;
use std::time::Duration;

use kcontrol_deltafifo::DeltaFifo;
use kcontrol_indexer::KubeObject;
use parking_lot::Mutex;

use super::{ShouldResync, Source, SourceContext, SourceFuture};

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
