//! IN1: many handlers per informer; each has its own buffer and thread, so
//! a slow (here: blocked) handler delays no other handler and not the
//! informer's processing loop.

use std::sync::Arc;

use super::*;
use crate::ResourceEventHandlerFuncs;

#[test]
fn in1_a_blocked_handler_delays_no_other_handler_nor_the_store() {
    const N: usize = 500;
    let mut h = Harness::new(|b| b.name("in1"));
    let gate = Arc::new(Gate::default());
    let slow = Recorder::gated(&gate);
    let fast = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&slow)).unwrap();
    h.informer.add_event_handler(Arc::clone(&fast)).unwrap();
    let fifo = h.start();
    for i in 0..N {
        fifo.add(cm("ns", &format!("o{i}"), "1")).unwrap();
    }
    // The fast handler gets every event while the slow one is still stuck
    // in its very first notification.
    assert!(fast.wait_logged(N));
    eventually_blocking("gate.arrived() == 1", || gate.arrived() == 1);
    assert!(slow.log().is_empty());
    assert_eq!(
        gate.arrived(),
        1,
        "the slow handler is still in its first call"
    );
    // ... and the informer kept going: everything is stored, and the slow
    // handler's notifications wait in its own buffer.
    eventually_blocking("fifo.is_empty() && h.informer.store().len() == N", || {
        fifo.is_empty() && h.informer.store().len() == N
    });
    let mut pending = Vec::new();
    h.informer.processor.for_each(|l| pending.push(l.pending()));
    assert_eq!(pending, [N - 1, 0]);

    gate.open();
    assert!(slow.wait_logged(N));
    assert_eq!(slow.log(), fast.log(), "same events, same order");
    assert!(slow.errors().is_empty() && fast.errors().is_empty());
    h.stop();
}

#[test]
fn in1_every_handler_sees_every_change_in_order() {
    let mut h = Harness::new(|b| b);
    let recorders: Vec<Arc<Recorder>> = (0..6).map(|_| Recorder::new()).collect();
    for r in &recorders {
        h.informer.add_event_handler(Arc::clone(r)).unwrap();
    }
    let fifo = h.start();
    fifo.replace([cm("a", "x", "1"), cm("a", "y", "1")], "1")
        .unwrap();
    for v in 2..50 {
        fifo.update(cm("a", "x", &v.to_string())).unwrap();
        if v % 7 == 0 {
            fifo.delete(cm("a", "y", &v.to_string())).unwrap();
            fifo.add(cm("a", "y", &(v + 1000).to_string())).unwrap();
        }
    }
    let refs: Vec<&Recorder> = recorders.iter().map(|r| r.as_ref()).collect();
    h.barrier(&refs);
    let first = recorders[0].log();
    assert!(first.len() >= 3, "{first:?}");
    for r in &recorders {
        assert_eq!(r.log(), first);
        assert!(r.errors().is_empty(), "{:?}", r.errors());
        assert_eq!(r.view(), h.store_view());
    }
    h.stop();
}

#[test]
fn in1_a_panicking_handler_keeps_handling_and_others_are_unaffected() {
    let mut h = Harness::new(|b| b);
    let handled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&handled);
    let panicky = ResourceEventHandlerFuncs::new().add_func(move |obj: &Arc<ConfigMap>, _| {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert!(obj.name() != Some("bad"), "handler bug");
    });
    let reg = h.informer.add_event_handler(panicky).unwrap();
    let good = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&good)).unwrap();
    let fifo = h.start();
    fifo.replace([cm("a", "bad", "1"), cm("a", "ok", "1")], "1")
        .unwrap();
    h.barrier(&[&good]);
    eventually_blocking("3 notifications handled", || {
        handled.load(std::sync::atomic::Ordering::SeqCst) >= 3
    });
    // the panic counted as handled: the registration still syncs
    eventually_blocking("reg.has_synced()", || reg.has_synced());
    assert_eq!(good.view().len(), 2);
    h.stop();
}

/// IN1: a plain handler registered on a runtime runs on a task of that
/// runtime, unless it asks for a thread (`HandlerOptions::blocking`): one
/// registered with it inside a runtime that is no longer driven still
/// gets every notification, on its own thread.
#[test]
fn in1_a_blocking_handler_gets_a_thread_even_on_a_runtime() {
    let mut h = Harness::new(|b| b);
    let r = Recorder::new();
    let idle = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // registered on `idle`, which nothing drives after this block_on
    let reg = idle
        .block_on(async {
            h.informer.add_event_handler_with_options(
                Arc::clone(&r),
                crate::HandlerOptions::new().blocking(true),
            )
        })
        .unwrap();
    let fifo = h.start();
    fifo.replace([cm("a", "x", "1"), cm("a", "y", "1")], "1")
        .unwrap();
    eventually_blocking("reg.has_synced()", || reg.has_synced());
    assert_eq!(r.view(), h.store_view());
    h.stop();
}
