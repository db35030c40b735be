//! RF9 with RF1: a streamed relist cut short leaves the store mixed
//! (objects at the newer version beside objects the newer state no longer
//! has, which only the completed replace deletes). The relists after it
//! are buffered and applied whole, so none of them mixes it further or
//! leaves it so, and the reflector says it is mixed meanwhile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::ReflectorConfig;
use tokio::sync::Notify;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf9_after_a_relist_failed_part_way_the_next_ones_apply_whole_or_nothing() {
    let server = server().await;
    bulk_seed(&server, 2000);
    let proxy = Proxy::start(server.url()).await;
    let recorder = Arc::new(Recorder::default());
    let h = Harness::for_url(
        &proxy.url(),
        ReflectorConfig::<ConfigMap>::default()
            .watch_config(fast_watch().page_size(0))
            .metrics(recorder.clone()),
    );
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    // changes the watch does not deliver: only a relist brings them. The
    // first key in list order is updated, the last one deleted.
    server.faults().pause_watches();
    update(&server, "bulk-0", "newer");
    server
        .objects()
        .delete("configmaps", NS, "bulk-999")
        .unwrap();
    let first = format!("{NS}/bulk-0");
    let applied_before = h.popped.lock().unwrap().applied[&first];
    // the next two lists are cut after their first objects; the one after
    // is held until the test has looked
    let lists = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Notify::new());
    proxy.set_rule({
        let (lists, gate) = (lists.clone(), gate.clone());
        move |_, _, q| {
            if param(q, "watch").is_some() {
                return Action::Forward(q.to_owned());
            }
            let (after_bytes, then) = match lists.fetch_add(1, Ordering::SeqCst) {
                0 | 1 => (64 * 1024, Then::Cut),
                _ => (0, Then::Hold(gate.clone())),
            };
            Action::ForwardThen {
                query: q.to_owned(),
                after_bytes,
                then,
            }
        }
    });
    server.faults().compact();
    server.faults().close_all_watches();
    eventually_within("the third relist", DEADLINE, async || {
        lists.load(Ordering::SeqCst) >= 3
    })
    .await;
    let fifo = h.fifo.clone();
    eventually_within("the FIFO drained", DEADLINE, async move || fifo.is_empty()).await;
    // mixed: the first object at its newer version, the deleted one still
    // there; and the reflector says so
    let store = store_state(&h.store);
    assert_eq!(store[&first], server_state(&server)[&first]);
    assert!(store.contains_key(&format!("{NS}/bulk-999")));
    assert!(h.reflector.relist_incomplete());
    // the cut relist delivered the first object; the one after it, cut at
    // the same place, delivered nothing (streamed, it would have again)
    let applied = h.popped.lock().unwrap().applied[&first] - applied_before;
    assert_eq!(applied, 1, "deltas for {first} since the relists began");
    gate.notify_one();
    server.faults().resume_watches();
    h.converge(&server).await;
    assert!(!h.reflector.relist_incomplete());
    assert_eq!(h.popped.lock().unwrap().deleted, [format!("{NS}/bulk-999")]);
    assert_never_back_in_time(&h);
    // the metric went up at the cut relist's first object and down once the
    // buffered one completed (the first list's own rise and fall before)
    let flags: Vec<Seen> = recorder
        .seen()
        .into_iter()
        .filter(|s| matches!(s, Seen::RelistIncomplete(_)))
        .collect();
    assert_eq!(
        flags,
        [
            Seen::RelistIncomplete(true),
            Seen::RelistIncomplete(false),
            Seen::RelistIncomplete(true),
            Seen::RelistIncomplete(false),
        ]
    );
    h.stop().await;
}

fn assert_never_back_in_time(h: &Harness) {
    let regressions = h.popped.lock().unwrap().regressions.clone();
    assert!(regressions.is_empty(), "{regressions:?}");
}
