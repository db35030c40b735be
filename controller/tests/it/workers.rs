//! `run_workers`: client-go's processNextWorkItem contract (CT4), panics
//! contained and counted (CT4), task and thread workers (CT6), graceful
//! shutdown with drain and deadline (CT7), one key never synced twice at
//! once (WQ3 through the workers).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_controller::run_workers;
use kcontrol_controller::workers::{run_workers_with, WorkerOptions};
use kcontrol_workqueue::RateLimitingQueue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(30);

async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("an event in time")
        .expect("channel open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct4_errors_requeue_with_backoff_and_success_forgets() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let q = queue.clone();
    let attempts = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let run = tokio::spawn(run_workers(
        queue.clone(),
        2,
        shutdown.clone(),
        move |key: String| {
            let (tx, attempts, q) = (tx.clone(), Arc::clone(&attempts), q.clone());
            async move {
                let n = {
                    let mut a = attempts.lock().unwrap();
                    let n = a.entry(key.clone()).or_default();
                    *n += 1;
                    *n
                };
                // what the rate limiter counted when this attempt started
                let _ = tx.send((key.clone(), n, q.num_requeues(&key)));
                if key == "flaky" && n < 3 {
                    Err(format!("attempt {n} failed"))
                } else {
                    Ok(())
                }
            }
        },
    ));
    queue.add("flaky".to_owned());
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(next(&mut rx).await);
    }
    assert_eq!(
        seen,
        [
            ("flaky".into(), 1, 0),
            ("flaky".into(), 2, 1),
            ("flaky".into(), 3, 2)
        ]
    );
    // the success forgot the failures; a later add starts from zero
    queue.add("flaky".to_owned());
    assert_eq!(next(&mut rx).await, ("flaky".into(), 4, 0));
    shutdown.cancel();
    let report = run.await.unwrap().unwrap();
    assert!(report.drained);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct4_a_panic_is_contained_counted_and_requeued() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let options = WorkerOptions::new().workers(1).name("panicky");
    let stats = options.stats();
    let mut registry = prometheus_client::registry::Registry::default();
    stats.register("panicky", &mut registry);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let panicked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(run_workers_with(
        queue.clone(),
        options,
        shutdown.clone(),
        move |key: String| {
            let (tx, panicked) = (tx.clone(), Arc::clone(&panicked));
            async move {
                if key == "boom" && !panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    panic!("reconcile bug");
                }
                let _ = tx.send(key);
                Ok::<(), String>(())
            }
        },
    ));
    queue.add("boom".to_owned());
    queue.add("after".to_owned());
    // the one worker survived the panic: both keys are synced, the
    // panicked one again after its backoff
    let mut seen = vec![next(&mut rx).await, next(&mut rx).await];
    seen.sort();
    assert_eq!(seen, ["after", "boom"]);
    // counted once each sync has returned
    kcontrol_testserver::eventually("both successes counted", async || stats.successes() >= 2)
        .await;
    assert_eq!(stats.panics(), 1);
    assert_eq!(stats.successes(), 2);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("controller_reconcile_panics_total{controller=\"panicky\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("controller_reconcile_total{controller=\"panicky\",result=\"success\"} 2"),
        "{text}"
    );
    shutdown.cancel();
    assert!(run.await.unwrap().unwrap().drained);
}

/// A key added again while it is synced waits for that sync: other workers
/// take other keys meanwhile, never the same one (WQ3); it is synced once
/// more afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wq3_one_key_is_never_synced_by_two_workers_at_once() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let in_flight = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let max_in_flight = Arc::new(Mutex::new(0u32));
    let shutdown = CancellationToken::new();
    let (f, m) = (Arc::clone(&in_flight), Arc::clone(&max_in_flight));
    let run = tokio::spawn(run_workers(
        queue.clone(),
        4,
        shutdown.clone(),
        move |key: String| {
            let (tx, in_flight, max, mut release) = (
                tx.clone(),
                Arc::clone(&f),
                Arc::clone(&m),
                release_rx.clone(),
            );
            async move {
                {
                    let mut f = in_flight.lock().unwrap();
                    let n = f.entry(key.clone()).or_default();
                    *n += 1;
                    let mut max = max.lock().unwrap();
                    *max = (*max).max(*n);
                }
                let _ = tx.send(key.clone());
                if key == "a" {
                    let _ = release.wait_for(|r| *r).await;
                }
                *in_flight.lock().unwrap().get_mut(&key).unwrap() -= 1;
                Ok::<(), String>(())
            }
        },
    ));
    queue.add("a".to_owned());
    assert_eq!(next(&mut rx).await, "a");
    // "a" is being synced (and blocks): add it again, and other keys
    queue.add("a".to_owned());
    for k in ["b", "c", "d"] {
        queue.add(k.to_owned());
    }
    let mut others: Vec<String> = vec![
        next(&mut rx).await,
        next(&mut rx).await,
        next(&mut rx).await,
    ];
    others.sort();
    // three free workers took b, c and d, none took the second "a"
    assert_eq!(others, ["b", "c", "d"]);
    assert_eq!(*max_in_flight.lock().unwrap(), 1);
    release_tx.send_replace(true);
    assert_eq!(next(&mut rx).await, "a");
    shutdown.cancel();
    assert!(run.await.unwrap().unwrap().drained);
    assert_eq!(*max_in_flight.lock().unwrap(), 1);
}

/// Thread workers: a sync that blocks its thread does not stall a
/// single-threaded runtime (a task worker would).
#[tokio::test(flavor = "current_thread")]
async fn ct6_thread_workers_may_block() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (release, blocked_on) = std::sync::mpsc::channel::<()>();
    let blocked_on = Arc::new(Mutex::new(blocked_on));
    let shutdown = CancellationToken::new();
    let options = WorkerOptions::new()
        .workers(1)
        .threads(true)
        .name("blocking");
    let run = tokio::spawn(run_workers_with(
        queue.clone(),
        options,
        shutdown.clone(),
        move |key: String| {
            let (started, blocked_on) = (started_tx.clone(), Arc::clone(&blocked_on));
            async move {
                let thread = std::thread::current().name().unwrap_or_default().to_owned();
                let _ = started.send((key, thread));
                // a blocking wait, as a Go-style sync may do
                let _ = blocked_on.lock().unwrap().recv();
                Ok::<(), String>(())
            }
        },
    ));
    queue.add("x".to_owned());
    let (key, thread) = next(&mut started).await;
    assert_eq!(key, "x");
    assert_eq!(thread, "blocking-0");
    // the runtime's only thread is free: this timer fires
    tokio::time::sleep(Duration::from_millis(1)).await;
    release.send(()).unwrap();
    shutdown.cancel();
    assert!(run.await.unwrap().unwrap().drained);
}

/// Shutdown: keys still waiting are not started, the sync in flight
/// finishes, the report says the queue drained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct7_shutdown_finishes_syncs_in_flight_and_starts_no_new_one() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(run_workers(
        queue.clone(),
        1,
        shutdown.clone(),
        move |key: String| {
            let (tx, mut release) = (tx.clone(), release_rx.clone());
            async move {
                let _ = tx.send(format!("start {key}"));
                let _ = release.wait_for(|r| *r).await;
                let _ = tx.send(format!("end {key}"));
                Ok::<(), String>(())
            }
        },
    ));
    queue.add("busy".to_owned());
    assert_eq!(next(&mut rx).await, "start busy");
    queue.add("waiting-1".to_owned());
    queue.add("waiting-2".to_owned());
    shutdown.cancel();
    // the stop is seen before the sync ends: new adds are dropped
    while !queue.is_shutting_down() {
        tokio::task::yield_now().await;
    }
    release_tx.send_replace(true);
    let report = tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(report.drained);
    assert_eq!(report.unfinished, 0);
    assert_eq!(next(&mut rx).await, "end busy");
    assert!(rx.recv().await.is_none(), "no waiting key was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct7_a_sync_outliving_the_drain_timeout_is_reported() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let options = WorkerOptions::new()
        .workers(2)
        .drain_timeout(Duration::from_millis(50));
    let run = tokio::spawn(run_workers_with(
        queue.clone(),
        options,
        shutdown.clone(),
        move |key: String| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(key);
                std::future::pending::<()>().await;
                Ok::<(), String>(())
            }
        },
    ));
    queue.add("stuck".to_owned());
    assert_eq!(next(&mut rx).await, "stuck");
    shutdown.cancel();
    let report = tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!report.drained);
    assert_eq!(report.unfinished, 1);
}
