//! The informer reports handler activity to its [`InformerMetrics`]:
//! notifications queued and handled per handler and kind, buffer depth,
//! and each handler's sync, once.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::{InformerMetrics, NotificationKind};

#[derive(Default)]
struct Counts {
    queued: Mutex<BTreeMap<(String, NotificationKind), usize>>,
    handled: Mutex<BTreeMap<(String, NotificationKind), usize>>,
    max_pending: Mutex<BTreeMap<String, usize>>,
    synced: Mutex<Vec<String>>,
    registered: Mutex<Vec<(String, bool)>>,
}

impl InformerMetrics for Counts {
    fn notification_queued(&self, handler: &str, kind: NotificationKind) {
        *self
            .queued
            .lock()
            .entry((handler.to_owned(), kind))
            .or_default() += 1;
    }
    fn notification_handled(&self, handler: &str, kind: NotificationKind, _: Duration, _: bool) {
        *self
            .handled
            .lock()
            .entry((handler.to_owned(), kind))
            .or_default() += 1;
    }
    fn pending(&self, handler: &str, depth: usize) {
        let mut m = self.max_pending.lock();
        let e = m.entry(handler.to_owned()).or_default();
        *e = (*e).max(depth);
    }
    fn handler_synced(&self, handler: &str) {
        self.synced.lock().push(handler.to_owned());
    }
    fn handler_registered(&self, handler: &str, registered: bool) {
        self.registered
            .lock()
            .push((handler.to_owned(), registered));
    }
}

#[test]
fn metrics_count_notifications_depth_and_sync() {
    let counts = Arc::new(Counts::default());
    let m: Arc<dyn InformerMetrics> = counts.clone();
    let mut h = Harness::new(|b| b.metrics(m));
    let gate = Arc::new(Gate::default());
    let slow = Recorder::gated(&gate);
    let fast = Recorder::new();
    let slow_reg = h
        .informer
        .add_event_handler_with_options(
            Arc::clone(&slow),
            crate::HandlerOptions::new().name("slow"),
        )
        .unwrap();
    let fast_reg = h
        .informer
        .add_event_handler_with_options(
            Arc::clone(&fast),
            crate::HandlerOptions::new().name("fast"),
        )
        .unwrap();
    let fifo = h.start();
    fifo.replace((0..10).map(|i| cm("a", &format!("o{i}"), "1")), "1")
        .unwrap();
    fifo.update(cm("a", "o1", "2")).unwrap();
    fifo.delete(cm("a", "o2", "3")).unwrap();
    assert!(fast.wait_logged(12));
    eventually_blocking("fast_reg.has_synced()", || fast_reg.has_synced());
    eventually_blocking("the fast handler counted as synced", || {
        counts.synced.lock().as_slice() == ["fast"]
    });
    eventually_blocking("10 pending for the slow handler", || {
        counts.max_pending.lock().get("slow") >= Some(&10)
    });
    gate.open();
    eventually_blocking("slow_reg.has_synced()", || slow_reg.has_synced());
    assert!(slow.wait_logged(12));
    let key = |h: &str, k| (h.to_owned(), k);
    for handler in ["slow", "fast"] {
        let q = counts.queued.lock().clone();
        assert_eq!(q[&key(handler, NotificationKind::Add)], 10);
        assert_eq!(q[&key(handler, NotificationKind::Update)], 1);
        assert_eq!(q[&key(handler, NotificationKind::Delete)], 1);
        eventually_blocking("one delete handled", || {
            counts
                .handled
                .lock()
                .get(&key(handler, NotificationKind::Delete))
                == Some(&1)
        });
    }
    let mut synced = counts.synced.lock().clone();
    synced.sort();
    assert_eq!(synced, ["fast", "slow"], "each reported once");
    h.informer.remove_event_handler(&slow_reg).unwrap();
    assert_eq!(
        *counts.registered.lock(),
        [
            ("slow".to_owned(), true),
            ("fast".to_owned(), true),
            ("slow".to_owned(), false)
        ]
    );
    h.stop();
}
