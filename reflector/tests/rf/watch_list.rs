//! RF6: WatchList — the state comes from a watch's initial events, finished
//! at the initial-events-end bookmark; a stream cut short deletes nothing
//! and is retried; servers that refuse or ignore `sendInitialEvents` get
//! list + watch, remembered.

use kcontrol_reflector::WatchConfig;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::ReflectorConfig;
use kcontrol_testserver::Verb;

use crate::support::*;

/// How these tests list and watch.
fn watch() -> WatchConfig {
    fast_watch().use_watch_list(true)
}

fn config() -> ReflectorConfig<ConfigMap> {
    ReflectorConfig::default().watch_config(watch())
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
async fn rf6_a_stream_that_ends_before_the_end_bookmark_deletes_nothing_and_lists_instead() {
    let server = server().await;
    seed(&server, 50);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    // the next WatchList stream ends after 10 of its 50 initial events
    server.faults().close_watches_after(Some(10));
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    eventually_within("the fallback list", DEADLINE, async || {
        requests(&server, Verb::List).len() == 1
    })
    .await;
    server.faults().close_watches_after(None);
    update(&server, "cm-7", "after");
    h.converge(&server).await;
    assert_eq!(h.tombstones(), 0, "the cut stream deleted nothing");
    assert_eq!(store_state(&h.store).len(), 50);
    let watch_lists = requests(&server, Verb::Watch)
        .into_iter()
        .filter(|w| param(&w.query, "sendInitialEvents").is_some())
        .count();
    assert_eq!(watch_lists, 2, "first sync, the cut one");
    // the fallback is not an error a controller needs to hear about
    assert!(
        h.errors().iter().all(|e| !e.contains("initial events")),
        "{:?}",
        h.errors()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_a_refused_watch_list_lists_for_this_attempt_and_is_tried_again() {
    let server = server().await;
    seed(&server, 20);
    let proxy = Proxy::start(server.url()).await;
    // a 403 while RBAC propagates: only the first WatchList is refused
    let tried = Arc::new(AtomicUsize::new(0));
    proxy.set_rule({
        let tried = tried.clone();
        move |_, _, q| {
            if param(q, "sendInitialEvents").is_some() && tried.fetch_add(1, Ordering::SeqCst) == 0
            {
                Action::Respond(
                    403,
                    status(
                        403,
                        "Forbidden",
                        "configmaps is forbidden: User cannot watch",
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
    assert_eq!(requests(&server, Verb::List).len(), 1, "listed instead");
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    // the next relist tries WatchList again, and it works now
    wait_watch_delivered(&server, &h).await;
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    eventually_within("a second WatchList", DEADLINE, async || {
        tried.load(Ordering::SeqCst) >= 2
    })
    .await;
    update(&server, "cm-1", "later");
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 1, "no list this time");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_falls_back_when_the_server_ignores_send_initial_events() {
    let server = server().await; // bookmarks every 300 ms
    seed(&server, 20);
    let proxy = Proxy::start(server.url()).await;
    // an old server: drops the parameters it does not know, so its stream
    // never sends the end bookmark and ends at its timeout
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
    let h = Harness::for_url(
        &proxy.url(),
        config().watch_config(watch().min_watch_timeout(std::time::Duration::from_secs(1))),
    );
    h.synced().await;
    h.converge(&server).await;
    assert!(
        !requests(&server, Verb::List).is_empty(),
        "fell back to a list"
    );
    assert_eq!(h.tombstones(), 0);
    update(&server, "cm-2", "later");
    h.converge(&server).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_changes_and_plain_bookmarks_before_the_end_bookmark_are_applied() {
    let server = server().await;
    let objects = server.objects();
    let a1 = objects
        .create("configmaps", NS, configmap("a", "1"))
        .unwrap();
    let b = objects
        .create("configmaps", NS, configmap("b", "1"))
        .unwrap();
    let a2 = objects
        .update("configmaps", NS, configmap("a", "2"))
        .unwrap();
    objects.delete("configmaps", NS, "b").unwrap();
    let now = bump_version(&server);
    let frame = |t: &str, v: &serde_json::Value| format!("{{\"type\":\"{t}\",\"object\":{v}}}\n");
    let bookmark = |end: bool| {
        let mut meta = serde_json::json!({"resourceVersion": now.to_string()});
        if end {
            meta["annotations"] = serde_json::json!({"k8s.io/initial-events-end": "true"});
        }
        frame(
            "BOOKMARK",
            &serde_json::json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta}),
        )
    };
    // a server before kubernetes#127012: the changes made while it sent the
    // initial events, and a plain bookmark, come before the end bookmark
    let body = [
        frame("ADDED", a1.value()),
        frame("ADDED", b.value()),
        frame("MODIFIED", a2.value()),
        frame("DELETED", b.value()),
        bookmark(false),
        bookmark(true),
    ]
    .concat();
    let proxy = Proxy::start(server.url()).await;
    let served = Arc::new(AtomicUsize::new(0));
    proxy.set_rule({
        let served = served.clone();
        move |_, _, q| {
            if param(q, "sendInitialEvents").is_some() && served.fetch_add(1, Ordering::SeqCst) == 0
            {
                Action::RespondRaw(body.clone())
            } else {
                Action::Forward(q.to_owned())
            }
        }
    });
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 0, "no list");
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    assert_eq!(h.tombstones(), 1, "b, deleted among the initial events");
    update(&server, "a", "3");
    h.converge(&server).await;
    h.stop().await;
}
