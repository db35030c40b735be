//! IN3: `on_update(old, new)` for changes; `on_delete` receives a typed
//! enum, the final state or a tombstone with the key and the last known
//! state; objects are the store's shared `Arc`s, never copies.

use std::sync::Arc;

use kcontrol_indexer::DeletedFinalStateUnknown;

use super::*;
use crate::ResourceEventHandlerFuncs;

#[test]
fn in3_deletions_arrive_typed_with_final_state_or_tombstone() {
    let mut h = Harness::new(|b| b);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    // No runtime type check anywhere: the match is on the enum.
    let handler =
        ResourceEventHandlerFuncs::new().delete_func(move |gone: &ObjectOrTombstone<ConfigMap>| {
            if gone.object().namespace() == Some(SENTINEL_NS) {
                return;
            }
            let entry = match gone {
                ObjectOrTombstone::Object(obj) => format!("final {}@{}", key(obj), rv(obj)),
                ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown { key: k, obj }) => {
                    format!("tombstone {k} last {}", rv(obj))
                }
            };
            log.lock().push(entry);
        });
    h.informer.add_event_handler(handler).unwrap();
    let r = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&r)).unwrap();
    let fifo = h.start();
    fifo.replace(
        [
            cm("a", "watched", "1"),
            cm("a", "missed", "1"),
            cm("a", "kept", "1"),
        ],
        "1",
    )
    .unwrap();
    h.barrier(&[&r]);
    // the watch sees one deletion; the other is only noticed by a relist
    fifo.delete(cm("a", "watched", "2")).unwrap();
    fifo.replace([cm("a", "kept", "1")], "3").unwrap();
    h.barrier(&[&r]);
    eventually_blocking("seen.lock().len() >= 2", || seen.lock().len() >= 2);
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(got, ["final a/watched@2", "tombstone a/missed last 1"]);
    assert!(r.log().contains(&Event::Delete {
        key: "a/missed".into(),
        rv: "1".into(),
        tombstone: true
    }));
    assert_eq!(
        h.store_view(),
        BTreeMap::from([("a/kept".to_owned(), "1".to_owned())])
    );
    assert!(r.errors().is_empty(), "{:?}", r.errors());
    h.stop();
}

#[test]
fn in3_updates_carry_the_old_and_new_state() {
    let mut h = Harness::new(|b| b);
    let r = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&r)).unwrap();
    let fifo = h.start();
    fifo.add(cm("a", "x", "1")).unwrap();
    fifo.update(cm("a", "x", "2")).unwrap();
    fifo.update(cm("a", "x", "3")).unwrap();
    h.barrier(&[&r]);
    assert_eq!(
        r.log(),
        [
            Event::Add {
                key: "a/x".into(),
                rv: "1".into(),
                initial: true
            },
            Event::Update {
                key: "a/x".into(),
                old: "1".into(),
                new: "2".into(),
                same_arc: false
            },
            Event::Update {
                key: "a/x".into(),
                old: "2".into(),
                new: "3".into(),
                same_arc: false
            },
        ]
    );
    h.stop();
}

#[test]
fn in3_handlers_get_the_stores_arc_not_a_copy() {
    let mut h = Harness::new(|b| b);
    let got: Arc<Mutex<Vec<Arc<ConfigMap>>>> = Arc::default();
    let sink = Arc::clone(&got);
    h.informer
        .add_event_handler(
            ResourceEventHandlerFuncs::new()
                .add_func(move |obj: &Arc<ConfigMap>, _| sink.lock().push(Arc::clone(obj))),
        )
        .unwrap();
    let fifo = h.start();
    let obj = cm("a", "x", "1");
    fifo.add(Arc::clone(&obj)).unwrap();
    eventually_blocking("!got.lock().is_empty()", || !got.lock().is_empty());
    let handed = got.lock()[0].clone();
    assert!(Arc::ptr_eq(&handed, &obj));
    assert!(Arc::ptr_eq(
        &handed,
        &h.informer.lister().get("a", "x").unwrap()
    ));
    h.stop();
}
