//! Async consumers (WQ8): tokio tasks (`get_async().await` and the stream)
//! and OS threads (`get`) draining one queue at the same time, on the
//! multi-thread and the current-thread runtime; cancellation loses nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kcontrol_workqueue::{DelayingQueue, Queue, RateLimitingQueue};

const ITEMS: u32 = 20_000;

/// Counts per item; every item must be processed exactly once.
fn counts() -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..ITEMS).map(|_| AtomicUsize::new(0)).collect())
}

fn spawn_thread_workers(
    queue: &Queue<u32>,
    seen: &Arc<Vec<AtomicUsize>>,
    n: usize,
) -> Vec<thread::JoinHandle<usize>> {
    (0..n)
        .map(|_| {
            let (queue, seen) = (queue.clone(), Arc::clone(seen));
            thread::spawn(move || {
                let mut mine = 0;
                while let Some(i) = queue.get() {
                    seen[i as usize].fetch_add(1, Ordering::Relaxed);
                    mine += 1;
                    queue.done(&i);
                }
                mine
            })
        })
        .collect()
}

/// The safety net of every wait below.
const DEADLINE: Duration = Duration::from_secs(30);

/// Waits (in the task, yielding to the others) until nothing is waiting
/// and, with `idle`, nothing is being processed either; gives up after
/// [`DEADLINE`] (the counts at the end then fail the test).
async fn drained(queue: &Queue<u32>, idle: bool) {
    let deadline = Instant::now() + DEADLINE;
    while !(queue.is_empty() && (!idle || queue.processing_len() == 0)) && Instant::now() < deadline
    {
        tokio::task::yield_now().await;
    }
}

async fn mixed_consumers(queue: Queue<u32>) {
    let seen = counts();
    let threads = spawn_thread_workers(&queue, &seen, 2);
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (queue, seen) = (queue.clone(), Arc::clone(&seen));
        tasks.push(tokio::spawn(async move {
            let mut mine = 0;
            while let Some(i) = queue.get_async().await {
                seen[i as usize].fetch_add(1, Ordering::Relaxed);
                mine += 1;
                if mine % 100 == 0 {
                    tokio::task::yield_now().await;
                }
                queue.done(&i);
            }
            mine
        }));
    }
    {
        let (queue, seen) = (queue.clone(), Arc::clone(&seen));
        tasks.push(tokio::spawn(async move {
            let mut stream = queue.stream();
            let mut mine = 0;
            while let Some(i) = stream.next().await {
                seen[i as usize].fetch_add(1, Ordering::Relaxed);
                mine += 1;
                queue.done(&i);
            }
            mine
        }));
    }
    // Produce from a thread and from a task, in bursts of 1000: after each,
    // the producer waits until the consumers took everything, so that
    // they park and get woken by the next burst.
    let producer = {
        let queue = queue.clone();
        thread::spawn(move || {
            for i in 0..ITEMS / 2 {
                queue.add(i);
                if i % 1000 == 0 {
                    let deadline = Instant::now() + DEADLINE;
                    while !queue.is_empty() && Instant::now() < deadline {
                        thread::yield_now();
                    }
                }
            }
        })
    };
    for i in ITEMS / 2..ITEMS {
        queue.add(i);
        if i % 1000 == 0 {
            drained(&queue, false).await;
        }
    }
    producer.join().unwrap();
    drained(&queue, true).await;
    queue.shut_down();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    for t in threads {
        total += t.join().unwrap();
    }
    assert_eq!(total, ITEMS as usize);
    assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
}

/// WQ8 on tokio's multi-thread runtime: tasks and threads share a queue.
#[test]
fn wq8_tasks_and_threads_share_a_queue_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(mixed_consumers(Queue::new()));
}

/// WQ8 on tokio's current-thread runtime.
#[test]
fn wq8_tasks_and_threads_share_a_queue_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(mixed_consumers(Queue::new()));
}

/// WQ8: an async worker loop on a rate-limiting queue, with retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wq8_async_worker_with_rate_limited_retries() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let worker = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut attempts = 0;
            while let Some(key) = queue.get_async().await {
                attempts += 1;
                if queue.num_requeues(&key) < 3 {
                    queue.add_rate_limited(key.clone()); // 5, 10, 20 ms
                } else {
                    queue.forget(&key);
                    queue.shut_down();
                }
                queue.done(&key);
            }
            attempts
        })
    };
    queue.add("ns/a".to_owned());
    let attempts = tokio::time::timeout(Duration::from_secs(10), worker)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(attempts, 4);
}

/// A waker that counts its wake-ups.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A woken task that is dropped before taking its item passes the wake-up
/// on: the next parked waiter is woken and gets the item.
#[test]
fn wq8_cancelled_get_passes_its_wake_up_on() {
    let queue: Queue<u32> = Queue::new();
    let (a, b) = (
        Arc::new(Count(AtomicUsize::new(0))),
        Arc::new(Count(AtomicUsize::new(0))),
    );
    let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
    let mut fa = Box::pin(queue.get_async());
    let mut fb = Box::pin(queue.get_async());
    assert!(fa.as_mut().poll(&mut Context::from_waker(&wa)).is_pending());
    assert!(fb.as_mut().poll(&mut Context::from_waker(&wb)).is_pending());
    queue.add(7);
    assert_eq!(a.0.load(Ordering::SeqCst), 1, "first parked task is woken");
    assert_eq!(b.0.load(Ordering::SeqCst), 0);
    drop(fa); // cancelled before taking the item
    assert_eq!(b.0.load(Ordering::SeqCst), 1, "the wake-up was passed on");
    assert_eq!(
        fb.as_mut().poll(&mut Context::from_waker(&wb)),
        Poll::Ready(Some(7))
    );
    // A parked, never woken task that is dropped leaves nothing behind.
    let mut fc: Pin<Box<_>> = Box::pin(queue.get_async());
    assert!(fc.as_mut().poll(&mut Context::from_waker(&wa)).is_pending());
    drop(fc);
    queue.add(8);
    assert_eq!(queue.try_get().into_item(), Some(8));
}

/// WQ8 + WQ5 without any async runtime: a thread blocked in `get` receives
/// a delayed item from the queue's own timer thread.
#[test]
fn wq5_wq8_delaying_queue_works_without_a_runtime() {
    let queue: DelayingQueue<&str> = DelayingQueue::new();
    let consumer = {
        let queue = queue.clone();
        thread::spawn(move || queue.get())
    };
    queue.add_after("later", Duration::from_millis(30));
    queue.add_after("sooner", Duration::from_millis(10));
    assert_eq!(consumer.join().unwrap(), Some("sooner"));
    assert_eq!(queue.get(), Some("later"));
}

/// Async drain: `shut_down_with_drain_async` resolves once the item in
/// process is done (the task holding it waits until the drain started).
#[tokio::test(flavor = "current_thread")]
async fn wq4_async_drain_resolves_when_processing_ends() {
    let queue: Queue<u32> = Queue::new();
    queue.add(1);
    let item = queue.get_async().await.unwrap();
    let q2 = queue.clone();
    let done_later = tokio::spawn(async move {
        while !q2.is_shutting_down() {
            tokio::task::yield_now().await;
        }
        q2.done(&item);
    });
    tokio::time::timeout(Duration::from_secs(5), queue.shut_down_with_drain_async())
        .await
        .unwrap();
    assert_eq!(queue.processing_len(), 0);
    done_later.await.unwrap();
    assert_eq!(queue.get_async().await, None);
}
