//! [`KnownObjects`]: the read access a DeltaFIFO needs to the objects an
//! informer already holds (to find vanished keys on replace, to queue
//! resyncs, and to give deletions their last known state).

use std::sync::Arc;

/// The objects already known to a consumer, looked up by key.
///
/// The informer's store implements it; a DeltaFIFO without one treats every
/// object as unknown.
pub trait KnownObjects<K>: Send + Sync {
    /// Every known key.
    fn list_keys(&self) -> Vec<String>;

    /// The known object with this key.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// Every known key, shared with the store where it can (a DeltaFIFO's
    /// replace holds them all until it ends: shared, a relist of 100,000
    /// objects copies no key). The default copies [`list_keys`](Self::list_keys).
    fn list_shared_keys(&self) -> Vec<Arc<str>> {
        self.list_keys().into_iter().map(Arc::from).collect()
    }
}
