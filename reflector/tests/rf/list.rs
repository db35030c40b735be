//! RF1 (list versions and the 410 fallback), RF2 (paging, expired continue
//! tokens, one huge page) and RF9 (objects flow into the FIFO while the
//! list is still arriving; a broken relist deletes nothing).

use kcontrol_reflector::WatchConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kcontrol_client::Api;
use kcontrol_deltafifo::DeltaType;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::ReflectorConfig;
use kcontrol_testserver::Verb;
use tokio::sync::Notify;

use crate::support::*;

/// How these tests list and watch.
fn watch() -> WatchConfig {
    fast_watch()
}

fn config() -> ReflectorConfig<ConfigMap> {
    ReflectorConfig::default().watch_config(watch())
}

/// Makes the next watch answer a 410 ERROR event, so the reflector relists.
async fn force_relist(server: &kcontrol_testserver::TestServer, h: &Harness) {
    let lists_before = requests(server, Verb::List).len();
    // the close must reach an open watch, or the expiry is never served
    wait_watch_open(server).await;
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    eventually_within("a relist", DEADLINE, async || {
        requests(server, Verb::List).len() > lists_before
    })
    .await;
    h.converge(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf1_first_list_at_zero_then_relists_at_the_last_synced_version() {
    let server = server().await;
    seed(&server, 5);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    update(&server, "cm-1", "v1");
    h.converge(&server).await;
    force_relist(&server, &h).await;

    let lists = requests(&server, Verb::List);
    assert_eq!(
        param(&lists[0].query, "resourceVersion").as_deref(),
        Some("0")
    );
    // the relist asks for the version of the watch that was expired: the
    // last synced one (after the update), not "0" and not ""
    // the watch logged last before the relist is the one that got the
    // ERROR event
    let log: Vec<_> = server
        .request_log()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps"))
        .collect();
    let relist_at = log
        .iter()
        .enumerate()
        .filter(|(_, r)| r.verb == Some(Verb::List))
        .nth(1)
        .unwrap()
        .0;
    let expired_watch = log[..relist_at]
        .iter()
        .rev()
        .find(|r| r.verb == Some(Verb::Watch))
        .expect("the watch that got the ERROR event");
    let relist_rv = param(&lists[1].query, "resourceVersion").unwrap();
    assert_eq!(
        Some(&relist_rv),
        param(&expired_watch.query, "resourceVersion").as_ref()
    );
    assert!(relist_rv.parse::<u64>().unwrap() > 1, "{relist_rv}");
    assert!(
        h.errors()
            .iter()
            .any(|e| e.contains("410") || e.contains("Expired")),
        "{:?}",
        h.errors()
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf1_a_list_answered_410_is_retried_as_a_consistent_read() {
    let server = server().await;
    seed(&server, 5);
    server.faults().expire_next_lists(1);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    h.converge(&server).await;
    let lists = requests(&server, Verb::List);
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert_eq!(lists[0].status, 410);
    assert_eq!(
        param(&lists[0].query, "resourceVersion").as_deref(),
        Some("0")
    );
    assert_eq!(lists[1].status, 200);
    assert_eq!(param(&lists[1].query, "resourceVersion"), None);
    // retried at once: not an error the handler hears of (client-go)
    assert!(h.errors().is_empty(), "{:?}", h.errors());

    // a successful list makes the last version available again: the next
    // relist asks for it
    let synced = h.reflector.last_sync_resource_version().unwrap();
    force_relist(&server, &h).await;
    let lists = requests(&server, Verb::List);
    assert_eq!(
        param(&lists[2].query, "resourceVersion").as_deref(),
        Some(synced.as_str())
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf2_consistent_lists_are_paged_with_continue_tokens() {
    let server = server().await;
    seed(&server, 25);
    server.faults().expire_next_lists(1); // the "" fallback is paged
    let lw = RecordingLw::new(Api::namespaced(client_for(server.url()), NS));
    let calls = lw.calls.clone();
    let h = Harness::start(Arc::new(lw), config().watch_config(watch().page_size(10)));
    h.synced().await;
    h.converge(&server).await;
    let lists = calls_of(&calls, false);
    assert_eq!(lists.len(), 4, "{lists:#?}");
    assert!(lists[0].outcome.is_err());
    assert_eq!(lists[1].resource_version.as_deref(), Some(""));
    assert_eq!(lists[1].limit, Some(10));
    for page in &lists[2..] {
        assert!(page.continue_token.is_some());
        assert_eq!(
            page.resource_version, None,
            "continue pages carry no version"
        );
        assert_eq!(page.limit, Some(10));
    }
    assert_ne!(lists[2].continue_token, lists[3].continue_token);
    assert_eq!(h.popped(DeltaType::Replaced), 25);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf2_an_expired_continue_token_falls_back_to_one_full_list() {
    let server = server().await;
    seed(&server, 25);
    server.faults().expire_next_lists(1);
    let (faults, objects) = (server.faults().clone(), server.objects());
    let compacted = Arc::new(AtomicBool::new(false));
    // before the second page is asked for, the snapshot behind its token goes
    let lw = RecordingLw::new(Api::namespaced(client_for(server.url()), NS)).before({
        let compacted = compacted.clone();
        move |call| {
            if !call.watch
                && call.continue_token.is_some()
                && !compacted.swap(true, Ordering::SeqCst)
            {
                objects
                    .delete("configmaps", NS, "cm-24")
                    .expect("delete one listed object");
                faults.compact();
            }
        }
    });
    let calls = lw.calls.clone();
    let h = Harness::start(Arc::new(lw), config().watch_config(watch().page_size(10)));
    h.synced().await;
    h.converge(&server).await;
    let lists = calls_of(&calls, false);
    assert_eq!(lists.len(), 4, "{lists:#?}");
    let expired = &lists[2];
    assert!(expired.continue_token.is_some());
    assert!(
        expired.outcome.as_ref().unwrap_err().contains("410"),
        "{expired:?}"
    );
    let full = &lists[3];
    assert_eq!(full.limit, None, "one full list, no pages");
    assert_eq!(full.continue_token, None);
    assert_eq!(
        full.resource_version.as_deref(),
        Some(""),
        "same version rules"
    );
    assert!(full.outcome.is_ok());
    // the deleted object was never listed by the full list, and the partial
    // pages queued no deletion: nothing tombstoned, 24 objects stored
    assert_eq!(h.tombstones(), 0);
    assert_eq!(store_state(&h.store).len(), 24);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf2_a_list_at_zero_served_as_one_big_page_is_handled() {
    let server = server().await;
    bulk_seed(&server, 1200);
    let h = Harness::for_url(server.url(), config()); // page size 500
    h.synced().await;
    h.converge(&server).await;
    let lists = requests(&server, Verb::List);
    assert_eq!(lists.len(), 1, "the watch cache ignores limit at \"0\"");
    assert_eq!(param(&lists[0].query, "limit").as_deref(), Some("500"));
    assert_eq!(store_state(&h.store).len(), 1200);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf9_objects_reach_the_fifo_while_the_list_is_still_arriving() {
    let server = server().await;
    bulk_seed(&server, 3000);
    let proxy = Proxy::start(server.url()).await;
    let gate = Arc::new(Notify::new());
    proxy.set_rule({
        let gate = gate.clone();
        move |_, _, q| {
            if param(q, "watch").is_none() {
                Action::ForwardThen {
                    query: q.to_owned(),
                    after_bytes: 64 * 1024,
                    then: Then::Hold(gate.clone()),
                }
            } else {
                Action::Forward(q.to_owned())
            }
        }
    });
    let h = Harness::for_url(&proxy.url(), config());
    // the server holds back the rest of the body: objects of the first
    // 64 KiB are already in the FIFO, popped and stored
    let store = h.store.clone();
    eventually_within("objects before the end of the list", DEADLINE, async || {
        !store.list_keys().is_empty()
    })
    .await;
    let partial = store_state(&h.store).len();
    assert!(partial < 3000, "{partial}");
    assert!(!h.fifo.has_synced());
    assert_eq!(h.reflector.last_sync_resource_version(), None);
    gate.notify_one();
    h.synced().await;
    h.converge(&server).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf9_a_relist_broken_off_mid_body_deletes_nothing() {
    let server = server().await;
    bulk_seed(&server, 2000);
    let proxy = Proxy::start(server.url()).await;
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    h.converge(&server).await;
    // relists now break off after 32 KiB
    proxy.set_rule(|_, _, q| {
        if param(q, "watch").is_none() {
            Action::ForwardThen {
                query: q.to_owned(),
                after_bytes: 32 * 1024,
                then: Then::Cut,
            }
        } else {
            Action::Forward(q.to_owned())
        }
    });
    let replaced_before = h.popped(DeltaType::Replaced);
    wait_watch_open(&server).await;
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    let errors = h.errors.clone();
    eventually_within("broken relists", DEADLINE, async || {
        errors
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.starts_with("list failed"))
            .count()
            >= 2
    })
    .await;
    assert!(
        h.popped(DeltaType::Replaced) > replaced_before,
        "the broken relists streamed objects in: {:?}",
        h.errors()
    );
    proxy.set_rule(|_, _, q| Action::Forward(q.to_owned()));
    h.converge(&server).await;
    assert_eq!(h.tombstones(), 0, "no broken relist deleted anything");
    assert_eq!(store_state(&h.store).len(), 2000);
    h.stop().await;
}

fn calls_of(calls: &Arc<std::sync::Mutex<Vec<Call>>>, watch: bool) -> Vec<Call> {
    crate::support::calls(calls, watch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_without_a_resource_version_syncs_and_watches_from_empty() {
    let server = server().await;
    seed(&server, 4);
    let proxy = Proxy::start(server.url()).await;
    // an aggregated server that sends lists without metadata.resourceVersion
    let objects = server.objects();
    proxy.set_rule(move |_, _, q| {
        if param(q, "watch").is_some() {
            return Action::Forward(q.to_owned());
        }
        let items: Vec<serde_json::Value> = objects
            .list("configmaps", Some(NS))
            .unwrap()
            .items
            .iter()
            .map(|o| o.value().clone())
            .collect();
        Action::Respond(
            200,
            serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": items}),
        )
    });
    let h = Harness::for_url(&proxy.url(), config());
    h.synced().await;
    h.converge(&server).await;
    assert_eq!(h.fifo.last_sync_resource_version().as_deref(), Some(""));
    // the watch follows the list: the store can converge before it is sent
    let watch = eventually_within("a watch after the list", DEADLINE, async || {
        requests(&server, Verb::Watch).into_iter().next()
    })
    .await;
    assert_eq!(
        param(&watch.query, "resourceVersion").unwrap_or_default(),
        "",
        "watched from the current state"
    );
    update(&server, "cm-2", "later");
    h.converge(&server).await;
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    h.stop().await;
}
