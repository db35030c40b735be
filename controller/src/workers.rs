//! Workers draining a work queue of keys, with client-go's
//! `processNextWorkItem` contract and a graceful shutdown.
//!
//! - CT4: each worker takes a key (`get`), syncs it, then on success
//!   `forget`s it (its backoff resets), on error re-queues it
//!   `add_rate_limited` (with a log), and always calls `done` — so a key is
//!   never synced by two workers at once (WQ3), and a key added while it is
//!   synced is synced again after.
//! - CT4: a panic in a sync is caught: the key is re-queued rate-limited
//!   and `done`, the panic is counted ([`WorkerStats::panics`], and
//!   `controller_reconcile_panics_total` once
//!   [`WorkerStats::register`] was called), and the worker goes on.
//! - CT6: workers are tokio tasks (default) or OS threads
//!   ([`WorkerOptions::threads`]: a sync that blocks its thread stalls no
//!   runtime worker).
//! - CT7: when `shutdown` is cancelled, workers start no new sync (keys
//!   still waiting are dropped: a restarted controller lists everything
//!   again), the queue is shut down with drain, and syncs in flight get
//!   [`WorkerOptions::drain_timeout`] to finish; the [`ShutdownReport`]
//!   says whether they did. Task workers still running then are aborted.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kcontrol_controller::workers::WorkerError> {
//! use kcontrol_controller::run_workers;
//! use kcontrol_workqueue::RateLimitingQueue;
//! use tokio_util::sync::CancellationToken;
//!
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
//! queue.add("default/web".to_owned());
//! let shutdown = CancellationToken::new();
//! let stop = shutdown.clone();
//! let report = run_workers(queue, 2, shutdown, move |key: String| {
//!     let stop = stop.clone();
//!     async move {
//!         println!("syncing {key}");
//!         stop.cancel(); // a real controller stops on a signal
//!         Ok::<(), std::io::Error>(())
//!     }
//! })
//! .await?;
//! assert!(report.drained);
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kcontrol_workqueue::RateLimitingQueue;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::reconciler::Action;

/// How many workers, on what, and how long shutdown waits for them.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    workers: usize,
    threads: bool,
    drain_timeout: Duration,
    name: String,
    stats: WorkerStats,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            threads: false,
            drain_timeout: Duration::from_secs(30),
            name: "controller".to_owned(),
            stats: WorkerStats::default(),
        }
    }
}

impl WorkerOptions {
    /// Two task workers, a 30 s drain timeout, named `controller`.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many workers (at least 1).
    #[must_use]
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Run each worker on its own OS thread instead of a tokio task (the
    /// sync future is driven there with the runtime's handle, so it may
    /// block without stalling the runtime).
    #[must_use]
    pub fn threads(mut self, on: bool) -> Self {
        self.threads = on;
        self
    }

    /// How long shutdown waits for syncs in flight.
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The name in logs, spans, thread names and metric labels.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The counters the workers report to (shared by clones): read them
    /// while the workers run, or export them with
    /// [`WorkerStats::register`].
    pub fn stats(&self) -> WorkerStats {
        self.stats.clone()
    }

    /// The number of workers.
    pub fn worker_count(&self) -> usize {
        self.workers
    }

    pub(crate) fn name_value(&self) -> &str {
        &self.name
    }

    pub(crate) fn drain_timeout_value(&self) -> Duration {
        self.drain_timeout
    }
}

#[derive(Debug, Default)]
struct Counters {
    successes: AtomicU64,
    errors: AtomicU64,
    panics: AtomicU64,
    active: AtomicU64,
}

/// What the workers did so far (cheap to clone; clones share the counters).
#[derive(Clone, Debug, Default)]
pub struct WorkerStats {
    counters: Arc<Counters>,
}

impl WorkerStats {
    /// Syncs that succeeded.
    pub fn successes(&self) -> u64 {
        self.counters.successes.load(Ordering::SeqCst)
    }

    /// Syncs that returned an error.
    pub fn errors(&self) -> u64 {
        self.counters.errors.load(Ordering::SeqCst)
    }

    /// Syncs that panicked (each was contained and its key re-queued).
    pub fn panics(&self) -> u64 {
        self.counters.panics.load(Ordering::SeqCst)
    }

    /// Syncs running now.
    pub fn active(&self) -> u64 {
        self.counters.active.load(Ordering::SeqCst)
    }

    /// Exports the counters to `registry`, labelled `controller=<name>`:
    /// `controller_reconcile_total{controller,result}` (`success`, `error`,
    /// `panic`), `controller_reconcile_panics_total{controller}` and
    /// `controller_active_workers{controller}` (syncs running), read at
    /// scrape time.
    pub fn register(&self, name: &str, registry: &mut Registry) {
        registry.register_collector(Box::new(StatsCollector {
            name: name.to_owned(),
            stats: self.clone(),
        }));
    }
}

#[derive(Debug)]
struct StatsCollector {
    name: String,
    stats: WorkerStats,
}

impl Collector for StatsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let name = self.name.as_str();
        {
            let mut family = encoder.encode_descriptor(
                "controller_reconcile",
                "Reconciles (syncs) by result: success, error or panic.",
                None,
                MetricType::Counter,
            )?;
            for (result, value) in [
                ("success", self.stats.successes()),
                ("error", self.stats.errors()),
                ("panic", self.stats.panics()),
            ] {
                let labels = [("controller", name), ("result", result)];
                ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "controller_reconcile_panics",
                "Reconciles that panicked (contained; the key was re-queued).",
                None,
                MetricType::Counter,
            )?;
            let labels = [("controller", name)];
            ConstCounter::new(self.stats.panics()).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "controller_active_workers",
            "Reconciles running now.",
            None,
            MetricType::Gauge,
        )?;
        let labels = [("controller", name)];
        let active = i64::try_from(self.stats.active()).unwrap_or(i64::MAX);
        ConstGauge::new(active).encode(family.encode_family(&labels)?)?;
        Ok(())
    }
}

/// What a graceful shutdown of the workers achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Every sync in flight finished before the drain timeout.
    pub drained: bool,
    /// Syncs still running at the deadline (0 when drained).
    pub unfinished: usize,
}

/// Why workers could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Not called on a tokio runtime.
    #[error("workers must be started on a tokio runtime")]
    NoRuntime,
    /// A worker thread could not be started.
    #[error("cannot start worker thread {name:?}: {source}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// What the operating system said.
        source: std::io::Error,
    },
}

/// Runs `workers` task workers syncing keys from `queue` until `shutdown`
/// is cancelled, then shuts them down gracefully (see
/// [`workers`](crate::workers)). `sync` gets each key; `Ok` forgets it, `Err`
/// re-queues it with backoff.
///
/// # Errors
/// [`WorkerError::NoRuntime`] when not run on a tokio runtime.
pub async fn run_workers<F, Fut, E>(
    queue: RateLimitingQueue<String>,
    workers: usize,
    shutdown: CancellationToken,
    sync: F,
) -> Result<ShutdownReport, WorkerError>
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    run_workers_with(queue, WorkerOptions::new().workers(workers), shutdown, sync).await
}

/// [`run_workers`] with options (threads, drain timeout, name, stats).
///
/// # Errors
/// [`WorkerError::NoRuntime`] when not run on a tokio runtime,
/// [`WorkerError::Spawn`] when a worker thread cannot be started (the
/// queue is shut down then, stopping the workers already started).
pub async fn run_workers_with<F, Fut, E>(
    queue: RateLimitingQueue<String>,
    options: WorkerOptions,
    shutdown: CancellationToken,
    sync: F,
) -> Result<ShutdownReport, WorkerError>
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    let requeues = queue.clone();
    let step = move |key: String| {
        let requeues = requeues.clone();
        sync(key.clone()).map(move |result| match result {
            Ok(()) => Ok(Action::Done),
            Err(e) => {
                tracing::warn!(%key, error = %e, requeues = requeues.num_requeues(&key), "sync failed: re-queued with backoff");
                Err(Action::RequeueRateLimited)
            }
        })
    };
    Ok(Pool::start(&queue, &options, shutdown, step)?.wait().await)
}

enum Worker {
    Task(JoinHandle<()>),
    Thread(tokio::sync::oneshot::Receiver<()>),
}

/// Started workers, waiting for their stop token.
pub(crate) struct Pool {
    queue: RateLimitingQueue<String>,
    workers: Vec<Worker>,
    stop: CancellationToken,
    drain_timeout: Duration,
    name: String,
}

impl Pool {
    /// Starts the workers: each runs `step` on the keys it takes. `step`
    /// says what becomes of the key: `Ok(action)` after a success,
    /// `Err(action)` after a failure (counted as an error).
    pub(crate) fn start<F, Fut>(
        queue: &RateLimitingQueue<String>,
        options: &WorkerOptions,
        stop: CancellationToken,
        step: F,
    ) -> Result<Self, WorkerError>
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, Action>> + Send + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| WorkerError::NoRuntime)?;
        let step = Arc::new(step);
        let mut pool = Self {
            queue: queue.clone(),
            workers: Vec::with_capacity(options.workers),
            stop: stop.clone(),
            drain_timeout: options.drain_timeout,
            name: options.name.clone(),
        };
        tracing::info!(controller = %options.name, workers = options.workers, threads = options.threads, "starting workers");
        for i in 0..options.workers {
            let work = worker_loop(
                queue.clone(),
                Arc::clone(&step),
                stop.clone(),
                options.stats.clone(),
                options.name.clone(),
            );
            if !options.threads {
                pool.workers.push(Worker::Task(runtime.spawn(work)));
                continue;
            }
            let (done, finished) = tokio::sync::oneshot::channel();
            let handle = runtime.clone();
            let name = format!("{}-{i}", options.name);
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    handle.block_on(work);
                    let _ = done.send(());
                });
            if let Err(source) = spawned {
                queue.shut_down();
                return Err(WorkerError::Spawn { name, source });
            }
            pool.workers.push(Worker::Thread(finished));
        }
        Ok(pool)
    }

    /// Waits for the stop token, then shuts down gracefully (CT7).
    pub(crate) async fn wait(self) -> ShutdownReport {
        self.stop.cancelled().await;
        tracing::info!(controller = %self.name, "stopping workers: draining the queue");
        self.queue.shut_down();
        let drained =
            tokio::time::timeout(self.drain_timeout, self.queue.shut_down_with_drain_async())
                .await
                .is_ok();
        let unfinished = if drained {
            0
        } else {
            self.queue.processing_len()
        };
        if !drained {
            tracing::warn!(controller = %self.name, timeout = ?self.drain_timeout, unfinished, "syncs did not finish in time");
        }
        for worker in self.workers {
            match worker {
                Worker::Task(task) => {
                    if !drained {
                        task.abort();
                    }
                    let _ = task.await;
                }
                // a thread still in a sync is left to finish on its own
                Worker::Thread(finished) if drained => {
                    let _ = finished.await;
                }
                Worker::Thread(_) => {}
            }
        }
        tracing::info!(controller = %self.name, drained, "workers stopped");
        ShutdownReport {
            drained,
            unfinished,
        }
    }
}

/// One worker: takes keys until the queue shuts down.
async fn worker_loop<F, Fut>(
    queue: RateLimitingQueue<String>,
    step: Arc<F>,
    stop: CancellationToken,
    stats: WorkerStats,
    name: String,
) where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, Action>> + Send + 'static,
{
    while let Some(key) = queue.get_async().await {
        if stop.is_cancelled() {
            // shutting down: no new sync
            queue.done(&key);
            continue;
        }
        process_next_work_item(&queue, step.as_ref(), key, &stats, &name).await;
    }
}

/// client-go's `processNextWorkItem` after `Get`: sync, then forget or
/// re-queue as the outcome says, then `done`; a panic is contained.
async fn process_next_work_item<F, Fut>(
    queue: &RateLimitingQueue<String>,
    step: &F,
    key: String,
    stats: &WorkerStats,
    name: &str,
) where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<Action, Action>>,
{
    let counters = &stats.counters;
    counters.active.fetch_add(1, Ordering::SeqCst);
    let span = tracing::info_span!("reconcile", controller = %name, key = %key);
    let outcome = AssertUnwindSafe(async { step(key.clone()).await })
        .catch_unwind()
        .instrument(span)
        .await;
    counters.active.fetch_sub(1, Ordering::SeqCst);
    match outcome {
        Ok(Ok(action)) => {
            counters.successes.fetch_add(1, Ordering::SeqCst);
            apply(queue, &key, action);
        }
        Ok(Err(action)) => {
            counters.errors.fetch_add(1, Ordering::SeqCst);
            apply(queue, &key, action);
        }
        Err(panic) => {
            counters.panics.fetch_add(1, Ordering::SeqCst);
            tracing::error!(controller = %name, %key, panic = panic_message(panic.as_ref()), "sync panicked: re-queued with backoff");
            queue.add_rate_limited(key.clone());
        }
    }
    queue.done(&key);
}

/// What `action` does to `key` (the key is still being processed: an add
/// marks it to be queued again once it is `done`).
fn apply(queue: &RateLimitingQueue<String>, key: &String, action: Action) {
    match action {
        Action::Done => queue.forget(key),
        Action::Requeue => {
            queue.forget(key);
            queue.add(key.clone());
        }
        Action::RequeueAfter(delay) => {
            queue.forget(key);
            queue.add_after(key.clone(), delay);
        }
        Action::RequeueRateLimited => queue.add_rate_limited(key.clone()),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}
