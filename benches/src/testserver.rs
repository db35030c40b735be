//! The `testserver` scenario: the in-process API server must never be the
//! bottleneck of the informer benchmarks (issue 5's targets: a
//! 100,000-object list at 200 MB/s of JSON or more, and 50,000 watch
//! events/s or more to one watcher).
//!
//! One [`TestServer`] on loopback holds the 100,000 fixture ConfigMaps,
//! bulk-loaded. Rows, each beside a reference measured in this process:
//! - `testserver-bulk-load`: `Objects::bulk_load` of the fixtures;
//! - `testserver-list` ([`list`]): the list unpaged and in pages of 500,
//!   against a bare hyper server serving the same bytes;
//! - `client-list-decode` ([`list`]): `Api::<ConfigMap>::list` against a
//!   bare `serde_json::from_slice` of the same bytes;
//! - `testserver-watch-replay` ([`watch`]): the bulk load's events replayed
//!   from history, against the same frames from a bare hyper server;
//! - `testserver-watch-live` ([`watch`]): writes from a writer thread
//!   delivered to one watcher, at full speed and paced.

mod conn;
mod list;
mod reference;
mod watch;

use std::time::Instant;

use kcontrol_testserver::TestServer;
use serde_json::json;

use crate::fixtures::{self, NAMESPACE};
use crate::report::{row, Report};
use watch::Pace;

/// Objects listed, and events replayed.
pub const OBJECTS: usize = 100_000;
/// Runs of each timed measurement; the best is reported (the machine is
/// shared, and a run is only ever slowed down by others).
pub const RUNS: usize = 5;
/// Writes of each full-speed live run (their request bodies are built
/// before the run: about 300 MB), and how many runs.
const LIVE_WRITES: usize = 50_000;
const LIVE_RUNS: usize = 3;
/// Writes, and writes a second, of the paced live run.
const PACED_WRITES: usize = 20_000;
const PACED_RATE: u32 = 10_000;

/// Runs the scenario on a Tokio runtime of two worker threads (client and
/// server share it, as in the informer benchmarks).
pub fn bench(report: &mut Report) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the Tokio runtime: {e}"))?;
    runtime.block_on(run(report))
}

async fn run(report: &mut Report) -> Result<(), String> {
    let server = TestServer::builder()
        // every event of the bulk load and of the live runs stays replayable
        .history_size(OBJECTS + LIVE_WRITES * LIVE_RUNS + PACED_WRITES + 1_000)
        .deployment_simulator(None)
        .start()
        .await
        .map_err(|e| format!("starting the testserver: {e}"))?;
    let objects = server.objects();
    objects
        .create(
            "namespaces",
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        )
        .map_err(|e| format!("creating namespace {NAMESPACE}: {e}"))?;
    let before_load = objects.resource_version();
    let fixtures: Vec<_> = (0..OBJECTS)
        .map(|i| fixtures::configmap_value(i, 0))
        .collect();
    let start = Instant::now();
    let loaded_rv = objects
        .bulk_load("configmaps", NAMESPACE, fixtures)
        .map_err(|e| format!("bulk load: {e}"))?;
    let secs = start.elapsed().as_secs_f64();
    report.row(row([
        ("scenario", json!("testserver-bulk-load")),
        ("objects", json!(OBJECTS)),
        ("seconds", json!(secs)),
        ("objects_per_sec", json!(OBJECTS as f64 / secs)),
        ("measured", json!("Objects::bulk_load of the fixture ConfigMaps (values built before timing): metadata, resourceVersion, encoding, one ADDED event each")),
    ]));

    let addr = server.addr();
    list::bench(report, addr, loaded_rv).await?;
    watch::replay(report, addr, before_load, OBJECTS).await?;
    watch::live(report, addr, &objects, (LIVE_WRITES, LIVE_RUNS), Pace::Max).await?;
    watch::live(
        report,
        addr,
        &objects,
        (PACED_WRITES, 1),
        Pace::PerSec(PACED_RATE),
    )
    .await?;
    server.shutdown().await;
    Ok(())
}

/// The best (fastest) of timed runs: its value and seconds.
pub struct Best<T> {
    /// What the fastest run returned.
    pub value: T,
    /// How long it took.
    pub secs: f64,
}

/// Runs `f` `runs` times (at least once); each run returns its value and
/// the seconds it measured itself.
pub async fn best<T>(
    runs: usize,
    mut f: impl AsyncFnMut() -> Result<(T, f64), String>,
) -> Result<Best<T>, String> {
    let (value, secs) = f().await?;
    let mut out = Best { value, secs };
    for _ in 1..runs {
        let (value, secs) = f().await?;
        if secs < out.secs {
            out = Best { value, secs };
        }
    }
    Ok(out)
}

/// Megabytes (10^6 bytes) a second.
pub fn mb_per_sec(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs.max(1e-9)
}
