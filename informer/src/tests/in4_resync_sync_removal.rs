//! IN4: per-handler resync periods (client-go's rules), handler removal,
//! and per-handler `has_synced`, true only once that handler has handled
//! its whole initial list.

use std::sync::{Arc, OnceLock, Weak};

use super::*;
use crate::resync_clock::ManualClock;
use crate::{HandlerOptions, HandlerRegistration, InformerError, ResourceEventHandlerFuncs};

fn syncs(r: &Recorder) -> usize {
    r.log()
        .iter()
        .filter(|e| matches!(e, Event::Update { old, new, .. } if old == new))
        .count()
}

#[test]
fn in4_has_synced_waits_for_the_handler_to_handle_its_initial_list() {
    let mut h = Harness::new(|b| b);
    let gate = Arc::new(Gate::default());
    let slow = Recorder::gated(&gate);
    let fast = Recorder::new();
    let slow_reg = h.informer.add_event_handler(Arc::clone(&slow)).unwrap();
    let fast_reg = h.informer.add_event_handler(Arc::clone(&fast)).unwrap();
    assert!(!fast_reg.has_synced() && !h.informer.has_synced());
    let fifo = h.start();
    fifo.replace((0..50).map(|i| cm("a", &format!("o{i}"), "1")), "1")
        .unwrap();
    eventually_blocking("fast_reg.has_synced()", || fast_reg.has_synced());
    assert!(h.informer.has_synced());
    eventually_blocking("gate.arrived() == 1", || gate.arrived() == 1);
    // The store has synced, but the slow handler is stuck on its first add.
    for _ in 0..20 {
        assert!(!slow_reg.has_synced());
        std::thread::sleep(Duration::from_millis(1));
    }
    gate.open();
    eventually_blocking("slow_reg.has_synced()", || slow_reg.has_synced());
    assert_eq!(slow.view(), h.store_view());
    assert_eq!(fast.view(), h.store_view());
    h.stop();
}

#[test]
fn in4_a_late_handler_is_synced_only_after_its_snapshot() {
    let mut h = Harness::new(|b| b);
    let fifo = h.start();
    fifo.replace((0..20).map(|i| cm("a", &format!("o{i}"), "1")), "1")
        .unwrap();
    eventually_blocking("h.informer.has_synced()", || h.informer.has_synced());
    let gate = Arc::new(Gate::default());
    let late = Recorder::gated(&gate);
    let reg = h.informer.add_event_handler(Arc::clone(&late)).unwrap();
    assert!(!reg.has_synced(), "synced before handling the snapshot");
    eventually_blocking("gate.arrived() == 1", || gate.arrived() == 1);
    assert!(!reg.has_synced());
    gate.open();
    eventually_blocking("reg.has_synced()", || reg.has_synced());
    assert_eq!(late.view().len(), 20);
    h.stop();
}

#[test]
fn in4_each_handler_resyncs_on_its_own_period() {
    let clock = ManualClock::new();
    let c = clock.clock();
    let mut h = Harness::new(|b| b.resync_period(Duration::from_secs(10)).clock(c));
    let every10 = Recorder::new();
    let every30 = Recorder::new();
    let never = Recorder::new();
    let r10 = h.informer.add_event_handler(Arc::clone(&every10)).unwrap();
    let r30 = h
        .informer
        .add_event_handler_with_resync_period(Arc::clone(&every30), Duration::from_secs(30))
        .unwrap();
    let r0 = h
        .informer
        .add_event_handler_with_resync_period(Arc::clone(&never), Duration::ZERO)
        .unwrap();
    assert_eq!(
        [r10.resync_period(), r30.resync_period(), r0.resync_period()],
        [
            Duration::from_secs(10),
            Duration::from_secs(30),
            Duration::ZERO
        ]
    );
    let fifo = h.start();
    assert_eq!(h.source.resync_period(), Some(Duration::from_secs(10)));
    fifo.replace((0..3).map(|i| cm("a", &format!("o{i}"), "1")), "1")
        .unwrap();
    let all = [&*every10, &*every30, &*never];
    h.barrier(&all);
    assert!(!h.source.resync_tick(), "nobody is due yet");

    let mut expect = [0, 0, 0];
    for (step, due) in [
        (1, [true, false]),
        (2, [true, false]),
        (3, [true, true]),
        (4, [true, false]),
    ] {
        clock.advance(Duration::from_secs(10));
        assert!(h.source.resync_tick(), "step {step}");
        h.barrier(&all);
        expect[0] += if due[0] { 3 } else { 0 };
        expect[1] += if due[1] { 3 } else { 0 };
        assert_eq!(
            [syncs(&every10), syncs(&every30), syncs(&never)],
            expect,
            "after {}0 s",
            step
        );
    }
    // a resync re-announces the very object in the store
    assert!(every10
        .log()
        .iter()
        .any(|e| matches!(e, Event::Update { same_arc: true, .. })));
    for r in all {
        assert!(r.errors().is_empty());
        assert_eq!(r.view(), h.store_view());
    }
    h.stop();
}

#[test]
fn in4_unchanged_objects_of_a_relist_go_only_to_handlers_due_for_resync() {
    let clock = ManualClock::new();
    let c = clock.clock();
    let mut h = Harness::new(|b| b.resync_period(Duration::from_secs(10)).clock(c));
    let resyncing = Recorder::new();
    let plain = Recorder::new();
    h.informer
        .add_event_handler(Arc::clone(&resyncing))
        .unwrap();
    h.informer
        .add_event_handler_with_resync_period(Arc::clone(&plain), Duration::ZERO)
        .unwrap();
    let fifo = h.start();
    fifo.replace([cm("a", "x", "1"), cm("a", "y", "1")], "1")
        .unwrap();
    h.barrier(&[&resyncing, &plain]);
    // a relist (no resync due): the changed object reaches everyone, the
    // unchanged one nobody
    fifo.replace([cm("a", "x", "1"), cm("a", "y", "2")], "2")
        .unwrap();
    h.barrier(&[&resyncing, &plain]);
    let changed = Event::Update {
        key: "a/y".into(),
        old: "1".into(),
        new: "2".into(),
        same_arc: false,
    };
    assert_eq!(resyncing.log()[2..], *std::slice::from_ref(&changed));
    assert_eq!(plain.log()[2..], [changed]);
    // once a resync is due for `resyncing`, same-version relists reach it
    clock.advance(Duration::from_secs(10));
    assert!(h.source.resync_tick());
    h.barrier(&[&resyncing, &plain]);
    assert_eq!(syncs(&resyncing), 2);
    fifo.replace([cm("a", "x", "1"), cm("a", "y", "2")], "3")
        .unwrap();
    h.barrier(&[&resyncing, &plain]);
    assert_eq!(syncs(&resyncing), 4);
    assert_eq!(syncs(&plain), 0);
    assert!(resyncing
        .log()
        .iter()
        .any(|e| matches!(e, Event::Update { old, new, same_arc: false, .. } if old == new)));
    h.stop();
}

#[test]
fn in4_resync_periods_follow_client_gos_rules() {
    let s = Duration::from_secs;
    // before start, a shorter period lowers the check period for everyone
    let h = Harness::new(|b| b.resync_period(s(10)));
    let a = h.informer.add_event_handler(Recorder::new()).unwrap();
    assert_eq!(a.resync_period(), s(10));
    let b = h
        .informer
        .add_event_handler_with_resync_period(Recorder::new(), s(3))
        .unwrap();
    assert_eq!(h.informer.resync_check_period(), s(3));
    assert_eq!((a.resync_period(), b.resync_period()), (s(10), s(3)));
    // below the minimum: raised to 1 s (and the check period follows)
    let tiny = h
        .informer
        .add_event_handler_with_resync_period(Recorder::new(), Duration::from_millis(10))
        .unwrap();
    assert_eq!(tiny.resync_period(), crate::MINIMUM_RESYNC_PERIOD);
    assert_eq!(h.informer.resync_check_period(), s(1));

    // after start, a shorter period is raised to the check period
    let mut h = Harness::new(|b| b.resync_period(s(10)));
    h.start();
    let late = h
        .informer
        .add_event_handler_with_resync_period(Recorder::new(), s(2))
        .unwrap();
    assert_eq!(late.resync_period(), s(10));
    assert_eq!(h.informer.resync_check_period(), s(10));
    let longer = h
        .informer
        .add_event_handler_with_resync_period(Recorder::new(), s(25))
        .unwrap();
    assert_eq!(longer.resync_period(), s(25));
    h.stop();

    // an informer that does not resync gives no handler a resync
    let mut h = Harness::new(|b| b);
    let r = h
        .informer
        .add_event_handler_with_resync_period(Recorder::new(), s(30))
        .unwrap();
    assert_eq!(r.resync_period(), Duration::ZERO);
    h.start();
    assert_eq!(h.source.resync_period(), None);
    h.stop();
}

#[test]
fn in4_a_removed_handler_gets_nothing_more_and_its_thread_ends() {
    let mut h = Harness::new(|b| b);
    let stays = Recorder::new();
    let goes = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&stays)).unwrap();
    let reg = h.informer.add_event_handler(Arc::clone(&goes)).unwrap();
    let fifo = h.start();
    fifo.add(cm("a", "x", "1")).unwrap();
    h.barrier(&[&stays, &goes]);
    let before = goes.log();
    h.informer.remove_event_handler(&reg).unwrap();
    h.informer.remove_event_handler(&reg).unwrap(); // twice is fine
                                                    // its thread ended and let go of the handler
    eventually_blocking("Arc::strong_count(&goes) == 1", || {
        Arc::strong_count(&goes) == 1
    });
    fifo.update(cm("a", "x", "2")).unwrap();
    fifo.add(cm("a", "y", "1")).unwrap();
    h.barrier(&[&stays]);
    assert_eq!(goes.log(), before);
    assert_eq!(stays.view(), h.store_view());

    // a registration of another informer is refused
    let other = Harness::new(|b| b.name("other"));
    let foreign = other.informer.add_event_handler(Recorder::new()).unwrap();
    assert!(matches!(
        h.informer.remove_event_handler(&foreign),
        Err(InformerError::ForeignRegistration { .. })
    ));
    h.stop();
}

#[test]
fn in4_a_handler_may_remove_itself() {
    let mut h = Harness::new(|b| b);
    let me: Arc<OnceLock<HandlerRegistration>> = Arc::default();
    let informer: Weak<SharedIndexInformer<ConfigMap>> = Arc::downgrade(&h.informer);
    let calls = Arc::new(Mutex::new(0));
    let (m, n) = (Arc::clone(&me), Arc::clone(&calls));
    let handler = ResourceEventHandlerFuncs::new().add_func(move |_: &Arc<ConfigMap>, _| {
        *n.lock() += 1;
        if *n.lock() == 3 {
            if let (Some(inf), Some(reg)) = (informer.upgrade(), m.get()) {
                inf.remove_event_handler(reg).unwrap();
            }
        }
    });
    let reg = h
        .informer
        .add_event_handler_with_options(handler, HandlerOptions::new().name("self-removing"))
        .unwrap();
    assert_eq!(reg.name(), "self-removing");
    me.set(reg).unwrap();
    let witness = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&witness)).unwrap();
    let fifo = h.start();
    for i in 0..10 {
        fifo.add(cm("a", &format!("o{i}"), "1")).unwrap();
    }
    h.barrier(&[&witness]);
    eventually_blocking("h.informer.processor.len() == 1", || {
        h.informer.processor.len() == 1
    });
    assert!(*calls.lock() >= 3 && *calls.lock() <= 10);
    h.stop();
}

#[test]
fn in4_a_stopped_informer_takes_no_handlers_and_does_not_restart() {
    let mut h = Harness::new(|b| b);
    let r = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&r)).unwrap();
    h.start();
    assert!(h.informer.has_started() && !h.informer.is_stopped());
    h.stop();
    assert!(h.informer.is_stopped());
    eventually_blocking("handler threads ended", || Arc::strong_count(&r) == 1);
    assert!(matches!(
        h.informer.add_event_handler(Recorder::new()),
        Err(InformerError::Stopped { .. })
    ));
    assert!(matches!(
        h.informer.add_indexers(kcontrol_indexer::Indexers::new()),
        Err(InformerError::Stopped { .. })
    ));
    // a second run returns at once, with an error
    let inf = Arc::clone(&h.informer);
    let second = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async move { inf.run(CancellationToken::new()).await });
    assert!(
        matches!(second, Err(InformerError::AlreadyRun { .. })),
        "{second:?}"
    );
}

#[test]
fn run_outside_a_tokio_runtime_starts_nothing_and_odd_names_are_fine() {
    let h = Harness::new(|b| b.name("odd\0informer"));
    let reg = h
        .informer
        .add_event_handler_with_options(Recorder::new(), HandlerOptions::new().name("nul\0name"))
        .unwrap();
    assert_eq!(reg.name(), "nul\0name");
    let outside = futures::executor::block_on(h.informer.run(CancellationToken::new()));
    assert!(
        matches!(outside, Err(InformerError::NoRuntime { .. })),
        "{outside:?}"
    );
    assert!(!h.informer.has_started());
}

#[test]
fn dropping_the_run_future_stops_the_informer_and_its_handlers() {
    let h = Harness::new(|b| b);
    let r = Recorder::new();
    h.informer.add_event_handler(Arc::clone(&r)).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let inf = Arc::clone(&h.informer);
    runtime.block_on(async {
        let run = inf.run(CancellationToken::new());
        // poll it a little, then drop it
        let _ = tokio::time::timeout(Duration::from_millis(20), run).await;
    });
    assert!(h.informer.is_stopped());
    assert!(h.source.fifo().unwrap().is_closed());
    eventually_blocking("handler thread ended", || Arc::strong_count(&r) == 1);
    assert!(h.informer.add_event_handler(Recorder::new()).is_err());
}
