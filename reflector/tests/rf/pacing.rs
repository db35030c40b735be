//! RF5 and RF6: pacing that recovers fast without loading a struggling
//! server harder than client-go does (issue 26's three scenarios, each
//! beside a reflector paced by the client-go preset where the comparison
//! is the point). Waits are read from the reflector's metrics (exact, the
//! jitter off) or checked as lower bounds on the calls' times; the
//! testserver counts requests that came sooner than their Retry-After.

use kcontrol_reflector::WatchConfig;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_client::Api;
use kcontrol_reflector::{BackoffConfig, PacingPreset, ReflectorConfig, RestartCause};
use kcontrol_testserver::{Failure, FaultScope, Flapping, TestServer, Verb};
use serde_json::json;

use crate::support::*;

fn watch_scope() -> FaultScope {
    FaultScope {
        verb: Some(Verb::Watch),
        resource: Some("configmaps".into()),
    }
}

fn recording(server: &TestServer) -> (RecordingLw, Arc<Mutex<Vec<Call>>>) {
    let lw = RecordingLw::new(Api::namespaced(client_for(server.url()), NS));
    let calls = lw.calls.clone();
    (lw, calls)
}

fn failed_watches(server: &TestServer) -> usize {
    requests(server, Verb::Watch)
        .iter()
        .filter(|r| r.status == 503)
        .count()
}

/// No jitter, so that the waits the metrics record are exact.
fn exact(initial: Duration) -> BackoffConfig {
    BackoffConfig {
        initial,
        max: Duration::from_secs(30),
        reset_after: Duration::from_secs(120),
        jitter: 0.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_a_watch_failing_with_503_and_retry_after_is_watched_again_not_relisted() {
    // issue 26, scenario 1: every watch is answered 503 with Retry-After: 1
    // (lists are served). A reflector paced by client-go's rules, on a
    // server of its own, is the reference.
    let (ours, theirs) = (server().await, server().await);
    for s in [&ours, &theirs] {
        seed(s, 3);
    }
    let (lw, calls) = recording(&ours);
    let h = Harness::start(Arc::new(lw), fast_config());
    let go = Harness::for_url(
        theirs.url(),
        ReflectorConfig::default().watch_config(fast_watch().pacing(PacingPreset::ClientGo)),
    );
    for (h, s) in [(&h, &ours), (&go, &theirs)] {
        h.synced().await;
        h.converge(s).await;
        wait_watch_delivered(s, h).await;
    }
    for s in [&ours, &theirs] {
        s.faults().fail_for(
            Duration::from_secs(120),
            Failure::ServiceUnavailable,
            watch_scope(),
        );
        s.faults().close_all_watches();
    }
    // twelve failed watches each: about 11 s of waiting what was asked
    eventually_within(
        "twelve failed watches each",
        Duration::from_secs(50),
        async || failed_watches(&ours) >= 12 && failed_watches(&theirs) >= 12,
    )
    .await;
    let lists = requests(&ours, Verb::List).len();
    let reference = requests(&theirs, Verb::List).len();
    // client-go's REST client retries ten times, then its reflector
    // relists; kcontrol watches again: only the first list
    assert_eq!(reference, 2, "the client-go preset relists after 11");
    assert_eq!(lists, 1, "no relist");
    assert!(lists <= reference);
    // each watch came at least the second asked for after the one before
    let watches: Vec<Call> = calls_of(&calls, true)
        .into_iter()
        .filter(|w| w.outcome.is_err())
        .collect();
    let gaps: Vec<Duration> = watches
        .windows(2)
        .map(|w| w[1].at.duration_since(w[0].at))
        .collect();
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_secs(1)),
        "{gaps:?}"
    );
    // the server saw no request sooner than asked from kcontrol; client-go's
    // reflector relists after its own backoff step (20 ms here) whatever
    // the server had asked for
    assert_eq!(ours.counters().retry_after_violations, 0);
    assert!(theirs.counters().retry_after_violations >= 1);
    for s in [&ours, &theirs] {
        s.faults().reset();
    }
    update(&ours, "cm-0", "after");
    h.converge(&ours).await;
    h.stop().await;
    go.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_a_flapping_server_does_not_get_the_reflector_back_at_the_initial_backoff() {
    // issue 26, scenario 2: the server restarts again and again (each
    // restart drops its watch history: a 410 and a relist each time it is
    // caught up); the backoff the refusals grew does not start over when
    // the server answers between two restarts
    let server = server().await;
    seed(&server, 3);
    let recorder = Arc::new(Recorder::default());
    let h = Harness::for_url(
        server.url(),
        ReflectorConfig::default()
            .watch_config(WatchConfig::default().backoff(exact(Duration::from_millis(100))))
            .metrics(recorder.clone()),
    );
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    server
        .faults()
        .flap(Flapping {
            down: Duration::from_millis(500),
            up: Duration::from_millis(1500),
            times: 3,
        })
        .await;
    update(&server, "cm-0", "after the flapping");
    h.converge(&server).await;
    let restarts = recorder.restarts();
    let refused: Vec<Duration> = restarts
        .iter()
        .filter(|(s, _)| {
            matches!(
                s,
                Seen::WatchRestarting(RestartCause::Unreachable)
                    | Seen::Relisting(RestartCause::Unreachable)
            )
        })
        .filter_map(|(_, wait)| *wait)
        .collect();
    let relists_after_410 = restarts
        .iter()
        .filter(|(s, _)| *s == Seen::Relisting(RestartCause::Expired))
        .count();
    assert!(
        relists_after_410 >= 2,
        "the reflector saw the server back between restarts: {restarts:?}"
    );
    assert!(
        refused.windows(2).all(|w| w[1] >= w[0]),
        "a wait after a refusal started over: {refused:?}"
    );
    assert!(
        refused.last() > Some(&Duration::from_millis(400)),
        "{refused:?}"
    );
    h.stop().await;
}

/// The LISTs the server answered.
fn lists_answered(server: &TestServer) -> usize {
    requests(server, Verb::List)
        .iter()
        .filter(|r| r.status == 200)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_a_server_that_falls_over_within_a_second_of_its_return_gets_no_list() {
    // issue 26: a server up for half a second between restarts. A 410 that
    // is the server's first answer after refusals is confirmed by the same
    // watch a second later (no jitter here), which finds it down again: no
    // LIST until it stays up. With the backoff from 120 ms, the fifth
    // attempt after the cut (about 1.8 s) meets the first up window, where
    // a relist at once (the old rule) got a LIST answered.
    let server = server().await;
    seed(&server, 3);
    let h = Harness::for_url(
        server.url(),
        ReflectorConfig::default()
            .watch_config(WatchConfig::default().backoff(exact(Duration::from_millis(120)))),
    );
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;
    let before = lists_answered(&server);
    server
        .faults()
        .flap(Flapping {
            down: Duration::from_millis(1600),
            up: Duration::from_millis(500),
            times: 3,
        })
        .await;
    update(&server, "cm-0", "after the flapping");
    h.converge(&server).await;
    assert_eq!(
        lists_answered(&server) - before,
        1,
        "one relist, once the server stayed up"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_a_watch_list_answered_429_is_tried_again_after_the_wait_not_listed() {
    // issue 26, scenario 3: WatchList requests answered 429 (Retry-After:
    // 1) for a while; plain lists would be served
    let server = server().await;
    seed(&server, 20);
    server.faults().fail_watch_lists_for(
        Duration::from_millis(2500),
        Failure::TooManyRequests {
            retry_after_secs: 1,
        },
    );
    let (lw, calls) = recording(&server);
    let h = Harness::start(
        Arc::new(lw),
        ReflectorConfig::default().watch_config(fast_watch().use_watch_list(true)),
    );
    h.synced().await;
    h.converge(&server).await;
    assert_eq!(requests(&server, Verb::List).len(), 0, "no LIST");
    let watch_lists: Vec<Call> = calls_of(&calls, true)
        .into_iter()
        .filter(|c| c.send_initial_events)
        .collect();
    assert!(watch_lists.len() >= 3, "{watch_lists:?}");
    assert!(watch_lists.last().is_some_and(|w| w.outcome.is_ok()));
    for pair in watch_lists.windows(2) {
        assert!(
            pair[1].at.duration_since(pair[0].at) >= Duration::from_secs(1),
            "{watch_lists:?}"
        );
    }
    assert_eq!(server.counters().retry_after_violations, 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf6_a_watch_list_throttled_without_a_wait_backs_off_and_tries_again_as_client_go() {
    // a 429 that asks for no particular wait is not retried by the
    // request layer: the reflector backs off and tries WatchList again
    // (client-go's watchList: isWatchErrorRetriable), for both pacings
    for pacing in [PacingPreset::Kcontrol, PacingPreset::ClientGo] {
        let server = server().await;
        seed(&server, 20);
        let proxy = Proxy::start(server.url()).await;
        let throttled = Arc::new(AtomicUsize::new(0));
        proxy.set_rule({
            let throttled = throttled.clone();
            move |_, _, q| {
                if param(q, "sendInitialEvents").is_some()
                    && throttled.fetch_add(1, Ordering::SeqCst) < 3
                {
                    Action::Respond(429, status(429, "TooManyRequests", "slow down"))
                } else {
                    Action::Forward(q.to_owned())
                }
            }
        });
        let h = Harness::for_url(
            &proxy.url(),
            ReflectorConfig::default()
                .watch_config(fast_watch().use_watch_list(true).pacing(pacing)),
        );
        h.synced().await;
        h.converge(&server).await;
        assert_eq!(
            requests(&server, Verb::List).len(),
            0,
            "{pacing:?}: no LIST"
        );
        assert_eq!(throttled.load(Ordering::SeqCst), 4, "{pacing:?}");
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_a_wait_asked_in_an_error_event_is_a_floor_under_a_growing_backoff() {
    // every watch ends at once with an ERROR event: 500, asking for a
    // second in its Status; each relists (RF4). The waits between the
    // relists never go below the second asked for, and grow past it
    let server = server().await;
    seed(&server, 3);
    let proxy = Proxy::start(server.url()).await;
    proxy.set_rule(|_, _, q| {
        if param(q, "watch").is_some() {
            let mut failed = status(500, "InternalError", "etcd is busy");
            failed["details"] = json!({"retryAfterSeconds": 1});
            Action::Respond(200, json!({"type": "ERROR", "object": failed}))
        } else {
            Action::Forward(q.to_owned())
        }
    });
    let recorder = Arc::new(Recorder::default());
    let h = Harness::for_url(
        &proxy.url(),
        ReflectorConfig::default()
            .watch_config(WatchConfig::default().backoff(exact(Duration::from_millis(400))))
            .metrics(recorder.clone()),
    );
    h.synced().await;
    eventually_within("three relists", DEADLINE, async || {
        requests(&server, Verb::List).len() >= 4
    })
    .await;
    let waits: Vec<u128> = recorder
        .restarts()
        .into_iter()
        .filter(|(s, _)| *s == Seen::Relisting(RestartCause::ServerError))
        .take(3)
        .map(|(_, wait)| wait.unwrap_or_default().as_millis())
        .collect();
    // the backoff 0.4, 0.8, 1.6 s beneath a floor of 1 s
    assert_eq!(waits, [1000, 1000, 1600]);
    h.stop().await;
}

/// The calls of a kind.
fn calls_of(calls: &Arc<Mutex<Vec<Call>>>, watch: bool) -> Vec<Call> {
    crate::support::calls(calls, watch)
}
