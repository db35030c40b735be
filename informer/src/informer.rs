//! [`SharedIndexInformer`]: the store, the listeners and the loop that pops
//! the DeltaFIFO into both; its lifecycle (`run`, `has_synced`, stop) and
//! its read accessors. Adding and removing handlers lives in
//! [`crate::handlers`], the processing of one pop in [`crate::process`].

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kcontrol_deltafifo::{DeltaFifo, PopError};
use kcontrol_indexer::{Indexers, KnownObjects, KubeObject, Lister, ThreadSafeStore};
use kcontrol_reflector::{ErrorHandlerFn, ReflectorError, TransformFn};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::error::InformerError;
use crate::metrics::InformerMetrics;
use crate::processor::Processor;
use crate::source::{ShouldResync, Source, SourceContext};
use crate::synced::HasSynced;

/// Gives each informer an identity, so a registration can only be removed
/// from the informer that made it.
static NEXT_INFORMER_ID: AtomicU64 = AtomicU64::new(1);

/// Whether the informer's store holds its initial list: the FIFO's
/// `has_synced`, remembered once true.
pub(crate) struct StoreSync<K: KubeObject> {
    fifo: OnceLock<Arc<DeltaFifo<K>>>,
    synced: AtomicBool,
}

impl<K: KubeObject> HasSynced for StoreSync<K> {
    fn has_synced(&self) -> bool {
        if self.synced.load(Ordering::Acquire) {
            return true;
        }
        let synced = self.fifo.get().is_some_and(|f| f.has_synced());
        if synced {
            self.synced.store(true, Ordering::Release);
        }
        synced
    }
}

/// What changes when the informer starts and stops (client-go's
/// `startedLock` and what it guards).
pub(crate) struct Lifecycle {
    pub(crate) started: bool,
    pub(crate) stopped: bool,
    /// How often the reflector asks whether a handler is due for a resync.
    pub(crate) resync_check_period: Duration,
    /// Handlers added so far (for default names and ids).
    pub(crate) handlers_added: u64,
}

/// A shared informer with an indexed store (client-go's
/// `SharedIndexInformer`): it lists and watches one resource into a
/// [`ThreadSafeStore`] and tells every registered handler about each change.
///
/// Shared as an `Arc`: controllers take its [`lister`](Self::lister) or
/// [`store`](Self::store) and add handlers; one task [`run`](Self::run)s it.
///
/// - IN1: each handler has its own unbounded buffer and its own thread, so a
///   slow handler delays no other and never the informer.
/// - IN2: a handler added after start first gets an add for every object in
///   the store (`is_in_initial_list = true`), then live events, with none
///   lost or repeated across the switch.
/// - IN3: deletions reach `on_delete` as a typed [`ObjectOrTombstone`](kcontrol_indexer::ObjectOrTombstone).
/// - IN4: per-handler resync periods, handler removal, and per-handler
///   `has_synced` that covers the store and the handler's initial list.
/// - IN5: an optional transform before objects are stored, and an
///   optional store filter.
pub struct SharedIndexInformer<K: KubeObject> {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) store: Arc<ThreadSafeStore<K>>,
    pub(crate) processor: Arc<Processor<K>>,
    source: Arc<dyn Source<K>>,
    pub(crate) lifecycle: Mutex<Lifecycle>,
    /// Held while a pop updates the store and notifies listeners, and while
    /// a handler is added (with its store snapshot) or removed: the switch
    /// of IN2 is atomic with respect to processing (client-go's `blockDeltas`).
    pub(crate) block_deltas: Mutex<()>,
    pub(crate) sync: Arc<StoreSync<K>>,
    pub(crate) metrics: Option<Arc<dyn InformerMetrics>>,
    pub(crate) default_handler_resync: Duration,
    /// Which objects the store keeps (all when `None`).
    pub(crate) filter: Option<StoreFilter<K>>,
}

/// Which objects an informer's store keeps
/// ([`SharedIndexInformerBuilder::store_filter`](crate::SharedIndexInformerBuilder::store_filter)).
pub type StoreFilter<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

impl<K: KubeObject> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lc = self.lifecycle.lock();
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.name)
            .field("started", &lc.started)
            .field("stopped", &lc.stopped)
            .field("resync_check_period", &lc.resync_check_period)
            .field("handlers", &self.processor.len())
            .field("store", &self.store)
            .finish()
    }
}

/// The parts a builder assembles.
pub(crate) struct Parts<K: KubeObject> {
    pub(crate) name: String,
    pub(crate) source: Arc<dyn Source<K>>,
    pub(crate) resync_period: Duration,
    pub(crate) indexers: Indexers<K>,
    pub(crate) metrics: Option<Arc<dyn InformerMetrics>>,
    pub(crate) clock: crate::resync_clock::ResyncClock,
    pub(crate) filter: Option<StoreFilter<K>>,
}

impl<K: KubeObject> SharedIndexInformer<K> {
    pub(crate) fn from_parts(parts: Parts<K>) -> Arc<Self> {
        // The built-in namespace index serves an indexer of that name; the
        // names of the others are unique (a map's keys), so none is refused.
        let store = Arc::new(ThreadSafeStore::with_namespace_index_and(parts.indexers));
        Arc::new(Self {
            id: NEXT_INFORMER_ID.fetch_add(1, Ordering::Relaxed),
            name: parts.name.into(),
            store,
            processor: Arc::new(Processor::new(parts.clock)),
            source: parts.source,
            lifecycle: Mutex::new(Lifecycle {
                started: false,
                stopped: false,
                resync_check_period: parts.resync_period,
                handlers_added: 0,
            }),
            block_deltas: Mutex::new(()),
            sync: Arc::new(StoreSync {
                fifo: OnceLock::new(),
                synced: AtomicBool::new(false),
            }),
            metrics: parts.metrics,
            default_handler_resync: parts.resync_period,
            filter: parts.filter,
        })
    }

    /// The informer's name (logs, metrics, handler thread names).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store every object is kept in, with its indexes (client-go's
    /// `GetStore` and `GetIndexer`, one object here); shared, never copied.
    pub fn store(&self) -> Arc<ThreadSafeStore<K>> {
        Arc::clone(&self.store)
    }

    /// A lister reading the store.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.store())
    }

    /// Adds indexers to the store, indexing what it holds: before or after
    /// start, until the informer stops. Fails if a name is taken.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        let lc = self.lifecycle.lock();
        if lc.stopped {
            return Err(self.stopped_error());
        }
        self.store.add_indexers(indexers)?;
        Ok(())
    }

    /// Whether the store holds the initial list: everything the first list
    /// returned has been popped into the store (and handed to the handlers'
    /// buffers; see [`HandlerRegistration::has_synced`](crate::HandlerRegistration::has_synced)
    /// for handlers having handled it).
    pub fn has_synced(&self) -> bool {
        self.sync.has_synced()
    }

    /// Whether [`run`](Self::run) was called.
    pub fn has_started(&self) -> bool {
        self.lifecycle.lock().started
    }

    /// Whether the informer has stopped: it ran and its run ended. It takes
    /// no more handlers then, and cannot be run again.
    pub fn is_stopped(&self) -> bool {
        self.lifecycle.lock().stopped
    }

    /// The resourceVersion the informer last synced with the server (from
    /// its reflector); `None` before the first list.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.source.last_sync_resource_version()
    }

    /// Whether the store may be mixed: a relist has delivered part of a new
    /// state (objects at their newer version) without completing it, so
    /// objects that state no longer has are not deleted yet — while a
    /// relist streams, and after one failed part way until a relist
    /// completes (those that follow are applied whole). `has_synced` stays
    /// true meanwhile; the reflector's `reflector_relist_incomplete` gauge
    /// says the same.
    pub fn relist_incomplete(&self) -> bool {
        self.source.relist_incomplete()
    }

    /// The last list or watch failure since the last successful list,
    /// described for a person (a 404 says the server does not serve the
    /// resource); `None` while healthy or before start. What to show when
    /// the cache does not sync.
    pub fn last_error(&self) -> Option<String> {
        self.source.last_error()
    }

    /// How often the reflector asks whether any handler is due for a resync
    /// (zero: never). Starts as the informer's resync period; a handler
    /// added before start with a shorter period lowers it.
    pub fn resync_check_period(&self) -> Duration {
        self.lifecycle.lock().resync_check_period
    }

    /// Sets the function called with every list or watch failure
    /// (client-go's `SetWatchErrorHandler`); only before start.
    pub fn set_watch_error_handler(
        &self,
        handler: impl Fn(&ReflectorError) + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let handler: ErrorHandlerFn = Arc::new(handler);
        self.configure_reflector("the watch error handler", &mut |config| {
            config.error_handler = Some(Arc::clone(&handler));
        })
    }

    /// Sets the transform applied to objects before they are stored (IN5,
    /// client-go's `SetTransform`); only before start. See
    /// [`SharedIndexInformerBuilder::transform`](crate::SharedIndexInformerBuilder::transform).
    pub fn set_transform(
        &self,
        transform: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        let transform: TransformFn<K> = Arc::new(transform);
        self.configure_reflector("the transform", &mut |config| {
            config.transform = Some(Arc::clone(&transform));
        })
    }

    fn configure_reflector(
        &self,
        what: &'static str,
        change: &mut dyn FnMut(&mut kcontrol_reflector::ReflectorConfig<K>),
    ) -> Result<(), InformerError> {
        let lc = self.lifecycle.lock();
        if lc.started || !self.source.configure(change) {
            return Err(InformerError::AlreadyStarted {
                informer: self.name.to_string(),
                what,
            });
        }
        Ok(())
    }

    pub(crate) fn stopped_error(&self) -> InformerError {
        InformerError::Stopped {
            informer: self.name.to_string(),
        }
    }

    /// Runs the informer until `shutdown` is cancelled: creates the
    /// DeltaFIFO (with the store as its known objects), starts the reflector
    /// on a new task, and pops the FIFO into the store and the handlers.
    ///
    /// Must be polled on a tokio runtime. On shutdown it stops the
    /// reflector, drops the notifications still buffered, and returns once
    /// every handler thread has finished the notification it was handling
    /// (a handler that never returns keeps `run` from returning, as in
    /// client-go).
    ///
    /// # Errors
    /// [`InformerError::NoRuntime`] when polled outside a tokio runtime
    /// (nothing starts), [`InformerError::AlreadyRun`] when the informer
    /// was run before (an informer runs once; client-go ignores the second
    /// `Run` with a warning).
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), InformerError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(InformerError::NoRuntime {
                informer: self.name.to_string(),
            });
        };
        let (fifo, check_period) = self.start()?;
        let source_shutdown = shutdown.child_token();
        let processor = Arc::clone(&self.processor);
        let should_resync: ShouldResync = Arc::new(move || processor.should_resync());
        let source = self.source.start(SourceContext {
            fifo: Arc::clone(&fifo),
            resync_period: (!check_period.is_zero()).then_some(check_period),
            should_resync,
            shutdown: source_shutdown.clone(),
        });
        let mut source = runtime.spawn(source);
        tracing::debug!(informer = %self.name, "informer started");
        // If this future is dropped before it ends, stop everything anyway.
        let mut guard = RunGuard {
            informer: self,
            fifo: &fifo,
            source_shutdown: &source_shutdown,
            armed: true,
        };

        let source_ended = self.process_loop(&fifo, &shutdown, &mut source).await;
        source_shutdown.cancel();
        fifo.close();
        if !source_ended {
            if let Err(e) = source.await {
                tracing::error!(informer = %self.name, error = %e, "the informer's reflector task failed");
            }
        }
        guard.armed = false;
        let done = self.mark_stopped();
        for d in done {
            let _ = d.await;
        }
        tracing::debug!(informer = %self.name, "informer stopped");
        Ok(())
    }

    /// Marks the informer started and creates its FIFO.
    fn start(&self) -> Result<(Arc<DeltaFifo<K>>, Duration), InformerError> {
        let mut lc = self.lifecycle.lock();
        let already_run = || InformerError::AlreadyRun {
            informer: self.name.to_string(),
        };
        if lc.started {
            return Err(already_run());
        }
        let known: Arc<dyn KnownObjects<K>> = self.store.clone();
        let fifo = DeltaFifo::builder()
            .known_objects(known)
            .emit_delta_type_replaced(true)
            .build();
        if self.sync.fifo.set(Arc::clone(&fifo)).is_err() {
            return Err(already_run());
        }
        lc.started = true;
        Ok((fifo, lc.resync_check_period))
    }

    /// Pops until shutdown, the FIFO closes, or the source task ends;
    /// returns whether the source task ended (and was awaited).
    async fn process_loop(
        &self,
        fifo: &DeltaFifo<K>,
        shutdown: &CancellationToken,
        source: &mut tokio::task::JoinHandle<()>,
    ) -> bool {
        let mut synced = false;
        loop {
            let popped = tokio::select! {
                biased;
                () = shutdown.cancelled() => return false,
                ended = &mut *source => {
                    if let Err(e) = ended {
                        tracing::error!(informer = %self.name, error = %e, "the informer's reflector task failed");
                    } else if !shutdown.is_cancelled() {
                        tracing::error!(informer = %self.name, "the informer's reflector ended; stopping the informer");
                    }
                    return true;
                }
                popped = fifo.pop_async(|deltas, initial| self.handle_deltas(deltas, initial)) => popped,
            };
            match popped {
                Ok(()) => {}
                Err(PopError::Closed) => return false,
                Err(e) => {
                    tracing::warn!(informer = %self.name, error = %e, "dropped deltas the store refused")
                }
            }
            if !synced && self.has_synced() {
                synced = true;
                tracing::debug!(informer = %self.name, objects = self.store.len(), "informer synced");
                self.processor.for_each(|l| l.sync.report_if_synced());
            }
        }
    }

    /// Marks the informer stopped and stops every handler; what it returns
    /// completes as their threads end.
    fn mark_stopped(&self) -> Vec<tokio::sync::oneshot::Receiver<()>> {
        let mut lc = self.lifecycle.lock();
        lc.stopped = true;
        self.processor.stop_all()
    }
}

/// Stops a running informer whose `run` future is dropped before it ends
/// (its task aborted, or a `select!` that moved on): the reflector task is
/// cancelled, the FIFO closed, and the handler threads told to end.
struct RunGuard<'a, K: KubeObject> {
    informer: &'a SharedIndexInformer<K>,
    fifo: &'a DeltaFifo<K>,
    source_shutdown: &'a CancellationToken,
    armed: bool,
}

impl<K: KubeObject> Drop for RunGuard<'_, K> {
    fn drop(&mut self) {
        if self.armed {
            self.source_shutdown.cancel();
            self.fifo.close();
            drop(self.informer.mark_stopped());
            tracing::debug!(informer = %self.informer.name, "informer stopped (its run was dropped)");
        }
    }
}

impl<K: KubeObject> HasSynced for SharedIndexInformer<K> {
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }

    fn unsynced(&self) -> Vec<String> {
        crate::synced::unsynced_name(self.has_synced(), &format!("informer {}", self.name))
    }
}

impl<K: KubeObject> Drop for SharedIndexInformer<K> {
    fn drop(&mut self) {
        // Handler threads hold their listener, not the informer: end them.
        drop(self.processor.stop_all());
    }
}
