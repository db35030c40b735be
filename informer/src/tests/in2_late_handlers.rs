//! IN2: a handler added after start first receives an add for every object
//! in the store (`is_in_initial_list = true`), then live events; none is
//! lost or repeated across the switch, even while the informer is busy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::*;

/// The snapshot adds at the head of a log, and what follows.
fn split_initial(log: &[Event]) -> (Vec<&Event>, Vec<&Event>) {
    let n = log
        .iter()
        .take_while(|e| matches!(e, Event::Add { initial: true, .. }))
        .count();
    (log[..n].iter().collect(), log[n..].iter().collect())
}

#[test]
fn in2_a_late_handler_gets_the_store_first_then_live_events() {
    let mut h = Harness::new(|b| b);
    let early = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&early)).unwrap();
    let fifo = h.start();
    let list: Vec<_> = (0..100).map(|i| cm("ns", &format!("o{i}"), "5")).collect();
    fifo.replace(list, "5").unwrap();
    h.barrier(&[&early]);
    assert!(h.informer.has_synced());

    let late = Recorder::new();
    let reg = h.informer.add_event_handler(Arc::clone(&late)).unwrap();
    fifo.update(cm("ns", "o7", "6")).unwrap();
    fifo.delete(cm("ns", "o8", "7")).unwrap();
    fifo.add(cm("ns", "new", "8")).unwrap();
    h.barrier(&[&early, &late]);

    let log = late.log();
    let (initial, live) = split_initial(&log);
    assert_eq!(initial.len(), 100);
    assert_eq!(
        live,
        [
            &Event::Update {
                key: "ns/o7".into(),
                old: "5".into(),
                new: "6".into(),
                same_arc: false
            },
            &Event::Delete {
                key: "ns/o8".into(),
                rv: "7".into(),
                tombstone: false
            },
            &Event::Add {
                key: "ns/new".into(),
                rv: "8".into(),
                initial: false
            },
        ]
    );
    assert!(late.errors().is_empty(), "{:?}", late.errors());
    assert_eq!(late.view(), h.store_view());
    assert_eq!(early.view(), h.store_view());
    eventually_blocking("reg.has_synced()", || reg.has_synced());
    h.stop();
}

#[test]
fn in2_handlers_joining_during_churn_lose_and_repeat_nothing() {
    const KEYS: usize = 200;
    const OPS: usize = 20_000;
    let mut h = Harness::new(|b| b);
    let fifo = h.start();
    fifo.replace((0..KEYS / 2).map(|i| cm("ns", &format!("k{i}"), "0")), "0")
        .unwrap();
    eventually_blocking("h.informer.has_synced()", || h.informer.has_synced());

    let done = Arc::new(AtomicBool::new(false));
    let feeder = {
        let fifo = Arc::clone(&fifo);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut rng = Rng(42);
            for op in 1..=OPS {
                let k = format!("k{}", rng.below(KEYS));
                let v = op.to_string();
                match rng.below(10) {
                    0..=5 => fifo.update(cm("ns", &k, &v)).unwrap(),
                    6..=7 => fifo.add(cm("ns", &k, &v)).unwrap(),
                    _ => fifo.delete(cm("ns", &k, &v)).unwrap(),
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    // Handlers join at staggered points while the feeder runs.
    let mut late = Vec::new();
    for _ in 0..8 {
        let r = Recorder::new();
        let reg = h.informer.add_event_handler(Arc::clone(&r)).unwrap();
        late.push((r, reg));
        // staggers the joins over the feed (interleaving, not a wait)
        std::thread::sleep(Duration::from_millis(2));
    }
    feeder.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
    let refs: Vec<&Recorder> = late.iter().map(|(r, _)| r.as_ref()).collect();
    h.barrier(&refs);
    let store = h.store_view();
    for (r, reg) in &late {
        assert!(r.errors().is_empty(), "{:?}", r.errors());
        assert_eq!(r.view(), store);
        // the snapshot came first; every later add is a live one
        let log = r.log();
        let (_, live) = split_initial(&log);
        assert!(live
            .iter()
            .all(|e| !matches!(e, Event::Add { initial: true, .. })));
        eventually_blocking("reg.has_synced()", || reg.has_synced());
    }
    h.stop();
}

#[test]
fn in2_a_handler_added_before_the_first_list_gets_it_as_initial() {
    let mut h = Harness::new(|b| b);
    let fifo = h.start();
    // running but nothing listed yet: the handler joins with an empty snapshot
    let r = Recorder::new();
    let reg = h.informer.add_event_handler(Arc::clone(&r)).unwrap();
    assert!(!reg.has_synced());
    fifo.replace([cm("a", "x", "1"), cm("a", "y", "1")], "1")
        .unwrap();
    h.barrier(&[&r]);
    let log = r.log();
    assert_eq!(log.len(), 2);
    assert!(log
        .iter()
        .all(|e| matches!(e, Event::Add { initial: true, .. })));
    eventually_blocking("reg.has_synced()", || reg.has_synced());
    h.stop();
}
