//! RF3 (watch parameters, bookmarks), RF4 (resume without a relist after a
//! normal end; relist on 410 as an ERROR event or HTTP answer, and on other
//! errors) and RF7 (corrupt frames and objects of another kind restart the
//! watch; when they keep coming, a relist).

use kcontrol_reflector::WatchConfig;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_client::Api;
use kcontrol_deltafifo::{DeltaFifo, PopError, ProcessError};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{ApiResource, DynamicObject};
use kcontrol_reflector::{Reflector, ReflectorConfig, ReflectorError};
use kcontrol_testserver::{TestServer, Verb};
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// How these tests list and watch.
fn watch() -> WatchConfig {
    fast_watch()
}

fn config() -> ReflectorConfig<ConfigMap> {
    ReflectorConfig::default().watch_config(watch())
}

fn recording(server: &TestServer) -> (RecordingLw, Arc<Mutex<Vec<Call>>>) {
    let lw = RecordingLw::new(Api::namespaced(client_for(server.url()), NS));
    let calls = lw.calls.clone();
    (lw, calls)
}

/// Waits until `calls` holds more than `n` successful watch calls.
async fn watch_calls_beyond(calls: &Arc<Mutex<Vec<Call>>>, n: usize) -> Vec<Call> {
    let c = calls.clone();
    eventually_within("a new watch", DEADLINE, async move || {
        crate::support::calls(&c, true)
            .iter()
            .filter(|w| w.outcome.is_ok())
            .count()
            > n
    })
    .await;
    crate::support::calls(calls, true)
        .into_iter()
        .filter(|w| w.outcome.is_ok())
        .collect()
}

fn rv_number(rv: &str) -> u64 {
    rv.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf3_watches_start_at_the_synced_version_with_bookmarks_and_a_random_timeout() {
    let server = server().await;
    seed(&server, 3);
    let listed_at = server.objects().resource_version().to_string();
    let (lw, calls) = recording(&server);
    let h = Harness::start(
        Arc::new(lw),
        config().watch_config(watch().min_watch_timeout(Duration::from_secs(60))),
    );
    h.synced().await;
    let watches = watch_calls_beyond(&calls, 0).await;
    assert_eq!(
        watches[0].resource_version.as_deref(),
        Some(listed_at.as_str())
    );
    // more watches: each from the version synced when it starts
    for i in 0..4 {
        let rv = update(&server, "cm-0", &format!("v{i}"));
        h.converge(&server).await;
        server.faults().close_all_watches();
        let watches = watch_calls_beyond(&calls, i + 1).await;
        let last = watches.last().unwrap();
        assert!(rv_number(last.resource_version.as_deref().unwrap()) >= rv);
    }
    for w in crate::support::calls(&calls, true) {
        assert!(w.bookmarks, "allowWatchBookmarks on every watch");
        assert!(!w.send_initial_events);
        let t = w.timeout.unwrap();
        assert!(
            (60..120).contains(&t),
            "timeoutSeconds {t} outside [60, 120)"
        );
    }
    let logged = requests(&server, Verb::Watch);
    assert_eq!(
        param(&logged[0].query, "allowWatchBookmarks").as_deref(),
        Some("true")
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf3_bookmarks_advance_the_version_and_queue_nothing() {
    let server = server().await; // bookmarks every 300 ms
    seed(&server, 3);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    let popped = h.popped.lock().unwrap().total();
    let synced = rv_number(&h.reflector.last_sync_resource_version().unwrap());
    // other resources move the server's version; only bookmarks tell the
    // ConfigMap watch about it
    let mut target = 0;
    for _ in 0..3 {
        target = bump_version(&server);
    }
    assert!(target > synced);
    let reflector = h.reflector.clone();
    eventually_within("a bookmark at the new version", DEADLINE, async || {
        rv_number(&reflector.last_sync_resource_version().unwrap()) >= target
    })
    .await;
    assert_eq!(
        h.popped.lock().unwrap().total(),
        popped,
        "a bookmark queued a delta"
    );
    assert!(h.fifo.is_empty());
    // the next watch starts from the bookmark's version
    let (watches_before, lists_before) = (
        requests(&server, Verb::Watch).len(),
        requests(&server, Verb::List).len(),
    );
    server.faults().close_all_watches();
    eventually_within("a new watch", DEADLINE, async || {
        requests(&server, Verb::Watch).len() > watches_before
    })
    .await;
    let watch = requests(&server, Verb::Watch).pop().unwrap();
    assert!(rv_number(&param(&watch.query, "resourceVersion").unwrap()) >= target);
    assert_eq!(requests(&server, Verb::List).len(), lists_before);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_a_watch_that_ends_is_resumed_without_a_relist() {
    let server = server().await;
    seed(&server, 5);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    for i in 0..3 {
        update(&server, &format!("cm-{i}"), "changed");
        h.converge(&server).await;
        let synced = h.reflector.last_sync_resource_version().unwrap();
        // the request log (not the open-watch counter, which the server
        // bumps before it logs the request) says which watch came next
        let logged = requests(&server, Verb::Watch).len();
        server.faults().close_all_watches();
        let resumed = eventually_within("the watch to resume", DEADLINE, async || {
            let watches = requests(&server, Verb::Watch);
            (watches.len() > logged)
                .then(|| watches.last().cloned())
                .flatten()
        })
        .await;
        assert!(
            rv_number(&param(&resumed.query, "resourceVersion").unwrap()) >= rv_number(&synced),
            "resumed from the last version"
        );
    }
    server.objects().delete("configmaps", NS, "cm-4").unwrap();
    h.converge(&server).await;
    assert_eq!(
        server.counters().count("list", "configmaps"),
        1,
        "no relist"
    );
    assert_eq!(h.tombstones(), 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_a_410_error_event_relists_at_the_last_synced_version() {
    let server = server().await;
    seed(&server, 10);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    let synced = h.reflector.last_sync_resource_version().unwrap();
    // changes the watch never delivers, then the history is compacted away
    server.faults().pause_watches();
    update(&server, "cm-0", "missed");
    for i in 1..4 {
        server
            .objects()
            .delete("configmaps", NS, &format!("cm-{i}"))
            .unwrap();
    }
    server
        .objects()
        .create("configmaps", NS, configmap("new", "v"))
        .unwrap();
    bump_version(&server);
    server.faults().compact();
    server.faults().close_all_watches();
    server.faults().resume_watches();
    h.converge(&server).await;
    let lists = requests(&server, Verb::List);
    assert_eq!(lists.len(), 2);
    assert_eq!(
        param(&lists[1].query, "resourceVersion").as_deref(),
        Some(synced.as_str()),
        "the relist asks for the last synced version first"
    );
    assert_eq!(h.tombstones(), 3, "the missed deletions come as tombstones");
    assert!(h
        .errors()
        .iter()
        .any(|e| e.contains("ERROR event") && e.contains("410")));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_a_410_http_answer_to_a_watch_relists_and_other_errors_relist_after_a_backoff() {
    let server = server().await;
    seed(&server, 3);
    let proxy = Proxy::start(server.url()).await;
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    for (code, reason) in [(410, "Gone"), (403, "Forbidden")] {
        wait_watch_delivered(&server, &h).await;
        let lists = requests(&server, Verb::List).len();
        let answered = Arc::new(AtomicUsize::new(0));
        proxy.set_rule({
            let answered = answered.clone();
            move |_, _, q| {
                if param(q, "watch").is_some() && answered.fetch_add(1, Ordering::SeqCst) == 0 {
                    Action::Respond(code, status(code, reason, "injected by the test"))
                } else {
                    Action::Forward(q.to_owned())
                }
            }
        });
        server.faults().close_all_watches();
        eventually_within("a relist", DEADLINE, async || {
            requests(&server, Verb::List).len() > lists
        })
        .await;
        assert!(answered.load(Ordering::SeqCst) >= 1);
        h.converge(&server).await;
    }
    let errors = h.errors();
    assert!(errors
        .iter()
        .any(|e| e.contains("watch failed to start") && e.contains("410")));
    assert!(errors
        .iter()
        .any(|e| e.contains("watch failed to start") && e.contains("403")));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf7_a_corrupt_frame_restarts_the_watch_and_loses_no_event() {
    let server = server().await;
    seed(&server, 3);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    server.faults().corrupt_next_watch_frames(1);
    update(&server, "cm-1", "after-corruption");
    h.converge(&server).await;
    let stored = h.store.get_by_key(&format!("{NS}/cm-1")).unwrap();
    assert_eq!(stored.data.as_ref().unwrap()["value"], "after-corruption");
    assert!(
        h.errors()
            .iter()
            .any(|e| e.contains("watch stream failed") && e.contains("cannot decode")),
        "{:?}",
        h.errors()
    );
    assert_eq!(
        requests(&server, Verb::List).len(),
        1,
        "re-watched, not relisted"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf7_an_object_of_another_kind_restarts_the_watch() {
    let server = server().await;
    seed(&server, 3);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    server.faults().send_unexpected_kind_frames(1);
    update(&server, "cm-2", "after-foreign");
    h.converge(&server).await;
    assert!(
        h.errors().iter().any(|e| e.contains("expected ConfigMap")),
        "{:?}",
        h.errors()
    );
    assert_eq!(requests(&server, Verb::List).len(), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf7_bad_events_that_keep_coming_lead_to_a_relist() {
    // default bookmark interval (1 min): no bookmark counts as progress here
    let server = TestServer::builder()
        .deployment_simulator(None)
        .start()
        .await
        .unwrap();
    seed(&server, 3);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    server.faults().send_unexpected_kind_frames(3);
    update(&server, "cm-0", "x");
    eventually_within("a relist", DEADLINE, async || {
        requests(&server, Verb::List).len() == 2
    })
    .await;
    h.converge(&server).await;
    let bad = h
        .errors()
        .iter()
        .filter(|e| e.contains("expected ConfigMap"))
        .count();
    assert_eq!(bad, 3, "{:?}", h.errors());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf7_dynamic_objects_of_another_kind_are_rejected() {
    let server = server().await;
    seed(&server, 2);
    let resource = ApiResource::new("", "v1", "ConfigMap", "configmaps", true);
    let api = Api::<DynamicObject>::namespaced_with(client_for(server.url()), NS, &resource);
    let fifo = DeltaFifo::<DynamicObject>::builder().build();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let recorded = errors.clone();
    let reflector = Arc::new(Reflector::new(
        Arc::new(api),
        fifo.clone(),
        fast_config()
            .error_handler(move |e: &ReflectorError| recorded.lock().unwrap().push(e.to_string())),
    ));
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, shutdown) = (reflector.clone(), shutdown.clone());
        async move { reflector.run(shutdown).await }
    });
    let seen = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let consumer = tokio::spawn({
        let (fifo, seen) = (fifo.clone(), seen.clone());
        async move {
            loop {
                let r = fifo
                    .pop_async(|deltas, _| {
                        let obj = deltas.newest().object();
                        let value = obj.data["data"]["value"].as_str().unwrap_or("").to_owned();
                        seen.lock().unwrap().push((deltas.key().to_owned(), value));
                        Ok::<_, ProcessError<Infallible>>(())
                    })
                    .await;
                if matches!(r, Err(PopError::Closed)) {
                    return;
                }
            }
        }
    });
    eventually_within("the initial list", DEADLINE, async || fifo.has_synced()).await;
    server.faults().send_unexpected_kind_frames(1);
    update(&server, "cm-1", "dynamic");
    eventually_within("the update", DEADLINE, async || {
        seen.lock()
            .unwrap()
            .contains(&(format!("{NS}/cm-1"), "dynamic".to_owned()))
    })
    .await;
    assert!(
        errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e == "unexpected object: expected v1/ConfigMap, got v1/Status"),
        "{:?}",
        errors.lock().unwrap()
    );
    shutdown.cancel();
    bounded("run ends", run).await.unwrap();
    fifo.close();
    bounded("consumer ends", consumer).await.unwrap();
    assert!(!seen.lock().unwrap().iter().any(|(k, _)| k.is_empty()));
}

/// A reflector over 3 ConfigMaps, through a proxy, synced and with a watch
/// that has delivered an event.
async fn synced_behind_a_proxy() -> (TestServer, Proxy, Harness) {
    let server = server().await;
    seed(&server, 3);
    let proxy = Proxy::start(server.url()).await;
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    (server, proxy, h)
}

/// A watch frame of type `event_type` carrying a ConfigMap at `rv` (no
/// newline).
fn configmap_event(event_type: &str, rv: u64) -> String {
    format!(
        "{{\"type\":\"{event_type}\",\"object\":{{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{rv}\"}}}}}}"
    )
}

/// Answers the proxy's next watch with `body`, forwarding every other
/// request; the count of watches the proxy has seen.
fn answer_the_next_watch(proxy: &Proxy, body: String) -> Arc<AtomicUsize> {
    let served = Arc::new(AtomicUsize::new(0));
    proxy.set_rule({
        let served = served.clone();
        move |_, _, q| {
            if param(q, "watch").is_some() && served.fetch_add(1, Ordering::SeqCst) == 0 {
                Action::RespondRaw(body.clone())
            } else {
                Action::Forward(q.to_owned())
            }
        }
    });
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_a_body_ending_inside_its_last_frame_is_a_normal_close() {
    let (server, proxy, h) = synced_behind_a_proxy().await;
    // the next watch gets a bookmark, then the body ends cleanly in the
    // middle of a frame (a server or proxy went away)
    let rv = bump_version(&server);
    let served = answer_the_next_watch(
        &proxy,
        format!(
            "{}\n{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"Conf",
            configmap_event("BOOKMARK", rv)
        ),
    );
    let lists = requests(&server, Verb::List).len();
    server.faults().close_all_watches();
    eventually_within("the watch after the truncated one", DEADLINE, async || {
        served.load(Ordering::SeqCst) >= 2
    })
    .await;
    update(&server, "cm-0", "after");
    h.converge(&server).await;
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    assert_eq!(requests(&server, Verb::List).len(), lists, "no relist");
    // watched again from the bookmark's version
    let last = requests(&server, Verb::Watch).pop().unwrap();
    assert_eq!(param(&last.query, "resourceVersion"), Some(rv.to_string()));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf7_an_unknown_event_type_relists_without_taking_its_version() {
    let (server, proxy, h) = synced_behind_a_proxy().await;
    // the next watch gets an event of a type from the future: whatever
    // change it carried cannot be applied (its version lies ahead of any
    // the server will reach in this test)
    let rv = bump_version(&server) + 1000;
    answer_the_next_watch(&proxy, format!("{}\n", configmap_event("SNAPSHOT", rv)));
    let lists = requests(&server, Verb::List).len();
    server.faults().close_all_watches();
    eventually_within("the relist", DEADLINE, async || {
        requests(&server, Verb::List).len() > lists
    })
    .await;
    update(&server, "cm-0", "after");
    h.converge(&server).await;
    // an error the handler hears of, as client-go's decoder rejects the type
    assert!(
        h.errors().iter().any(|e| e.contains("SNAPSHOT")),
        "{:?}",
        h.errors()
    );
    // the relist asked for the last version applied, not the odd event's
    let relist = requests(&server, Verb::List).swap_remove(lists);
    assert_ne!(
        param(&relist.query, "resourceVersion"),
        Some(rv.to_string())
    );
    assert_eq!(relist.status, 200);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_requests_go_through_the_client_rate_limiter() {
    let server = server().await;
    seed(&server, 1);
    let client = kcontrol_client::Client::new(
        kcontrol_client::Config::new(server.url().parse().unwrap())
            .with_rate_limit(Some(kcontrol_client::RateLimit { qps: 4.0, burst: 1 })),
    )
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let started = std::time::Instant::now();
    let mut streams = Vec::new();
    for _ in 0..5 {
        let params = kcontrol_client::WatchParams::default().timeout(5);
        streams.push(api.watch(&params, "").await.unwrap());
    }
    // one at once, then one every 250 ms at least
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900), "5 watches in {took:?}");
}
