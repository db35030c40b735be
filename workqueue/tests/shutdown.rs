//! Shutdown under concurrent workers (WQ4): plain shutdown hands out what
//! is queued, then `None`, and drops later adds; shutdown with drain
//! returns only once no item is being processed. (That threads blocked in
//! `get` wake at shutdown is `queue::tests::wq4_shut_down_wakes_blocked_threads`:
//! it waits until they sleep, which only the crate can see.)
//!
//! No test sleeps for a while: each waits for the event it needs. A
//! drainer sets the shutdown flag and waits for the drain in one hold of
//! the queue lock, so once another thread reads `is_shutting_down()` as
//! true (which takes the lock), the drainer is waiting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use kcontrol_workqueue::{Queue, RateLimitingQueue, TryGet};

/// Waits until `cond` holds; panics after 30 s (a safety net).
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::yield_now();
    }
}

/// WQ4: every item queued before `shut_down` is still handed out exactly
/// once; workers then get `None`; adds after shutdown are dropped.
#[test]
fn wq4_shut_down_hands_out_queued_items_then_none_and_drops_later_adds() {
    let queue: Queue<u32> = Queue::new();
    for i in 0..10_000 {
        queue.add(i);
    }
    let seen: Vec<AtomicUsize> = (0..10_000).map(|_| AtomicUsize::new(0)).collect();
    thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    while let Some(i) = queue.get() {
                        seen[i as usize].fetch_add(1, Ordering::Relaxed);
                        queue.done(&i);
                    }
                })
            })
            .collect();
        queue.shut_down();
        queue.add(20_000);
        for w in workers {
            w.join().unwrap();
        }
    });
    assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
    assert!(queue.is_shutting_down());
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.try_get(), TryGet::ShutDown);
    assert_eq!(queue.get(), None);
}

/// WQ4: `shut_down_with_drain` returns only after every item being
/// processed is done, while workers keep getting what is queued. Each
/// worker holds its first item from before the drain starts until it has
/// started, so the drain cannot return before all four are done. (Once
/// they are, it may return between two items of the rest, as client-go's
/// does: it waits for nothing in process, not for an empty queue.)
#[test]
fn wq4_shut_down_with_drain_waits_for_items_in_process() {
    let queue: RateLimitingQueue<u32> = RateLimitingQueue::new();
    let firsts_done = AtomicUsize::new(0);
    let processed = AtomicUsize::new(0);
    let holding = Barrier::new(5);
    thread::scope(|s| {
        for _ in 0..4 {
            let (queue, firsts_done, processed, holding) =
                (&queue, &firsts_done, &processed, &holding);
            s.spawn(move || {
                let mut first = true;
                while let Some(i) = queue.get() {
                    processed.fetch_add(1, Ordering::SeqCst);
                    queue.forget(&i);
                    if first {
                        first = false;
                        holding.wait();
                        wait_until("the drain started", || queue.is_shutting_down());
                        firsts_done.fetch_add(1, Ordering::SeqCst);
                    }
                    queue.done(&i);
                }
            });
        }
        for i in 0..1000 {
            queue.add(i);
        }
        holding.wait(); // each worker holds an item
        queue.shut_down_with_drain();
        assert_eq!(
            firsts_done.load(Ordering::SeqCst),
            4,
            "drain returned while an item was in process"
        );
        queue.add(5000); // dropped
    });
    assert_eq!(processed.load(Ordering::SeqCst), 1000);
    assert_eq!(queue.processing_len(), 0);
}

/// WQ4: a drain with a timeout reports whether it finished; a plain
/// shutdown cancels a drain in progress (as in client-go).
#[test]
fn wq4_drain_timeout_and_cancellation() {
    let queue: Queue<&str> = Queue::new();
    queue.add("held");
    let item = queue.get().unwrap();
    assert!(!queue.shut_down_with_drain_timeout(Duration::from_millis(10)));
    queue.done(&item);
    assert!(queue.shut_down_with_drain_timeout(Duration::from_millis(10)));

    let queue: Queue<&str> = Queue::new();
    queue.add("held");
    let _item = queue.get().unwrap();
    thread::scope(|s| {
        let drainer = s.spawn(|| queue.shut_down_with_drain());
        wait_until("the drainer waits", || queue.is_shutting_down());
        queue.shut_down(); // cancels the drain
        drainer.join().unwrap();
    });
    assert_eq!(queue.processing_len(), 1);
}

/// Misuse is harmless: done of an item never handed out, double done,
/// forget of an unknown item, adds after shutdown.
#[test]
fn misuse_is_harmless() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    queue.done(&"never-got".to_owned());
    queue.add("a".to_owned());
    queue.done(&"a".to_owned()); // waiting, not processing: still queued
    assert_eq!(queue.len(), 1);
    let a = queue.get().unwrap();
    queue.done(&a);
    queue.done(&a);
    queue.forget(&"unknown".to_owned());
    assert_eq!(queue.num_requeues(&"unknown".to_owned()), 0);
    queue.shut_down();
    queue.add("b".to_owned());
    queue.add_ref("b");
    queue.add_after("c".to_owned(), Duration::from_millis(1));
    queue.add_rate_limited("d".to_owned());
    queue.shut_down();
    queue.shut_down_with_drain();
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.scheduled_len(), 0);
    assert_eq!(queue.processing_len(), 0);
    assert_eq!(queue.get(), None);
}
