//! Shutdown under concurrent workers (WQ4): plain shutdown hands out what
//! is queued, then `None`, and drops later adds; shutdown with drain
//! returns only once no item is being processed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use kcontrol_workqueue::{Queue, RateLimitingQueue, TryGet};

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

/// WQ4: blocked workers (threads) wake up at shutdown and get `None`.
#[test]
fn wq4_shut_down_wakes_blocked_workers() {
    let queue: Queue<u32> = Queue::new();
    let started = Barrier::new(5);
    thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    started.wait();
                    queue.get()
                })
            })
            .collect();
        started.wait();
        thread::sleep(Duration::from_millis(20));
        queue.shut_down();
        for w in workers {
            assert_eq!(w.join().unwrap(), None);
        }
    });
}

/// WQ4: `shut_down_with_drain` returns only after every item being
/// processed is done, while workers keep getting what is queued.
#[test]
fn wq4_shut_down_with_drain_waits_for_items_in_process() {
    let queue: RateLimitingQueue<u32> = RateLimitingQueue::new();
    let in_flight = AtomicUsize::new(0);
    let processed = AtomicUsize::new(0);
    let holding = Barrier::new(5);
    thread::scope(|s| {
        for w in 0..4 {
            let (queue, in_flight, processed, holding) = (&queue, &in_flight, &processed, &holding);
            s.spawn(move || {
                let mut first = true;
                while let Some(i) = queue.get() {
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    if first {
                        first = false;
                        holding.wait();
                        thread::sleep(Duration::from_millis(20 + 10 * w));
                    }
                    processed.fetch_add(1, Ordering::SeqCst);
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    queue.forget(&i);
                    queue.done(&i);
                }
            });
        }
        for i in 0..1000 {
            queue.add(i);
        }
        holding.wait(); // each worker holds an item
        queue.shut_down_with_drain();
        assert_eq!(queue.processing_len(), 0);
        assert_eq!(
            in_flight.load(Ordering::SeqCst),
            0,
            "drain returned while an item was in process"
        );
        queue.add(5000); // dropped
    });
    assert_eq!(processed.load(Ordering::SeqCst), 1000);
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
        thread::sleep(Duration::from_millis(20));
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
