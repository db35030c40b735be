//! Helpers shared by the unit tests: ConfigMaps and a known-objects store.

use std::collections::BTreeMap;
use std::sync::Arc;

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{KnownObjects, Object};
use parking_lot::Mutex;

use crate::delta::{Delta, DeltaType, Deltas};

/// A ConfigMap `ns/name` at resource version `rv`.
pub(crate) fn cm(name: &str, rv: u32) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.meta_mut().namespace = Some("ns".into());
    cm.meta_mut().name = Some(name.into());
    cm.meta_mut().resource_version = Some(rv.to_string());
    Arc::new(cm)
}

/// A known-objects store the way an informer keeps one: a map updated by
/// applying popped deltas.
#[derive(Default)]
pub(crate) struct Store(pub(crate) Mutex<BTreeMap<String, Arc<ConfigMap>>>);

impl KnownObjects<ConfigMap> for Store {
    fn list_keys(&self) -> Vec<String> {
        self.0.lock().keys().cloned().collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<ConfigMap>> {
        self.0.lock().get(key).cloned()
    }
}

impl Store {
    pub(crate) fn insert(&self, obj: &Arc<ConfigMap>) {
        let key = kcontrol_indexer::meta_namespace_key(obj.as_ref()).unwrap();
        self.0.lock().insert(key, Arc::clone(obj));
    }

    /// Applies deltas as an informer does.
    pub(crate) fn apply(&self, deltas: &Deltas<ConfigMap>) {
        let mut map = self.0.lock();
        for d in deltas.iter() {
            match d {
                Delta::Deleted(_) => map.remove(deltas.key()),
                other => map.insert(deltas.key().to_owned(), Arc::clone(other.object())),
            };
        }
    }
}

/// `(kind, resource version, tombstone?)` of each delta.
pub(crate) fn summary(deltas: &Deltas<ConfigMap>) -> Vec<(DeltaType, String, bool)> {
    deltas
        .iter()
        .map(|d| {
            let rv = d.object().resource_version().unwrap_or_default().to_owned();
            (d.kind(), rv, d.is_tombstone())
        })
        .collect()
}

/// Pops one key, returning its deltas and `is_in_initial_list`.
pub(crate) fn pop_one(fifo: &crate::DeltaFifo<ConfigMap>) -> (Deltas<ConfigMap>, bool) {
    fifo.pop(|d, initial| Ok::<_, crate::ProcessError<()>>((d.clone(), initial)))
        .unwrap()
}

/// Pops one key and applies it to `store`, as an informer does.
pub(crate) fn pop_into(fifo: &crate::DeltaFifo<ConfigMap>, store: &Store) -> Deltas<ConfigMap> {
    fifo.pop(|d, _| {
        store.apply(d);
        Ok::<_, crate::ProcessError<()>>(d.clone())
    })
    .unwrap()
}

/// A FIFO reading `store` as its known objects.
pub(crate) fn fifo_with(store: &Arc<Store>) -> Arc<crate::DeltaFifo<ConfigMap>> {
    let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::clone(store) as _;
    crate::DeltaFifo::builder().known_objects(known).build()
}

/// Waits (bounded: 30 s) until `threads` poppers block in `pop` and `tasks`
/// in `pop_async`: the counts a producer reads to wake them, so once they
/// match, those poppers are parked and only a wake-up brings them back.
pub(crate) fn wait_for_blocked_poppers(
    fifo: &crate::DeltaFifo<ConfigMap>,
    threads: usize,
    tasks: usize,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (t, a) = {
            let st = fifo.state.lock();
            (st.thread_waiters, st.task_waiters)
        };
        if (t, a) == (threads, tasks) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {threads} threads and {tasks} tasks to block in pop \
             ({t} threads and {a} tasks blocked)"
        );
        std::thread::yield_now();
    }
}
