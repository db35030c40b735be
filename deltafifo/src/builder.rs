//! [`DeltaFifoBuilder`]: the options of a [`DeltaFifo`] (client-go's
//! `DeltaFIFOOptions`).

use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::{meta_namespace_key, KeyError, KnownObjects, KubeObject};

use crate::delta::DeltaType;
use crate::fifo::{DeltaFifo, KeyFn};
use crate::metrics::FifoMetrics;

/// Options for a [`DeltaFifo`], from [`DeltaFifo::builder`].
///
/// ```
/// use std::sync::Arc;
/// use kcontrol_deltafifo::DeltaFifo;
/// use kcontrol_indexer::{k8s_openapi::api::core::v1::ConfigMap, meta_namespace_key};
///
/// let fifo = DeltaFifo::<ConfigMap>::builder()
///     .key_fn(|cm: &ConfigMap| meta_namespace_key(cm))
///     .emit_delta_type_replaced(true)
///     .build();
/// assert!(fifo.is_empty());
/// ```
pub struct DeltaFifoBuilder<K: KubeObject> {
    key_fn: Option<KeyFn<K>>,
    known: Option<Arc<dyn KnownObjects<K>>>,
    emit_delta_type_replaced: bool,
    metrics: Option<Arc<dyn FifoMetrics>>,
}

impl<K: KubeObject> fmt::Debug for DeltaFifoBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifoBuilder")
            .field("custom_key_fn", &self.key_fn.is_some())
            .field("known_objects", &self.known.is_some())
            .field("emit_delta_type_replaced", &self.emit_delta_type_replaced)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl<K: KubeObject> Default for DeltaFifoBuilder<K> {
    fn default() -> Self {
        Self {
            key_fn: None,
            known: None,
            emit_delta_type_replaced: true,
            metrics: None,
        }
    }
}

impl<K: KubeObject> DeltaFifoBuilder<K> {
    /// The key of an object; default [`meta_namespace_key`]
    /// (`namespace/name`, or `name`). Tombstones always key to their own key.
    /// A known-objects store must key its objects the same way.
    #[must_use]
    pub fn key_fn<F>(mut self, key_fn: F) -> Self
    where
        F: Fn(&K) -> Result<String, KeyError> + Send + Sync + 'static,
    {
        self.key_fn = Some(Arc::new(key_fn));
        self
    }

    /// The objects the consumer already holds (the informer's store), read
    /// to ignore deletions of unknown objects (DF3), find keys a replace no
    /// longer lists (DF4) and queue resyncs (DF6). Without it, only queued
    /// keys count as known: a relist cannot report deletions of objects
    /// already popped, and `resync` does nothing.
    #[must_use]
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects<K>>) -> Self {
        self.known = Some(known);
        self
    }

    /// Whether a replace queues `Replaced` deltas (`true`, the default) or,
    /// as client-go did before `Replaced` existed, `Sync` ones.
    ///
    /// The default differs from client-go's (false there, for old
    /// consumers; its own informers always turn it on): with `Replaced`, a
    /// consumer can tell "the server listed this object" (it may have
    /// changed) from "a resync re-announced what we hold" (it has not), for
    /// example to skip resync work but never relist work. Kcontrol has no old
    /// consumer to stay compatible with.
    #[must_use]
    pub fn emit_delta_type_replaced(mut self, emit: bool) -> Self {
        self.emit_delta_type_replaced = emit;
        self
    }

    /// Hooks that receive the FIFO's activity.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn FifoMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The FIFO, ready to share between a producer and consumers.
    pub fn build(self) -> Arc<DeltaFifo<K>> {
        let key_fn = self
            .key_fn
            .unwrap_or_else(|| Arc::new(|obj: &K| meta_namespace_key(obj)));
        let replace_kind = if self.emit_delta_type_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        Arc::new(DeltaFifo::from_parts(
            key_fn,
            self.known,
            replace_kind,
            self.metrics,
        ))
    }
}

impl<K: KubeObject> DeltaFifo<K> {
    /// Options for a new FIFO: default key function, no known-objects store,
    /// `Replaced` deltas on replace, no metrics.
    pub fn builder() -> DeltaFifoBuilder<K> {
        DeltaFifoBuilder::default()
    }
}
