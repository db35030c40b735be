//! RF6: WatchList — the state comes from a watch's initial events, finished
//! at the initial-events-end bookmark; a stream cut short deletes nothing
//! and is retried; servers that refuse or ignore `sendInitialEvents` get
//! list + watch, remembered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::{ReflectorConfig, ReflectorError};
use kcontrol_testserver::Verb;

use crate::support::*;

fn config() -> ReflectorConfig<ConfigMap> {
    ReflectorConfig::default()
        .backoff(fast_backoff())
        .use_watch_list(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_syncs_from_initial_events_without_any_list() {
    let server = server().await;
    seed(&server, 50);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 0, "no list at all");
    let first = &requests(&server, Verb::Watch)[0];
    assert_eq!(
        param(&first.query, "sendInitialEvents").as_deref(),
        Some("true")
    );
    assert_eq!(
        param(&first.query, "resourceVersionMatch").as_deref(),
        Some("NotOlderThan")
    );
    assert_eq!(
        param(&first.query, "allowWatchBookmarks").as_deref(),
        Some("true")
    );
    assert_eq!(
        param(&first.query, "resourceVersion"),
        None,
        "a consistent start"
    );
    // the same stream goes on as a watch
    update(&server, "cm-3", "later");
    h.converge(&server).await;
    assert_eq!(server.counters().watches_opened, 1);

    // a relist (410) is a WatchList from the last synced version; what it
    // no longer lists is deleted at the end bookmark
    let synced = h.reflector.last_sync_resource_version().unwrap();
    server.faults().pause_watches();
    for i in 0..5 {
        server
            .objects()
            .delete("configmaps", NS, &format!("cm-{i}"))
            .unwrap();
    }
    bump_version(&server);
    server.faults().compact();
    server.faults().close_all_watches();
    server.faults().resume_watches();
    h.converge(&server).await;
    assert_eq!(h.tombstones(), 5);
    let relist = requests(&server, Verb::Watch)
        .into_iter()
        .filter(|w| param(&w.query, "sendInitialEvents").is_some())
        .nth(1)
        .expect("a second WatchList");
    assert_eq!(
        param(&relist.query, "resourceVersion").as_deref(),
        Some(synced.as_str())
    );
    assert_eq!(requests(&server, Verb::List).len(), 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_a_stream_that_ends_before_the_end_bookmark_deletes_nothing_and_is_retried() {
    let server = server().await;
    seed(&server, 50);
    let faults = server.faults().clone();
    let h = Harness::for_url(
        server.url(),
        config().error_handler(move |e: &ReflectorError| {
            if matches!(e, ReflectorError::WatchListIncomplete) {
                faults.close_watches_after(None);
            }
        }),
    );
    h.synced().await;
    h.converge(&server).await;
    // the next WatchList stream ends after 10 of its 50 initial events
    server.faults().close_watches_after(Some(10));
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    let errors = h.errors.clone();
    wait_for("the cut WatchList", DEADLINE, || {
        errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("before its initial events were complete"))
    })
    .await;
    update(&server, "cm-7", "after");
    h.converge(&server).await;
    assert_eq!(h.tombstones(), 0, "the cut stream deleted nothing");
    assert_eq!(store_state(&h.store).len(), 50);
    let watch_lists = requests(&server, Verb::Watch)
        .into_iter()
        .filter(|w| param(&w.query, "sendInitialEvents").is_some())
        .count();
    assert_eq!(watch_lists, 3, "first sync, the cut one, its retry");
    assert_eq!(
        requests(&server, Verb::List).len(),
        0,
        "no fallback to list"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_falls_back_to_list_and_watch_for_good_when_the_server_refuses() {
    let server = server().await;
    seed(&server, 20);
    let proxy = Proxy::start(server.url()).await;
    let refused = Arc::new(AtomicUsize::new(0));
    proxy.set_rule({
        let refused = refused.clone();
        move |_, _, q| {
            if param(q, "sendInitialEvents").is_some() {
                refused.fetch_add(1, Ordering::SeqCst);
                Action::Respond(
                    422,
                    status(
                        422,
                        "Invalid",
                        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch",
                    ),
                )
            } else {
                Action::Forward(q.to_owned())
            }
        }
    });
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 1);
    assert!(
        h.errors()[0].starts_with("WatchList is not supported by the server"),
        "{:?}",
        h.errors()
    );
    // later relists list directly
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    wait_for("a relist", DEADLINE, || {
        requests(&server, Verb::List).len() == 2
    })
    .await;
    h.converge(&server).await;
    assert_eq!(
        refused.load(Ordering::SeqCst),
        1,
        "the fallback is remembered"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_falls_back_when_the_server_ignores_send_initial_events() {
    let server = server().await; // bookmarks every 300 ms
    seed(&server, 20);
    let proxy = Proxy::start(server.url()).await;
    // an old server: drops the parameters it does not know
    proxy.set_rule(|_, _, q| {
        let kept: Vec<(String, String)> = form_urlencoded::parse(q.as_bytes())
            .into_owned()
            .filter(|(k, _)| k != "sendInitialEvents" && k != "resourceVersionMatch")
            .collect();
        Action::Forward(
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(kept)
                .finish(),
        )
    });
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    h.converge(&server).await;
    assert!(
        h.errors()
            .iter()
            .any(|e| e.contains("without the k8s.io/initial-events-end annotation")),
        "{:?}",
        h.errors()
    );
    assert_eq!(
        requests(&server, Verb::List).len(),
        1,
        "fell back to a list"
    );
    assert_eq!(h.tombstones(), 0);
    update(&server, "cm-2", "later");
    h.converge(&server).await;
    h.stop().await;
}
