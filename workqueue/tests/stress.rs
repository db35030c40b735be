//! Multi-thread stress (WQ2, WQ3, no lost wake-ups): 8 producers add
//! 1,000,000 times over 10,000 keys (owned and borrowed adds, so both the
//! locked path and the lock-free path of hot items run) while 4 workers get
//! and done them, some slowly enough that keys get re-added while they are
//! processed.
//!
//! Checked:
//! - no key is ever held by two workers at once (WQ3);
//! - every add is followed by a processing of its key that starts after it:
//!   a producer bumps the key's add sequence number before each add, a
//!   worker records the highest sequence number it sees at the start of
//!   processing, and at the end every key's last add is covered;
//! - the queue drains to empty.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use kcontrol_workqueue::{Queue, RateLimitingQueue};

const PRODUCERS: usize = 8;
const WORKERS: usize = 4;
const ADDS: usize = 1_000_000;
const KEYS: usize = 10_000;

struct Tracker {
    /// Adds started per key (bumped before `add`).
    added: Vec<AtomicU64>,
    /// Highest add number seen at the start of a processing of the key.
    covered: Vec<AtomicU64>,
    /// Whether a worker holds the key.
    held: Vec<AtomicBool>,
    double_holds: AtomicUsize,
    processed: AtomicUsize,
}

impl Tracker {
    fn new() -> Self {
        Self {
            added: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            covered: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            held: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
            double_holds: AtomicUsize::new(0),
            processed: AtomicUsize::new(0),
        }
    }

    fn start(&self, k: usize) {
        if self.held[k].swap(true, Ordering::SeqCst) {
            self.double_holds.fetch_add(1, Ordering::SeqCst);
        }
        let seen = self.added[k].load(Ordering::SeqCst);
        self.covered[k].fetch_max(seen, Ordering::SeqCst);
    }

    fn finish(&self, k: usize) {
        self.held[k].store(false, Ordering::SeqCst);
        self.processed.fetch_add(1, Ordering::Relaxed);
    }
}

fn index(key: &str) -> usize {
    key.rsplit_once("name-").unwrap().1.parse().unwrap()
}

fn run_stress(queue: &Queue<String>) -> usize {
    let keys: Vec<String> = (0..KEYS)
        .map(|i| format!("ns-{}/name-{i}", i % 50))
        .collect();
    let t = Tracker::new();
    thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (queue, t) = (queue, &t);
                s.spawn(move || {
                    let mut n = 0u64;
                    while let Some(key) = queue.get() {
                        let k = index(&key);
                        t.start(k);
                        n += 1;
                        // Some items take a while, so their keys get
                        // added again while they are processed.
                        if (n + w as u64).is_multiple_of(64) {
                            thread::yield_now();
                        }
                        t.finish(k);
                        queue.done(&key);
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (queue, t, keys) = (queue, &t, &keys);
                s.spawn(move || {
                    let mut x = 0x9e37_79b9_u64.wrapping_mul(p as u64 + 1);
                    for i in 0..ADDS / PRODUCERS {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // half the adds go to a hot tenth of the keys
                        let k = if i % 2 == 0 {
                            (x as usize) % (KEYS / 10)
                        } else {
                            (x as usize) % KEYS
                        };
                        t.added[k].fetch_add(1, Ordering::SeqCst);
                        if i % 3 == 0 {
                            queue.add(keys[k].clone());
                        } else {
                            queue.add_ref(keys[k].as_str());
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        // Let the workers drain; bounded.
        let deadline = Instant::now() + Duration::from_secs(60);
        while (!queue.is_empty() || queue.processing_len() > 0) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(queue.len(), 0, "queue did not drain");
        assert_eq!(queue.processing_len(), 0, "processing did not finish");
        queue.shut_down();
        for w in workers {
            w.join().unwrap();
        }
    });
    assert_eq!(
        t.double_holds.load(Ordering::SeqCst),
        0,
        "a key was held by two workers at once (WQ3)"
    );
    let mut total_adds = 0;
    for k in 0..KEYS {
        let added = t.added[k].load(Ordering::SeqCst);
        total_adds += added;
        assert!(
            t.covered[k].load(Ordering::SeqCst) >= added,
            "key {k}: add #{added} was never followed by a processing (lost wake-up or lost add)"
        );
    }
    assert_eq!(total_adds, ADDS as u64);
    t.processed.load(Ordering::Relaxed)
}

/// WQ3 and no lost wake-ups on a plain queue.
#[test]
fn wq3_stress_no_double_processing_no_lost_adds_and_drains() {
    let queue: Queue<String> = Queue::new();
    let processed = run_stress(&queue);
    assert!(processed > 0 && processed <= ADDS);
    assert!(queue.get().is_none());
}

/// The same on a rate-limiting queue (the controller's queue), whose
/// background thread and due-item release share the lock.
#[test]
fn wq3_stress_on_a_rate_limiting_queue() {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    run_stress(queue.queue());
}
