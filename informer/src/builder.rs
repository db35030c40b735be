//! [`SharedIndexInformerBuilder`]: the options of a [`SharedIndexInformer`]
//! (client-go's `SharedIndexInformerOptions` and the reflector settings the
//! informer passes on).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_indexer::{IndexFunc, Indexers, Object};

use crate::clock::Clock;
use crate::informer::{Parts, SharedIndexInformer};
use crate::metrics::InformerMetrics;
use crate::source::Source;

/// Options for a [`SharedIndexInformer`].
pub struct SharedIndexInformerBuilder<K: Object> {
    name: Option<String>,
    source: Arc<dyn Source<K>>,
    resync_period: Duration,
    indexers: Indexers<K>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    clock: Clock,
}

impl<K: Object> fmt::Debug for SharedIndexInformerBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformerBuilder")
            .field("name", &self.name)
            .field("resync_period", &self.resync_period)
            .field("indexers", &self.indexers.keys().collect::<Vec<_>>())
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl<K: Object> SharedIndexInformerBuilder<K> {
    pub(crate) fn with_source(source: Arc<dyn Source<K>>) -> Self {
        Self {
            name: None,
            source,
            resync_period: Duration::ZERO,
            indexers: Indexers::new(),
            metrics: None,
            clock: Clock::real(),
        }
    }

    /// The informer's name in logs, metrics and handler thread names;
    /// default `informer`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The default resync period of handlers, and how often the reflector
    /// checks whether any handler is due (client-go's `defaultResync`).
    /// Zero (the default) disables resyncs entirely.
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

    /// Hooks that receive the handlers' activity.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The clock resync schedules read.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The informer, ready to share; [`run`](SharedIndexInformer::run) starts it.
    pub fn build(self) -> Arc<SharedIndexInformer<K>> {
        SharedIndexInformer::from_parts(Parts {
            name: self.name.unwrap_or_else(|| "informer".to_owned()),
            source: self.source,
            resync_period: self.resync_period,
            indexers: self.indexers,
            metrics: self.metrics,
            clock: self.clock,
        })
    }
}
