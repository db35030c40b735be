//! Criterion micro-benchmarks of the work queue's hot paths: add + get +
//! done of a new key, add of a key already waiting (owned and borrowed),
//! and the add_rate_limited + forget cycle.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use kcontrol_workqueue::{DelayingQueue, Queue, RateLimitingQueue};

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ns-{}/name-{i}", i % 100)).collect()
}

fn add_get_done(c: &mut Criterion) {
    let queue: Queue<String> = Queue::new();
    let pool = keys(1024);
    let mut i = 0;
    c.bench_function("add_get_done", |b| {
        b.iter(|| {
            queue.add(pool[i & 1023].clone());
            i += 1;
            let k = queue.try_get().into_item().unwrap();
            queue.done(&k);
        })
    });
}

fn dedup_add(c: &mut Criterion) {
    let queue: Queue<String> = Queue::new();
    let pool = keys(1000);
    for k in &pool {
        queue.add(k.clone());
    }
    let mut i = 0;
    c.bench_function("dedup_add_ref", |b| {
        b.iter(|| {
            queue.add_ref(pool[i % 1000].as_str());
            i += 1;
        })
    });
    c.bench_function("dedup_add_owned", |b| {
        b.iter(|| {
            queue.add(pool[i % 1000].clone());
            i += 1;
        })
    });
}

fn rate_limited(c: &mut Criterion) {
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let pool = keys(10_000);
    let mut i = 0;
    c.bench_function("add_rate_limited_forget", |b| {
        b.iter(|| {
            let k = &pool[i % 10_000];
            queue.add_rate_limited(k.clone());
            queue.forget(k);
            i += 1;
        })
    });
    queue.shut_down();
}

fn add_after(c: &mut Criterion) {
    let queue: DelayingQueue<String> = DelayingQueue::new();
    let pool = keys(100_000);
    let mut i = 0usize;
    c.bench_function("add_after", |b| {
        b.iter(|| {
            let d =
                std::time::Duration::from_nanos((i as u64).wrapping_mul(0x9e37_79b9) % 10_000_000);
            queue.add_after(pool[i % 100_000].clone(), d);
            i += 1;
            if i.is_multiple_of(100_000) {
                while queue.try_get().into_item().is_some_and(|k| {
                    queue.done(&k);
                    true
                }) {}
            }
        })
    });
    queue.shut_down();
}

criterion_group!(benches, add_get_done, dedup_add, rate_limited, add_after);
criterion_main!(benches);
