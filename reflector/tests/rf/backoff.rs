//! RF4 and RF5 over HTTP: 429 waits at least Retry-After, 5xx and
//! connection errors back off with growing waits and watch again without a
//! relist; lists that fail back off too. Timings are only asserted as lower
//! bounds (a wait the reflector must have made), never as speed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_client::Api;
use kcontrol_reflector::{BackoffConfig, ReflectorConfig};
use kcontrol_testserver::{Failure, FaultScope, TestServer, Verb};

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
    wait_for(
        "a successful watch after the failures",
        DEADLINE,
        move || {
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
    let h = Harness::start(
        Arc::new(lw),
        ReflectorConfig::default().backoff(fast_backoff()),
    );
    h.synced().await;
    h.converge(&server).await;
    wait_watch_open(&server).await;
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
async fn rf5_5xx_answers_back_off_with_growing_waits_and_watch_again() {
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
    let h = Harness::start(Arc::new(lw), ReflectorConfig::default().backoff(backoff));
    h.synced().await;
    h.converge(&server).await;
    wait_watch_open(&server).await;
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
    // each wait is at least the backoff, which doubles: after three
    // doublings the wait is at least 8 × initial (whatever step it began at)
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
    assert_eq!(
        requests(&server, Verb::List).len(),
        1,
        "5xx re-watch, no relist"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf4_connection_errors_back_off_and_watch_again_without_a_relist() {
    let server = server().await;
    seed(&server, 3);
    let proxy = Proxy::start(server.url()).await;
    // requests are slow to be served, so the first watch is still on its
    // way when the store has converged
    server.faults().set_latency(Duration::from_millis(300));
    let h = Harness::for_url(
        &proxy.url(),
        ReflectorConfig::default().backoff(fast_backoff()),
    );
    h.synced().await;
    h.converge(&server).await;
    server.faults().set_latency(Duration::ZERO);
    // the watch must have reached the server before the rule and the close:
    // one still in flight (here held up by the latency) would get past both
    // and stay open for minutes
    wait_watch_open(&server).await;
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
    wait_for("three dropped watches", DEADLINE, || {
        dropped.load(Ordering::SeqCst) >= 4
    })
    .await;
    update(&server, "cm-1", "after-drops");
    h.converge(&server).await;
    let transport = h
        .errors()
        .iter()
        .filter(|e| e.contains("watch failed to start") && e.contains("transport"))
        .count();
    assert_eq!(transport, 3, "{:?}", h.errors());
    assert_eq!(requests(&server, Verb::List).len(), 1, "no relist");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_failing_lists_back_off_then_sync() {
    let server = server().await;
    seed(&server, 3);
    server.faults().fail_next_matching(
        3,
        Failure::ServiceUnavailable,
        FaultScope {
            verb: Some(Verb::List),
            resource: Some("configmaps".into()),
        },
    );
    let (lw, calls) = recording(&server);
    let initial = Duration::from_millis(40);
    let h = Harness::start(
        Arc::new(lw),
        ReflectorConfig::default().backoff(BackoffConfig {
            initial,
            max: Duration::from_secs(1),
            reset_after: Duration::from_secs(30),
            jitter: 0.0,
        }),
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
