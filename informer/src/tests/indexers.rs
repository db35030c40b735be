//! Indexers given to the builder, and added after start (the store indexes
//! what it already holds); the lister reads the shared store.

use std::sync::Arc;

use kcontrol_indexer::{IndexFunc, Indexers};

use super::*;
use crate::InformerError;

fn by_version(cm: &ConfigMap) -> Vec<String> {
    vec![rv(cm)]
}

#[test]
fn indexers_before_and_after_start() {
    let mut h = Harness::new(|b| b.indexer("by-rv", by_version));
    let fifo = h.start();
    fifo.replace(
        [cm("a", "x", "1"), cm("b", "y", "2"), cm("b", "z", "2")],
        "2",
    )
    .unwrap();
    h.barrier(&[]);
    let store = h.informer.store();
    assert_eq!(store.index_keys("by-rv", "2").unwrap().len(), 2);
    // added while running: indexes what is there, and follows changes
    let by_name: IndexFunc<ConfigMap> =
        Arc::new(|cm: &ConfigMap| vec![cm.name().unwrap_or("").to_owned()]);
    h.informer
        .add_indexers(Indexers::from([("by-name".to_owned(), by_name)]))
        .unwrap();
    assert_eq!(store.index_keys("by-name", "x").unwrap(), ["a/x"]);
    fifo.add(cm("c", "x", "3")).unwrap();
    h.barrier(&[]);
    let mut xs = store.index_keys("by-name", "x").unwrap();
    xs.sort();
    assert_eq!(xs, ["a/x", "c/x"]);
    assert!(store.check_consistency().is_ok());
    // a taken name is refused, nothing changes
    let again: IndexFunc<ConfigMap> = Arc::new(by_version);
    assert!(matches!(
        h.informer
            .add_indexers(Indexers::from([("by-rv".to_owned(), again)])),
        Err(InformerError::Store(_))
    ));
    assert_eq!(h.informer.lister().namespaced("b").list().len(), 2);
    h.stop();
}
