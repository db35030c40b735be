//! The `queue` scenarios: throughput of kcontrol-workqueue beside a
//! crossbeam channel carrying the same `String` keys ("ns-N/name-M", what
//! controllers queue) in the same process, without deduplication.
//!
//! | scenario | what |
//! |---|---|
//! | `single` | one thread adds 1,000,000 distinct keys, then gets and dones each |
//! | `dedup` | 4 producers add 2,000,000 times from 1,000 keys (`add_ref`) while 2 workers get and done: the mixed case (`processed` says how many the workers took) |
//! | `dedup-owned` | the same with `add(key.clone())` |
//! | `dedup-waiting` | 4 producers add 2,000,000 times from 1,000 keys that are all already waiting, the 2 workers held back: the pure de-duplication path; also beside a plain `Mutex` queue (client-go's design) |
//! | `workers-N` | 2 producers add 1,000,000 distinct keys, N workers get and done |
//! | `rate-limited` | `add_rate_limited` + `forget` cycles on 10,000 keys, default controller limiter |
//! | `delayed` | 100,000 `add_after` with random 0–10 ms delays, one consumer: calls/s, lateness until ready and until `get` |
//! | `delayed-paced` | the same, 20,000 calls at 100,000 a second: timer precision |
//!
//! Lateness in the delayed scenarios is measured against each item's due
//! time twice. *Ready* lateness (`ready_p50_lateness_ms`,
//! `ready_p99_lateness_ms`) runs until the item is in the ready queue, where
//! any idle worker would get it at once: that is the queue's timing. *Get*
//! lateness (`get_p50_lateness_ms`, `get_p99_lateness_ms` from the same run;
//! `p50_lateness_ms` / `p99_lateness_ms` from a run without metrics) runs
//! until the one consumer's `get` returns it, so it adds the wait behind
//! every ready item that consumer has not reached yet: in `delayed`, 100,000
//! items come due within about 60 ms, faster than one thread can get and
//! done them on this machine, and get lateness there measures that backlog.
//! In `delayed-paced` the consumer keeps up and both figures are close.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kcontrol_workqueue::metrics::HistogramMetric;
use kcontrol_workqueue::{DelayingQueue, MetricsProvider, Queue, QueueConfig, RateLimitingQueue};
use serde_json::json;

use crate::report::{row, Report};

/// Key `i` as controllers queue them.
fn key(i: usize) -> String {
    format!("ns-{}/name-{i}", i % 100)
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(key).collect()
}

fn per_sec(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn ratio(value: f64, reference: f64) -> f64 {
    if reference > 0.0 {
        value / reference
    } else {
        0.0
    }
}

/// Runs every queue scenario, or those named in the comma-separated
/// `KCONTROL_QUEUE_SCENARIOS` (e.g. `single,dedup`).
pub fn bench(report: &mut Report) -> Result<(), String> {
    let only = std::env::var("KCONTROL_QUEUE_SCENARIOS").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|s| s.trim() == name);
    if run("single") {
        single(report);
    }
    if run("dedup") {
        dedup(report, false);
    }
    if run("dedup-owned") {
        dedup(report, true);
    }
    if run("dedup-waiting") {
        dedup_waiting(report)?;
    }
    for workers in [1, 2, 8] {
        if run(&format!("workers-{workers}")) {
            workers_n(report, workers);
        }
    }
    if run("rate-limited") {
        rate_limited(report);
    }
    if run("delayed") {
        delayed(report, "delayed", 100_000, None)?;
    }
    if run("delayed-paced") {
        delayed(report, "delayed-paced", 20_000, Some(100_000))?;
    }
    Ok(())
}

fn throughput_row(report: &mut Report, scenario: &str, items: usize, secs: f64, reference: f64) {
    let items_per_sec = per_sec(items, secs);
    report.row(row([
        ("scenario", json!(scenario)),
        ("items", json!(items)),
        ("seconds", json!(secs)),
        ("items_per_sec", json!(items_per_sec)),
        ("reference_items_per_sec", json!(reference)),
        ("ratio", json!(ratio(items_per_sec, reference))),
    ]));
}

// ---- single ----------------------------------------------------------------

fn single(report: &mut Report) {
    const N: usize = 1_000_000;
    let input = keys(N);
    let start = Instant::now();
    let got = single_queue(input);
    let secs = start.elapsed().as_secs_f64();
    debug_assert_eq!(got, N);

    let input = keys(N);
    let start = Instant::now();
    let n = single_channel(input);
    let reference = per_sec(n, start.elapsed().as_secs_f64());
    throughput_row(report, "single", got, secs, reference);
}

/// The timed part of `single` on the queue: adds every key, then gets and
/// dones each; returns how many it got. Not inlined, so that callgrind can
/// count its instructions alone (`--toggle-collect='*single_queue*'`).
#[inline(never)]
fn single_queue(input: Vec<String>) -> usize {
    let queue: Queue<String> = Queue::new();
    for k in input {
        queue.add(k);
    }
    let mut got = 0;
    while let Some(k) = queue.try_get().into_item() {
        queue.done(&k);
        got += 1;
    }
    got
}

/// The timed part of `single` on the channel (`*single_channel*`).
#[inline(never)]
fn single_channel(input: Vec<String>) -> usize {
    let (tx, rx) = crossbeam_channel::unbounded();
    for k in input {
        let _ = tx.send(k);
    }
    let mut n = 0;
    while let Ok(k) = rx.try_recv() {
        drop(k);
        n += 1;
    }
    n
}

// ---- dedup -----------------------------------------------------------------

/// Producers and adds of the dedup scenarios, and the keys they add.
const PRODUCERS: usize = 4;
const WORKERS: usize = 2;
const ADDS: usize = 2_000_000;
const KEYS: usize = 1_000;

/// The key producer `p` adds at its `i`-th add.
fn dedup_key(pool: &[String], p: usize, i: usize) -> &str {
    &pool[(i * 7 + p * 251) % KEYS]
}

/// Runs `PRODUCERS` threads that each make `ADDS / PRODUCERS` calls of
/// `add(producer, i)`; returns their wall time in seconds.
fn produce(add: impl Fn(usize, usize) + Sync) -> f64 {
    let start = Instant::now();
    thread::scope(|s| {
        for p in 0..PRODUCERS {
            let add = &add;
            s.spawn(move || (0..ADDS / PRODUCERS).for_each(|i| add(p, i)));
        }
    });
    start.elapsed().as_secs_f64()
}

/// The same adds through a crossbeam channel (every one delivered, to
/// `WORKERS` receivers): sends a second.
fn dedup_channel_reference(pool: &[String]) -> f64 {
    let (tx, rx) = crossbeam_channel::unbounded::<String>();
    let start = Instant::now();
    thread::scope(|s| {
        for _ in 0..WORKERS {
            let rx = rx.clone();
            s.spawn(move || while rx.recv().is_ok() {});
        }
        for p in 0..PRODUCERS {
            let tx = tx.clone();
            s.spawn(move || {
                for i in 0..ADDS / PRODUCERS {
                    let _ = tx.send(dedup_key(pool, p, i).to_owned());
                }
            });
        }
        drop(tx);
    });
    per_sec(ADDS, start.elapsed().as_secs_f64())
}

fn dedup(report: &mut Report, owned: bool) {
    let pool = keys(KEYS);
    let queue: Queue<String> = Queue::new();
    let processed = AtomicUsize::new(0);
    let start = Instant::now();
    let adds_secs = thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                let mut n = 0;
                while let Some(k) = queue.get() {
                    queue.done(&k);
                    n += 1;
                }
                processed.fetch_add(n, Ordering::Relaxed);
            });
        }
        let adds_secs = produce(|p, i| {
            let k = dedup_key(&pool, p, i);
            if owned {
                queue.add(k.to_owned());
            } else {
                queue.add_ref(k);
            }
        });
        queue.shut_down();
        adds_secs
    });
    let secs = start.elapsed().as_secs_f64();
    let processed = processed.into_inner();
    let items_per_sec = per_sec(processed, secs);
    let reference = dedup_channel_reference(&pool);
    report.row(row([
        (
            "scenario",
            json!(if owned { "dedup-owned" } else { "dedup" }),
        ),
        ("items", json!(processed)),
        ("seconds", json!(secs)),
        ("items_per_sec", json!(items_per_sec)),
        ("reference_items_per_sec", json!(reference)),
        ("ratio", json!(ratio(items_per_sec, reference))),
        ("adds", json!(ADDS)),
        ("processed", json!(processed)),
        ("adds_per_sec", json!(per_sec(ADDS, adds_secs))),
        ("reference_adds_per_sec", json!(reference)),
    ]));
}

/// client-go's queue design, reduced to what an add of a waiting key does:
/// one mutex over the set of waiting keys and their FIFO.
#[derive(Default)]
struct MutexQueue(Mutex<(HashSet<String>, VecDeque<String>)>);

impl MutexQueue {
    fn add_ref(&self, key: &str) {
        if let Ok(mut guard) = self.0.lock() {
            let (dirty, queue) = &mut *guard;
            if !dirty.contains(key) {
                dirty.insert(key.to_owned());
                queue.push_back(key.to_owned());
            }
        }
    }

    fn len(&self) -> usize {
        self.0.lock().map_or(0, |guard| guard.1.len())
    }
}

/// The pure de-duplication path: every key is already waiting (and hot),
/// the workers wait at a gate, 4 producers `add_ref` 2,000,000 times.
/// Then the workers drain the queue: each key is processed exactly once.
/// Beside it, the same adds on a plain `Mutex` queue and through a channel.
fn dedup_waiting(report: &mut Report) -> Result<(), String> {
    let pool = keys(KEYS);
    let queue: Queue<String> = Queue::new();
    for k in &pool {
        queue.add_ref(k.as_str());
        queue.add_ref(k.as_str()); // already waiting: now hot
    }
    let processed = AtomicUsize::new(0);
    let (open, gate) = crossbeam_channel::bounded::<()>(0);
    let adds_secs = thread::scope(|s| {
        for _ in 0..WORKERS {
            let (queue, processed, gate) = (&queue, &processed, gate.clone());
            s.spawn(move || {
                let _ = gate.recv();
                while let Some(k) = queue.get() {
                    queue.done(&k);
                    processed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let secs = produce(|p, i| queue.add_ref(dedup_key(&pool, p, i)));
        drop(open);
        queue.shut_down();
        secs
    });
    let processed = processed.into_inner();
    if processed != KEYS {
        return Err(format!(
            "dedup-waiting: {processed} items processed, {KEYS} expected"
        ));
    }
    let mutex = MutexQueue::default();
    pool.iter().for_each(|k| mutex.add_ref(k));
    let mutex_secs = produce(|p, i| mutex.add_ref(dedup_key(&pool, p, i)));
    if mutex.len() != KEYS {
        return Err(format!(
            "dedup-waiting: the mutex queue holds {}",
            mutex.len()
        ));
    }
    let adds_per_sec = per_sec(ADDS, adds_secs);
    let mutex_per_sec = per_sec(ADDS, mutex_secs);
    let reference = dedup_channel_reference(&pool);
    report.row(row([
        ("scenario", json!("dedup-waiting")),
        ("items", json!(ADDS)),
        ("seconds", json!(adds_secs)),
        ("items_per_sec", json!(adds_per_sec)),
        ("reference_items_per_sec", json!(reference)),
        ("ratio", json!(ratio(adds_per_sec, reference))),
        ("adds", json!(ADDS)),
        ("processed", json!(processed)),
        ("adds_per_sec", json!(adds_per_sec)),
        ("reference_adds_per_sec", json!(reference)),
        ("mutex_adds_per_sec", json!(mutex_per_sec)),
        ("mutex_ratio", json!(ratio(adds_per_sec, mutex_per_sec))),
    ]));
    Ok(())
}

// ---- workers-N ---------------------------------------------------------------

fn workers_n(report: &mut Report, workers: usize) {
    const PRODUCERS: usize = 2;
    const N: usize = 1_000_000;
    let mut inputs: Vec<Vec<String>> = (0..PRODUCERS)
        .map(|p| (0..N / PRODUCERS).map(|i| key(p * N + i)).collect())
        .collect();
    let queue: Queue<String> = Queue::new();
    let processed = AtomicUsize::new(0);
    let start = Instant::now();
    thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut n = 0;
                while let Some(k) = queue.get() {
                    queue.done(&k);
                    n += 1;
                }
                processed.fetch_add(n, Ordering::Relaxed);
            });
        }
        let producers: Vec<_> = inputs
            .drain(..)
            .map(|input| {
                let queue = &queue;
                s.spawn(move || {
                    for k in input {
                        queue.add(k);
                    }
                })
            })
            .collect();
        for p in producers {
            let _ = p.join();
        }
        queue.shut_down();
    });
    let secs = start.elapsed().as_secs_f64();
    let processed = processed.into_inner();

    let mut inputs: Vec<Vec<String>> = (0..PRODUCERS)
        .map(|p| (0..N / PRODUCERS).map(|i| key(p * N + i)).collect())
        .collect();
    let (tx, rx) = crossbeam_channel::unbounded::<String>();
    let start = Instant::now();
    thread::scope(|s| {
        for _ in 0..workers {
            let rx = rx.clone();
            s.spawn(move || while rx.recv().is_ok() {});
        }
        for input in inputs.drain(..) {
            let tx = tx.clone();
            s.spawn(move || {
                for k in input {
                    let _ = tx.send(k);
                }
            });
        }
        drop(tx);
    });
    let reference = per_sec(N, start.elapsed().as_secs_f64());
    throughput_row(
        report,
        &format!("workers-{workers}"),
        processed,
        secs,
        reference,
    );
}

// ---- rate-limited ------------------------------------------------------------

fn rate_limited(report: &mut Report) {
    const KEYS: usize = 10_000;
    const ROUNDS: usize = 100;
    let pool = keys(KEYS);
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let start = Instant::now();
    rate_limited_queue(&queue, &pool, ROUNDS);
    let secs = start.elapsed().as_secs_f64();
    queue.shut_down();

    let (tx, rx) = crossbeam_channel::unbounded::<String>();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        for k in &pool {
            let _ = tx.send(k.clone());
            let _ = rx.try_recv();
        }
    }
    let reference = per_sec(KEYS * ROUNDS, start.elapsed().as_secs_f64());
    throughput_row(report, "rate-limited", KEYS * ROUNDS, secs, reference);
}

/// The timed part of `rate-limited`: `rounds` add_rate_limited + forget
/// cycles over `pool` (callgrind: `*rate_limited_queue*`).
#[inline(never)]
fn rate_limited_queue(queue: &RateLimitingQueue<String>, pool: &[String], rounds: usize) {
    for _ in 0..rounds {
        for k in pool {
            queue.add_rate_limited(k.clone());
            queue.forget(k);
        }
    }
}

// ---- delayed -----------------------------------------------------------------

/// A small deterministic generator (xorshift64*) for the delays.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn index_of(key: &str) -> Option<usize> {
    key.rsplit_once("name-")?.1.parse().ok()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Queue latency (seconds from an item entering the ready queue to its
/// `get`), in the order of the gets; every other metric records nothing.
#[derive(Clone, Default)]
struct LatencyLog(Arc<Mutex<Vec<f64>>>);

impl HistogramMetric for LatencyLog {
    fn observe(&self, value: f64) {
        if let Ok(mut v) = self.0.lock() {
            v.push(value);
        }
    }
}

impl MetricsProvider for LatencyLog {
    fn new_latency_metric(&self, _name: &str) -> Box<dyn HistogramMetric> {
        Box::new(self.clone())
    }
}

/// What one run of a delayed scenario measured.
struct DelayedRun {
    add_secs: f64,
    drain_secs: f64,
    /// Due time to `get`, in ms, in the order of the gets.
    get_late_ms: Vec<f64>,
    /// Seconds each item spent in the ready queue, in the same order
    /// (runs with the latency log only).
    queued_secs: Vec<f64>,
}

/// One producer makes `n` add_after calls with the given delays (as fast
/// as it can, or at `rate` calls a second) while one consumer gets and
/// dones every item. With `log`, the queue records its queue latency.
fn delayed_run(
    n: usize,
    delays: &[Duration],
    rate: Option<u64>,
    log: Option<&LatencyLog>,
) -> Result<DelayedRun, String> {
    let input = keys(n);
    let queue: DelayingQueue<String> = match log {
        Some(log) => DelayingQueue::with_config(
            QueueConfig::new()
                .name("delayed")
                .metrics_provider(Arc::new(log.clone())),
        ),
        None => DelayingQueue::new(),
    };
    let base = Instant::now();
    let due: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let mut get_late_ms: Vec<f64> = Vec::new();
    let mut add_secs = 0.0;
    let mut drain_secs = 0.0;
    thread::scope(|s| {
        let consumer = thread::Builder::new()
            .name("consumer".into())
            .spawn_scoped(s, || {
                let mut late = Vec::with_capacity(n);
                while late.len() < n {
                    let Some(k) = queue.get() else { break };
                    let now = base.elapsed().as_nanos() as f64;
                    if let Some(i) = index_of(&k) {
                        let due = due[i].load(Ordering::Relaxed) as f64;
                        late.push(((now - due) / 1e6).max(0.0));
                    }
                    queue.done(&k);
                }
                (late, base.elapsed().as_secs_f64())
            });
        let start = Instant::now();
        for (i, (k, d)) in input.into_iter().zip(delays).enumerate() {
            if let Some(rate) = rate {
                let slot = Duration::from_nanos(i as u64 * 1_000_000_000 / rate);
                while start.elapsed() < slot {
                    std::hint::spin_loop();
                }
            }
            let at = base.elapsed() + *d;
            due[i].store(at.as_nanos() as u64, Ordering::Relaxed);
            queue.add_after(k, *d);
        }
        add_secs = start.elapsed().as_secs_f64();
        if let Ok(Ok((late, end))) = consumer.map(|c| c.join()) {
            get_late_ms = late;
            drain_secs = end - start.duration_since(base).as_secs_f64();
        }
    });
    queue.shut_down();
    if get_late_ms.len() != n {
        return Err(format!("got {} of {n} items", get_late_ms.len()));
    }
    let queued_secs = match log {
        Some(log) => log.0.lock().map(|v| v.clone()).unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(DelayedRun {
        add_secs,
        drain_secs,
        get_late_ms,
        queued_secs,
    })
}

/// `n` add_after calls with random 0–10 ms delays, as fast as possible or
/// at `rate` calls a second (`delayed-paced`: the timer's precision when
/// the consumer is not the bottleneck).
///
/// Two lateness figures, both against the due time:
/// - *get* lateness: until the consumer's `get` returned the item. With
///   100,000 items coming due within ~60 ms and one consumer, this mostly
///   measures the backlog in front of that consumer (items wait behind
///   tens of thousands of ready items it has not reached yet), not the
///   queue's timing.
/// - *ready* lateness: until the item entered the ready queue, i.e. could
///   be handed to any idle worker: get lateness minus the item's queue
///   latency, which a second run records through a metrics provider (one
///   consumer, so the i-th latency observed belongs to the i-th get). The
///   metrics bookkeeping slows that run a little, so this figure errs late.
///
/// `ready_*` and `get_*` come from that second run (comparable: same run);
/// `add_after_per_sec`, `drain_seconds` and `p50_lateness_ms` /
/// `p99_lateness_ms` (get lateness) from the first, which has no metrics.
fn delayed(report: &mut Report, scenario: &str, n: usize, rate: Option<u64>) -> Result<(), String> {
    const MAX_DELAY_NANOS: u64 = 10_000_000;
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let delays: Vec<Duration> = (0..n)
        .map(|_| Duration::from_nanos(rng.next() % (MAX_DELAY_NANOS + 1)))
        .collect();
    let plain = delayed_run(n, &delays, rate, None).map_err(|e| format!("{scenario}: {e}"))?;
    if std::env::var("DBG_PLAIN").is_ok() {
        let mut g = plain.get_late_ms.clone();
        g.sort_by(f64::total_cmp);
        eprintln!(
            "plain add {:.4}s drain {:.4}s get p50 {:.3} p99 {:.3}",
            plain.add_secs,
            plain.drain_secs,
            percentile(&g, 0.5),
            percentile(&g, 0.99)
        );
        return Ok(());
    }
    let log = LatencyLog::default();
    let logged =
        delayed_run(n, &delays, rate, Some(&log)).map_err(|e| format!("{scenario}: {e}"))?;
    if logged.queued_secs.len() != n {
        return Err(format!(
            "{scenario}: {} queue latencies for {n} gets",
            logged.queued_secs.len()
        ));
    }
    let mut ready_late_ms: Vec<f64> = logged
        .get_late_ms
        .iter()
        .zip(&logged.queued_secs)
        .map(|(late, queued)| (late - queued * 1e3).max(0.0))
        .collect();
    if std::env::var("DBG_DELAYED").is_ok() {
        for (i, r) in ready_late_ms.iter().enumerate().step_by(2000) {
            eprintln!("{i} ready {r:.3} get {:.3}", logged.get_late_ms[i]);
        }
    }
    ready_late_ms.sort_by(f64::total_cmp);
    let mut logged_get_ms = logged.get_late_ms;
    logged_get_ms.sort_by(f64::total_cmp);
    let mut get_late_ms = plain.get_late_ms;
    get_late_ms.sort_by(f64::total_cmp);

    let input = keys(n);
    let (tx, rx) = crossbeam_channel::unbounded::<String>();
    let start = Instant::now();
    for k in input {
        let _ = tx.send(k);
    }
    let reference = per_sec(n, start.elapsed().as_secs_f64());
    drop(rx);
    let add_after_per_sec = per_sec(n, plain.add_secs);
    let get_p50 = percentile(&get_late_ms, 0.50);
    let get_p99 = percentile(&get_late_ms, 0.99);
    report.row(row([
        ("scenario", json!(scenario)),
        ("items", json!(n)),
        ("seconds", json!(plain.add_secs)),
        ("items_per_sec", json!(add_after_per_sec)),
        ("reference_items_per_sec", json!(reference)),
        ("ratio", json!(ratio(add_after_per_sec, reference))),
        ("add_after_per_sec", json!(add_after_per_sec)),
        ("drain_seconds", json!(plain.drain_secs)),
        ("p50_lateness_ms", json!(get_p50)),
        ("p99_lateness_ms", json!(get_p99)),
        (
            "ready_p50_lateness_ms",
            json!(percentile(&ready_late_ms, 0.50)),
        ),
        (
            "ready_p99_lateness_ms",
            json!(percentile(&ready_late_ms, 0.99)),
        ),
        (
            "get_p50_lateness_ms",
            json!(percentile(&logged_get_ms, 0.50)),
        ),
        (
            "get_p99_lateness_ms",
            json!(percentile(&logged_get_ms, 0.99)),
        ),
    ]));
    Ok(())
}
