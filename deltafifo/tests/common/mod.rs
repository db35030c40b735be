//! Helpers shared by the integration tests: ConfigMaps and a known-objects
//! store updated the way an informer updates its store.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kcontrol_deltafifo::{Delta, Deltas};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{KnownObjects, Object};

/// A ConfigMap `ns/name` at resource version `rv`.
pub fn cm(name: &str, rv: u64) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.meta_mut().namespace = Some("ns".into());
    cm.meta_mut().name = Some(name.into());
    cm.meta_mut().resource_version = Some(rv.to_string());
    Arc::new(cm)
}

/// A ConfigMap without a name (so without a key).
pub fn nameless(rv: u64) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.meta_mut().namespace = Some("ns".into());
    cm.meta_mut().resource_version = Some(rv.to_string());
    Arc::new(cm)
}

/// The informer's store, as far as a DeltaFIFO sees it.
#[derive(Default)]
pub struct Store(pub Mutex<BTreeMap<String, Arc<ConfigMap>>>);

impl KnownObjects<ConfigMap> for Store {
    fn list_keys(&self) -> Vec<String> {
        self.0.lock().unwrap().keys().cloned().collect()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<ConfigMap>> {
        self.0.lock().unwrap().get(key).cloned()
    }
}

impl Store {
    /// Applies popped deltas as an informer does: a deletion removes the
    /// key, anything else stores the object.
    pub fn apply(&self, deltas: &Deltas<ConfigMap>) {
        let mut map = self.0.lock().unwrap();
        for delta in deltas.iter() {
            match delta {
                Delta::Deleted(_) => map.remove(deltas.key()),
                other => map.insert(deltas.key().to_owned(), Arc::clone(other.object())),
            };
        }
    }

    /// A snapshot of the store.
    pub fn snapshot(&self) -> BTreeMap<String, Arc<ConfigMap>> {
        self.0.lock().unwrap().clone()
    }
}
