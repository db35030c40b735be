//! Model checking of the queue's concurrency with loom: each scenario runs
//! under every interleaving of its threads (the scenarios with the timer
//! thread up to a few preemptions), with the queue's locks, condition
//! variables, hint flags and timer thread replaced by loom's
//! (`src/sync.rs`). A lost wake-up shows as a deadlock, a lost or doubled
//! item as a failed assertion, a missing happens-before as a stale read.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p kcontrol-workqueue --release \
//!     --target-dir target/loom --test loom
//! ```
//!
//! Scenarios (DESIGN.md, WQ9): the lock-free read of a hot item's hint
//! against the locked adds that set it, `try_get` and shutdown; an add that
//! returns at once, against the worker that processes its item; `done`
//! racing an `add`; adds waking a thread going to sleep and a task
//! parking; the async park / cancel hand-off; shutdown with drain; the
//! release of a delayed item by a blocked consumer or the timer thread,
//! and an `add_after` kicking the sleeping timer thread.
#![cfg(loom)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use kcontrol_workqueue::{DelayingQueue, FakeClock, Queue, QueueConfig, TryGet};
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;

/// Runs `f` under loom, every interleaving (`bound`: at most that many
/// preemptions; `LOOM_MAX_PREEMPTIONS` overrides), and prints how many
/// interleavings it explored.
fn model_bounded(bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = bound;
    }
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f();
    });
    eprintln!("{} interleavings explored", runs.load(Ordering::Relaxed));
}

/// Every interleaving, unbounded.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(None, f);
}

/// A queue whose item 1 is hot and gone: its hint is published and clear,
/// so the next `add(1)` takes the lock and sets it again, while a
/// concurrent `add(1)` may read it set and return at once.
fn hot_idle_queue() -> Queue<u8> {
    let queue = Queue::new();
    queue.add(1);
    queue.add(1); // already waiting: hot, its hint is published
    assert_eq!(queue.try_get(), TryGet::Item(1));
    queue.done(&1); // gone: the hint stays published, idle
    queue
}

/// A queue whose item 1 is hot and being processed, not dirty (hint
/// clear).
fn hot_processing_queue() -> Queue<u8> {
    let queue = Queue::new();
    queue.add(1);
    queue.add(1);
    assert_eq!(queue.try_get(), TryGet::Item(1));
    queue
}

/// Another thread's `add(1)`.
fn spawn_add(queue: &Queue<u8>) -> thread::JoinHandle<()> {
    let queue = queue.clone();
    thread::spawn(move || queue.add(1))
}

/// An add (of a hot item that left the queue) wakes a consumer that is
/// going to sleep: no lost wake-up.
#[test]
fn wq9_an_add_wakes_a_consumer_going_to_sleep() {
    model(|| {
        let queue = hot_idle_queue();
        let producer = spawn_add(&queue);
        assert_eq!(queue.get(), Some(1));
        producer.join().unwrap();
        queue.done(&1);
        assert_eq!(queue.try_get(), TryGet::Empty);
    });
}

/// An add that returned is seen by the operations after it, even when it
/// returned at once because another add of the same item had just set its
/// hint.
#[test]
fn wq9_an_add_that_returned_early_is_seen_by_try_get() {
    model(|| {
        let queue = hot_idle_queue();
        let claimer = spawn_add(&queue);
        queue.add(1);
        assert_eq!(queue.try_get(), TryGet::Item(1));
        claimer.join().unwrap();
        queue.done(&1);
    });
}

/// WQ4 with a racing add of the same item: an add that returned (early or
/// not) before `shut_down` is handed out after it.
#[test]
fn wq9_an_add_before_shutdown_is_kept_while_another_add_races() {
    model(|| {
        let queue = hot_idle_queue();
        let claimer = spawn_add(&queue);
        queue.add(1);
        queue.shut_down();
        claimer.join().unwrap();
        assert_eq!(queue.try_get(), TryGet::Item(1));
        queue.done(&1);
        assert_eq!(queue.try_get(), TryGet::ShutDown);
    });
}

/// WQ2 with `done` racing an add of the hot item being processed: the item
/// is processed again exactly once, by a worker that sees what the adder
/// wrote before `add`.
#[test]
fn wq9_done_racing_an_add_requeues_once_and_publishes_the_write() {
    model(|| {
        let queue = hot_processing_queue();
        let data = Arc::new(AtomicUsize::new(0));
        let adder = {
            let (queue, data) = (queue.clone(), Arc::clone(&data));
            thread::spawn(move || {
                data.store(7, Ordering::Relaxed);
                queue.add(1);
            })
        };
        let worker = {
            let (queue, data) = (queue.clone(), Arc::clone(&data));
            thread::spawn(move || {
                queue.done(&1);
                // Not dirty at `done`: only the add can bring it back.
                assert_eq!(queue.get(), Some(1));
                assert_eq!(data.load(Ordering::Relaxed), 7);
                queue.done(&1);
            })
        };
        adder.join().unwrap();
        worker.join().unwrap();
        assert_eq!(queue.len(), 0);
        assert_eq!(queue.processing_len(), 0);
    });
}

/// An add that returns at once (its item is already waiting) is ordered
/// before the processing that covers it: what the adder wrote under a lock
/// before `add` is what the worker reads when it processes the item.
#[test]
fn wq9_an_early_returning_add_publishes_what_was_written_before_it() {
    model(|| {
        let queue = Queue::new();
        queue.add(1);
        queue.add(1); // hot and waiting: the next add returns at once
        let data = Arc::new(loom::sync::Mutex::new(0));
        let adder = {
            let (queue, data) = (queue.clone(), Arc::clone(&data));
            thread::spawn(move || {
                *data.lock().unwrap() = 7;
                queue.add(1);
            })
        };
        let worker = {
            let (queue, data) = (queue.clone(), Arc::clone(&data));
            thread::spawn(move || {
                let mut last = None;
                while let TryGet::Item(item) = queue.try_get() {
                    last = Some(*data.lock().unwrap());
                    queue.done(&item);
                }
                last
            })
        };
        adder.join().unwrap();
        let last = worker.join().unwrap();
        // The worker's last processing came after the add, or the add
        // came after it and queued the item again.
        if queue.is_empty() {
            assert_eq!(last, Some(7));
        }
    });
}

/// A waker that records that it was woken.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Flag {
    fn woken(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// WQ8: two parked async consumers, an add, and the first consumer
/// cancelled (its future dropped) while the add runs: the item is not left
/// waiting while the other consumer waits (it is woken and gets it).
#[test]
fn wq9_a_cancelled_parked_consumer_hands_its_wake_up_on() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        let (flag1, flag2) = (Arc::new(Flag::default()), Arc::new(Flag::default()));
        let (waker1, waker2) = (
            Waker::from(Arc::clone(&flag1)),
            Waker::from(Arc::clone(&flag2)),
        );
        let mut first = Box::pin(queue.get_async());
        let mut second = pin!(queue.get_async());
        assert!(first
            .as_mut()
            .poll(&mut Context::from_waker(&waker1))
            .is_pending());
        assert!(second
            .as_mut()
            .poll(&mut Context::from_waker(&waker2))
            .is_pending());
        let producer = spawn_add(&queue);
        drop(first);
        producer.join().unwrap();
        assert!(
            flag2.woken(),
            "the item waits while a parked consumer sleeps"
        );
        let got = second.as_mut().poll(&mut Context::from_waker(&waker2));
        assert_eq!(got, Poll::Ready(Some(1)));
        drop(flag1);
    });
}

/// An add wakes a task parking in `get_async` at the same time.
#[test]
fn wq9_an_add_wakes_a_parking_task() {
    model(|| {
        let queue = hot_idle_queue();
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(Arc::clone(&flag));
        let producer = spawn_add(&queue);
        let mut get = pin!(queue.get_async());
        let first = get.as_mut().poll(&mut Context::from_waker(&waker));
        producer.join().unwrap();
        let got = match first {
            Poll::Ready(got) => got,
            Poll::Pending => {
                assert!(flag.woken(), "an added item waits while a task sleeps");
                match get.as_mut().poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(got) => got,
                    Poll::Pending => None,
                }
            }
        };
        assert_eq!(got, Some(1));
    });
}

/// WQ4: `shut_down_with_drain` returns once no item is in process (as in
/// client-go, it does not wait for items still waiting), and the worker
/// still gets the item that was waiting, then `None`.
#[test]
fn wq9_shutdown_with_drain_waits_for_the_worker_and_hands_out_the_rest() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        queue.add(1);
        queue.add(2);
        assert_eq!(queue.try_get(), TryGet::Item(1));
        let worker = {
            let queue = queue.clone();
            thread::spawn(move || {
                queue.done(&1);
                let mut got = Vec::new();
                while let Some(item) = queue.get() {
                    got.push(item);
                    queue.done(&item);
                }
                got
            })
        };
        queue.shut_down_with_drain();
        assert_eq!(worker.join().unwrap(), vec![2]);
        assert_eq!(queue.processing_len(), 0);
    });
}

/// WQ5: an item scheduled with `add_after` reaches a consumer blocked in
/// `get` when the (fake) clock passes its due time, whoever moves it (the
/// timer thread or the consumer); the timer thread stops at shutdown.
#[test]
fn wq9_a_delayed_item_reaches_a_blocked_consumer_when_due() {
    // Four threads (with the timer thread and the clock's wake-up):
    // bounded, or it runs for hours.
    model_bounded(Some(5), || {
        let clock = Arc::new(FakeClock::new());
        let queue: DelayingQueue<u8> =
            DelayingQueue::with_config(QueueConfig::new().clock(clock.clone()));
        queue.add_after(1, Duration::from_millis(10));
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || {
                let got = queue.get();
                if let Some(item) = got {
                    queue.done(&item);
                }
                got
            })
        };
        clock.step(Duration::from_secs(1));
        assert_eq!(consumer.join().unwrap(), Some(1));
        queue.shut_down();
    });
}

/// A clock on which every reading is an hour after the previous one: an
/// item scheduled for any shorter delay is due at the next look. It never
/// tells the timer thread that it jumps, so only `add_after` kicks it.
#[derive(Debug)]
struct HourPerRead {
    start: std::time::Instant,
    reads: std::sync::atomic::AtomicU32,
}

impl kcontrol_workqueue::Clock for HourPerRead {
    fn now(&self) -> std::time::Instant {
        let hours = self.reads.fetch_add(1, Ordering::Relaxed);
        self.start + Duration::from_secs(3600) * hours
    }
}

/// WQ5: an `add_after` of an item due before the sleeping timer thread
/// would wake kicks it, whatever it is doing at that moment: a parked task
/// (which has no timer of its own) is woken with the item.
#[test]
fn wq9_an_earlier_add_after_kicks_the_sleeping_timer_thread() {
    model_bounded(Some(3), || {
        let clock = Arc::new(HourPerRead {
            start: std::time::Instant::now(),
            reads: std::sync::atomic::AtomicU32::new(0),
        });
        let queue: DelayingQueue<u8> = DelayingQueue::with_config(QueueConfig::new().clock(clock));
        queue.add_after(0, Duration::from_millis(10)); // starts the timer thread
        assert_eq!(queue.try_get(), TryGet::Item(0)); // due at the next read
        queue.done(&0);
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(Arc::clone(&flag));
        let mut get = pin!(queue.get_async());
        assert!(get
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        queue.add_after(1, Duration::from_millis(10));
        while !flag.woken() {
            thread::yield_now();
        }
        let got = get.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(got, Poll::Ready(Some(1)));
        queue.shut_down();
    });
}
