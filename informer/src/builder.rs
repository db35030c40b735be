//! [`SharedIndexInformerBuilder`]: the options of a [`SharedIndexInformer`]
//! (client-go's `SharedIndexInformerOptions`, plus what the informer passes
//! on to its reflector: the [`WatchConfig`], transform, error handler).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_indexer::{IndexFunc, Indexers, KubeObject};
use kcontrol_reflector::{
    ListerWatcher, ReflectorConfig, ReflectorError, ReflectorMetrics, WatchConfig,
};
use serde::de::DeserializeOwned;

use crate::informer::{Parts, SharedIndexInformer, StoreFilter};
use crate::metrics::InformerMetrics;
use crate::resync_clock::ResyncClock;
use crate::source::{ReflectorSource, Source};

/// Makes the informer's source from the final reflector options.
type MakeSource<K> = Box<dyn FnOnce(ReflectorConfig<K>) -> Arc<dyn Source<K>> + Send>;

/// Options for a [`SharedIndexInformer`], from
/// [`SharedIndexInformer::builder`].
pub struct SharedIndexInformerBuilder<K: KubeObject> {
    name: Option<String>,
    make_source: MakeSource<K>,
    reflector: ReflectorConfig<K>,
    resync_period: Duration,
    indexers: Indexers<K>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    clock: ResyncClock,
    filter: Option<StoreFilter<K>>,
}

impl<K: KubeObject> fmt::Debug for SharedIndexInformerBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformerBuilder")
            .field("name", &self.name)
            .field("resync_period", &self.resync_period)
            .field("indexers", &self.indexers.keys().collect::<Vec<_>>())
            .field("metrics", &self.metrics.is_some())
            .field("store_filter", &self.filter.is_some())
            .field("reflector", &self.reflector)
            .finish_non_exhaustive()
    }
}

impl<K: KubeObject + DeserializeOwned> SharedIndexInformer<K> {
    /// Options for an informer of the objects `lister_watcher` lists and
    /// watches (an [`Api<K>`](kcontrol_client::Api), or a
    /// [`ListWatch`](kcontrol_reflector::ListWatch) with selectors).
    pub fn builder(lister_watcher: impl ListerWatcher<K>) -> SharedIndexInformerBuilder<K> {
        Self::builder_shared(Arc::new(lister_watcher))
    }

    /// [`builder`](Self::builder) with a shared lister-watcher.
    pub fn builder_shared(
        lister_watcher: Arc<dyn ListerWatcher<K>>,
    ) -> SharedIndexInformerBuilder<K> {
        SharedIndexInformerBuilder::with_source(Box::new(move |config| {
            Arc::new(ReflectorSource::new(lister_watcher, config))
        }))
    }
}

impl<K: KubeObject> SharedIndexInformerBuilder<K> {
    pub(crate) fn with_source(make_source: MakeSource<K>) -> Self {
        Self {
            name: None,
            make_source,
            reflector: ReflectorConfig::default(),
            resync_period: Duration::ZERO,
            indexers: Indexers::new(),
            metrics: None,
            clock: ResyncClock::real(),
            filter: None,
        }
    }

    /// The informer's name in logs, metrics and handler thread names (and
    /// its reflector's, unless set there); default `informer`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The default resync period of handlers, and how often the reflector
    /// checks whether any handler is due (client-go's `defaultResync`).
    /// Zero (the default) disables resyncs.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// Named indexers of the store, besides the built-in namespace index.
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers.extend(indexers);
        self
    }

    /// One named indexer (see [`indexers`](Self::indexers)).
    #[must_use]
    pub fn indexer(
        mut self,
        name: impl Into<String>,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        let func: IndexFunc<K> = Arc::new(func);
        self.indexers.insert(name.into(), func);
        self
    }

    /// A transform applied to every object before it is stored or handed
    /// to a handler (IN5): it gets the decoded object by value, before it is
    /// shared, so dropping fields frees their memory. It must be a pure
    /// function of the object; it runs on the reflector's task.
    #[must_use]
    pub fn transform(mut self, transform: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.reflector.transform = Some(Arc::new(transform));
        self
    }

    /// Keeps in the store only the objects `keep` accepts (after any
    /// [`transform`](Self::transform)): a selector evaluated by the client,
    /// for what a label or field selector cannot express. A rejected object
    /// is never stored nor handed to a handler; a stored one that stops
    /// matching leaves the store, and handlers get `on_delete` with it. The
    /// reflector still lists and watches every object, so only the store's
    /// memory is saved. `keep` must be a pure function of the object; it
    /// runs on the informer's task.
    #[must_use]
    pub fn store_filter(mut self, keep: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.filter = Some(Arc::new(keep));
        self
    }

    /// How the informer lists and watches: page size, WatchList
    /// (`sendInitialEvents`), dropping `metadata.managedFields` (protobuf
    /// answers decoded without them, JSON ones stripped before any
    /// [`transform`](Self::transform)), watch timeout, backoff and pacing
    /// (default: client-go's).
    #[must_use]
    pub fn watch_config(mut self, watch_config: WatchConfig) -> Self {
        self.reflector.watch_config = watch_config;
        self
    }

    /// Called with every list or watch failure (client-go's
    /// `SetWatchErrorHandler`); the reflector recovers by itself.
    #[must_use]
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&ReflectorError) + Send + Sync + 'static,
    ) -> Self {
        self.reflector.error_handler = Some(Arc::new(handler));
        self
    }

    /// Hooks for the reflector's activity (lists, watches, events).
    #[must_use]
    pub fn reflector_metrics(mut self, metrics: Arc<dyn ReflectorMetrics>) -> Self {
        self.reflector.metrics = Some(metrics);
        self
    }

    /// Every reflector option at once (its watch configuration, transform,
    /// error handler, metrics). The informer still sets its resync period
    /// and hook.
    #[must_use]
    pub fn reflector_config(mut self, config: ReflectorConfig<K>) -> Self {
        self.reflector = config;
        self
    }

    /// Hooks that receive the handlers' activity.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The clock resync schedules read.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn clock(mut self, clock: ResyncClock) -> Self {
        self.clock = clock;
        self
    }

    /// The informer, ready to share; [`run`](SharedIndexInformer::run) starts it.
    pub fn build(self) -> Arc<SharedIndexInformer<K>> {
        let name = self.name.unwrap_or_else(|| "informer".to_owned());
        let mut reflector = self.reflector;
        if reflector.name == ReflectorConfig::<K>::default().name {
            reflector.name.clone_from(&name);
        }
        SharedIndexInformer::from_parts(Parts {
            name,
            source: (self.make_source)(reflector),
            resync_period: self.resync_period,
            indexers: self.indexers,
            metrics: self.metrics,
            clock: self.clock,
            filter: self.filter,
        })
    }
}
