//! RF4 and RF5 over HTTP, with client-go's semantics: 429 waits at least
//! Retry-After and a refused connection backs off, both watching again
//! without a relist (a watch whose connection broke before any answer too);
//! 5xx and very short watches relist after growing waits; lists that fail back off too. Timings are only asserted as lower
//! bounds (a wait the reflector must have made), never as speed.

use kcontrol_reflector::WatchConfig;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kcontrol_client::{Api, Error as ClientError, ListParams, ListStream, ObjectList, WatchParams};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::ApiResource;
use kcontrol_reflector::{BackoffConfig, ListerWatcher, ReflectorConfig, WatchEventStream};
use kcontrol_testserver::{Failure, FaultScope, TestServer, Verb};
use serde_json::json;

use crate::support::*;

fn recording(server: &TestServer) -> (RecordingLw, Arc<Mutex<Vec<Call>>>) {
    let lw = RecordingLw::new(Api::namespaced(client_for(server.url()), NS));
    let calls = lw.calls.clone();
    (lw, calls)
}

fn watch_scope() -> FaultScope {
    FaultScope {
        verb: Some(Verb::Watch),
        resource: Some("configmaps".into()),
    }
}

/// Waits until a watch call succeeds after `failed` failed ones.
async fn wait_rewatch(calls: &Arc<Mutex<Vec<Call>>>, failed: usize) -> Vec<Call> {
    let c = calls.clone();
    eventually_within(
        "a successful watch after the failures",
        DEADLINE,
        async move || {
            let watches = crate::support::calls(&c, true);
            let failures = watches.iter().filter(|w| w.outcome.is_err()).count();
            failures >= failed && watches.last().is_some_and(|w| w.outcome.is_ok())
        },
    )
    .await;
    crate::support::calls(calls, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_a_429_waits_at_least_retry_after_before_watching_again() {
    let server = server().await;
    seed(&server, 3);
    let (lw, calls) = recording(&server);
    let h = Harness::start(Arc::new(lw), fast_config());
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    server.faults().fail_next_matching(
        1,
        Failure::TooManyRequests {
            retry_after_secs: 1,
        },
        watch_scope(),
    );
    server.faults().close_all_watches();
    let watches = wait_rewatch(&calls, 1).await;
    let (i, throttled) = watches
        .iter()
        .enumerate()
        .find(|(_, w)| w.outcome.is_err())
        .unwrap();
    assert!(throttled.outcome.as_ref().unwrap_err().contains("429"));
    let next = &watches[i + 1];
    // the backoff alone would be 20 ms: the wait follows Retry-After
    assert!(
        next.at.duration_since(throttled.at) >= Duration::from_secs(1),
        "watched again {:?} after a 429 with Retry-After: 1",
        next.at.duration_since(throttled.at)
    );
    assert!(next.outcome.is_ok());
    assert_eq!(requests(&server, Verb::List).len(), 1, "no relist");
    update(&server, "cm-0", "later");
    h.converge(&server).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_5xx_answers_to_watches_relist_with_growing_waits() {
    let server = server().await;
    seed(&server, 3);
    let (lw, calls) = recording(&server);
    let initial = Duration::from_millis(60);
    let backoff = BackoffConfig {
        initial,
        max: Duration::from_secs(2),
        reset_after: Duration::from_secs(30),
        jitter: 0.0,
    };
    let h = Harness::start(
        Arc::new(lw),
        ReflectorConfig::default().watch_config(WatchConfig::default().backoff(backoff)),
    );
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    // a conversion webhook failing every watch: each 500 ends the
    // iteration (client-go), so the reflector relists, and it does not
    // spin: the waits between attempts grow
    server
        .faults()
        .fail_next_matching(4, Failure::InternalError, watch_scope());
    server.faults().close_all_watches();
    let watches = wait_rewatch(&calls, 4).await;
    let failed: Vec<&Call> = watches.iter().filter(|w| w.outcome.is_err()).collect();
    assert_eq!(failed.len(), 4);
    assert!(failed
        .iter()
        .all(|w| w.outcome.as_ref().unwrap_err().contains("500")));
    let gaps: Vec<Duration> = failed
        .windows(2)
        .map(|w| w[1].at.duration_since(w[0].at))
        .collect();
    assert!(gaps.iter().all(|g| *g >= initial), "{gaps:?}");
    let last = watches.last().unwrap().at.duration_since(failed[3].at);
    assert!(
        last >= initial * 8,
        "waits did not grow: {gaps:?} then {last:?}"
    );
    assert_eq!(requests(&server, Verb::List).len(), 5, "each 5xx relists");
    update(&server, "cm-0", "later");
    h.converge(&server).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_5xx_error_events_and_very_short_watches_relist() {
    let server = server().await;
    seed(&server, 3);
    let proxy = Proxy::start(server.url()).await;
    let h = Harness::for_url(&proxy.url(), fast_config());
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    // one watch ends at once with a 500 ERROR event, the next one's
    // connection closes at once without any event
    let n = Arc::new(AtomicUsize::new(0));
    proxy.set_rule({
        let n = n.clone();
        move |_, _, q| {
            if param(q, "watch").is_none() {
                return Action::Forward(q.to_owned());
            }
            match n.fetch_add(1, Ordering::SeqCst) {
                0 => Action::Respond(200, json!({"type": "ERROR", "object": status(500, "InternalError", "conversion webhook failed")})),
                // answered, then closed at once without any event
                1 => Action::ForwardThen {
                    query: q.to_owned(),
                    after_bytes: 0,
                    then: Then::End,
                },
                _ => Action::Forward(q.to_owned()),
            }
        }
    });
    server.faults().close_all_watches();
    eventually_within("two relists", DEADLINE, async || {
        requests(&server, Verb::List).len() >= 3
    })
    .await;
    update(&server, "cm-0", "later");
    h.converge(&server).await;
    h.stop().await;
}

/// Lists through `api`; its first `refused` watches go to a port nobody
/// listens on (a refused TCP connection, as while an API server restarts).
struct RefusingLw {
    api: Api<ConfigMap>,
    dead: Api<ConfigMap>,
    refused: AtomicUsize,
    watches: AtomicUsize,
}

impl ListerWatcher<ConfigMap> for RefusingLw {
    fn list<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<ConfigMap>, ClientError>> {
        self.api.list(params).boxed()
    }

    fn list_stream<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ListStream<ConfigMap>, ClientError>> {
        self.api.list_stream(params).boxed()
    }

    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchEventStream<ConfigMap>, ClientError>> {
        async move {
            let n = self.watches.fetch_add(1, Ordering::SeqCst);
            let api = if n >= 1 && n <= self.refused.load(Ordering::SeqCst) {
                &self.dead
            } else {
                &self.api
            };
            api.watch(params, resource_version)
                .await
                .map(StreamExt::boxed)
        }
        .boxed()
    }

    fn api_resource(&self) -> Option<ApiResource> {
        Some(self.api.resource().clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_refused_connections_back_off_and_watch_again_without_a_relist() {
    let server = server().await;
    seed(&server, 3);
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let lw = Arc::new(RefusingLw {
        api: Api::namespaced(client_for(server.url()), NS),
        dead: Api::namespaced(client_for(&format!("http://127.0.0.1:{dead_port}")), NS),
        refused: AtomicUsize::new(3),
        watches: AtomicUsize::new(0),
    });
    let h = Harness::start(lw.clone(), fast_config());
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    server.faults().close_all_watches();
    eventually_within(
        "three refused watches and a good one",
        DEADLINE,
        async || lw.watches.load(Ordering::SeqCst) >= 5,
    )
    .await;
    update(&server, "cm-1", "after-refusals");
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 1, "no relist");
    // healed by watching again: not an error the handler hears of
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_watches_dropped_before_an_answer_watch_again_after_a_backoff() {
    let server = server().await;
    seed(&server, 3);
    let proxy = Proxy::start(server.url()).await;
    // requests are slow to be served, so the first watch is still on its
    // way when the store has converged
    server.faults().set_latency(Duration::from_millis(300));
    let h = Harness::for_url(&proxy.url(), fast_config());
    h.synced().await;
    h.converge(&server).await;
    server.faults().set_latency(Duration::ZERO);
    // the watch must have reached the server before the rule and the close:
    // one still in flight (here held up by the latency) would get past both
    // and stay open for minutes
    wait_watch_delivered(&server, &h).await;
    let dropped = Arc::new(AtomicUsize::new(0));
    proxy.set_rule({
        let dropped = dropped.clone();
        move |_, _, q| {
            if param(q, "watch").is_some() && dropped.fetch_add(1, Ordering::SeqCst) < 3 {
                Action::Drop
            } else {
                Action::Forward(q.to_owned())
            }
        }
    });
    server.faults().close_all_watches();
    eventually_within("three dropped watches", DEADLINE, async || {
        dropped.load(Ordering::SeqCst) >= 4
    })
    .await;
    update(&server, "cm-1", "after-drops");
    h.converge(&server).await;
    // healed by watching again: the error handler hears nothing, as after
    // a refused connection
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    // the server never answered: as after a refused connection, the watch
    // resumes from the last version (a restarted server answers 410 if it
    // cannot), which costs it less than a relist
    assert_eq!(requests(&server, Verb::List).len(), 1, "no relist");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_failing_lists_back_off_then_sync() {
    let server = server().await;
    seed(&server, 3);
    // 500s (no Retry-After: the wait is the reflector's own)
    server.faults().fail_next_matching(
        3,
        Failure::InternalError,
        FaultScope {
            verb: Some(Verb::List),
            resource: Some("configmaps".into()),
        },
    );
    let (lw, calls) = recording(&server);
    let initial = Duration::from_millis(40);
    let h = Harness::start(
        Arc::new(lw),
        ReflectorConfig::default().watch_config(WatchConfig::default().backoff(BackoffConfig {
            initial,
            max: Duration::from_secs(1),
            reset_after: Duration::from_secs(30),
            jitter: 0.0,
        })),
    );
    h.synced().await;
    h.converge(&server).await;
    let lists = crate::support::calls(&calls, false);
    assert_eq!(lists.len(), 4);
    let gaps: Vec<Duration> = lists
        .windows(2)
        .map(|w| w[1].at.duration_since(w[0].at))
        .collect();
    for (i, gap) in gaps.iter().enumerate() {
        assert!(*gap >= initial * (1 << i), "wait {i} too short: {gaps:?}");
    }
    assert_eq!(h.errors().len(), 3);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_a_watch_cache_initializing_is_waited_for_without_a_relist() {
    let server = server().await;
    seed(&server, 3);
    // as right after a CRD is established: watches answer 429 "storage is
    // (re)initializing" for a while
    server
        .faults()
        .initialize_watch_cache("configmaps", Duration::from_millis(1500));
    let (lw, calls) = recording(&server);
    let h = Harness::start(Arc::new(lw), fast_config());
    h.synced().await;
    let watches = wait_rewatch(&calls, 1).await;
    let failed: Vec<&Call> = watches.iter().filter(|w| w.outcome.is_err()).collect();
    assert!(failed
        .iter()
        .all(|w| w.outcome.as_ref().unwrap_err().contains("initializing")));
    // each retry waited for Retry-After (1 s), not the 20 ms backoff
    for pair in watches.windows(2) {
        assert!(
            pair[1].at.duration_since(pair[0].at) >= Duration::from_secs(1),
            "{watches:?}"
        );
    }
    update(&server, "cm-0", "later");
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 1, "no relist");
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    h.stop().await;
}
